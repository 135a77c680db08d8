//! A group's files written in format 1 (bincode 1.3, no header: `tests/fixtures/raft-format-1`
//! was written by the code of that format, before format 2) open with everything they held —
//! entries after the purge and the truncation, the committed position, the vote, the
//! snapshot — and are rewritten in format 2 on open; reopened, they hold the same. A file
//! of a newer format is refused with what it is.

use accelkv_cluster::openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
use accelkv_cluster::openraft::{EntryPayload, Vote};
use accelkv_cluster::raft::codec;
use accelkv_cluster::raft::log::LogStore;
use accelkv_cluster::raft::machine::StateMachine;
use accelkv_cluster::Machine;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A machine that keeps what a snapshot installs.
#[derive(Default)]
struct Kept(Mutex<Vec<u8>>);

impl Machine for Kept {
    fn apply(&self, _cmd: &[u8]) -> Vec<u8> {
        Vec::new()
    }
    fn snapshot(&self) -> Result<Vec<u8>, String> {
        Ok(self.0.lock().unwrap().clone())
    }
    fn install(&self, data: &[u8]) -> Result<(), String> {
        *self.0.lock().unwrap() = data.to_vec();
        Ok(())
    }
}

fn copy_fixture(name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/raft-format-1");
    let to = std::env::temp_dir().join(format!("accelkv-format-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).unwrap();
    for f in ["log", "vote", "snapshot"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
    to
}

/// What the fixture holds, as read through openraft's storage traits.
fn check(dir: &Path, rt: &tokio::runtime::Runtime) {
    let mut log = LogStore::open(dir, false).unwrap();
    let entries = rt.block_on(log.try_get_log_entries(0..100)).unwrap();
    let ids: Vec<(u64, u64)> = entries
        .iter()
        .map(|e| (e.log_id.leader_id.term, e.log_id.index))
        .collect();
    // 1..=12 written in term 1, cut at 11, 11 rewritten in term 2, purged up to 4.
    let want: Vec<(u64, u64)> = (5..=10).map(|i| (1, i)).chain([(2, 11)]).collect();
    assert_eq!(ids, want);
    let EntryPayload::Normal(c) = &entries[0].payload else {
        panic!("a command")
    };
    assert_eq!(c.0, b"*3\r\n$3\r\nSET\r\n$2\r\nk5\r\n$2\r\nv5\r\n");
    let state = rt.block_on(log.get_log_state()).unwrap();
    assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(4));
    let committed = rt.block_on(log.read_committed()).unwrap();
    assert_eq!(
        committed.map(|l| (l.leader_id.term, l.index)),
        Some((2, 11))
    );
    let vote = rt.block_on(log.read_vote()).unwrap();
    assert_eq!(vote, Some(Vote::new_committed(2, 1)));
    let kept = Arc::new(Kept::default());
    let mut sm = StateMachine::open(dir, kept.clone(), false).unwrap();
    assert_eq!(*kept.0.lock().unwrap(), b"the store's pages as of entry 4");
    let (applied, membership) = rt.block_on(sm.applied_state()).unwrap();
    assert_eq!(applied.map(|l| l.index), Some(4));
    let voters: Vec<u64> = membership.voter_ids().collect();
    assert_eq!(voters, [1, 2, 3]);
}

fn header(path: PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap()[..8].to_vec()
}

#[test]
fn files_of_format_1_open_and_are_rewritten_in_format_2() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let dir = copy_fixture("upgrade");
    assert_eq!(
        codec::file_format(&std::fs::read(dir.join("log")).unwrap(), &codec::LOG),
        Some(1)
    );
    check(&dir, &rt);
    assert_eq!(header(dir.join("log")), codec::LOG);
    assert_eq!(header(dir.join("vote")), codec::VOTE);
    assert_eq!(header(dir.join("snapshot")), codec::SNAPSHOT);
    // Once more, from the rewritten files.
    check(&dir, &rt);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_of_a_newer_format_is_refused() {
    let dir = copy_fixture("newer");
    let _ = LogStore::open(&dir, false).unwrap();
    let mut log = std::fs::read(dir.join("log")).unwrap();
    log[7] = codec::FORMAT + 1;
    std::fs::write(dir.join("log"), log).unwrap();
    let e = LogStore::open(&dir, false)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("newer accelkv"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
