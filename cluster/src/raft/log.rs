//! The durable Raft log of one group: an append-only file of checksummed records (entries,
//! truncations, purges, the committed position) replayed on open, and the vote in its own
//! file replaced atomically. Every append is flushed (`fdatasync`) before openraft is told
//! it is stored, so a replica that acknowledged an entry still has it after `kill -9` or a
//! power cut; a torn record at the tail (a crash mid-append) is cut off on open.
//!
//! The file: the header `AKVRLOG` and the format (codec.rs), then records `u32 length |
//! u32 crc32c(payload) | payload`, the payload a `Record` in postcard. The file is rewritten
//! (to a temporary file, flushed, renamed) once purged records make up most of it, and when
//! a log of format 1 (bincode, no header) is opened. The vote file: the header `AKVRVOT`
//! and the format, `u32 crc32c(body) | body`.

use super::codec::{self, FORMAT};
use super::{io_error, Config, Entry, LogId, StorageError};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, RaftLogId, RaftLogReader, Vote};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, Serialize, Deserialize)]
enum Record {
    Entry(Entry),
    /// Entries at and after this index are gone (a leader overwrote them).
    Truncate(u64),
    /// Entries up to and including this one are gone (they are in a snapshot).
    Purge(LogId),
    /// The committed position.
    Committed(Option<LogId>),
}

struct Inner {
    dir: PathBuf,
    file: File,
    /// Bytes in the file.
    len: u64,
    /// Each entry with the size of its record (for deciding when to rewrite).
    entries: BTreeMap<u64, (Entry, u64)>,
    purged: Option<LogId>,
    committed: Option<LogId>,
    vote: Option<Vote<u64>>,
    /// Whether appends are flushed to the device (off only in tests of the logic).
    sync: bool,
}

/// A group's log; clones share it (openraft's reader and writer).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

fn encode(r: &Record) -> Vec<u8> {
    let payload = codec::to_bytes(r).expect("a log record serializes");
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Flushes a directory so a rename or a new file in it is durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, replaying what is there.
    pub fn open(dir: &Path, sync: bool) -> std::io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("log");
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (vote, old_vote) = read_vote(dir)?;
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            file,
            len: 0,
            entries: BTreeMap::new(),
            purged: None,
            committed: None,
            vote,
            sync,
        };
        let format = match codec::file_format(&bytes, &codec::LOG) {
            _ if bytes.is_empty() => {
                inner.file.write_all(&codec::LOG)?;
                inner.file.sync_all()?;
                bytes.extend_from_slice(&codec::LOG);
                FORMAT
            }
            Some(f) => f,
            None => return Err(codec::newer(&path.display().to_string(), &bytes)),
        };
        let mut at = if format == FORMAT {
            codec::LOG.len()
        } else {
            0
        };
        while let Some(head) = bytes.get(at..at + 8) {
            let n = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(head[4..].try_into().unwrap());
            let Some(payload) = bytes.get(at + 8..at + 8 + n) else {
                break;
            };
            if crc32c::crc32c(payload) != crc {
                break;
            }
            let Ok(r) = codec::from_bytes_in::<Record>(format, payload) else {
                break;
            };
            inner.replay(r, (n + 8) as u64);
            at += n + 8;
        }
        if at < bytes.len() {
            // A torn tail: the crash came mid-append, and nothing after it was acknowledged.
            inner.file.set_len(at as u64)?;
            inner.file.sync_all()?;
        }
        inner.len = at as u64;
        if format != FORMAT {
            // Format 1: the same records, rewritten in this format.
            inner.rewrite()?;
        }
        if let (Some(v), true) = (inner.vote, old_vote) {
            write_vote(dir, &v)?;
        }
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The index of the last entry (0: none).
    pub fn last_index(&self) -> u64 {
        let g = self.lock();
        g.entries
            .keys()
            .next_back()
            .copied()
            .or(g.purged.map(|p| p.index))
            .unwrap_or(0)
    }

    /// Writes a new log in `dir` that starts after `id` (everything up to it is in the
    /// snapshot a new group is seeded with). `dir` must hold no log yet.
    pub fn seed(dir: &Path, id: LogId) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut f = File::create(dir.join("log"))?;
        f.write_all(&codec::LOG)?;
        f.write_all(&encode(&Record::Purge(id)))?;
        f.sync_all()
    }

    /// Whether nothing was ever written (no entry, purge or vote): a new replica.
    pub fn is_empty(&self) -> bool {
        let g = self.lock();
        g.entries.is_empty() && g.purged.is_none() && g.vote.is_none()
    }
}

/// The vote kept in `dir`, and whether its file is of format 1 (to be rewritten).
fn read_vote(dir: &Path) -> std::io::Result<(Option<Vote<u64>>, bool)> {
    match std::fs::read(dir.join("vote")) {
        Ok(b) => codec::read_checked_file(&b, &codec::VOTE, "the vote file")
            .map(|(v, old)| (Some(v), old)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, false)),
        Err(e) => Err(e),
    }
}

