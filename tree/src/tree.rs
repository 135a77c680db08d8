//! The B+tree: shared state (arena, page table, version clocks, reclamation), access to node
//! memory, and the reference reader — one request at a time, wait-free, plainly correct; the
//! oracle every read engine is tested against.
//!
//! Thread safety: any number of readers and writers share a `Tree`. Readers take no lock and
//! never retry: they pin an epoch, take the read version, and follow page-table entries and
//! old-version chains to the node versions of their snapshot. Writers: see write.rs and
//! smo.rs.
//!
//! Invariants (DESIGN.md §3):
//! 1. Bytes `[16, used)` of a published buffer never change; `[0, 16)` (lock/used word, left
//!    sibling word) are only accessed atomically. A writer publishes by a release store of
//!    the lock/used word or of a page-table entry; readers acquire them. So a reader's
//!    shared slice never overlaps a concurrent write.
//! 2. A buffer reachable at read version `rv` (through the root's page-table entry, interior
//!    children, right-sibling links and old-version chains, stopping at the first version
//!    <= `rv`) holds the state of its node as of `rv`.
//! 3. A buffer is freed only after every reader that could reach it has unpinned
//!    (epoch.rs).

use crate::arena::Arena;
use crate::config::Config;
use crate::epoch::{Epochs, Pin};
use crate::page_table::PageTable;
use crate::values;
use crate::version::Versions;
use accelkv_node::layout::*;
use accelkv_node::{Geometry, NodeView, ValueData, ValueRef};
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// LID of the root; it never changes (root growth and shrink replace its buffer).
pub(crate) const ROOT: u64 = 1;

/// The little-endian u64 at `off` of the node at `base`.
///
/// # Safety
/// `[off, off + 8)` lies in a buffer the caller keeps alive, in bytes nobody writes.
#[inline(always)]
unsafe fn read_u64(base: *const u8, off: usize) -> u64 {
    // SAFETY: the caller's contract.
    u64::from_le_bytes(unsafe { std::ptr::read(base.add(off).cast::<[u8; 8]>()) })
}

/// Most write observers a tree accepts.
pub(crate) const MAX_OBSERVERS: usize = 4;

/// Byte reclaimed buffers are filled with in the `poison` test build.
pub(crate) const POISON: u8 = 0xA5;

/// Something retired that is freed once no reader can reach it.
pub(crate) enum Garbage {
    Buffer(u64),
    Lid(u64),
    Value(u64, u32),
    /// Memory owned outside the tree (a read engine's cache) that readers may still hold.
    Boxed(#[allow(dead_code)] Box<dyn Send>),
}

pub(crate) struct Tree {
    pub(crate) cfg: Config,
    pub(crate) geo: Geometry,
    pub(crate) arena: Arena,
    pub(crate) pt: PageTable,
    pub(crate) versions: Versions,
    pub(crate) epochs: Arc<Epochs>,
    /// Serialises structural modifications (merge, split, node merge, root changes).
    pub(crate) smo: Mutex<()>,
    /// Serialises atomic batches (batch.rs).
    pub(crate) batch: Mutex<()>,
    /// Set while an atomic batch writes: other writers wait before taking a version.
    pub(crate) gate: std::sync::atomic::AtomicBool,
    pub(crate) garbage: Mutex<VecDeque<(u64, Garbage)>>,
    /// Garbage unlinked by a write whose version is not visible yet, with that version:
    /// retired once it is (epoch invariant 2), so a write never waits to retire.
    pub(crate) unretired: Mutex<VecDeque<(u64, Garbage)>>,
    pub(crate) items: AtomicI64,
    /// Items with an expiry deadline (expired ones not yet removed included).
    pub(crate) expiring: AtomicI64,
    /// Some write (or the bulk load) gave an item a deadline: from then on readers read the
    /// clock; before, they use 0 ("expire nothing") and skip it. Never reset, so a reader
    /// at an old version cannot miss a deadline that the current items no longer have.
    pub(crate) deadlines_seen: std::sync::atomic::AtomicBool,
    pub(crate) ool_bytes: AtomicU64,
    pub(crate) counters: SmoCounters,
    /// Told about every write before it is released (the hot-key cache, the durability
    /// layer's dirty set); filled front to back.
    pub(crate) observers: [std::sync::OnceLock<Arc<dyn crate::WriteObserver>>; MAX_OBSERVERS],
    /// Serialises registration of observers.
    pub(crate) observers_lock: Mutex<()>,
    /// Test hook: a write of this key sleeps this long between taking and completing its
    /// version (a writer the OS descheduled there), set once by `Store::stall_writes_of`.
    pub(crate) stall: std::sync::OnceLock<(Vec<u8>, std::time::Duration)>,
    /// The mirror cache, once a pager is attached (mirror.rs).
    pub(crate) mirror: std::sync::OnceLock<crate::mirror::Mirror>,
}

/// How many structural modifications of each kind have run.
#[derive(Default)]
pub(crate) struct SmoCounters {
    pub(crate) log_merges: AtomicU64,
    pub(crate) splits: AtomicU64,
    pub(crate) node_merges: AtomicU64,
    pub(crate) root_splits: AtomicU64,
    pub(crate) root_shrinks: AtomicU64,
}

impl SmoCounters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

impl Tree {
    /// Completes `wv` (visible once every older version is), after the test hook's stall.
    pub(crate) fn complete(&self, key: &[u8], wv: u64) {
        if let Some((k, d)) = self.stall.get() {
            if k.as_slice() == key {
                std::thread::sleep(*d);
            }
        }
        self.versions.complete(wv);
    }

