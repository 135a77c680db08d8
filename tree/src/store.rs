//! The in-process public API: a `Store` opened from a `Config`, with get/put/update/delete,
//! scans, snapshots and stats. Reads go through the reference reader.

/// What one step of [`Store::expired_keys`] returns: the expired keys it found, and the
/// key to continue from (`None`: the walk reached the end).
pub type ExpiredStep = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// Why a panicking scan panics.
const PAGE_READ: &str = "an evicted leaf could not be read back (use try_scan)";

/// The copying scans of a reader ([`Store`], [`Snapshot`], [`VersionView`]), written once
/// from its lending ones (`scan_with`, `scan_rev_with`): `scan` (panics where `try_scan`
/// fails), `try_scan` and `try_scan_rev`.
macro_rules! copying_scans {
    () => {
        /// The items with `lo <= key < hi` (`hi` `None`: to the end) in key order, at most
        /// `limit`, copied.
        ///
        /// # Panics
        /// Only in a store whose leaves may live in a page file (a memory budget over a
        /// data directory, `Config::evict`), when one cannot be read back: use `try_scan`
        /// there.
        pub fn scan(&self, lo: &[u8], hi: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
            self.try_scan(lo, hi, limit).expect(PAGE_READ)
        }

        /// `scan`, failing with [`Error::PageRead`] when an evicted leaf cannot be read
        /// back.
        pub fn try_scan(
            &self,
            lo: &[u8],
            hi: Option<&[u8]>,
            limit: usize,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let mut out = Vec::new();
            self.scan_with(lo, hi, limit, |k, v| out.push((k.to_vec(), v.to_vec())))?;
            Ok(out)
        }

        /// The items with `lo <= key < hi` in descending key order, at most `limit`: the
        /// last items of a range without reading the ones before them (one descent per
        /// leaf).
        pub fn try_scan_rev(
            &self,
            lo: &[u8],
            hi: &[u8],
            limit: usize,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let mut out = Vec::new();
            self.scan_rev_with(lo, hi, limit, |k, v| out.push((k.to_vec(), v.to_vec())))?;
            Ok(out)
        }
    };
}

use crate::config::Config;
use crate::epoch::ReaderSlot;
use crate::error::{Error, Result};
use crate::raw::{Raw, WriteObserver};
use crate::tree::{Tree, ROOT};
use crate::write::{Op, Outcome};
use accelkv_node::layout::NO_DEADLINE;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An ordered key-value store held in memory.
///
/// Thread safety: `Store` is `Send + Sync`; share it (`Arc<Store>`) among any number of
/// reader and writer threads. Reads are wait-free and linearizable; writes return once
/// visible to every later read.
pub struct Store {
    pub(crate) tree: Tree,
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// The write version (for a delete of an absent key, the read version at which the key
    /// was seen absent). Reads at this version or later see the write.
    pub version: u64,
    /// Whether the key was present before the write.
    pub existed: bool,
}

