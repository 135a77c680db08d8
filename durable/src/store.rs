//! The durable store: an in-memory `accelkv_tree::Store` whose writes are acknowledged once
//! durable (per the sync policy), opened from a data directory (or any [`Storage`]).
//! Reads never touch the device.

use crate::commit::{Callback, Core, Counters, DirtyObserver, Queue, Status, SyncPolicy};
use crate::error::{Error, Result};
use crate::index::INDEX_FILE;
use crate::io::{sync_dir, FileStorage, Storage};
use crate::recovery::{recover, LoadProgress, RecoveryReport};
use accelkv_tree::{Config, Store as Tree, Write};
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Name of the page file inside a data directory.
pub const PAGE_FILE: &str = "pages";
/// Name of the lock file inside a data directory.
pub const LOCK_FILE: &str = "LOCK";

/// How a durable store is opened.
#[derive(Clone, Debug)]
pub struct Options {
    /// The in-memory store's configuration.
    pub config: Config,
    /// When writes are acknowledged. Default [`SyncPolicy::Sync`].
    pub sync: SyncPolicy,
    /// Where opening reports how far recovery has read (a server answers LOADING with it).
    pub progress: Arc<LoadProgress>,
    /// How many versions one clock page leases ([`DEFAULT_LEASE`]; at least [`MIN_LEASE`]):
    /// a new lease is written (one 4 KiB page and an `fdatasync`) when half of it is used,
    /// and versions jump by up to this much when the store is reopened.
    pub version_lease: u64,
    /// When commits write delta pages instead of whole leaf images
    /// ([`Deltas::default`](crate::Deltas::default); [`Deltas::OFF`](crate::Deltas::OFF):
    /// whole images only). With a memory budget (`Config::evict`) an evicted leaf is its
    /// last image and the delta entries newer than it, read back together.
    pub deltas: crate::Deltas,
}

/// Versions leased by one clock page unless [`Options::version_lease`] says otherwise.
pub const DEFAULT_LEASE: u64 = 1 << 24;
/// The smallest lease: twice what an atomic batch may need to fit below the limit.
pub const MIN_LEASE: u64 = 1 << 19;

impl Default for Options {
    fn default() -> Options {
        Options {
            config: Config::default(),
            sync: SyncPolicy::Sync,
            progress: Arc::default(),
            version_lease: DEFAULT_LEASE,
            deltas: crate::Deltas::default(),
        }
    }
}

/// Counters of the durability layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableStats {
    /// The sync policy.
    pub policy: String,
    /// Every write with a version up to this one is durable.
    pub durable_version: u64,
    /// Commits that wrote pages.
    pub commits: u64,
    /// Leaf pages written.
    pub leaf_pages_written: u64,
    /// Delta pages written.
    pub delta_pages_written: u64,
    /// Delta pages still providing some key's newest state.
    pub live_delta_pages: u64,
    /// Their slots, in bytes.
    pub live_delta_bytes: u64,
    /// The live leaf pages' slots, in bytes.
    pub live_leaf_bytes: u64,
    /// Keys whose newest durable state is in a delta page (their leaf's page is older).
    pub delta_keys: u64,
    /// Extension pages written.
    pub ext_pages_written: u64,
    /// Bytes written to the device.
    pub bytes_written: u64,
    /// `fdatasync` calls.
    pub syncs: u64,
    /// Failed commits.
    pub failures: u64,
    /// Dirty keys persisted (one per key per commit).
    pub keys_persisted: u64,
    /// With a memory budget: leaves the evictor had written back (imaged by a commit
    /// without a write) so that they could be evicted.
    pub write_backs: u64,
    /// Leaf pages providing the newest state of some key range.
    pub live_pages: u64,
    /// Free slots in the page file.
    pub free_slots: u64,
    /// The device error the store is stuck on, if any (writes are refused meanwhile).
    pub failed: Option<String>,
    /// Writes released but not yet durable (written, under `none`): the tree's read version
    /// minus `durable_version`.
    pub lag_versions: u64,
    /// How old the oldest write not yet durable can be (zero when every released write is
    /// durable): what a crash now could lose, in time.
    pub lag: std::time::Duration,
    /// The bound the policy keeps `lag` under by making writers wait (zero for `sync`).
    pub max_lag: std::time::Duration,
    /// Writes whose answer waited for the page writer to catch up (relaxed policies).
    pub stalls: u64,
    /// Time those writers waited, summed, in microseconds.
    pub stall_us: u64,
    /// The last commit's duration (snapshot to durable), in microseconds.
    pub last_commit_us: u64,
    /// When the last commit became durable, in ms since the Unix epoch (0: none since the
    /// store opened).
    pub last_commit_at_ms: u64,
    /// The longest commit so far, in microseconds.
    pub max_commit_us: u64,
    /// The version lease on the device: no version above it has been issued.
    pub version_lease: u64,
    /// Clock pages written (leases taken) since the store opened.
    pub leases: u64,
}