    /// The clock a reader applies, read after its read version: 0 (expire nothing) while
    /// no item has ever had a deadline. Writers set `deadlines_seen` before releasing the
    /// write that carries one, and the reader's acquire of the read version orders it.
    #[inline]
    pub(crate) fn read_clock(&self) -> u64 {
        if self.deadlines_seen.load(Ordering::Acquire) {
            crate::clock::now_ms()
        } else {
            accelkv_node::layout::NO_DEADLINE
        }
    }

    /// An empty tree: the root is an empty leaf at version 0.
    pub(crate) fn new(cfg: Config) -> Result<Tree, crate::Error> {
        cfg.validate()?;
        let geo = cfg.geometry();
        let tree = Tree {
            arena: Arena::new(cfg.node_size, cfg.chunk_size, cfg.hard_memory_limit()),
            pt: PageTable::new(),
            versions: Versions::new(0),
            epochs: Arc::new(Epochs::new()),
            smo: Mutex::new(()),
            batch: Mutex::new(()),
            gate: std::sync::atomic::AtomicBool::new(false),
            garbage: Mutex::new(VecDeque::new()),
            unretired: Mutex::new(VecDeque::new()),
            items: AtomicI64::new(0),
            expiring: AtomicI64::new(0),
            deadlines_seen: std::sync::atomic::AtomicBool::new(false),
            ool_bytes: AtomicU64::new(0),
            counters: SmoCounters::default(),
            observers: Default::default(),
            observers_lock: Mutex::new(()),
            stall: std::sync::OnceLock::new(),
            mirror: std::sync::OnceLock::new(),
            geo,
            cfg,
        };
        let off = tree.alloc_buffer()?;
        let meta = accelkv_node::NodeMeta {
            version: 0,
            old: NO_BUFFER,
            link: NO_LID,
            left: NO_LID,
            level: 0,
            lock: 0,
        };
        // SAFETY: the buffer is fresh and unpublished.
        accelkv_node::build_leaf(unsafe { tree.buf_mut(off) }, &geo, &[], &meta)
            .expect("empty leaf fits");
        tree.pt.set(ROOT, off);
        Ok(tree)
    }

    /// A node buffer; when the arena is full, garbage that no reader can reach is freed
    /// first (Honeycomb §3.2: a writer that cannot allocate retries after reclamation).
    pub(crate) fn alloc_buffer(&self) -> Result<u64, crate::Error> {
        let at_write_limit =
            || self.arena.live_buffers() * self.geo.node_size >= self.cfg.write_memory_limit();
        if self.cfg.evict && at_write_limit() {
            // Writers stop at the write limit and wait unpinned (Tree::write) for the
            // evictor; the room above it is for loads, whose readers are pinned and so
            // hold back the reclamation of whatever is evicted while they wait.
            self.reclaim();
            if at_write_limit() {
                if let Some(m) = self.mirror.get() {
                    m.pressure();
                }
                return Err(crate::Error::OutOfMemory {
                    limit: self.cfg.memory_limit,
                });
            }
        }
        self.alloc_any()
    }