/// One write of [`Store::write_batch_expiring_unwaited`]: the key, and its new value with
/// its deadline (0: none), or `None` to delete it.
pub type BatchItem<'a> = (&'a [u8], Option<(&'a [u8], u64)>);

/// One write of an atomic batch with client flags: the key, and its new value, deadline (0:
/// none) and flags (0: none), or `None` to delete it.
pub type BatchEntry<'a> = (&'a [u8], Option<(&'a [u8], u64, u32)>);

/// What an atomic batch did; see [`Store::write_batch`].
#[derive(Clone, Debug)]
pub struct Batch {
    /// Each item's result, in order (inline for the small batches a command makes).
    pub results: smallvec::SmallVec<[Result<Write>; 8]>,
    /// The batch's version: every item is visible once it is, none before.
    pub version: u64,
}

/// Size and shape of the store.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Items visible at the current read version.
    pub items: u64,
    /// Levels in the tree (1 when the root is a leaf).
    pub depth: usize,
    /// Leaf nodes.
    pub leaves: usize,
    /// Leaf nodes with no item visible at the current read version (each one a step that
    /// a scan crossing it takes for nothing; deletes merge them away).
    pub empty_leaves: usize,
    /// Interior nodes.
    pub interiors: usize,
    /// Node size in bytes.
    pub node_size: usize,
    /// Bytes of the current version's nodes (nodes × node size).
    pub node_bytes: usize,
    /// Bytes in use inside those nodes (headers, shortcuts, items, logs).
    pub used_bytes: usize,
    /// Bytes of values stored out of line.
    pub out_of_line_bytes: u64,
    /// Bytes of the page table.
    pub page_table_bytes: usize,
    /// Node buffers allocated, old versions awaiting reclamation included.
    pub buffers_live: usize,
    /// Bytes of arena chunks reserved from the system.
    pub arena_reserved_bytes: usize,
    /// Raw bytes of keys and values.
    pub raw_bytes: u64,
    /// (node bytes + out-of-line bytes + page table) / items.
    pub bytes_per_item: f64,
    /// The global read version.
    pub read_version: u64,
    /// Structural modifications so far: log merges (every structural write rebuilds a leaf).
    pub log_merges: u64,
    /// Node splits (leaf and interior, root excluded).
    pub splits: u64,
    /// Node merges (leaf and interior).
    pub node_merges: u64,
    /// Root splits (tree growth).
    pub root_splits: u64,
    /// Root shrinks.
    pub root_shrinks: u64,
}

impl Store {
    /// The tree inside (tests of the tree's internals).
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Tree {
        &self.tree
    }

    /// An empty store.
    pub fn new(cfg: Config) -> Result<Store> {
        Ok(Store {
            tree: Tree::new(cfg)?,
        })
    }

    /// A store built from `items`, which must be sorted by key with no duplicates; nodes are
    /// filled to `cfg.bulk_fill_pct`.
    pub fn bulk_load<K, V>(cfg: Config, items: impl IntoIterator<Item = (K, V)>) -> Result<Store>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        Store::bulk_load_expiring(cfg, items.into_iter().map(|(k, v)| (k, v, NO_DEADLINE)))
    }

    /// [`Store::bulk_load`] of items that carry expiry deadlines (ms since the Unix epoch,
    /// 0: none). Items already expired are loaded too (invisible to readers; the active
    /// sweep of a server removes them).
    pub fn bulk_load_expiring<K, V>(
        cfg: Config,
        items: impl IntoIterator<Item = (K, V, u64)>,
    ) -> Result<Store>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        Store::bulk_load_items(cfg, items.into_iter().map(|(k, v, d)| (k, v, d, 0)))
    }

    /// [`Store::bulk_load_expiring`] of items that also carry client flags (0: none).
    pub fn bulk_load_items<K, V>(
        cfg: Config,
        items: impl IntoIterator<Item = (K, V, u64, u32)>,
    ) -> Result<Store>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let store = Store::new(cfg)?;
        store.tree.bulk_load(items, |k, v| {
            store.check_key(k)?;
            store.check_value(v)
        })?;
        Ok(store)
    }

    /// [`Store::bulk_load_items`] for recovery: the store's version clocks start at `version`, so
    /// every later write gets a version above it. (Nodes built here carry version 0.)
    pub fn bulk_load_at<K, V>(
        cfg: Config,
        items: impl IntoIterator<Item = (K, V, u64, u32)>,
        version: u64,
    ) -> Result<Store>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let store = Store::bulk_load_items(cfg, items)?;
        store.tree.versions.advance_to(version);
        Ok(store)
    }

    /// A store rebuilt from a page file with a memory budget (`cfg.evict`): `pieces`, in key
    /// order, are items for resident leaves and leaves left in the page file, read back
    /// through `pager` when needed. The version clocks start at `version`. Returns the store
    /// and the (LID, page) of every leaf left in the page file.
    pub fn recovered<K, V>(
        cfg: Config,
        pager: Arc<dyn crate::Pager>,
        pieces: impl IntoIterator<Item = crate::Recovered<K, V>>,
        version: u64,
    ) -> Result<(Store, Vec<(u64, u64)>)>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let store = Store::new(cfg)?;
        store.tree.attach_pager(pager);
        let (_, stubs) = store.tree.bulk_load_recovered(pieces, |k, v| {
            store.check_key(k)?;
            store.check_value(v)
        })?;
        store.tree.versions.advance_to(version);
        Ok((store, stubs))
    }

    /// The configuration the store was built with.
    pub fn config(&self) -> &Config {
        &self.tree.cfg
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(Error::EmptyKey);
        }
        if key.len() > self.tree.cfg.max_key {
            return Err(Error::KeyTooLong {
                len: key.len(),
                max: self.tree.cfg.max_key,
            });
        }
        Ok(())
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.tree.cfg.max_value {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: self.tree.cfg.max_value,
            });
        }
        Ok(())
    }

    /// Leases versions up to `upto` (a durable store, once the device records that no
    /// version up to it will be issued again): the read version, and so every version any
    /// reader, snapshot or client sees, stops at the lease until it is raised. Writers
    /// past it are completed and wait to become visible ([`Store::wait_visible`]); write
    /// observers are asked to raise it (`WriteObserver::on_lease_wait`) by atomic batches
    /// that would straddle it. The first call sets the lease (before any write), later
    /// ones raise it. Without a call there is no limit.
    pub fn lease_versions(&self, upto: u64) {
        self.tree.versions.lease(upto);
    }

    /// The version lease's limit (`u64::MAX`: none).
    pub fn version_lease(&self) -> u64 {
        self.tree.versions.limit()
    }

    /// The last write version handed out (visible or not).
    pub fn last_write_version(&self) -> u64 {
        self.tree.versions.last_write()
    }

    /// The global read version: every write with a version up to it is visible.
    pub fn read_version(&self) -> u64 {
        self.tree.versions.read_version()
    }

    /// The value of `key` (absent once its deadline has passed).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.to_vec())
    }

    /// Calls `f` with the value of `key` without copying it.
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.get_entry_with(key, 0, |v, _| f(v))
    }

    /// The value of `key` and its expiry deadline (ms since the Unix epoch; 0: none).
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        self.get_entry_with(key, 0, |v, d| (v.to_vec(), d))
    }

    /// Calls `f` with the value of `key` and its deadline, as a reader whose clock reads
    /// `now` (ms since the Unix epoch; 0: the store's clock, read after the read version).
    /// A value whose deadline is before `now` is absent.
    pub fn get_entry_with<R>(
        &self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&[u8], u64) -> R,
    ) -> Result<Option<R>> {
        self.get_item_with(key, now, |v, d, _| f(v, d))
    }

    /// [`Store::get_entry_with`] that also hands `f` the item's client flags (0: none).
    pub fn get_item_with<R>(
        &self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&[u8], u64, u32) -> R,
    ) -> Result<Option<R>> {
        self.check_key(key)?;
        let pin = self.tree.epochs.pin();
        let rv = self.tree.versions.read_version();
        let now = if now == 0 {
            self.tree.read_clock()
        } else {
            now
        };
        self.tree.get_at(key, rv, now, &pin, f)
    }

    /// Inserts or replaces; returns once the write is visible to readers.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.put_expiring(key, value, NO_DEADLINE)
    }

    /// Inserts or replaces with an expiry deadline (ms since the Unix epoch, as Redis's
    /// PXAT; 0: never): readers whose clock is past `deadline` no longer see the item.
    /// Returns once the write is visible to readers.
    pub fn put_expiring(&self, key: &[u8], value: &[u8], deadline: u64) -> Result<Write> {
        let w = self.put_expiring_unwaited(key, value, deadline)?;
        self.wait_visible(w.version);
        Ok(w)
    }

    /// Inserts or replaces with a deadline (0: never) and client flags (0: none; the
    /// memcached port's per-item word). Returns once the write is visible to readers.
    pub fn put_item(&self, key: &[u8], value: &[u8], deadline: u64, flags: u32) -> Result<Write> {
        let w = self.put_item_unwaited(key, value, deadline, flags)?;
        self.wait_visible(w.version);
        Ok(w)
    }

    /// Replaces the value of a present key; `Error::NotFound` when absent. Returns once the
    /// write is visible to readers.
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.check_key(key)?;
        self.check_value(value)?;
        match self.tree.write(key, Op::Update(value, NO_DEADLINE, 0))? {
            (Outcome::Absent, _) => Err(Error::NotFound),
            (_, version) => {
                self.wait_visible(version);
                Ok(Write {
                    version,
                    existed: true,
                })
            }
        }
    }

    /// Deletes `key`; `existed` says whether it was there. Returns once the write is
    /// visible to readers.
    pub fn delete(&self, key: &[u8]) -> Result<Write> {
        let w = self.delete_unwaited(key)?;
        self.wait_visible(w.version);
        Ok(w)
    }

    /// [`Store::put`] without waiting for visibility: the write is in the tree and its
    /// version completed, but readers see it only once every older write has completed too
    /// ([`Store::is_visible`]). A caller with other work (a server's event loop) answers
    /// later instead of waiting behind a writer the OS descheduled.
    pub fn put_unwaited(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.put_expiring_unwaited(key, value, NO_DEADLINE)
    }

    /// [`Store::put_expiring`] without waiting for visibility (see [`Store::put_unwaited`]).
    pub fn put_expiring_unwaited(&self, key: &[u8], value: &[u8], deadline: u64) -> Result<Write> {
        self.put_item_unwaited(key, value, deadline, 0)
    }

    /// [`Store::put_item`] without waiting for visibility (see [`Store::put_unwaited`]).
    pub fn put_item_unwaited(
        &self,
        key: &[u8],
        value: &[u8],
        deadline: u64,
        flags: u32,
    ) -> Result<Write> {
        self.put_item_hinted(key, value, deadline, flags, None)
    }

    /// [`Store::put_item_unwaited`] starting at the leaf `hint` names
    /// ([`Store::locate_writes`]), when it is still the key's.
    pub fn put_item_hinted(
        &self,
        key: &[u8],
        value: &[u8],
        deadline: u64,
        flags: u32,
        hint: Option<crate::WriteHint<'_>>,
    ) -> Result<Write> {
        self.check_key(key)?;
        self.check_value(value)?;
        let (o, version) = self
            .tree
            .write_hinted(key, Op::Put(value, deadline, flags), hint)?;
        Ok(Write {
            version,
            existed: o.existed(),
        })
    }

    /// [`Store::put_item_hinted`] with a value the store keeps as it is: one over the inline
    /// limit becomes the item's out-of-line value without a copy (a value read from a socket
    /// into its own allocation is held once, not twice). Past the memory limit it is refused
    /// at once (`Error::OutOfMemory`), without waiting for the mirror cache's evictor.
    pub fn put_item_owned_hinted(
        &self,
        key: &[u8],
        value: Box<[u8]>,
        deadline: u64,
        flags: u32,
        hint: Option<crate::WriteHint<'_>>,
    ) -> Result<Write> {
        self.check_key(key)?;
        self.check_value(&value)?;
        let (o, version) = self.tree.write_owned(key, value, deadline, flags, hint)?;
        Ok(Write {
            version,
            existed: o.existed(),
        })
    }

    /// One step of an expiry sweep: examines up to `budget` items (expired ones included)
    /// from `from` on, in key order, and returns the keys among them that have expired by
    /// clock reading `now`, and the key to continue from (`None`: the walk reached the end).
    /// Remove them with [`Store::purge_expired`], which checks again.
    pub fn expired_keys(&self, from: &[u8], budget: usize, now: u64) -> Result<crate::ExpiredStep> {
        let t = &self.tree;
        let pin = t.epochs.pin();
        let rv = t.versions.read_version();
        let budget = budget.max(1);
        let (mut found, mut seen, mut next) = (Vec::new(), 0usize, None);
        // Clock 0: every item, so expired ones are examined too.
        t.scan_refs_at(
            from,
            Bound::Unbounded,
            budget + 1,
            rv,
            NO_DEADLINE,
            &pin,
            |k, v| {
                if seen == budget {
                    next = Some(k.to_vec());
                } else if v.is_expired(now) {
                    found.push(k.to_vec());
                }
                seen += 1;
            },
        )?;
        Ok((found, next))
    }

    /// Removes every item as one write, without deleting them one by one (Redis's FLUSHALL):
    /// readers at earlier versions, snapshots and scans in progress keep seeing the old
    /// items, later ones see none, and the old tree's memory is reclaimed once no reader can
    /// reach it. Returns the write and how many items it removed; returns once visible.
    pub fn clear(&self) -> Result<(Write, u64)> {
        let (version, removed) = self.tree.clear()?;
        self.wait_visible(version);
        Ok((
            Write {
                version,
                existed: removed > 0,
            },
            removed,
        ))
    }

    /// Removes `key` if its value has expired by clock reading `now` (ms since the Unix
    /// epoch); a value written since, or one that has no deadline, is left alone. Returns
    /// whether it removed the item. The active sweep's delete: reclaims an expired item's
    /// memory without racing a writer that just gave the key a new value.
    pub fn purge_expired(&self, key: &[u8], now: u64) -> Result<bool> {
        self.check_key(key)?;
        let (o, version) = self.tree.write(key, Op::DeleteExpired(now))?;
        self.wait_visible(version);
        Ok(o == Outcome::Purged)
    }

    /// [`Store::delete`] without waiting for visibility (see [`Store::put_unwaited`]).
    pub fn delete_unwaited(&self, key: &[u8]) -> Result<Write> {
        self.check_key(key)?;
        let (o, version) = self.tree.write(key, Op::Delete)?;
        Ok(Write {
            version,
            existed: o.existed(),
        })
    }

    /// Applies `items` in order as one atomic step (a value sets the key, `None` deletes
    /// it): readers, scans, snapshots and durable commits see all of them or none. Returns
    /// once the batch is visible. At most [`crate::MAX_BATCH`] items; an item that fails
    /// (a key too long, memory full) changes nothing and the others still apply, as in a
    /// Redis transaction.
    pub fn write_batch(&self, items: &[(&[u8], Option<&[u8]>)]) -> Result<Batch> {
        let b = self.write_batch_unwaited(items)?;
        self.wait_visible(b.version);
        Ok(b)
    }

    /// [`Store::write_batch`] without waiting for visibility (see [`Store::put_unwaited`]).
    pub fn write_batch_unwaited(&self, items: &[(&[u8], Option<&[u8]>)]) -> Result<Batch> {
        let with: Vec<_> = items
            .iter()
            .map(|(k, v)| (*k, v.map(|v| (v, NO_DEADLINE))))
            .collect();
        self.write_batch_expiring_unwaited(&with)
    }

    /// [`Store::write_batch_unwaited`] whose values carry deadlines (0: none).
    pub fn write_batch_expiring_unwaited(&self, items: &[BatchItem<'_>]) -> Result<Batch> {
        let with: Vec<BatchEntry<'_>> = items
            .iter()
            .map(|(k, v)| (*k, v.map(|(v, d)| (v, d, 0))))
            .collect();
        self.write_batch_items_unwaited(&with)
    }

    /// [`Store::write_batch_expiring_unwaited`] whose values also carry client flags.
    pub fn write_batch_items_unwaited(&self, items: &[BatchEntry<'_>]) -> Result<Batch> {
        if items.len() > crate::MAX_BATCH {
            return Err(Error::BatchTooLarge {
                len: items.len(),
                max: crate::MAX_BATCH,
            });
        }
        // Inline for the few writes of one command: no allocation on that path.
        let mut checked: smallvec::SmallVec<[Result<()>; 8]> = smallvec::SmallVec::new();
        let mut ops: smallvec::SmallVec<[(&[u8], Op<'_>); 8]> = smallvec::SmallVec::new();
        for (k, v) in items {
            let ok = self
                .check_key(k)
                .and_then(|()| v.map_or(Ok(()), |(v, ..)| self.check_value(v)));
            if ok.is_ok() {
                ops.push((*k, v.map_or(Op::Delete, |(v, d, f)| Op::Put(v, d, f))));
            }
            checked.push(ok);
        }
        let (written, version) = self.tree.write_batch(&ops);
        let mut written = written.into_iter();
        let results = checked
            .into_iter()
            .map(|c| {
                c?;
                let (o, version) = written.next().ok_or(Error::NotFound)??;
                Ok(Write {
                    version,
                    existed: o.existed(),
                })
            })
            .collect();
        Ok(Batch { results, version })
    }

    /// A version that changes whenever `key` does (its value, or its presence), counting
    /// completed writes not yet visible: the newest log entry for the key in its leaf, or
    /// the leaf's own version when it has none. A structural change of the leaf changes it
    /// too, so it may change when the key did not (never the other way round). Optimistic
    /// checks (Redis's WATCH) compare two of these.
    pub fn key_version(&self, key: &[u8]) -> Result<u64> {
        self.check_key(key)?;
        let pin = self.tree.epochs.pin();
        let leaf = self.tree.leaf_for(key, u64::MAX, &pin)?;
        Ok(leaf
            .log_entries()
            .filter(|e| e.key == key)
            .map(|e| e.version)
            .fold(leaf.version(), u64::max))
    }

    /// Whether every write up to `version` is visible to readers.
    pub fn is_visible(&self, version: u64) -> bool {
        self.tree.versions.is_visible(version)
    }

    /// Waits until every write up to `version` is visible to readers (past the version
    /// lease, asking the write observers to raise it meanwhile).
    pub fn wait_visible(&self, version: u64) {
        let v = &self.tree.versions;
        if v.is_visible(version) {
            return;
        }
        let mut backoff = crate::backoff::Backoff::new();
        while !v.is_visible(version) {
            if version > v.limit() {
                self.tree.observe_lease_wait();
            }
            backoff.snooze();
        }
    }

    /// The newest value of `key`, including completed writes not yet visible to readers.
    /// Only for a single write door that orders every write of `key` itself (the server's
    /// reservation station): its read-modify-write must see its own earlier writes even
    /// while an older writer elsewhere holds back visibility.
    pub fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_latest_entry(key)?.map(|(v, _)| v))
    }

    /// [`Store::get_latest`] with the value's deadline (expired values are absent).
    pub fn get_latest_entry(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        Ok(self.get_latest_item(key)?.map(|(v, d, _)| (v, d)))
    }

    /// [`Store::get_latest`] with the value's deadline and client flags.
    pub fn get_latest_item(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64, u32)>> {
        self.get_latest_item_with(key, |v, d, f| (v.to_vec(), d, f))
    }

    /// [`Store::get_latest_item`] lending the value, its deadline and client flags to `f`
    /// instead of copying the value out.
    pub fn get_latest_item_with<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&[u8], u64, u32) -> R,
    ) -> Result<Option<R>> {
        self.check_key(key)?;
        let pin = self.tree.epochs.pin();
        let now = self.tree.read_clock();
        self.tree.get_at(key, u64::MAX, now, &pin, f)
    }

    /// Test hook: every later write of `key` sleeps `stall` between taking its version and
    /// completing it, as a writer the OS descheduled there would. Only the first call has
    /// an effect.
    #[doc(hidden)]
    pub fn stall_writes_of(&self, key: &[u8], stall: std::time::Duration) {
        let _ = self.tree.stall.set((key.to_vec(), stall));
    }

    copying_scans!();

    /// [`Store::try_scan_rev`] over the newest items, as [`Store::scan_latest_with`] reads
    /// them (only for the single write door that orders every write of the range itself).
    pub fn scan_rev_latest(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan_rev_with_at(lo, hi, limit, true, |k, v| {
            out.push((k.to_vec(), v.to_vec()))
        })?;
        Ok(out)
    }

    /// As [`Store::try_scan_rev`], calling `f` for each item without copying.
    pub fn scan_rev_with(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.scan_rev_with_at(lo, hi, limit, false, f)
    }

    /// A descending scan at the read version, or of the newest items (`latest`), the epoch
    /// pinned first as in [`Store::scan_with`].
    fn scan_rev_with_at(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        latest: bool,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let pin = self.tree.epochs.pin();
        let rv = match latest {
            true => u64::MAX,
            false => self.tree.versions.read_version(),
        };
        self.tree
            .scan_rev_at(lo, hi, limit, rv, self.tree.read_clock(), &pin, f)
    }

    /// As [`Store::try_scan`], calling `f` for each item without copying.
    pub fn scan_with(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.scan_with_at(lo, hi, limit, false, f)
    }

    /// [`Store::scan_with`] over the newest items, including completed writes not yet
    /// visible to readers: the range counterpart of [`Store::get_latest`], with the same
    /// rule (only for the single write door that orders every write of the range itself).
    pub fn scan_latest_with(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.scan_with_at(lo, hi, limit, true, f)
    }

    /// A scan at the read version, or of the newest items (`latest`). The epoch is pinned
    /// before the read version is taken, so nothing reachable at it is reclaimed meanwhile.
    fn scan_with_at(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        latest: bool,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let pin = self.tree.epochs.pin();
        let rv = match latest {
            true => u64::MAX,
            false => self.tree.versions.read_version(),
        };
        self.tree
            .scan_at(lo, upper(hi), limit, rv, self.tree.read_clock(), &pin, f)
    }

    /// Honeycomb's SCAN(kl, ku): the items from the largest key <= `kl` (from the first key
    /// when there is none) through `ku` inclusive, at most `limit`.
    ///
    /// # Panics
    /// As [`Store::scan`]; [`Store::try_scan_floor`] returns the error instead.
    pub fn scan_floor(&self, kl: &[u8], ku: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.try_scan_floor(kl, ku, limit).expect(PAGE_READ)
    }

    /// [`Store::scan_floor`], failing with [`Error::PageRead`] when an evicted leaf cannot
    /// be read back.
    pub fn try_scan_floor(
        &self,
        kl: &[u8],
        ku: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pin = self.tree.epochs.pin();
        let rv = self.tree.versions.read_version();
        let mut out = Vec::new();
        self.tree
            .scan_floor_at(kl, ku, limit, rv, self.tree.read_clock(), &pin, |k, v| {
                out.push((k.to_vec(), v.to_vec()))
            })?;
        Ok(out)
    }

    /// A consistent read-only view at the current read version. Old node versions it may
    /// need are kept until it is dropped, so do not hold one for long.
    pub fn snapshot(&self) -> Snapshot<'_> {
        let slot = self.tree.epochs.register();
        slot.enter();
        let rv = self.tree.versions.read_version();
        Snapshot {
            store: self,
            rv,
            now: self.tree.read_clock(),
            _slot: slot,
        }
    }

    /// Attaches the pager that reads evicted leaves back (the durability layer does, for a
    /// store built with `Config::evict`); false if one is attached already.
    pub fn attach_pager(&self, pager: Arc<dyn crate::Pager>) -> bool {
        self.tree.attach_pager(pager)
    }

    /// One eviction round of the mirror cache (the durability layer's evictor calls it):
    /// evicts leaves, chosen by S3-FIFO, until the store holds at most `target` bytes or no
    /// candidate is left. `page_of(lid, version)` names the page that images leaf `lid` as
    /// of `version` (its newest state), or `None` when there is none yet; `first_key` is a
    /// key the leaf holds (`None` when empty), through which the caller can have the leaf
    /// imaged (written back) by its next commit. Returns how many leaves were evicted.
    pub fn evict(&self, target: usize, page_of: &mut crate::PageOf<'_>) -> usize {
        self.tree.evict_round(target, page_of)
    }

    /// Reads evicted leaf `lid` back from the page file (blocking), so that the next walk
    /// that reaches it finds it resident: how a read engine that must not block completes
    /// a request that missed ([`Raw::resident`]). A LID that is resident, or no longer a
    /// leaf, costs nothing.
    pub fn read_back(&self, lid: u64) -> Result<()> {
        if lid >= self.tree.pt.lid_bound() {
            return Ok(()); // never allocated
        }
        let _pin = self.tree.epochs.pin();
        self.tree.page(lid).map(|_| ())
    }

    /// Whether the store holds more than its memory budget.
    pub fn over_budget(&self) -> bool {
        self.tree.over_budget()
    }

    /// Bytes the memory budget counts now (node buffers and out-of-line values).
    pub fn resident_bytes(&self) -> usize {
        self.tree.resident_bytes()
    }

    /// The mirror cache's counters (zeros when no pager is attached).
    pub fn mirror_stats(&self) -> crate::MirrorStats {
        self.tree.mirror_stats()
    }

    /// A reader slot for a population of readers managed outside this API (a read engine):
    /// publish the epoch of the oldest request in flight with [`ReaderSlot::hold`].
    pub fn reader_slot(&self) -> ReaderSlot {
        self.tree.epochs.register()
    }

    /// Low-level read access for read engines (see [`Raw`]).
    pub fn raw(&self) -> Raw<'_> {
        Raw { tree: &self.tree }
    }

    /// Registers an observer told about every write before its release. A store takes up
    /// to four; returns `false` when all are taken. Observers are called in registration
    /// order.
    pub fn set_write_observer(&self, observer: Arc<dyn WriteObserver>) -> bool {
        let t = &self.tree;
        let _g = t.observers_lock.lock().unwrap_or_else(|e| e.into_inner());
        match t.observers.iter().find(|s| s.get().is_none()) {
            Some(slot) => slot.set(observer).is_ok(),
            None => false,
        }
    }

    /// Bytes an item with a key of `key_len` bytes and a value of `value_len` takes: its
    /// entry in a leaf (headers, key, the value inline or a reference to it) plus the value
    /// stored out of line when it is larger than inline values may be. Redis's MEMORY USAGE.
    pub fn item_footprint(&self, key_len: usize, value_len: usize) -> usize {
        let inline = value_len <= self.tree.geo.max_inline_value;
        let reference = accelkv_node::ValueRef::out_of_line(0, value_len as u32);
        let body = if inline {
            value_len
        } else {
            reference.body_len() + value_len
        };
        2 + key_len + 2 + body
    }

    /// Items in the store (expired items the sweep has not removed yet included, as
    /// Redis's DBSIZE counts them).
    pub fn len(&self) -> usize {
        self.tree.items.load(Ordering::Relaxed).max(0) as usize
    }

    /// Items that carry an expiry deadline (Redis's `expires=` in INFO keyspace).
    pub fn expiring_len(&self) -> usize {
        self.tree.expiring.load(Ordering::Relaxed).max(0) as usize
    }

    /// Whether the store holds no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the store holds now, in O(1): every live node buffer (versions awaiting
    /// reclamation included), out-of-line values and the page table.
    pub fn memory_used(&self) -> usize {
        let t = &self.tree;
        t.arena.live_buffers() * t.geo.node_size
            + t.ool_bytes.load(Ordering::Relaxed) as usize
            + t.pt.bytes()
    }

    /// What [`Store::stats`] reports that the store keeps counted, in O(1), without walking
    /// the tree (for INFO and metrics, which clients call often): items, depth, read
    /// version, out-of-line and page-table bytes, buffers and counters exactly; `node_bytes`
    /// counts every live buffer (versions awaiting reclamation included), and `leaves`,
    /// `interiors` and `used_bytes` are left 0 (only the walk knows them).
    pub fn summary(&self) -> Stats {
        let t = &self.tree;
        let pin = t.epochs.pin();
        let rv = t.versions.read_version();
        // The root is never evicted.
        let root = t.view(t.pt.get(ROOT), &pin);
        let c = &t.counters;
        let mut s = Stats {
            items: t.items.load(Ordering::Relaxed).max(0) as u64,
            depth: usize::from(root.level()) + 1,
            node_size: t.geo.node_size,
            node_bytes: t.arena.live_buffers() * t.geo.node_size,
            out_of_line_bytes: t.ool_bytes.load(Ordering::Relaxed),
            page_table_bytes: t.pt.bytes(),
            buffers_live: t.arena.live_buffers(),
            arena_reserved_bytes: t.arena.reserved_bytes(),
            read_version: rv,
            log_merges: c.log_merges.load(Ordering::Relaxed),
            splits: c.splits.load(Ordering::Relaxed),
            node_merges: c.node_merges.load(Ordering::Relaxed),
            root_splits: c.root_splits.load(Ordering::Relaxed),
            root_shrinks: c.root_shrinks.load(Ordering::Relaxed),
            ..Stats::default()
        };
        let total = s.node_bytes as u64 + s.out_of_line_bytes + s.page_table_bytes as u64;
        s.bytes_per_item = if s.items == 0 {
            0.0
        } else {
            total as f64 / s.items as f64
        };
        s
    }

    /// Walks the current version of the tree and reports its size and shape.
    pub fn stats(&self) -> Stats {
        let t = &self.tree;
        let pin = t.epochs.pin();
        let rv = t.versions.read_version();
        let now = t.read_clock();
        let mut s = Stats {
            node_size: t.geo.node_size,
            read_version: rv,
            ..Stats::default()
        };
        let mut stack = vec![(ROOT, 1usize)];
        while let Some((lid, depth)) = stack.pop() {
            if let Some(items) = t.stub_items(lid) {
                // Only in the page file: counted without reading it back.
                s.depth = s.depth.max(depth);
                s.leaves += 1;
                s.items += items;
                continue;
            }
            let Ok(v) = t.resolve(lid, rv, &pin) else {
                continue;
            };
            s.depth = s.depth.max(depth);
            s.used_bytes += v.used();
            if v.is_leaf() {
                s.leaves += 1;
                let before = s.items;
                for (k, val) in v.leaf_iter(rv, now) {
                    s.items += 1;
                    s.raw_bytes += (k.len() + val.value_len()) as u64;
                }
                if s.items == before && lid != ROOT {
                    s.empty_leaves += 1;
                }
            } else {
                s.interiors += 1;
                let (leftmost, entries) = v.interior_entries();
                stack.push((leftmost, depth + 1));
                stack.extend(entries.iter().map(|e| (e.1, depth + 1)));
            }
        }
        s.node_bytes = (s.leaves + s.interiors) * t.geo.node_size;
        s.out_of_line_bytes = t.ool_bytes.load(Ordering::Relaxed);
        s.page_table_bytes = t.pt.bytes();
        let c = &t.counters;
        s.log_merges = c.log_merges.load(Ordering::Relaxed);
        s.splits = c.splits.load(Ordering::Relaxed);
        s.node_merges = c.node_merges.load(Ordering::Relaxed);
        s.root_splits = c.root_splits.load(Ordering::Relaxed);
        s.root_shrinks = c.root_shrinks.load(Ordering::Relaxed);
        s.buffers_live = t.arena.live_buffers();
        s.arena_reserved_bytes = t.arena.reserved_bytes();
        let total = s.node_bytes as u64 + s.out_of_line_bytes + s.page_table_bytes as u64;
        s.bytes_per_item = if s.items == 0 {
            0.0
        } else {
            total as f64 / s.items as f64
        };
        s
    }
}

