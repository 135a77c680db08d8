//! Low-level read access for read engines: the page table, node bytes, version clocks and
//! reclamation, so an engine can walk the tree itself (with many requests in flight) and
//! must return exactly what the reference reader returns.
//!
//! Protocol an engine follows (docs/ARCHITECTURE.md, "External readers"):
//! 1. Before taking a read version for a request, publish an epoch no newer than
//!    [`Raw::current_epoch`] in a [`ReaderSlot`] it owns ([`ReaderSlot::enter`] or
//!    [`ReaderSlot::hold`]), and keep an epoch that old published until the request is done.
//! 2. Walk from [`ROOT_LID`]: [`Raw::page`] gives a node's newest buffer; follow
//!    `old_version()` while the buffer's version is newer than the read version; interior
//!    nodes route with `child_for`, leaves link right with `link()`.

use crate::epoch::ReaderSlot;
use crate::tree::{Garbage, Tree, ROOT};
use accelkv_node::{NodeView, ValueRef};

/// LID of the root node.
pub const ROOT_LID: u64 = ROOT;

/// Read access to a store's tree for engines; see the module docs.
#[derive(Clone, Copy)]
pub struct Raw<'s> {
    pub(crate) tree: &'s Tree,
}

impl<'s> Raw<'s> {
    /// The global read version.
    #[inline]
    pub fn read_version(&self) -> u64 {
        self.tree.versions.read_version()
    }

    /// The current reclamation epoch.
    pub fn current_epoch(&self) -> u64 {
        self.tree.epochs.current()
    }

    /// A reader slot for the engine's in-flight requests.
    pub fn reader_slot(&self) -> ReaderSlot {
        self.tree.epochs.register()
    }

    /// Arena offset of `lid`'s newest buffer; a leaf evicted to the page file is read back
    /// first (the call blocks on the read; an error when the read fails).
    #[inline]
    pub fn page(&self, lid: u64) -> crate::Result<u64> {
        self.tree.page(lid)
    }

    /// Arena offset of `lid`'s newest buffer if it is resident; `None` for a leaf evicted to
    /// the page file (nothing is read: an engine that must not block hands the LID to
    /// [`crate::Store::read_back`] on another thread and runs the request again later).
    #[inline]
    pub fn resident(&self, lid: u64) -> Option<u64> {
        self.tree.page_if_resident(lid)
    }

    /// Counts a request's visit of a leaf for the mirror cache's hit ratio (a no-op
    /// without a memory budget).
    #[inline]
    pub fn leaf_visit(&self) {
        self.tree.leaf_visit();
    }

    /// Whether leaves may live only in the page file (a memory budget over a data
    /// directory): engines that read the page table themselves (the GPU's) cannot serve
    /// such a store.
    pub fn evicts(&self) -> bool {
        self.tree.mirror.get().is_some() || self.tree.cfg.evict
    }

    /// Address of `lid`'s page-table entry, for a prefetch (null if not allocated).
    #[inline]
    pub fn page_entry_addr(&self, lid: u64) -> *const u8 {
        self.tree.pt.entry_addr(lid)
    }

    /// Address of the buffer at arena offset `off`, for a prefetch.
    #[inline]
    pub fn node_addr(&self, off: u64) -> *const u8 {
        self.tree.arena.ptr(off)
    }