    /// A node buffer up to the arena's own limit (loads of evicted leaves).
    pub(crate) fn alloc_any(&self) -> Result<u64, crate::Error> {
        self.arena
            .alloc()
            .or_else(|_| {
                self.reclaim();
                self.arena.alloc()
            })
            .map_err(|_| {
                if let Some(m) = self.mirror.get() {
                    m.pressure();
                }
                crate::Error::OutOfMemory {
                    limit: self.cfg.memory_limit,
                }
            })
    }

    /// The lock/used word of the buffer at `off`.
    #[inline]
    pub(crate) fn word(&self, off: u64) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: buffers are node-size aligned (arena invariant 2), so the header word is
        // 8-byte aligned, and it is only ever accessed atomically once published (invariant
        // 1); the arena keeps the memory alive as long as `self`.
        unsafe { AtomicU64::from_ptr(self.arena.ptr(off).add(OFF_LOCK_USED) as *mut u64) }
    }

    /// The left-sibling word of the buffer at `off`.
    #[inline]
    pub(crate) fn left_word(&self, off: u64) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: as for `word`.
        unsafe { AtomicU64::from_ptr(self.arena.ptr(off).add(OFF_LEFT) as *mut u64) }
    }

    /// A view of the published part of the buffer at `off`, valid while `_pin` is held.
    #[inline]
    pub(crate) fn view<'g>(&'g self, off: u64, _pin: &'g Pin<'_>) -> NodeView<'g> {
        // SAFETY: the pin keeps the buffer from being freed for 'g (invariant 3).
        unsafe { self.view_raw(off) }
    }

    /// A view of the published part of the buffer at `off`.
    ///
    /// # Safety
    /// The caller keeps the buffer from being reclaimed for as long as it uses the view (an
    /// epoch pinned or held before it reached the buffer).
    #[inline]
    pub(crate) unsafe fn view_raw(&self, off: u64) -> NodeView<'_> {
        let base = self.arena.ptr(off);
        // SAFETY: buffers are node-size aligned (arena invariant 2), so the header word is
        // 8-byte aligned, and it is only ever accessed atomically once published (invariant
        // 1); the caller keeps the buffer alive (contract).
        let w = unsafe { AtomicU64::from_ptr(base.add(OFF_LOCK_USED) as *mut u64) }
            .load(Ordering::Acquire);
        if cfg!(feature = "poison") && w == u64::from_ne_bytes([POISON; 8]) {
            panic!("reader touched reclaimed buffer at arena offset {off}");
        }
        let used = used_of(w);
        let size = self.geo.node_size;
        debug_assert!(used >= HEADER_SIZE && used <= size);
        // SAFETY: bytes [ATOMIC_END, used) and the trailer were written before the release
        // store of `used` that our acquire load saw, and never change again (invariant 1);
        // so were the log slots of the entries that word counts, the last `shape.len` bytes.
        // The caller keeps the buffer alive (contract).
        unsafe {
            let imm = std::slice::from_raw_parts(base.add(ATOMIC_END), used - ATOMIC_END);
            let trailer = std::ptr::read(base.add(size - TRAILER_SIZE).cast::<[u8; 4]>());
            let shape = accelkv_node::TailShape::of(trailer, log_count_of(w), size);
            debug_assert!(shape.len >= TRAILER_SIZE && size - shape.len >= used);
            let tail = std::slice::from_raw_parts(base.add(size - shape.len), shape.len);
            NodeView::with_shape(imm, tail, shape)
        }
    }

    /// The whole buffer at `off`, for building it.
    ///
    /// # Safety
    /// The buffer must be unpublished and owned by the caller.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn buf_mut(&self, off: u64) -> &mut [u8] {
        // SAFETY: per the contract nobody else accesses these bytes.
        unsafe { std::slice::from_raw_parts_mut(self.arena.ptr(off), self.geo.node_size) }
    }

    /// Bytes `[from, from + len)` of the buffer at `off`, between its published `used` and
    /// its published tail.
    ///
    /// # Safety
    /// The caller holds the buffer's lock, `from` is at least its published `used` and
    /// `from + len` at most where its published log slots begin.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn tail_mut(&self, off: u64, from: usize, len: usize) -> &mut [u8] {
        debug_assert!(from + len <= self.geo.node_size);
        // SAFETY: readers read only below `used` and in the published tail, and other
        // writers need the lock.
        unsafe { std::slice::from_raw_parts_mut(self.arena.ptr(off).add(from), len) }
    }

    /// Bytes of a value, valid while the pin that protects its item is held.
    #[inline]
    pub(crate) fn value_bytes<'g>(&self, v: ValueRef<'g>) -> &'g [u8] {
        match v.data {
            ValueData::Inline(b) => b,
            // SAFETY: out-of-line values are freed only with the buffers that reference
            // them, after reclamation (invariant 3), and the caller's pin covers `'g`.
            ValueData::OutOfLine { handle, len } => unsafe { values::bytes(handle, len) },
        }
    }

    // ---------------------------------------------------------------------------------
    // Reference reader.

    /// The version of node `lid` that readers at `rv` see.
    #[inline]
    pub(crate) fn resolve<'g>(
        &'g self,
        lid: u64,
        rv: u64,
        pin: &'g Pin<'_>,
    ) -> Result<NodeView<'g>, crate::Error> {
        let mut off = match self.page(lid) {
            Ok(off) => off,
            // No room for an evicted leaf: read it into a private copy.
            Err(crate::Error::OutOfMemory { .. }) if self.mirror.get().is_some() => {
                return self.load_private(lid, rv, pin)
            }
            Err(e) => return Err(e),
        };
        loop {
            let v = self.view(off, pin);
            if v.version() <= rv {
                return Ok(v);
            }
            match v.old_version() {
                NO_BUFFER => return Ok(v),
                old => off = old,
            }
        }
    }

    /// The LID of the node at `level` (0: the leaf) whose key range holds `key` at `rv`,
    /// found by walking the interior nodes above it one after another (the straight part of
    /// an engine's walk; interior nodes are never evicted, and an evicted leaf is given as
    /// it is, so nothing here reads the page file). A tree not that tall gives the root.
    ///
    /// # Safety
    /// The caller keeps every buffer reachable at `rv` from being reclaimed (an epoch
    /// published before `rv` was taken, as [`Tree::view_raw`] requires).
    #[inline]
    pub(crate) unsafe fn lid_at_level(
        &self,
        key: &[u8],
        rv: u64,
        level: u8,
    ) -> Result<u64, crate::Error> {
        let size = self.geo.node_size;
        let mut lid = ROOT;
        loop {
            // Only leaves are evicted: one that is is the node asked for (its reader reads
            // it back, or defers).
            let Some(mut off) = self.page_if_resident(lid) else {
                return Ok(lid);
            };
            // The version of the node that readers at `rv` see.
            let base = loop {
                let base = self.arena.ptr(off);
                let w = self.word(off).load(Ordering::Acquire);
                if cfg!(feature = "poison") && w == u64::from_ne_bytes([POISON; 8]) {
                    panic!("reader touched reclaimed buffer at arena offset {off}");
                }
                // SAFETY: header bytes [16, 48) are written before the node is published
                // (the release store that the acquire loads of its page-table entry or of
                // its newer version's header saw) and never change (invariant 1); the
                // caller's epoch keeps the buffer alive (contract).
                let (version, old) =
                    unsafe { (read_u64(base, OFF_VERSION), read_u64(base, OFF_OLD)) };
                if version <= rv || old == NO_BUFFER {
                    break base;
                }
                off = old;
            };
            // SAFETY: as above.
            let (kind, node_level) = unsafe { (*base.add(OFF_KIND), *base.add(OFF_LEVEL)) };
            if kind != KIND_INTERIOR || node_level <= level {
                return Ok(lid);
            }
            // SAFETY: an interior node has no log block: every byte of it past the atomic
            // words is written before it is published and never again (invariant 1), so
            // they can be read as one slice while the caller's epoch keeps it alive.
            let body =
                unsafe { std::slice::from_raw_parts(base.add(ATOMIC_END), size - ATOMIC_END) };
            lid = match accelkv_node::route_heads(body, key) {
                Some(child) => child,
                // SAFETY: as above.
                None => unsafe { self.view_raw(off) }.descend(key),
            };
            if node_level == level + 1 {
                return Ok(lid);
            }
        }
    }

    /// The child of the interior node at `off` for `key`, routed by its heads block without
    /// a view (`None`: the node is a leaf, or a view must route: a key's head ties with a
    /// separator's).
    #[inline]
    pub(crate) fn interior_route(&self, off: u64, key: &[u8], _pin: &Pin<'_>) -> Option<u64> {
        let base = self.arena.ptr(off);
        // The header word's acquire load orders the reads below after the node's build.
        let w = self.word(off).load(Ordering::Acquire);
        if cfg!(feature = "poison") && w == u64::from_ne_bytes([POISON; 8]) {
            panic!("reader touched reclaimed buffer at arena offset {off}");
        }
        // SAFETY: the kind byte is written before the node is published and never changes
        // (invariant 1); the pin keeps the buffer alive.
        if unsafe { *base.add(OFF_KIND) } != KIND_INTERIOR {
            return None;
        }
        // SAFETY: an interior node has no log block: every byte of it past the atomic words
        // is written before it is published and never again (invariant 1); the pin keeps it
        // alive.
        let body = unsafe {
            std::slice::from_raw_parts(base.add(ATOMIC_END), self.geo.node_size - ATOMIC_END)
        };
        accelkv_node::route_heads(body, key)
    }

    /// The leaf whose key range holds `key`, at `rv`.
    pub(crate) fn leaf_for<'g>(
        &'g self,
        key: &[u8],
        rv: u64,
        pin: &'g Pin<'_>,
    ) -> Result<NodeView<'g>, crate::Error> {
        // SAFETY: `pin` was taken before `rv` (every caller's order) and is held for 'g.
        let lid = unsafe { self.lid_at_level(key, rv, 0) }?;
        let v = self.resolve(lid, rv, pin)?;
        self.leaf_visit();
        Ok(v)
    }

    /// GET at `rv` by a reader whose clock reads `now` (0: expire nothing): calls `f` with
    /// the value and its deadline, if present.
    pub(crate) fn get_at<R>(
        &self,
        key: &[u8],
        rv: u64,
        now: u64,
        pin: &Pin<'_>,
        f: impl FnOnce(&[u8], u64, u32) -> R,
    ) -> Result<Option<R>, crate::Error> {
        let leaf = self.leaf_for(key, rv, pin)?;
        Ok(leaf
            .leaf_get(key, rv, now)
            .map(|v| f(self.value_bytes(v), v.deadline, v.flags)))
    }

    /// SCAN at `rv`: calls `f` for each item with key >= `lo` within `hi`, ascending, at most
    /// `limit` items.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_at(
        &self,
        lo: &[u8],
        hi: Bound<&[u8]>,
        limit: usize,
        rv: u64,
        now: u64,
        pin: &Pin<'_>,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), crate::Error> {
        self.scan_refs_at(lo, hi, limit, rv, now, pin, |k, v| {
            f(k, self.value_bytes(v))
        })
    }

    /// [`Tree::scan_at`] handing out each item's stored value (its deadline included).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_refs_at<'g>(
        &'g self,
        lo: &[u8],
        hi: Bound<&[u8]>,
        limit: usize,
        rv: u64,
        now: u64,
        pin: &'g Pin<'_>,
        f: impl FnMut(&'g [u8], ValueRef<'g>),
    ) -> Result<(), crate::Error> {
        if limit == 0 {
            return Ok(());
        }
        let leaf = self.leaf_for(lo, rv, pin)?;
        self.scan_refs_from(leaf, lo, hi, limit, rv, now, pin, f)
    }

    /// [`Tree::scan_refs_at`] from `leaf`, the leaf `lo` routes to at `rv` (found by an
    /// engine's walk).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_refs_from<'g>(
        &'g self,
        mut leaf: NodeView<'g>,
        lo: &[u8],
        hi: Bound<&[u8]>,
        limit: usize,
        rv: u64,
        now: u64,
        pin: &'g Pin<'_>,
        mut f: impl FnMut(&'g [u8], ValueRef<'g>),
    ) -> Result<(), crate::Error> {
        if limit == 0 {
            return Ok(());
        }
        let mut n = 0;
        loop {
            for (k, v) in leaf.leaf_lower_bound(lo, rv, now) {
                let beyond = match hi {
                    Bound::Included(h) => k > h,
                    Bound::Excluded(h) => k >= h,
                    Bound::Unbounded => false,
                };
                if beyond {
                    return Ok(());
                }
                f(k, v);
                n += 1;
                if n == limit {
                    return Ok(());
                }
            }
            let next = leaf.link();
            if next == NO_LID {
                return Ok(());
            }
            leaf = self.resolve(next, rv, pin)?;
            self.leaf_visit();
        }
    }

    /// The largest key <= `key` at `rv` (Honeycomb's K_s), found by descending for `key` and,
    /// when that leaf holds no such key, descending again for the keys just below the
    /// leaf's lower fence — never through left-sibling links, so every step stays inside
    /// the snapshot.
    pub(crate) fn floor_at<'g>(
        &'g self,
        key: &[u8],
        rv: u64,
        now: u64,
        pin: &'g Pin<'_>,
    ) -> Result<Option<&'g [u8]>, crate::Error> {
        let mut probe: &[u8] = key;
        let mut strict = false;
        loop {
            let mut v = self.resolve(ROOT, rv, pin)?;
            let mut fence: Option<&'g [u8]> = None;
            while !v.is_leaf() {
                let (child, sep) = v.route(probe, strict);
                if sep.is_some() {
                    fence = sep;
                }
                v = self.resolve(child, rv, pin)?;
            }
            let found = if strict {
                v.leaf_iter(rv, now)
                    .map(|(k, _)| k)
                    .take_while(|k| *k < probe)
                    .last()
            } else {
                v.leaf_floor(probe, rv, now)
            };
            if found.is_some() {
                return Ok(found);
            }
            let Some(f) = fence else {
                return Ok(None);
            };
            probe = f;
            strict = true;
        }
    }

    /// SCAN backwards at `rv`: calls `f` for each item with `lo <= key < hi`, descending, at
    /// most `limit` items. Each leaf is reached by descending for the keys just below the
    /// previous leaf's lower fence (as [`Tree::floor_at`] does), never through sibling
    /// links, so every step stays inside the snapshot; a leaf's items are read forward and
    /// handed out backwards. Costs one descent per leaf visited, so the last few items of a
    /// long range cost what its first few do.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_rev_at(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        rv: u64,
        now: u64,
        pin: &Pin<'_>,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), crate::Error> {
        let mut n = 0;
        let mut probe: &[u8] = hi;
        let mut items = Vec::new();
        while n < limit && lo < probe {
            let mut v = self.resolve(ROOT, rv, pin)?;
            let mut fence = None;
            while !v.is_leaf() {
                let (child, sep) = v.route(probe, true);
                if sep.is_some() {
                    fence = sep;
                }
                v = self.resolve(child, rv, pin)?;
            }
            self.leaf_visit();
            self.leaf_tail(&v, (lo, probe), limit - n, (rv, now), &mut items);
            for (k, val) in items.iter().rev() {
                f(k, self.value_bytes(*val));
                n += 1;
                if n == limit {
                    return Ok(());
                }
            }
            match fence {
                Some(fence) => probe = fence,
                None => break, // the first leaf
            }
        }
        Ok(())
    }

    /// The last `want` or more items of `leaf` in `[lo, probe)` at `rv` (all of them when
    /// it holds fewer), ascending, into `items`. Read from a sorted item `want` places
    /// before the probe's position rather than from `lo`, so the last few items of a full
    /// leaf cost what they answer, not the leaf; a window that delete markers thinned out
    /// below `want` items is widened fourfold and read again.
    fn leaf_tail<'g>(
        &self,
        leaf: &NodeView<'g>,
        (lo, probe): (&[u8], &[u8]),
        want: usize,
        (rv, now): (u64, u64),
        items: &mut Vec<(&'g [u8], ValueRef<'g>)>,
    ) {
        let end = leaf.lower_bound(probe);
        let mut back = want.max(1);
        loop {
            let from = match end.checked_sub(back) {
                Some(i) if leaf.item_key(i) > lo => leaf.item_key(i),
                _ => lo,
            };
            items.clear();
            items.extend(
                leaf.leaf_lower_bound(from, rv, now)
                    .take_while(|(k, _)| *k < probe),
            );
            if items.len() >= want || from == lo {
                return;
            }
            back = back.saturating_mul(4);
        }
    }

    /// Honeycomb's SCAN(kl, ku): from the largest key <= `kl` (or the first key when there
    /// is none) through `ku` inclusive, at most `limit` items.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_floor_at(
        &self,
        kl: &[u8],
        ku: &[u8],
        limit: usize,
        rv: u64,
        now: u64,
        pin: &Pin<'_>,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), crate::Error> {
        let start = self.floor_at(kl, rv, now, pin)?.unwrap_or(&[]);
        self.scan_at(start, Bound::Included(ku), limit, rv, now, pin, f)
    }

    // ---------------------------------------------------------------------------------
    // Reclamation.

    /// Retires garbage unlinked by a write that has been released (epoch invariant 2).
    pub(crate) fn retire(&self, items: impl IntoIterator<Item = Garbage>) {
        let tag = self.epochs.retire_tag();
        let mut g = self.garbage.lock().unwrap_or_else(|e| e.into_inner());
        g.extend(items.into_iter().map(|x| (tag, x)));
    }

    /// Retires garbage unlinked by the write of version `wv` once that write is visible:
    /// until then a reader can reach the unlinked buffers through old-version pointers
    /// without its epoch protecting them.
    pub(crate) fn retire_at(&self, wv: u64, items: impl IntoIterator<Item = Garbage>) {
        let mut u = self.unretired.lock().unwrap_or_else(|e| e.into_inner());
        u.extend(items.into_iter().map(|g| (wv, g)));
        self.retire_visible(&mut u);
    }

    /// Retires everything unretired whose write is visible now.
    fn retire_visible(&self, u: &mut VecDeque<(u64, Garbage)>) {
        // Versions are visible in order, so a visible write's garbage may sit behind an
        // invisible one's (they were pushed in completion order): look at all of it.
        let mut i = 0;
        // The garbage list and its tag, taken at the first visible item.
        let mut to = None;
        while i < u.len() {
            if self.versions.is_visible(u[i].0) {
                if let Some((_, x)) = u.swap_remove_back(i) {
                    let (tag, g) = to.get_or_insert_with(|| {
                        let tag = self.epochs.retire_tag();
                        (tag, self.garbage.lock().unwrap_or_else(|e| e.into_inner()))
                    });
                    g.push_back((*tag, x));
                }
            } else {
                i += 1;
            }
        }
    }

    /// Frees the garbage no reader can reach any more.
    pub(crate) fn reclaim(&self) {
        {
            let mut u = self.unretired.lock().unwrap_or_else(|e| e.into_inner());
            if !u.is_empty() {
                self.retire_visible(&mut u);
            }
        }
        let safe = self.epochs.safe_below();
        let mut g = self.garbage.lock().unwrap_or_else(|e| e.into_inner());
        while g.front().is_some_and(|(tag, _)| *tag < safe) {
            if let Some((_, x)) = g.pop_front() {
                self.free_garbage(x);
            }
        }
    }

    /// Tells the write observers, if any, about a write that is visible in node memory and
    /// not yet released.
    pub(crate) fn observe(&self, key: &[u8], op: &crate::write::Op<'_>, wv: u64) {
        let (value, deadline, flags) = (op.value(), op.deadline(), op.flags());
        for slot in &self.observers {
            match slot.get() {
                Some(o) => o.on_write(key, value, deadline, flags, wv),
                None => return,
            }
        }
    }

    /// Tells the write observers that a writer waits for the version lease.
    pub(crate) fn observe_lease_wait(&self) {
        for slot in &self.observers {
            match slot.get() {
                Some(o) => o.on_lease_wait(),
                None => return,
            }
        }
    }

    /// Tells the write observers that every item is gone at `wv` (before its release).
    pub(crate) fn observe_clear(&self, wv: u64) {
        for slot in &self.observers {
            match slot.get() {
                Some(o) => o.on_clear(wv),
                None => return,
            }
        }
    }

    fn free_garbage(&self, x: Garbage) {
        match x {
            Garbage::Buffer(off) => {
                if cfg!(feature = "poison") {
                    // SAFETY: no reader can reach the buffer (epochs), so we own it.
                    unsafe { self.buf_mut(off) }.fill(POISON);
                }
                self.arena.free(off);
            }
            Garbage::Lid(lid) => {
                self.drop_stub(self.pt.get(lid));
                self.pt.free_lid(lid);
            }
            Garbage::Value(handle, len) => {
                self.ool_bytes.fetch_sub(u64::from(len), Ordering::Relaxed);
                // SAFETY: the value's last referencing buffer is unreachable.
                unsafe { values::free(handle, len) }
            }
            Garbage::Boxed(b) => drop(b),
        }
    }

    /// Out-of-line value handles referenced anywhere in a leaf buffer (sorted and log).
    pub(crate) fn ool_refs(view: &NodeView<'_>, out: &mut Vec<(u64, u32)>) {
        let mut it = view.sorted_items();
        while let Some(item) = it.next_item() {
            if let Some((handle, len)) = view.value_at(item.body).0.out_of_line_ref() {
                out.push((handle, len));
            }
        }
        for e in view.log_entries() {
            if let Some((handle, len)) = e.value.and_then(|v| v.out_of_line_ref()) {
                out.push((handle, len));
            }
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // Free retired garbage, then every out-of-line value still referenced by the newest
        // version of the tree. (Older buffers' values were retired with those buffers.)
        let mut g: Vec<_> = self
            .garbage
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for (_, x) in self
            .unretired
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            g.push((0, x));
        }
        for (_, x) in g {
            if let Garbage::Value(h, l) = x {
                // SAFETY: no reader exists any more (we have `&mut self`).
                unsafe { values::free(h, l) };
            }
        }
        let pin = self.epochs.pin();
        let mut refs = Vec::new();
        let mut stack = vec![ROOT];
        while let Some(lid) = stack.pop() {
            let e = self.pt.get(lid);
            if crate::mirror::is_evicted(e) {
                continue;
            }
            let v = self.view(e, &pin);
            if v.is_leaf() {
                Tree::ool_refs(&v, &mut refs);
            } else {
                let (leftmost, entries) = v.interior_entries();
                stack.push(leftmost);
                stack.extend(entries.iter().map(|e| e.1));
            }
        }
        drop(pin);
        refs.sort_unstable();
        refs.dedup();
        for (h, l) in refs {
            // SAFETY: as above; each value is freed once (deduplicated).
            unsafe { values::free(h, l) };
        }
    }
}

#[cfg(all(test, feature = "poison"))]
mod poison_tests {
    use super::*;
    use crate::write::Op;

    /// The poison build's check fires: a view of a reclaimed buffer panics.
    #[test]
    #[should_panic(expected = "reclaimed buffer")]
    fn reading_a_reclaimed_buffer_panics() {
        let t = Tree::new(Config {
            log_threshold: 0,
            chunk_size: 1 << 20,
            ..Config::default()
        })
        .unwrap();
        let old_root = t.pt.get(ROOT);
        // With the log block off every write rebuilds the root leaf, retiring the old one,
        // and with no reader pinned it is reclaimed at once.
        t.write(b"k", Op::Put(b"v", 0, 0)).unwrap();
        t.write(b"k2", Op::Put(b"v", 0, 0)).unwrap();
        let pin = t.epochs.pin();
        let _ = t.view(old_root, &pin);
    }
}