fn upper(hi: Option<&[u8]>) -> Bound<&[u8]> {
    match hi {
        Some(h) => Bound::Excluded(h),
        None => Bound::Unbounded,
    }
}

/// A read-only view of the store at one read version; see [`Store::snapshot`].
pub struct Snapshot<'s> {
    store: &'s Store,
    rv: u64,
    now: u64,
    _slot: ReaderSlot,
}

impl Snapshot<'_> {
    /// The read version this snapshot sees.
    pub fn version(&self) -> u64 {
        self.rv
    }

    /// A view at read version `rv`, which must be at least this snapshot's version (the
    /// snapshot holds everything such a view needs) and already released. `None` otherwise.
    pub fn at(&self, rv: u64) -> Option<VersionView<'_>> {
        (rv >= self.rv && rv <= self.store.read_version()).then_some(VersionView {
            store: self.store,
            rv,
            now: self.now,
        })
    }

    /// Calls `f` with the leaf whose key range holds `key` at this snapshot: its LID, its
    /// fences (the separators that route to it; `None` = unbounded) and its items. The
    /// durability layer persists leaves this way.
    pub fn leaf<R>(&self, key: &[u8], f: impl FnOnce(&LeafImage<'_>) -> R) -> Result<R> {
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        let mut v = t.resolve(ROOT, self.rv, &pin)?;
        let (mut lid, mut low, mut high) = (ROOT, None, None);
        while !v.is_leaf() {
            // The largest separator <= key routes (and is the child's lower fence), the next
            // one is its upper fence; a child's fences narrow its parent's.
            let (child, lo, hi) = v.route_fenced(key);
            low = lo.or(low);
            high = hi.or(high);
            lid = child;
            v = t.resolve(lid, self.rv, &pin)?;
        }
        let items: Vec<(&[u8], &[u8], u64, u32)> = v
            .leaf_iter(self.rv, self.now)
            .map(|(k, val)| (k, t.value_bytes(val), val.deadline, val.flags))
            .collect();
        debug_assert!(
            items
                .iter()
                .all(|(k, ..)| low.is_none_or(|l| l <= *k) && high.is_none_or(|h| *k < h)),
            "leaf {lid} at version {} holds keys outside its fences [{:?}, {:?}): first {:?}, \
             last {:?}, node version {}, log entries {}",
            self.rv,
            low.map(String::from_utf8_lossy),
            high.map(String::from_utf8_lossy),
            items.first().map(|i| String::from_utf8_lossy(i.0)),
            items.last().map(|i| String::from_utf8_lossy(i.0)),
            v.version(),
            v.log_len()
        );
        Ok(f(&LeafImage {
            lid,
            low,
            high,
            items,
        }))
    }

    fn here(&self) -> VersionView<'_> {
        VersionView {
            store: self.store,
            rv: self.rv,
            now: self.now,
        }
    }

    /// The value of `key` at this snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.here().get(key)
    }

    /// The value of `key` and its deadline (0: none) at this snapshot.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        self.store.check_key(key)?;
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        t.get_at(key, self.rv, self.now, &pin, |v, d, _| (v.to_vec(), d))
    }

    /// The value of `key`, its deadline and its client flags at this snapshot.
    pub fn get_item(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64, u32)>> {
        self.store.check_key(key)?;
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        t.get_at(key, self.rv, self.now, &pin, |v, d, f| (v.to_vec(), d, f))
    }

    copying_scans!();

    /// [`Store::scan_floor`] at this snapshot.
    pub fn scan_floor(&self, kl: &[u8], ku: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.here().scan_floor(kl, ku, limit)
    }

    /// [`Snapshot::try_scan`] lending each item to `f` instead of copying it.
    pub fn scan_with(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.here().scan_with(lo, hi, limit, f)
    }

    /// [`Snapshot::try_scan_rev`] lending each item to `f` instead of copying it.
    pub fn scan_rev_with(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.here().scan_rev_with(lo, hi, limit, f)
    }
}

