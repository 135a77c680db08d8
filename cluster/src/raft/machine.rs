//! The state machine openraft drives: committed commands go to the node's store through
//! [`Machine`] (the server runs each as the RESP command it is, through its one write
//! door), and a snapshot is the range's contents as the machine encodes them. The last
//! snapshot is kept in the group's directory, so a replica that restarts installs it and
//! replays only the log after it.

use super::codec;
use super::{io_error, Answer, Config, Entry, LogId, StorageError};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, EntryPayload, ErrorSubject, ErrorVerb, RaftSnapshotBuilder, SnapshotMeta,
    StoredMembership,
};
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a range's replicas apply commands to.
pub trait Machine: Send + Sync + 'static {
    /// Applies one committed command and answers its reply. It must be deterministic: the
    /// same commands in the same order give every replica the same contents.
    fn apply(&self, cmd: &[u8]) -> Vec<u8>;
    /// Everything the range holds, as [`Machine::install`] takes it, or why it cannot be
    /// read. An error stops the group (openraft takes it for a storage failure): a replica
    /// that stops is safe, a snapshot missing keys is not.
    fn snapshot(&self) -> Result<Vec<u8>, String>;
    /// Replaces everything the range holds with a snapshot's contents.
    fn install(&self, data: &[u8]) -> Result<(), String>;
    /// Takes what a snapshot holds besides the contents the machine already has (a new
    /// range seeded from its parent's store on this node); by default nothing.
    fn adopt(&self, _data: &[u8]) {}
}

type Meta = SnapshotMeta<u64, BasicNode>;

struct Inner {
    machine: Arc<dyn Machine>,
    dir: PathBuf,
    applied: Option<LogId>,
    membership: StoredMembership<u64, BasicNode>,
    current: Option<(Meta, Vec<u8>)>,
    built: u64,
}

/// A group's state machine; clones share it (openraft's snapshot builder).
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<Inner>>,
}

fn serr(e: impl std::fmt::Display) -> StorageError {
    io_error(ErrorSubject::StateMachine, ErrorVerb::Write, e)
}

impl StateMachine {
    /// The size of the snapshot kept (built here or installed from the leader), and how
    /// many this replica built since it opened.
    pub fn snapshot_stats(&self) -> (u64, u64) {
        let g = self.lock();
        let bytes = g.current.as_ref().map_or(0, |(_, d)| d.len() as u64);
        (bytes, g.built)
    }

    /// The state machine of the group whose files are in `dir`, restored from the snapshot
    /// kept there (given to the machine unless `installed`: it holds the contents already).
    pub fn open(
        dir: &Path,
        machine: Arc<dyn Machine>,
        installed: bool,
    ) -> Result<StateMachine, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let mut inner = Inner {
            machine,
            dir: dir.to_path_buf(),
            applied: None,
            membership: StoredMembership::default(),
            current: None,
            built: 0,
        };
        match std::fs::read(dir.join("snapshot")) {
            Ok(b) => {
                let (meta, data, old) = decode_snapshot(&b)?;
                if installed {
                    inner.machine.adopt(&data);
                } else {
                    inner.machine.install(&data)?;
                }
                inner.applied = meta.last_log_id;
                inner.membership = meta.last_membership.clone();
                if old {
                    // Format 1: kept again, in this format.
                    let e = |e: std::io::Error| format!("rewriting the snapshot: {e}");
                    inner.keep(meta, data).map_err(e)?;
                } else {
                    inner.current = Some((meta, data));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("reading the snapshot: {e}")),
        }
        Ok(StateMachine {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Writes the snapshot a new group starts from into `dir`: `data` as of `meta`.
pub(crate) fn seed(dir: &Path, meta: &Meta, data: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut f = std::fs::File::create(dir.join("snapshot"))?;
    f.write_all(&snapshot_file(meta, data)?)?;
    f.sync_all()
}

/// A snapshot file: the header `AKVRSNP` and the format, `u32 crc32c(body) | body`, the body
/// `(meta, data)` in postcard.
fn snapshot_file(meta: &Meta, data: &[u8]) -> std::io::Result<Vec<u8>> {
    codec::checked_file(&codec::SNAPSHOT, &(meta, data))
}

/// A snapshot file's meta and data, and whether it is of format 1 (bincode, no header).
fn decode_snapshot(b: &[u8]) -> Result<(Meta, Vec<u8>, bool), String> {
    let ((meta, data), old) = codec::read_checked_file(b, &codec::SNAPSHOT, "the snapshot file")
        .map_err(|e| e.to_string())?;
    Ok((meta, data, old))
}

impl Inner {
    /// Keeps a snapshot in the directory (written aside, flushed, renamed).
    fn keep(&mut self, meta: Meta, data: Vec<u8>) -> std::io::Result<()> {
        let file = snapshot_file(&meta, &data)?;
        let tmp = self.dir.join("snapshot.tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&file)?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.dir.join("snapshot"))?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        self.current = Some((meta, data));
        Ok(())
    }
}

impl RaftSnapshotBuilder<Config> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<Config>, StorageError> {
        let mut g = self.lock();
        let data = g.machine.snapshot().map_err(serr)?;
        g.built += 1;
        let id = match g.applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, g.built),
            None => format!("0-0-{}", g.built),
        };
        let meta = Meta {
            last_log_id: g.applied,
            last_membership: g.membership.clone(),
            snapshot_id: id,
        };
        g.keep(meta.clone(), data.clone()).map_err(serr)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<Config> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError> {
        let g = self.lock();
        Ok((g.applied, g.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Answer>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut g = self.lock();
        let mut out = Vec::new();
        for e in entries {
            g.applied = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => out.push(Answer::default()),
                EntryPayload::Normal(cmd) => out.push(Answer(g.machine.apply(&cmd.0))),
                EntryPayload::Membership(m) => {
                    g.membership = StoredMembership::new(Some(e.log_id), m);
                    out.push(Answer::default());
                }
            }
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let mut g = self.lock();
        g.machine.install(&data).map_err(serr)?;
        g.applied = meta.last_log_id;
        g.membership = meta.last_membership.clone();
        g.keep(meta.clone(), data).map_err(serr)?;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<Config>>, StorageError> {
        let g = self.lock();
        Ok(g.current.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.clone())),
        }))
    }
}
