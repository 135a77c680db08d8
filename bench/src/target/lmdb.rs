//! LMDB in this process (the `heed` crate, which builds LMDB's own C source): a
//! copy-on-write B+tree over a memory map, one write transaction per write as YCSB's LMDB
//! binding does, a read transaction per read. LMDB has no cache of its own to size: every
//! page is read through the map from the OS page cache, so it has no counterpart of
//! accelkv's memory budget or RocksDB's block cache (docs/BENCHMARKS.md says what that
//! means for the comparison). The environment lives in a fresh directory under the system's
//! temporary directory ([`Scratch`]), removed when the target is dropped.

use super::scratch::Scratch;
use super::{Conn, Op, Outcome, Result, Target, TargetError};
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use std::ops::Bound;

/// Address space reserved for the map (sparse: only written pages take disk or memory).
const MAP_SIZE: usize = 64 << 30;

/// LMDB target.
pub struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
    /// After `env`: removed once the environment is closed.
    _dir: Scratch,
    sync: bool,
}

fn err(e: heed::Error) -> TargetError {
    TargetError::from_display("lmdb", e)
}

impl Lmdb {
    /// Opens a new environment in a fresh temporary directory: `sync` (the default) syncs
    /// every commit, `none` never (`MDB_NOSYNC`: the OS writes the map back).
    pub fn open(spec: Option<&str>) -> Result<Lmdb> {
        let sync = match spec {
            None | Some("sync") => true,
            Some("none") => false,
            Some(other) => {
                return Err(TargetError(format!(
                    "lmdb={other}: expected lmdb=sync or lmdb=none (LMDB has no cache to size: \
                     it reads through the OS page cache)"
                )))
            }
        };
        let dir = Scratch::new("lmdb");
        std::fs::create_dir_all(dir.path())
            .map_err(|e| TargetError(format!("lmdb: creating {}: {e}", dir.path().display())))?;
        let mut opts = EnvOpenOptions::new();
        opts.map_size(MAP_SIZE).max_readers(256);
        if !sync {
            // SAFETY: MDB_NOSYNC only weakens durability (the benchmark's `none` policy);
            // the environment is used by this process alone.
            unsafe { opts.flags(EnvFlags::NO_SYNC) };
        }
        // SAFETY: a fresh directory that no other environment in this process or any
        // other opens (the name is unique to this process and target).
        let env = unsafe { opts.open(dir.path()) }.map_err(err)?;
        let mut w = env.write_txn().map_err(err)?;
        let db = env.create_database(&mut w, None).map_err(err)?;
        w.commit().map_err(err)?;
        Ok(Lmdb {
            env,
            db,
            _dir: dir,
            sync,
        })
    }
}

impl Target for Lmdb {
    fn name(&self) -> String {
        if self.sync {
            "lmdb(sync)".into()
        } else {
            "lmdb(none)".into()
        }
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        Ok(Box::new(LmdbConn {
            env: self.env.clone(),
            db: self.db,
        }))
    }

    fn uses_device(&self) -> bool {
        true
    }
}

struct LmdbConn {
    env: Env,
    db: Database<Bytes, Bytes>,
}

impl Conn for LmdbConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        for op in ops {
            out.push(match op {
                Op::Update(k, v) | Op::Insert(k, v) => {
                    let mut w = self.env.write_txn().map_err(err)?;
                    self.db.put(&mut w, k, v).map_err(err)?;
                    w.commit().map_err(err)?;
                    Outcome::Written
                }
                Op::Read(k) => {
                    let r = self.env.read_txn().map_err(err)?;
                    Outcome::Value(self.db.get(&r, k).map_err(err)?.map(<[u8]>::to_vec))
                }
                Op::Scan(k, n) => {
                    let r = self.env.read_txn().map_err(err)?;
                    let range = (Bound::Included(&k[..]), Bound::Unbounded);
                    let mut items = Vec::with_capacity(*n);
                    for item in self.db.range(&r, &range).map_err(err)?.take(*n) {
                        let (k, v) = item.map_err(err)?;
                        items.push((k.to_vec(), v.to_vec()));
                    }
                    Outcome::Items(items)
                }
            });
        }
        Ok(())
    }
}
