//! RocksDB in this process (the `rocksdb` crate, linked against the system's librocksdb when
//! `ROCKSDB_LIB_DIR` is set): default options as YCSB's RocksDB binding uses them — write-ahead
//! log on without fsync — plus a 1 GiB block cache so a data set that fits in memory is read
//! from memory, as it is from the in-memory stores beside it. The database lives in a fresh
//! directory under the system's temporary directory, removed when the target is dropped.

use super::scratch::Scratch;
use super::{Conn, Op, Outcome, Result, Target, TargetError};
use rocksdb::{BlockBasedOptions, Cache, Direction, IteratorMode, Options, WriteOptions, DB};
use std::sync::Arc;

/// RocksDB target.
pub struct Rocks {
    db: Arc<DB>,
    /// After `db`: removed once the database is closed.
    _dir: Scratch,
    /// `Some(true)`: sync on every write; `Some(false)`/`None`: never (named or default).
    sync: Option<bool>,
}

fn err(e: rocksdb::Error) -> TargetError {
    TargetError::from_display("rocksdb", e)
}

impl Rocks {
    /// Opens a new database in a fresh temporary directory; `sync` = `Some("sync")` syncs
    /// the WAL on every write (`WriteOptions::set_sync`), `None` or `Some("none")` leaves
    /// it to the OS (YCSB's default).
    /// `,cache=<MiB>` after the policy sets the block cache (default 1 GiB).
    pub fn open(spec: Option<&str>) -> Result<Rocks> {
        let (sync, cache_mib) = match spec.and_then(|s| s.split_once(",cache=")) {
            Some((p, c)) => (
                Some(p),
                c.parse::<usize>()
                    .map_err(|_| TargetError(format!("rocksdb cache={c}: a size in MiB")))?,
            ),
            None => (spec, 1024),
        };
        let sync = match sync {
            None => None,
            Some("none") => Some(false),
            Some("sync") => Some(true),
            Some(other) => {
                return Err(TargetError(format!(
                    "rocksdb={other}: expected rocksdb=sync or rocksdb=none"
                )))
            }
        };
        let dir = Scratch::new("rocksdb");
        let mut opts = Options::default();
        opts.create_if_missing(true);
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        opts.increase_parallelism(cores as i32);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(cache_mib << 20).map_err(err)?);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, dir.path()).map_err(err)?;
        Ok(Rocks {
            db: Arc::new(db),
            _dir: dir,
            sync,
        })
    }
}

impl Target for Rocks {
    fn name(&self) -> String {
        match self.sync {
            None => "rocksdb".into(),
            Some(true) => "rocksdb(sync)".into(),
            Some(false) => "rocksdb(none)".into(),
        }
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        let mut wo = WriteOptions::default();
        wo.set_sync(self.sync == Some(true));
        Ok(Box::new(RocksConn {
            db: self.db.clone(),
            wo,
        }))
    }

    fn uses_device(&self) -> bool {
        true
    }
}

struct RocksConn {
    db: Arc<DB>,
    wo: WriteOptions,
}

impl Conn for RocksConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        for op in ops {
            out.push(match op {
                Op::Update(k, v) | Op::Insert(k, v) => {
                    self.db.put_opt(k, v, &self.wo).map_err(err)?;
                    Outcome::Written
                }
                Op::Read(k) => Outcome::Value(self.db.get(k).map_err(err)?),
                Op::Scan(k, n) => {
                    let mut items = Vec::with_capacity(*n);
                    for item in self
                        .db
                        .iterator(IteratorMode::From(k, Direction::Forward))
                        .take(*n)
                    {
                        let (k, v) = item.map_err(err)?;
                        items.push((k.into_vec(), v.into_vec()));
                    }
                    Outcome::Items(items)
                }
            });
        }
        Ok(())
    }
}