/// Replaces the vote file (written aside, flushed, renamed).
fn write_vote(dir: &Path, vote: &Vote<u64>) -> std::io::Result<()> {
    let b = codec::checked_file(&codec::VOTE, vote)?;
    let tmp = dir.join("vote.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(&b)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join("vote"))?;
    sync_dir(dir)
}

impl Inner {
    fn replay(&mut self, r: Record, bytes: u64) {
        match r {
            Record::Entry(e) => {
                self.entries.insert(e.log_id.index, (e, bytes));
            }
            Record::Truncate(i) => {
                self.entries.split_off(&i);
            }
            Record::Purge(id) => {
                self.entries = match id.index.checked_add(1) {
                    Some(next) => self.entries.split_off(&next),
                    None => BTreeMap::new(),
                };
                self.purged = Some(id);
            }
            Record::Committed(c) => self.committed = c,
        }
    }

    /// Appends records and flushes them; answers each record's size.
    fn write(&mut self, recs: &[Record]) -> std::io::Result<Vec<u64>> {
        let mut buf = Vec::new();
        let mut sizes = Vec::with_capacity(recs.len());
        for r in recs {
            let b = encode(r);
            sizes.push(b.len() as u64);
            buf.extend_from_slice(&b);
        }
        self.file.write_all(&buf)?;
        if self.sync {
            self.file.sync_data()?;
        }
        self.len += buf.len() as u64;
        Ok(sizes)
    }

    /// Rewrites the file with only what is live, once most of it is dead.
    fn compact(&mut self) -> std::io::Result<()> {
        let live: u64 = self.entries.values().map(|e| e.1).sum();
        if self.len < 4 << 20 || live * 2 > self.len {
            return Ok(());
        }
        self.rewrite()
    }

    /// Writes what is live to a new file, in this format, and puts it in place.
    fn rewrite(&mut self) -> std::io::Result<()> {
        let tmp = self.dir.join("log.tmp");
        let mut buf = codec::LOG.to_vec();
        if let Some(p) = self.purged {
            buf.extend_from_slice(&encode(&Record::Purge(p)));
        }
        buf.extend_from_slice(&encode(&Record::Committed(self.committed)));
        for (e, _) in self.entries.values() {
            buf.extend_from_slice(&encode(&Record::Entry(e.clone())));
        }
        let mut f = File::create(&tmp)?;
        f.write_all(&buf)?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.dir.join("log"))?;
        sync_dir(&self.dir)?;
        self.file = OpenOptions::new().append(true).open(self.dir.join("log"))?;
        self.len = buf.len() as u64;
        Ok(())
    }
}

fn werr(e: std::io::Error) -> StorageError {
    io_error(ErrorSubject::Logs, ErrorVerb::Write, e)
}

impl RaftLogReader<Config> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self
            .lock()
            .entries
            .range(range)
            .map(|(_, e)| e.0.clone())
            .collect())
    }
}