/// The durability side of a store: the committer, the wait for durability, stats. Shared
/// by a server's write paths; closing the last handle flushes and stops the committer.
pub struct Durability {
    core: Arc<Core>,
    committer: Mutex<Option<JoinHandle<()>>>,
    evictor: Mutex<Option<JoinHandle<()>>>,
    tree: Arc<Tree>,
    /// The data directory (a store opened from one): a clean close writes the index there.
    dir: Mutex<Option<PathBuf>>,
    _lock: Option<File>,
}

impl Durability {
    /// Fails when the device is failing: writes must not start (nothing is changed).
    pub fn writable(&self) -> Result<()> {
        self.core.failed().map_or(Ok(()), Err)
    }

    /// Blocks until the write with `version` may be acknowledged: under `sync`, once it is
    /// durable; under the relaxed policies, at once while the page writer is within the
    /// policy's window ([`SyncPolicy::max_lag`]), else once it has caught up.
    pub fn wait(&self, version: u64) -> Result<()> {
        self.core.wait(version)
    }

    /// Calls `cb` (on the committer's thread, so briefly) once [`Durability::wait`] would
    /// return for `version`, or with the error if its commit failed; at once when it would
    /// not block.
    pub fn on_durable(&self, version: u64, cb: Callback) {
        self.core.on_durable(version, cb)
    }

    /// Whether an answer to a write must wait ([`Durability::wait`] or
    /// [`Durability::on_durable`]) before it is sent: always under `sync`; under the
    /// relaxed policies only while the page writer is further behind than the policy
    /// allows. One atomic load and a clock read.
    pub fn must_wait(&self) -> bool {
        self.core.must_wait()
    }

    /// Writes and syncs everything written so far, whatever the policy.
    pub fn flush(&self) -> Result<()> {
        self.core.commit(&self.tree, true).map(|_| ())
    }

    /// The sync policy.
    pub fn policy(&self) -> SyncPolicy {
        self.core.policy
    }

    /// Counters.
    pub fn stats(&self) -> DurableStats {
        let c: &Counters = &self.core.counters;
        let released = self.tree.read_version();
        let s = self.core.status.lock().unwrap_or_else(|e| e.into_inner());
        let (durable_version, failed) = (s.durable, s.failed.as_ref().map(ToString::to_string));
        drop(s);
        let lag_versions = released.saturating_sub(durable_version);
        let lag = if lag_versions == 0 {
            std::time::Duration::ZERO
        } else {
            self.core.lag()
        };
        let d = self.core.disk.lock().unwrap_or_else(|e| e.into_inner());
        DurableStats {
            policy: self.core.policy.to_string(),
            durable_version,
            commits: c.commits.load(Ordering::Relaxed),
            leaf_pages_written: c.leaf_pages.load(Ordering::Relaxed),
            delta_pages_written: c.delta_pages.load(Ordering::Relaxed),
            live_delta_pages: d.delta.live_pages() as u64,
            live_delta_bytes: d.delta.live_bytes(),
            live_leaf_bytes: d.leaf_bytes,
            delta_keys: d.delta.pending_keys() as u64,
            ext_pages_written: c.ext_pages.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
            keys_persisted: c.keys.load(Ordering::Relaxed),
            write_backs: self
                .core
                .mirror
                .as_ref()
                .map_or(0, |m| m.write_backs.load(Ordering::Relaxed)),
            live_pages: d.cover.live_pages() as u64,
            free_slots: d.slabs.free_slots() as u64,
            failed,
            lag_versions,
            lag,
            max_lag: self.core.policy.max_lag(),
            stalls: c.stalls.load(Ordering::Relaxed),
            stall_us: c.stall_us.load(Ordering::Relaxed),
            last_commit_us: c.last_commit_us.load(Ordering::Relaxed),
            last_commit_at_ms: c.last_commit_at_ms.load(Ordering::Relaxed),
            max_commit_us: c.max_commit_us.load(Ordering::Relaxed),
            version_lease: d.lease,
            leases: c.leases.load(Ordering::Relaxed),
        }
    }
}