/// One leaf at a snapshot; see [`Snapshot::leaf`].
pub struct LeafImage<'a> {
    /// The leaf's LID.
    pub lid: u64,
    /// Lower fence: the leaf holds keys >= it (`None`: no lower bound).
    pub low: Option<&'a [u8]>,
    /// Upper fence: the leaf holds keys < it (`None`: no upper bound).
    pub high: Option<&'a [u8]>,
    /// The leaf's items at the snapshot, in key order: key, value, deadline (ms since the
    /// Unix epoch, 0: none), client flags (0: none). Items expired at the snapshot's clock
    /// reading are left out.
    pub items: Vec<(&'a [u8], &'a [u8], u64, u32)>,
}

/// Reads at one read version, borrowed from a [`Snapshot`] that keeps it readable.
pub struct VersionView<'s> {
    store: &'s Store,
    rv: u64,
    now: u64,
}

impl VersionView<'_> {
    /// The read version.
    pub fn version(&self) -> u64 {
        self.rv
    }

    /// The value of `key` at this version.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.check_key(key)?;
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        t.get_at(key, self.rv, self.now, &pin, |v, _, _| v.to_vec())
    }

    copying_scans!();

    /// [`VersionView::try_scan`] lending each item to `f` instead of copying it.
    pub fn scan_with(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        t.scan_at(lo, upper(hi), limit, self.rv, self.now, &pin, f)
    }

    /// [`VersionView::try_scan_rev`] lending each item to `f` instead of copying it.
    pub fn scan_rev_with(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        t.scan_rev_at(lo, hi, limit, self.rv, self.now, &pin, f)
    }

    /// [`Store::scan_floor`] at this version (panics as it does).
    pub fn scan_floor(&self, kl: &[u8], ku: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let t = &self.store.tree;
        let pin = t.epochs.pin();
        let mut out = Vec::new();
        t.scan_floor_at(kl, ku, limit, self.rv, self.now, &pin, |k, v| {
            out.push((k.to_vec(), v.to_vec()))
        })
        .expect(PAGE_READ);
        out
    }
}