    /// The published bytes of the buffer at `off`.
    ///
    /// # Safety
    /// The caller follows the protocol of the module docs: an epoch published before it took
    /// the read version it walks at is still published, and `off` was reached by that walk.
    #[inline]
    pub unsafe fn view(&self, off: u64) -> NodeView<'s> {
        // SAFETY: the caller's published epoch protects the buffer (contract).
        unsafe { self.tree.view_raw(off) }
    }

    /// The LID of the node at `level` (0: the leaf) on `key`'s path at `rv`, walking the
    /// interior nodes above it straight, one after another: the part of a walk an engine
    /// runs without interleaving (the upper levels, shared by every lookup, stay in the
    /// processor's caches). The root when the tree is not that tall.
    ///
    /// # Safety
    /// As for [`Raw::view`]: an epoch published before `rv` was taken is still published.
    #[inline]
    pub unsafe fn lid_at_level(&self, key: &[u8], rv: u64, level: u8) -> crate::Result<u64> {
        // SAFETY: the caller's published epoch protects the walk (contract).
        unsafe { self.tree.lid_at_level(key, rv, level) }
    }

    /// Bytes of the nodes one level above the leaves (0 when the root is that level or a
    /// leaf): counted along the leftmost path from the root, each level's node taken to
    /// have as many children as that path's node. A hint (it moves with every split) for an
    /// engine deciding which levels stay in the processor's caches.
    pub fn level1_bytes(&self) -> usize {
        let pin = self.tree.epochs.pin();
        let Ok(mut off) = self.tree.page(ROOT) else {
            return 0;
        };
        let mut nodes = 1usize;
        loop {
            let v = self.tree.view(off, &pin);
            if v.level() <= 1 {
                return if nodes > 1 {
                    nodes.saturating_mul(self.tree.geo.node_size)
                } else {
                    0
                };
            }
            nodes = nodes.saturating_mul(v.item_count() + 1);
            match self.tree.page(v.link()) {
                Ok(next) => off = next,
                Err(_) => return 0,
            }
        }
    }

    /// Height of the tree: the root's level (0: the root is a leaf). A hint: it changes
    /// when the root splits or shrinks.
    pub fn height(&self) -> u8 {
        let pin = self.tree.epochs.pin();
        self.tree
            .page(ROOT)
            .map_or(0, |off| self.tree.view(off, &pin).level())
    }

    /// The bytes of a value found in a node read with [`Raw::view`].
    ///
    /// # Safety
    /// As for [`Raw::view`]: the caller's published epoch still protects the node.
    #[inline]
    pub unsafe fn value<'a>(&self, v: ValueRef<'a>) -> &'a [u8] {
        // Callers read `v.deadline` themselves (they filtered with their `now`).
        self.tree.value_bytes(v)
    }

    /// The reference reader's GET at read version `rv` by a reader whose clock reads `now`
    /// (an engine's answer for a request it cannot run itself).
    ///
    /// # Safety
    /// As for [`Raw::view`]: an epoch published before `rv` was taken is still published.
    pub unsafe fn reference_get(
        &self,
        key: &[u8],
        rv: u64,
        now: u64,
    ) -> crate::Result<Option<Vec<u8>>> {
        let pin = self.tree.epochs.pin();
        self.tree.get_at(key, rv, now, &pin, |v, _, _| v.to_vec())
    }

    /// The reference reader's SCAN of `[lo, hi)` at `rv`.
    ///
    /// # Safety
    /// As for [`Raw::reference_get`].
    pub unsafe fn reference_scan(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        rv: u64,
        now: u64,
        f: impl FnMut(&[u8], &[u8]),
    ) -> crate::Result<()> {
        let pin = self.tree.epochs.pin();
        let hi = hi.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        self.tree.scan_at(lo, hi, limit, rv, now, &pin, f)
    }

    /// The reference reader's SCAN of `[lo, hi)` at `rv`, starting at the leaf at arena
    /// offset `leaf`: the leaf `lo` routes to at `rv`, found by an engine's own walk (the RTL
    /// engine walks to the leaf; the leaves' items are read here).
    ///
    /// # Safety
    /// As for [`Raw::reference_get`], and `leaf` was reached by a walk for `lo` at `rv`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reference_scan_from(
        &self,
        leaf: u64,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        rv: u64,
        now: u64,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> crate::Result<()> {
        let pin = self.tree.epochs.pin();
        let v = self.tree.view(leaf, &pin);
        self.tree.leaf_visit();
        let hi = hi.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        self.tree
            .scan_refs_from(v, lo, hi, limit, rv, now, &pin, |k, v| {
                f(k, self.tree.value_bytes(v))
            })
    }

    /// The reference reader's SCAN_FLOOR at `rv`.
    ///
    /// # Safety
    /// As for [`Raw::reference_get`].
    pub unsafe fn reference_scan_floor(
        &self,
        kl: &[u8],
        ku: &[u8],
        limit: usize,
        rv: u64,
        now: u64,
        f: impl FnMut(&[u8], &[u8]),
    ) -> crate::Result<()> {
        let pin = self.tree.epochs.pin();
        self.tree.scan_floor_at(kl, ku, limit, rv, now, &pin, f)
    }

    /// Frees `b` once every reader that may still hold a reference to it is done: the caller
    /// unlinked it from everything readers can reach before calling.
    pub fn retire<T: Send + 'static>(&self, b: Box<T>) {
        self.tree.retire([Garbage::Boxed(b)]);
    }

    /// Subscribes to the tree's page-table changes and chunk announcements (remap.rs):
    /// returns the feed and a copy of the page table (`table[lid]` = arena offset, or
    /// `u64::MAX` when unmapped) taken atomically with the registration, so the copy plus the
    /// remaps drained later name every mapping. Writers' structural modifications wait
    /// while the table is copied.
    pub fn subscribe_remaps(&self) -> RemapSubscription {
        let t = self.tree;
        let _smo = t.smo.lock().unwrap_or_else(|e| e.into_inner());
        let feed = std::sync::Arc::new(crate::remap::RemapFeed::default());
        t.arena.subscribe(&feed);
        let table = (0..t.pt.lid_bound()).map(|lid| t.pt.get(lid)).collect();
        RemapSubscription { feed, table }
    }

    /// Node size in bytes.
    pub fn node_size(&self) -> usize {
        self.tree.geo.node_size
    }

    /// Arena chunk size in bytes (a power of two): offset `off` lies in chunk
    /// `off / chunk_size` at `off % chunk_size`.
    pub fn chunk_size(&self) -> usize {
        self.tree.arena.chunk_size()
    }

    /// Most arena chunks the store can allocate.
    pub fn max_chunks(&self) -> usize {
        self.tree.arena.max_chunks()
    }

    /// The last write version handed out (writers may not have released it yet).
    pub fn last_write_version(&self) -> u64 {
        self.tree.versions.last_write()
    }
}

/// What [`Raw::subscribe_remaps`] returns.
pub struct RemapSubscription {
    /// Remaps and chunk announcements from the moment of subscription.
    pub feed: std::sync::Arc<crate::remap::RemapFeed>,
    /// The page table at that moment, indexed by LID.
    pub table: Vec<u64>,
}

/// Told about every write after it is visible in node memory and before it is released to
/// readers; the write's release waits for `on_write` to return. The hot-key cache uses it
/// to update or invalidate its entry, so no reader sees a value outside its snapshot.
pub trait WriteObserver: Send + Sync {
    /// `value` is the key's new value, `None` for a delete; `deadline` its expiry deadline
    /// (ms since the Unix epoch, 0: none); `flags` its client flags (0: none); `version`
    /// its write version.
    fn on_write(&self, key: &[u8], value: Option<&[u8]>, deadline: u64, flags: u32, version: u64);

    /// Every item was removed at `version` ([`crate::Store::clear`]), before its release.
    fn on_clear(&self, version: u64);

    /// A writer waits for the version lease to be raised ([`crate::Store::lease_versions`]):
    /// whoever holds the lease should raise it now. The default does nothing.
    fn on_lease_wait(&self) {}
}