impl Durability {
    /// Closes the store cleanly while other handles to it may remain (a server at
    /// shutdown): stops the evictor, has the committer make its last commit and stop, and
    /// writes the index the next open reads instead of scanning the page file (index.rs).
    /// Writes after it are not persisted (nothing commits them). Returns the last commit's
    /// error, if it failed. Dropping the store closes it the same way.
    pub fn close(&self) -> Result<()> {
        if let Some(m) = &self.core.mirror {
            m.stop();
        }
        if let Some(h) = self
            .evictor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = h.join();
        }
        self.core
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .shutdown = true;
        self.core.wake.notify_all();
        if let Some(h) = self
            .committer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = h.join();
        }
        if let Some(e) = self.core.failed() {
            return Err(e);
        }
        // A clean close: the last commit is durable; the index spares the next open the
        // scan. A failure to write it costs only that (the next open scans).
        let dir = self.dir.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(dir) = dir {
            let _ = self.core.write_index(&dir);
        }
        Ok(())
    }
}

impl Drop for Durability {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A durable ordered key-value store; see the crate docs.
pub struct Store {
    tree: Arc<Tree>,
    durability: Arc<Durability>,
    report: RecoveryReport,
    path: Option<PathBuf>,
}

impl Store {
    /// Opens (creating if needed) the store in directory `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, Options::default())
    }

