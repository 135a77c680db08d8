//! The store as the adapters read it ([`Shared::view`]): values and items at the latest
//! version or at one snapshot, scans, versions and what the store says of itself (its
//! limits, its size, its memory), and the visibility waits a reply rests on. It has no
//! method that changes the store: every write goes through the write door
//! (`write_door.rs`). The adapters reach the store through nothing else
//! (`server/tests/layers.rs` checks); GET and MGET read through the loop's read door
//! (`reads.rs`) over the engines.

use crate::core::reads::{NotYet, Reads};
use crate::core::shared::Shared;
use accelkv_engine::{Found, ReadRef};
use accelkv_tree::{Config, Result, Snapshot, Store, StorePin, WriteHint};

/// The store, read-only, borrowed from [`Shared`].
pub struct StoreView<'s> {
    store: &'s Store,
}

impl Shared {
    /// Reads `reqs` through a loop's read door (`reads`) over the engine, each answer handed
    /// to `emit` with its index ([`Reads::run`]: `Err` when they were submitted to an
    /// engine's workers and the command runs again once answered).
    #[inline]
    pub fn read(
        &self,
        reads: &mut Reads,
        reqs: &[ReadRef<'_>],
        emit: impl FnMut(usize, Found<'_>),
    ) -> std::result::Result<(), NotYet> {
        reads.run(self.engine(), reqs, emit)
    }

    /// A new read door for an event loop (`wake` wakes the loop when a read it waits for is
    /// ready).
    pub fn loop_reads(&self, wake: impl Fn() + Send + Sync + 'static) -> Reads {
        self.engine().reads(wake)
    }

    /// The store, for reading.
    pub fn view(&self) -> StoreView<'_> {
        StoreView {
            store: self.store(),
        }
    }
}

impl<'s> StoreView<'s> {
    /// The store's limits (largest key and value, node size).
    pub fn config(&self) -> &'s Config {
        self.store.config()
    }

    /// `key`'s value now.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.get(key)
    }

    /// `key`'s value now, lent to `f`.
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.store.get_with(key, f)
    }

    /// `key`'s value and deadline at clock reading `now`, lent to `f`.
    pub fn get_entry_with<R>(
        &self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&[u8], u64) -> R,
    ) -> Result<Option<R>> {
        self.store.get_entry_with(key, now, f)
    }

    /// `key`'s value, deadline and client flags at clock reading `now`, lent to `f`.
    pub fn get_item_with<R>(
        &self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&[u8], u64, u32) -> R,
    ) -> Result<Option<R>> {
        self.store.get_item_with(key, now, f)
    }

    /// `key`'s newest item, released or not (value, deadline, client flags).
    pub fn get_latest_item(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64, u32)>> {
        self.store.get_latest_item(key)
    }

    /// The version of `key`'s last write (WATCH).
    pub fn key_version(&self, key: &[u8]) -> Result<u64> {
        self.store.key_version(key)
    }

    /// A snapshot: every read through it at one version.
    pub fn snapshot(&self) -> Snapshot<'s> {
        self.store.snapshot()
    }

    /// Up to `limit` items in `lo..hi` (`None`: to the end).
    pub fn try_scan(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.try_scan(lo, hi, limit)
    }

    /// Up to `limit` items in `lo..hi`, from the highest down.
    pub fn try_scan_rev(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.try_scan_rev(lo, hi, limit)
    }

    /// [`StoreView::try_scan`] lending each item to `f` instead of copying it.
    pub fn scan_with(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.store.scan_with(lo, hi, limit, f)
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the store holds no item.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// The items from `lo` on that have expired and are not yet swept away (counted in
    /// [`StoreView::len`], invisible to reads): a walk of every item from `lo`.
    pub fn expired_from(&self, lo: &[u8]) -> Result<usize> {
        let now = accelkv_tree::now_ms();
        let (mut from, mut n) = (lo.to_vec(), 0);
        loop {
            let (found, next) = self.store.expired_keys(&from, 4096, now)?;
            n += found.len();
            match next {
                Some(k) => from = k,
                None => return Ok(n),
            }
        }
    }

    /// The number of items with a deadline.
    pub fn expiring_len(&self) -> usize {
        self.store.expiring_len()
    }

    /// The bytes the store holds (INFO's `used_memory`, `maxmemory`).
    pub fn memory_used(&self) -> usize {
        self.store.memory_used()
    }

    /// The bytes one item of these sizes takes (MEMORY USAGE).
    pub fn item_footprint(&self, key_len: usize, value_len: usize) -> usize {
        self.store.item_footprint(key_len, value_len)
    }

    /// Whether write `version` is visible to readers.
    pub fn is_visible(&self, version: u64) -> bool {
        self.store.is_visible(version)
    }

    /// Waits until write `version` is visible to readers.
    pub fn wait_visible(&self, version: u64) {
        self.store.wait_visible(version)
    }

    /// A pin under which [`StoreView::locate_writes`]'s hints stay valid.
    pub fn pin(&self) -> StorePin<'s> {
        self.store.pin()
    }

    /// Where each of `keys`' writes will start, found in one interleaved descent (the
    /// station takes the hints: a pipeline's SETs pay for their memory misses once).
    pub fn locate_writes<'p>(
        &self,
        pin: &'p StorePin<'_>,
        keys: &[&[u8]],
        hints: &mut [Option<WriteHint<'p>>],
    ) {
        self.store.locate_writes(pin, keys, hints)
    }
}