impl RaftLogStorage<Config> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<Config>, StorageError> {
        let g = self.lock();
        let last = g.entries.values().next_back().map(|e| *e.0.get_log_id());
        Ok(LogState {
            last_purged_log_id: g.purged,
            last_log_id: last.or(g.purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        let mut g = self.lock();
        write_vote(&g.dir, vote).map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        g.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        Ok(self.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let mut g = self.lock();
        if g.committed != committed {
            // Not flushed on its own: a lost committed position is only re-learned from
            // the leader, never wrong (openraft replays at most what a leader confirms).
            g.committed = committed;
            let buf = encode(&Record::Committed(committed));
            g.file.write_all(&buf).map_err(werr)?;
            g.len += buf.len() as u64;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<Config>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let recs: Vec<Record> = entries.into_iter().map(Record::Entry).collect();
        let mut g = self.lock();
        match g.write(&recs) {
            Ok(sizes) => {
                for (r, n) in recs.into_iter().zip(sizes) {
                    g.replay(r, n);
                }
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                callback.log_io_completed(Err(e));
                Err(werr(std::io::Error::other(msg)))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut g = self.lock();
        g.write(&[Record::Truncate(log_id.index)]).map_err(werr)?;
        g.replay(Record::Truncate(log_id.index), 0);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut g = self.lock();
        g.write(&[Record::Purge(log_id)]).map_err(werr)?;
        g.replay(Record::Purge(log_id), 0);
        g.compact().map_err(werr)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::Command;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Command(format!("{term}/{index}").into_bytes())),
        }
    }

    fn indexes(s: &LogStore) -> Vec<(u64, u64)> {
        let g = s.lock();
        g.entries
            .values()
            .map(|(e, _)| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    fn write(s: &LogStore, recs: Vec<Record>) {
        let mut g = s.lock();
        let sizes = g.write(&recs).unwrap();
        for (r, n) in recs.into_iter().zip(sizes) {
            g.replay(r, n);
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accelkv-log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_reopened_log_has_what_was_written_and_cut() {
        let d = dir("reopen");
        let s = LogStore::open(&d, false).unwrap();
        assert!(s.is_empty());
        write(&s, (1..=10).map(|i| Record::Entry(entry(1, i))).collect());
        write(&s, vec![Record::Truncate(8)]);
        write(&s, (8..=9).map(|i| Record::Entry(entry(2, i))).collect());
        write(&s, vec![Record::Purge(entry(1, 3).log_id)]);
        write(&s, vec![Record::Committed(Some(entry(2, 8).log_id))]);
        let want: Vec<_> = (4..=7).map(|i| (1, i)).chain([(2, 8), (2, 9)]).collect();
        assert_eq!(indexes(&s), want);
        drop(s);
        let s = LogStore::open(&d, false).unwrap();
        assert_eq!(indexes(&s), want);
        assert_eq!(s.last_index(), 9);
        let g = s.lock();
        assert_eq!(g.purged.map(|p| p.index), Some(3));
        assert_eq!(g.committed.map(|p| p.index), Some(8));
        drop(g);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_torn_tail_is_cut_off() {
        let d = dir("torn");
        let s = LogStore::open(&d, true).unwrap();
        write(&s, (1..=5).map(|i| Record::Entry(entry(1, i))).collect());
        drop(s);
        let path = d.join("log");
        let full = std::fs::read(&path).unwrap();
        // A crash mid-append: half of a sixth record, then a flipped byte in a fifth.
        let extra = encode(&Record::Entry(entry(1, 6)));
        let mut torn = full.clone();
        torn.extend_from_slice(&extra[..extra.len() / 2]);
        std::fs::write(&path, &torn).unwrap();
        let s = LogStore::open(&d, true).unwrap();
        assert_eq!(s.last_index(), 5);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full.len() as u64);
        write(&s, vec![Record::Entry(entry(1, 6))]);
        drop(s);
        let mut bad = std::fs::read(&path).unwrap();
        let n = bad.len();
        bad[n - 3] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        assert_eq!(LogStore::open(&d, true).unwrap().last_index(), 5);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_mostly_purged_log_is_rewritten() {
        let d = dir("compact");
        let s = LogStore::open(&d, false).unwrap();
        let big = |i: u64| Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
            payload: EntryPayload::Normal(Command(vec![i as u8; 64 << 10])),
        };
        write(&s, (1..=100).map(|i| Record::Entry(big(i))).collect());
        write(&s, vec![Record::Purge(big(95).log_id)]);
        s.lock().compact().unwrap();
        let len = std::fs::metadata(d.join("log")).unwrap().len();
        assert!(len < 6 * (64 << 10) + 4096, "{len} bytes after compaction");
        drop(s);
        let s = LogStore::open(&d, false).unwrap();
        assert_eq!(indexes(&s), (96..=100).map(|i| (1, i)).collect::<Vec<_>>());
        assert_eq!(s.lock().purged.map(|p| p.index), Some(95));
        let _ = std::fs::remove_dir_all(&d);
    }

    fn record() -> impl proptest::strategy::Strategy<Value = Record> {
        use proptest::prelude::*;
        let id = || (any::<u64>(), 0u64..40).prop_map(|(t, i)| entry(t, i).log_id);
        let index = || prop_oneof![0u64..40, Just(u64::MAX)];
        prop_oneof![
            (any::<u64>(), index()).prop_map(|(t, i)| Record::Entry(entry(t, i))),
            index().prop_map(Record::Truncate),
            prop_oneof![id(), Just(entry(1, u64::MAX).log_id)].prop_map(Record::Purge),
            proptest::option::of(id()).prop_map(Record::Committed),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever a log file holds (any checksummed records, in any order, then any
        /// bytes), opening it never panics, keeps the entries the whole records leave (a
        /// model: a map of index to term) and cuts the file after them.
        #[test]
        fn any_log_file_opens(
            recs in proptest::collection::vec(record(), 0..24),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48),
        ) {
            let d = dir("any");
            std::fs::create_dir_all(&d).unwrap();
            let mut whole = codec::LOG.to_vec();
            whole.extend(recs.iter().flat_map(encode));
            std::fs::write(d.join("log"), [&whole[..], &tail].concat()).unwrap();
            let s = LogStore::open(&d, false).unwrap();
            let got = indexes(&s);
            drop(s);
            proptest::prop_assert_eq!(std::fs::metadata(d.join("log")).unwrap().len(), whole.len() as u64);
            let mut model = BTreeMap::new();
            for r in &recs {
                match r {
                    Record::Entry(e) => {
                        model.insert(e.log_id.index, e.log_id.leader_id.term);
                    }
                    Record::Truncate(i) => model.retain(|k, _| k < i),
                    Record::Purge(id) => model.retain(|k, _| *k > id.index),
                    Record::Committed(_) => {}
                }
            }
            let want: Vec<(u64, u64)> = model.into_iter().map(|(i, t)| (t, i)).collect();
            proptest::prop_assert_eq!(got, want);
            let _ = std::fs::remove_dir_all(&d);
        }
    }
}