    /// Opens (creating if needed) the store in directory `path`.
    pub fn open_with(path: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let dir = path.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Disk(format!("creating {}: {e}", dir.display())))?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(|e| Error::Disk(format!("opening {}: {e}", dir.join(LOCK_FILE).display())))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(Error::Locked(format!(
                "{} is open in another process",
                dir.display()
            )));
        }
        let file = dir.join(PAGE_FILE);
        let existed = file.exists();
        let storage = FileStorage::open(&file)
            .map_err(|e| Error::Disk(format!("opening {}: {e}", file.display())))?;
        if !existed {
            sync_dir(dir).map_err(|e| Error::Disk(format!("syncing {}: {e}", dir.display())))?;
        }
        // The index of the last clean close, if any (index.rs): used only if the page
        // file's close record names it, which the open clears; removed either way.
        let index_file = dir.join(INDEX_FILE);
        let index = std::fs::read(&index_file).ok();
        let mut s = Store::open_on(Arc::new(storage), opts, Some(lock), index.as_deref())?;
        if index.is_some() {
            let _ = std::fs::remove_file(&index_file);
        }
        s.path = Some(dir.to_path_buf());
        *s.durability.dir.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
        Ok(s)
    }

    /// Opens the store on `storage` (a file, or the fault-injecting device in tests).
    pub fn open_storage(storage: Arc<dyn Storage>, opts: Options) -> Result<Store> {
        Store::open_on(storage, opts, None, None)
    }

    fn open_on(
        storage: Arc<dyn Storage>,
        opts: Options,
        lock: Option<File>,
        index: Option<&[u8]>,
    ) -> Result<Store> {
        opts.config.validate().map_err(Error::Tree)?;
        if opts.version_lease < MIN_LEASE {
            return Err(Error::Config(format!(
                "version_lease {} is below the smallest, {MIN_LEASE}",
                opts.version_lease
            )));
        }
        let shared = opts.config.evict.then(crate::mirror::Shared::new);
        let parts = shared.clone().map(|s| (storage.clone(), s));
        let (tree, disk, report) = recover(
            storage.as_ref(),
            opts.config.clone(),
            parts,
            &opts.progress,
            index,
        )?;
        let tree = Arc::new(tree);
        let core = Arc::new(Core {
            storage,
            policy: opts.sync,
            inline_max: opts.config.max_inline_value,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            status: Mutex::new(Status {
                durable: report.version,
                ..Status::default()
            }),
            done: Condvar::new(),
            disk: Mutex::new(disk),
            counters: Counters::default(),
            epoch: std::time::Instant::now(),
            durable_at: std::sync::atomic::AtomicU64::new(0),
            mirror: shared,
            freed_later: Arc::new(Mutex::new(Vec::new())),
            lease_step: opts.version_lease,
            deltas: opts.deltas,
        });
        // Recovery read the file in order (read-ahead's large folios, now clean): dropped,
        // so that commits' small writes dirty only their own pages, and a leaf cache's
        // misses read only theirs. (An open from the index read only what it names.)
        if !report.from_index {
            core.storage.drop_cached(0, 0);
        }
        // Before any write: versions from here on are above every version ever issued, and
        // the device says so before any of them is seen.
        core.renew_lease(&tree)?;
        if !tree.set_write_observer(Arc::new(DirtyObserver(core.clone()))) {
            return Err(Error::Config(
                "the store has no free write-observer slot".into(),
            ));
        }
        let (c, t) = (core.clone(), tree.clone());
        let committer = std::thread::Builder::new()
            .name("accelkv-commit".into())
            .spawn(move || c.run(&t))
            .map_err(|e| Error::Disk(format!("starting the committer thread: {e}")))?;
        let evictor = match &core.mirror {
            Some(shared) => {
                // Recovery has read the file in order; from now on a miss reads one page
                // at a random offset (RocksDB's advise_random_on_open does the same).
                core.storage.advise_random();
                // Attached by recovery when it left leaves in the page file.
                tree.attach_pager(Arc::new(crate::pager::PageReader {
                    storage: core.storage.clone(),
                    shared: shared.clone(),
                    guess: opts.config.node_size + 4096,
                }));
                let (c, t, s) = (core.clone(), tree.clone(), shared.clone());
                Some(
                    std::thread::Builder::new()
                        .name("accelkv-evict".into())
                        .spawn(move || crate::mirror::run_evictor(t, c, s))
                        .map_err(|e| Error::Disk(format!("starting the evictor thread: {e}")))?,
                )
            }
            None => None,
        };
        let durability = Arc::new(Durability {
            core,
            committer: Mutex::new(Some(committer)),
            evictor: Mutex::new(evictor),
            tree: tree.clone(),
            dir: Mutex::new(None),
            _lock: lock,
        });
        Ok(Store {
            tree,
            durability,
            report,
            path: None,
        })
    }

    /// What recovery found when the store was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    /// The data directory, if opened from one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The in-memory store: reads, snapshots, stats, and the read engines' access. Writes
    /// made directly on it are persisted but not waited for; use [`Store::put`] and friends
    /// (or [`Durability::wait`]) to acknowledge only durable writes.
    pub fn tree(&self) -> &Arc<Tree> {
        &self.tree
    }

    /// The durability handle (wait for a version, flush, stats).
    pub fn durability(&self) -> &Arc<Durability> {
        &self.durability
    }

    fn durable(&self, w: accelkv_tree::Result<Write>) -> Result<Write> {
        let w = w?;
        self.durability.wait(w.version)?;
        Ok(w)
    }

    /// Inserts or replaces; returns once durable (per the sync policy).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.durability.writable()?;
        self.durable(self.tree.put(key, value))
    }

    /// Inserts or replaces with an expiry deadline (ms since the Unix epoch; 0: none);
    /// returns once durable. The deadline is durable with the value.
    pub fn put_expiring(&self, key: &[u8], value: &[u8], deadline: u64) -> Result<Write> {
        self.durability.writable()?;
        self.durable(self.tree.put_expiring(key, value, deadline))
    }

    /// Removes every item as one write; returns once durable. The next commit's pages
    /// replace every page of the old state.
    pub fn clear(&self) -> Result<Write> {
        self.durability.writable()?;
        let w = self.tree.clear()?.0;
        self.durability.wait(w.version)?;
        Ok(w)
    }

    /// The value of `key` and its deadline (0: none).
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        Ok(self.tree.get_entry(key)?)
    }

    /// Replaces the value of a present key (`Error::Tree(NotFound)` if absent).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.durability.writable()?;
        self.durable(self.tree.update(key, value))
    }

    /// Deletes a key (`existed` says whether it was there; deleting an absent key writes
    /// nothing).
    pub fn delete(&self, key: &[u8]) -> Result<Write> {
        self.durability.writable()?;
        self.durable(self.tree.delete(key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tree.get(key)?)
    }

    /// Items with `lo <= key < hi` (no upper bound with `None`), at most `limit`.
    pub fn scan(&self, lo: &[u8], hi: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.tree.scan(lo, hi, limit)
    }

    /// Writes and syncs everything written so far, whatever the policy.
    pub fn flush(&self) -> Result<()> {
        self.durability.flush()
    }

    /// Closes the store cleanly ([`Durability::close`]) while other handles may remain.
    pub fn close(&self) -> Result<()> {
        self.durability.close()
    }

    /// Counters of the durability layer.
    pub fn stats(&self) -> DurableStats {
        self.durability.stats()
    }
}
