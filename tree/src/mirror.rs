//! The mirror cache (Retina §3.4, issue 18): a memory budget over the page file. A leaf whose
//! image is durable can be *evicted*: its page-table entry becomes a stub naming the page
//! (`EVICTED | stub number`), its buffer is retired, and the next walk that reaches the LID
//! reads the page back through the [`Pager`] and installs a fresh buffer. Interior nodes
//! always stay resident; only the durability layer, which knows which page images a leaf,
//! decides that a leaf may go ([`crate::Store::evict`]).
//!
//! Which leaves go is S3-FIFO (Yang et al., SOSP 2023): a small FIFO for leaves that just
//! arrived, a main FIFO, and a ghost FIFO of LIDs evicted from the small one. Readers only
//! bump a 2-bit frequency per LID (a load and, when it is below 3, a store: no contention
//! on a hot leaf). A leaf read once (a scan passing through) leaves the small FIFO without
//! reaching the main one, so scans do not flush the working set; a leaf read again while in
//! the small FIFO, or returning soon after its eviction (ghost), joins the main FIFO, which
//! is a CLOCK over frequencies.
//!
//! Invariants:
//! 1. A leaf is evicted only under the SMO latch, by locking its current buffer (which then
//!    stays locked, like every superseded buffer), only if the durability layer names a
//!    page that images the buffer's newest state, and only if every reader still pinned
//!    reads at a version at or after that state ([`Mirror::safe_version`]): the reloaded
//!    buffer has that version and no old-version pointer, so no reader can need an older one.
//! 2. A stub number is never reused, so a reader that read a page for a stub installs its
//!    buffer, or uses its private copy, only if the page-table entry still names that stub
//!    after the read (for installs checked under the stubs' mutex, under which evictions and
//!    installs happen): the pager reads the leaf's newest image, which may be of a newer
//!    state once the stub was installed, so a stale read is discarded.
//! 3. A stub whose LID was retired (FLUSHALL) is never installed into the page table; a
//!    reader at an old version that loads it gets a private buffer, retired at once.

use crate::epoch::Pin;
use crate::page_table::UNMAPPED;
use crate::tree::{Garbage, Tree};
use crate::values;
use accelkv_node::layout::*;
use accelkv_node::{build_leaf_full, NodeMeta, ValueRef};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Tag bit of a page-table entry that names a stub instead of a buffer.
pub(crate) const EVICTED: u64 = 1 << 63;

/// Whether a page-table entry names a stub.
#[inline]
pub(crate) fn is_evicted(entry: u64) -> bool {
    entry != UNMAPPED && entry & EVICTED != 0
}

/// One item of a page: key, value, deadline (0: none), client flags (0: none).
pub type PageItem<'p> = (&'p [u8], &'p [u8], u64, u32);

/// Receives a page's items, all at once, borrowed from the pager's buffer.
pub type ItemSink<'a> = dyn for<'p> FnMut(&[PageItem<'p>]) + 'a;

/// Names the page that images a leaf: (LID, newest version, first key) → page.
pub type PageOf<'a> = dyn FnMut(u64, u64, Option<&[u8]>) -> Option<u64> + 'a;

/// Reads leaf images back from where the durability layer wrote them.
pub trait Pager: Send + Sync {
    /// Calls `items` once with every (key, value, deadline) of evicted leaf `lid`, in key order:
    /// from the newest page that images it, or from `page`, the one that did when it was
    /// evicted (a commit may image an unchanged leaf again, and free that page). An error
    /// names what failed (the read, a checksum).
    fn read(
        &self,
        lid: u64,
        page: u64,
        items: &mut crate::ItemSink<'_>,
    ) -> std::result::Result<(), String>;

    /// The store is over its memory budget (a load or an allocation found it so): evict.
    fn pressure(&self);
}

/// What an evicted leaf needs to come back.
#[derive(Clone, Debug)]
struct Stub {
    lid: u64,
    page: u64,
    version: u64,
    link: u64,
    left: u64,
    /// Items the evicted buffer held (expired ones included) and those with a deadline: a
    /// page leaves out items expired when it was written, so the tree's counts are
    /// corrected by the difference when the page comes back.
    items: i64,
    expiring: i64,
    retired: bool,
}

#[derive(Default)]
struct Stubs {
    by_seq: HashMap<u64, Stub>,
    next: u64,
    /// What a load built, per LID, so evicting a leaf no write changed since (a read-mostly
    /// working set's usual victim) needs no walk over its items. Only a hint: used only while
    /// the leaf's newest version is still the loaded one.
    loaded: HashMap<u64, Loaded>,
}

/// A loaded leaf's counts and out-of-line values, as built.
struct Loaded {
    version: u64,
    items: i64,
    expiring: i64,
    ool: Vec<(u64, u32)>,
}

const BITS: u32 = 14;
const BLOCK: usize = 1 << BITS;
type FreqBlock = [AtomicU8; BLOCK];

/// Per-LID access frequency (0..=3), two levels like the page table.
struct Freq {
    dirs: Box<[AtomicPtr<FreqBlock>]>,
}

impl Freq {
    fn new() -> Freq {
        Freq {
            dirs: (0..BLOCK)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        }
    }

    fn block(&self, lid: u64) -> Option<&FreqBlock> {
        let d = self.dirs.get((lid >> BITS) as usize)?;
        // SAFETY: blocks are installed once (`block_or_install`) and freed only in Drop.
        unsafe { d.load(Ordering::Acquire).as_ref() }
    }

    fn block_or_install(&self, lid: u64) -> Option<&FreqBlock> {
        if let Some(b) = self.block(lid) {
            return Some(b);
        }
        let d = self.dirs.get((lid >> BITS) as usize)?;
        let b: Box<FreqBlock> = Box::new(std::array::from_fn(|_| AtomicU8::new(0)));
        let p = Box::into_raw(b);
        if d.compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `p` came from Box::into_raw above and was never shared.
            drop(unsafe { Box::from_raw(p) });
        }
        self.block(lid)
    }

    #[inline]
    fn touch(&self, lid: u64) {
        if let Some(b) = self.block(lid) {
            let f = &b[lid as usize & (BLOCK - 1)];
            let v = f.load(Ordering::Relaxed);
            if v < 3 {
                f.store(v + 1, Ordering::Relaxed);
            }
        }
    }

    fn get(&self, lid: u64) -> u8 {
        self.block(lid)
            .map_or(0, |b| b[lid as usize & (BLOCK - 1)].load(Ordering::Relaxed))
    }

    fn set(&self, lid: u64, v: u8) {
        if let Some(b) = self.block_or_install(lid) {
            b[lid as usize & (BLOCK - 1)].store(v, Ordering::Relaxed);
        }
    }
}

impl Drop for Freq {
    fn drop(&mut self) {
        for d in self.dirs.iter() {
            let p = d.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: installed from a Box by `block_or_install`, freed once here.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// The S3-FIFO queues (LIDs of resident leaves; stale entries are dropped when reached).
#[derive(Default)]
struct Policy {
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    ghost: VecDeque<u64>,
    ghost_set: HashSet<u64>,
    queued: HashSet<u64>,
    /// (epoch tag, read version read before the tag was taken), oldest first.
    marks: VecDeque<(u64, u64)>,
}

/// Counters of the mirror cache.
#[derive(Default)]
pub(crate) struct MirrorCounters {
    pub(crate) loads: AtomicU64,
    pub(crate) load_errors: AtomicU64,
    pub(crate) load_ns: AtomicU64,
    pub(crate) load_ns_max: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) evict_skipped: AtomicU64,
    pub(crate) leaf_visits: [Padded; 8],
}

impl MirrorCounters {
    /// A leaf was read back, starting at `started`.
    fn loaded(&self, started: Instant) {
        let ns = started.elapsed().as_nanos() as u64;
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.load_ns.fetch_add(ns, Ordering::Relaxed);
        self.load_ns_max.fetch_max(ns, Ordering::Relaxed);
    }
}

#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Padded(pub(crate) AtomicU64);

/// The mirror cache's state, present once a pager is attached.
pub(crate) struct Mirror {
    pager: Arc<dyn Pager>,
    stubs: Mutex<Stubs>,
    freq: Freq,
    arrivals: Mutex<Vec<u64>>,
    policy: Mutex<Policy>,
    pub(crate) counters: MirrorCounters,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What [`crate::Store::mirror_stats`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// Leaves reached by reads (the reference reader and the engines) and writes, resident
    /// or read back for them: the hit ratio is `1 - loads / leaf_visits`.
    pub leaf_visits: u64,
    /// Leaves read back from the page file (misses, by reads and writes).
    pub loads: u64,
    /// Page reads that failed.
    pub load_errors: u64,
    /// Mean and largest time a load took, in microseconds.
    pub load_us_mean: u64,
    /// Largest load time, in microseconds.
    pub load_us_max: u64,
    /// Leaves evicted.
    pub evictions: u64,
    /// Eviction candidates passed over because their newest state was not durable yet (or
    /// a reader at an older version was still running).
    pub evict_skipped: u64,
    /// Leaves that live only in the page file now.
    pub evicted_leaves: u64,
    /// Bytes the store holds in memory (node buffers, out-of-line values).
    pub resident_bytes: u64,
    /// The budget.
    pub budget_bytes: u64,
}

impl MirrorStats {
    /// `1 - loads / leaf_visits` (1 when nothing was visited).
    pub fn hit_ratio(&self) -> f64 {
        if self.leaf_visits == 0 {
            1.0
        } else {
            1.0 - (self.loads as f64 / self.leaf_visits as f64).min(1.0)
        }
    }
}

impl Mirror {
    pub(crate) fn new(pager: Arc<dyn Pager>) -> Mirror {
        Mirror {
            pager,
            stubs: Mutex::new(Stubs {
                next: 1,
                ..Stubs::default()
            }),
            freq: Freq::new(),
            arrivals: Mutex::new(Vec::new()),
            policy: Mutex::new(Policy::default()),
            counters: MirrorCounters::default(),
        }
    }

    /// A walk reaches `lid`'s resident buffer.
    #[inline]
    pub(crate) fn touch(&self, lid: u64) {
        self.freq.touch(lid);
    }

    /// A read reached a leaf (resident, or loaded for it): counted on the thread's own
    /// stripe, so readers on different threads do not share a counter's cache line.
    #[inline]
    pub(crate) fn leaf_visit(&self) {
        thread_local! {
            static STRIPE: usize = {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed) as usize
            };
        }
        let i = STRIPE.with(|s| *s) & 7;
        self.counters.leaf_visits[i]
            .0
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Tells the durability layer the store is over its budget.
    pub(crate) fn pressure(&self) {
        self.pager.pressure();
    }

    /// A leaf LID became resident (a new leaf, a load).
    pub(crate) fn arrived(&self, lid: u64) {
        lock(&self.arrivals).push(lid);
    }
}

/// What a load built: the out-of-line values it references, and its items and those with
/// a deadline (the tree's counts are corrected by them).
struct Built {
    ool: Vec<(u64, u32)>,
    items: i64,
    expiring: i64,
}

/// A leaf's newest version: its node version or its last log entry's.
fn newest_version(v: &accelkv_node::NodeView<'_>) -> u64 {
    v.log_entries().last().map_or(v.version(), |e| e.version)
}

impl Tree {
    /// The resident buffer of `lid` (its newest), reading it back from the page file when
    /// it was evicted.
    #[inline]
    pub(crate) fn page(&self, lid: u64) -> Result<u64, crate::Error> {
        let e = self.pt.get(lid);
        if let Some(m) = self.mirror.get() {
            if is_evicted(e) {
                return self.load(m, lid, e);
            }
            m.touch(lid);
        }
        Ok(e)
    }

    /// The resident buffer of `lid` (its newest), or `None` when it is evicted.
    #[inline]
    pub(crate) fn page_if_resident(&self, lid: u64) -> Option<u64> {
        let e = self.pt.get(lid);
        if let Some(m) = self.mirror.get() {
            if is_evicted(e) {
                return None;
            }
            m.touch(lid);
        }
        Some(e)
    }

    /// Bytes of memory the budget counts: node buffers and out-of-line values.
    pub(crate) fn resident_bytes(&self) -> usize {
        self.arena.live_buffers() * self.geo.node_size
            + self.ool_bytes.load(Ordering::Relaxed) as usize
    }

    /// Whether the store is over its memory budget.
    pub(crate) fn over_budget(&self) -> bool {
        self.resident_bytes() > self.cfg.memory_limit
    }

    fn load(&self, m: &Mirror, lid: u64, mut entry: u64) -> Result<u64, crate::Error> {
        loop {
            let seq = entry & !EVICTED;
            let Some(stub) = lock(&m.stubs).by_seq.get(&seq).cloned() else {
                // Installed (or evicted again) since we read the entry.
                entry = self.pt.get(lid);
                if is_evicted(entry) {
                    continue;
                }
                return Ok(entry);
            };
            let started = Instant::now();
            let off = self.alloc_any()?;
            // SAFETY: a fresh, unpublished buffer.
            let built = match self.read_into(m, lid, &stub, unsafe { self.buf_mut(off) }) {
                Ok(b) => b,
                Err(e) => {
                    self.arena.free(off);
                    // A stale stub's page may have been reused: look again before failing.
                    let now = self.pt.get(lid);
                    if now == entry {
                        return Err(e);
                    }
                    entry = now;
                    if is_evicted(entry) {
                        continue;
                    }
                    return Ok(entry);
                }
            };
            m.counters.loaded(started);
            let mut stubs = lock(&m.stubs);
            let current = stubs.by_seq.get(&seq).map(|s| s.retired);
            match current {
                Some(false) if self.pt.get(lid) == entry => {
                    stubs.by_seq.remove(&seq);
                    self.pt.set(lid, off);
                    if stubs.loaded.len() > 2 * (self.cfg.memory_limit / self.geo.node_size) + 64 {
                        // Hints of leaves merged away or rewritten since: drop them all.
                        stubs.loaded.clear();
                    }
                    stubs.loaded.insert(
                        lid,
                        Loaded {
                            version: stub.version,
                            items: built.items,
                            expiring: built.expiring,
                            ool: built.ool.clone(),
                        },
                    );
                    drop(stubs);
                    self.items
                        .fetch_sub(stub.items - built.items, Ordering::Relaxed);
                    self.expiring
                        .fetch_sub(stub.expiring - built.expiring, Ordering::Relaxed);
                    m.freq.set(lid, 0);
                    m.arrived(lid);
                    if self.over_budget() {
                        m.pager.pressure();
                    }
                    return Ok(off);
                }
                Some(true) => {
                    // Invariant 3: a private copy for a reader of the old tree.
                    drop(stubs);
                    let mut g = vec![Garbage::Buffer(off)];
                    g.extend(built.ool.into_iter().map(|(h, l)| Garbage::Value(h, l)));
                    self.retire(g);
                    return Ok(off);
                }
                _ => {
                    drop(stubs);
                    self.arena.free(off);
                    self.free_values(&built.ool);
                    entry = self.pt.get(lid);
                    if !is_evicted(entry) {
                        return Ok(entry);
                    }
                }
            }
        }
    }

    /// Frees out-of-line values that were never published.
    fn free_values(&self, ool: &[(u64, u32)]) {
        for &(h, l) in ool {
            self.ool_bytes.fetch_sub(u64::from(l), Ordering::Relaxed);
            // SAFETY: never published: nobody else holds the handle.
            unsafe { values::free(h, l) };
        }
    }

    /// Reads `stub`'s page and builds the leaf into `buf` (unpublished), straight from the
    /// pager's buffer; on failure (counted) nothing is left allocated but `buf`. The
    /// buffer comes from up to the arena's limit and is never waited for: the caller is
    /// pinned, and a pinned reader holds back both the reclamation of what the evictor
    /// retires and the versions it may evict (invariant 1), so waiting could only wait for
    /// itself. Readers fall back to a private copy ([`Tree::load_private`]); writers retry
    /// unpinned (`Tree::write`).
    fn read_into(
        &self,
        m: &Mirror,
        lid: u64,
        stub: &Stub,
        buf: &mut [u8],
    ) -> Result<Built, crate::Error> {
        let mut built = None;
        let read = m
            .pager
            .read(lid, stub.page, &mut |items| {
                built = Some(self.build_into(buf, stub, items))
            })
            .map_err(crate::Error::PageRead)
            .and_then(|()| {
                built.unwrap_or_else(|| {
                    Err(crate::Error::PageRead(format!(
                        "page {} of leaf {lid} was not read",
                        stub.page
                    )))
                })
            });
        if read.is_err() {
            m.counters.load_errors.fetch_add(1, Ordering::Relaxed);
        }
        read
    }

    /// Builds a loaded leaf from a page's items into `buf`; on failure nothing is left
    /// allocated.
    fn build_into(
        &self,
        buf: &mut [u8],
        stub: &Stub,
        items: &[PageItem<'_>],
    ) -> Result<Built, crate::Error> {
        let (refs, ool) = self.loaded_refs(items);
        let built = build_leaf_full(buf, &self.geo, &refs, &self.loaded_meta(stub));
        drop(refs);
        match built {
            Ok(_) => Ok(Built {
                ool,
                items: items.len() as i64,
                expiring: items.iter().filter(|i| i.2 != NO_DEADLINE).count() as i64,
            }),
            Err(_) => {
                self.free_values(&ool);
                Err(crate::Error::PageRead(format!(
                    "page {} of leaf {} does not fit in a node",
                    stub.page, stub.lid
                )))
            }
        }
    }

    /// Reads evicted leaf `lid` into a private buffer that is never installed, retired at
    /// once (so it lives until the caller unpins): how a reader goes on when the arena is
    /// full. Returns the view a reader at `rv` resolves `lid` to.
    pub(crate) fn load_private<'g>(
        &'g self,
        lid: u64,
        rv: u64,
        pin: &'g Pin<'_>,
    ) -> Result<accelkv_node::NodeView<'g>, crate::Error> {
        let Some(m) = self.mirror.get() else {
            return Err(crate::Error::OutOfMemory {
                limit: self.cfg.memory_limit,
            });
        };
        let (built, buf) = loop {
            let entry = self.pt.get(lid);
            let stub = if is_evicted(entry) {
                lock(&m.stubs).by_seq.get(&(entry & !EVICTED)).cloned()
            } else {
                None
            };
            let Some(stub) = stub else {
                // Installed meanwhile.
                return self.resolve(lid, rv, pin);
            };
            let started = Instant::now();
            let mut buf = vec![0u8; self.geo.node_size].into_boxed_slice();
            let read = self.read_into(m, lid, &stub, &mut buf);
            // The pager reads the leaf's newest image, which is this stub's state only while
            // the entry still names the stub (invariant 2): if the leaf was installed since,
            // it may have been changed (split, merged) and imaged again, and that state is
            // not what a reader at `rv` may see. Look again.
            if self.pt.get(lid) != entry {
                if let Ok(b) = &read {
                    self.free_values(&b.ool);
                }
                continue;
            }
            let built = read?;
            m.counters.loaded(started);
            break (built, buf);
        };
        let mut g: Vec<Garbage> = built
            .ool
            .iter()
            .map(|&(h, l)| Garbage::Value(h, l))
            .collect();
        let ptr = buf.as_ptr();
        g.push(Garbage::Boxed(Box::new(buf)));
        // Retired after our pin was taken, so freed only once we unpin.
        self.retire(g);
        // SAFETY: the boxed bytes do not move (a boxed slice moved into the garbage list
        // keeps its heap allocation) and are freed only after `pin` is dropped (above); they
        // were fully written by `build_leaf` and are never written again.
        let node = unsafe { std::slice::from_raw_parts(ptr, self.geo.node_size) };
        Ok(accelkv_node::NodeView::from_node(node))
    }

    /// Item references for a leaf built from a page's items; values past the inline limit
    /// are copied out of line (returned so they can be freed or retired).
    #[allow(clippy::type_complexity)]
    fn loaded_refs<'a>(
        &self,
        items: &[PageItem<'a>],
    ) -> (Vec<(&'a [u8], ValueRef<'a>)>, Vec<(u64, u32)>) {
        let mut ool = Vec::new();
        let refs = items
            .iter()
            .map(|&(k, v, d, f)| {
                let r = if v.len() > self.geo.max_inline_value {
                    let r = values::alloc(v);
                    if let Some((h, l)) = r.out_of_line_ref() {
                        self.ool_bytes.fetch_add(u64::from(l), Ordering::Relaxed);
                        ool.push((h, l));
                    }
                    r
                } else {
                    ValueRef::inline(v)
                };
                (k, r.with_deadline(d).with_flags(f))
            })
            .collect();
        (refs, ool)
    }

    /// The header of a loaded leaf: the evicted buffer's version and links, no older
    /// version (invariant 1), unlocked.
    fn loaded_meta(&self, stub: &Stub) -> NodeMeta {
        NodeMeta {
            version: stub.version,
            old: NO_BUFFER,
            link: stub.link,
            left: stub.left,
            level: 0,
            lock: 0,
        }
    }

    /// Turns a retired LID's stub, if it has one, into a retired stub (invariant 3); called
    /// for every LID a clear retires.
    pub(crate) fn retire_stub(&self, entry: u64) {
        if let (Some(m), true) = (self.mirror.get(), is_evicted(entry)) {
            if let Some(s) = lock(&m.stubs).by_seq.get_mut(&(entry & !EVICTED)) {
                s.retired = true;
            }
        }
    }

    /// The item count of `lid`'s stub, when it is evicted.
    pub(crate) fn stub_items(&self, lid: u64) -> Option<u64> {
        let e = self.pt.get(lid);
        if !is_evicted(e) {
            return None;
        }
        let m = self.mirror.get()?;
        let stubs = lock(&m.stubs);
        stubs
            .by_seq
            .get(&(e & !EVICTED))
            .map(|s| s.items.max(0) as u64)
    }

    /// Forgets the stub of a LID being freed.
    pub(crate) fn drop_stub(&self, entry: u64) {
        if let (Some(m), true) = (self.mirror.get(), is_evicted(entry)) {
            lock(&m.stubs).by_seq.remove(&(entry & !EVICTED));
        }
    }

    /// Updates the left-sibling word of `lid`, resident or evicted (under the SMO latch).
    pub(crate) fn set_left(&self, lid: u64, left: u64) {
        let e = self.pt.get(lid);
        if is_evicted(e) {
            if let Some(m) = self.mirror.get() {
                let mut stubs = lock(&m.stubs);
                // The entry cannot change meanwhile: installs happen under this mutex.
                if self.pt.get(lid) == e {
                    if let Some(s) = stubs.by_seq.get_mut(&(e & !EVICTED)) {
                        s.left = left;
                    }
                    return;
                }
            }
        }
        let e = self.pt.get(lid);
        if !is_evicted(e) && e != UNMAPPED {
            self.left_word(e).store(left, Ordering::Release);
        }
    }

    /// The newest read version every pinned reader reads at or after (invariant 1): taken
    /// from marks (read version, then epoch tag) the pinned epochs have all passed.
    fn safe_version(&self, p: &mut Policy) -> u64 {
        let rv = self.versions.read_version();
        let tag = self.epochs.retire_tag();
        p.marks.push_back((tag, rv));
        let safe = self.epochs.safe_below();
        let mut best = 0;
        while let Some(&(t, v)) = p.marks.front() {
            if t < safe {
                best = v;
                p.marks.pop_front();
            } else {
                break;
            }
        }
        if best > 0 {
            // Keep the newest safe mark for the next round.
            p.marks.push_front((0, best));
        }
        best
    }

    /// One eviction round: evicts leaves until the store is at `target` bytes or no
    /// candidate is left; `page_of(lid, newest_version, first_key)` names the page that
    /// images a leaf's state at that version, if there is one (when not, the durability
    /// layer may have the leaf imaged by its next commit, through its first key). Returns
    /// how many were evicted.
    pub(crate) fn evict_round(&self, target: usize, page_of: &mut crate::PageOf<'_>) -> usize {
        let Some(m) = self.mirror.get() else {
            return 0;
        };
        // Arrivals join the queues every round, evicting or not, so the list of them stays
        // short (the queues hold each LID once).
        self.absorb_arrivals(m);
        // What earlier rounds evicted counts until it is reclaimed: free what can be, and
        // evict only the rest (counting what this round frees), or every round would empty
        // the cache.
        self.reclaim();
        let Some(mut need) = self.resident_bytes().checked_sub(target) else {
            return 0;
        };
        let _smo = lock(&self.smo);
        let pin = self.epochs.pin();
        let mut p = lock(&m.policy);
        let safe = self.safe_version(&mut p);
        let mut evicted = 0;
        // Every candidate is looked at at most about twice per round.
        let mut budget = 2 * (p.small.len() + p.main.len()) + 16;
        while need > 0 && budget > 0 {
            budget -= 1;
            let resident = p.small.len() + p.main.len();
            let from_small = !p.small.is_empty() && p.small.len() * 10 >= resident;
            let lid = match if from_small {
                p.small.pop_front()
            } else {
                p.main.pop_front()
            } {
                Some(l) => l,
                None => break,
            };
            let f = m.freq.get(lid);
            if from_small && f > 1 {
                m.freq.set(lid, 0);
                p.main.push_back(lid);
                continue;
            }
            if !from_small && f > 0 {
                m.freq.set(lid, f - 1);
                p.main.push_back(lid);
                continue;
            }
            match self.try_evict(m, lid, safe, page_of, &pin) {
                Evict::Gone => {
                    p.queued.remove(&lid);
                }
                Evict::Done(freed) => {
                    need = need.saturating_sub(freed);
                    p.queued.remove(&lid);
                    evicted += 1;
                    if from_small {
                        p.ghost_set.insert(lid);
                        p.ghost.push_back(lid);
                        let cap = resident.max(16);
                        while p.ghost.len() > cap {
                            if let Some(g) = p.ghost.pop_front() {
                                p.ghost_set.remove(&g);
                            }
                        }
                    }
                }
                Evict::NotNow => {
                    m.counters.evict_skipped.fetch_add(1, Ordering::Relaxed);
                    p.main.push_back(lid);
                }
            }
        }
        drop(p);
        drop(pin);
        drop(_smo);
        // Evicted buffers are freed once the readers that may hold them are done.
        self.reclaim();
        evicted
    }

    fn try_evict(
        &self,
        m: &Mirror,
        lid: u64,
        safe: u64,
        page_of: &mut crate::PageOf<'_>,
        pin: &Pin<'_>,
    ) -> Evict {
        let off = self.pt.get(lid);
        if off == UNMAPPED || is_evicted(off) || lid == crate::tree::ROOT {
            return Evict::Gone;
        }
        let v = self.view(off, pin);
        if !v.is_leaf() {
            return Evict::Gone;
        }
        let newest = newest_version(&v);
        if newest > safe {
            return Evict::NotNow;
        }
        let first = v.leaf_iter(u64::MAX, NO_DEADLINE).next().map(|(k, _)| k);
        let Some(page) = page_of(lid, newest, first) else {
            return Evict::NotNow;
        };
        let w = self.word(off).load(Ordering::Acquire);
        if is_locked(w)
            || self
                .word(off)
                .compare_exchange(w, locked(w), Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return Evict::NotNow;
        }
        // Locked, and still the newest (the SMO latch is held and a fast-path append would
        // have needed the lock): nothing changes it any more.
        let v = self.view(off, pin);
        if newest_version(&v) != newest {
            self.word(off).store(w, Ordering::Release);
            return Evict::NotNow;
        }
        let mut stubs = lock(&m.stubs);
        let (items, expiring, ool) = match stubs.loaded.remove(&lid) {
            // Unchanged since it was loaded: as built.
            Some(l) if l.version == newest => (l.items, l.expiring, l.ool),
            _ => {
                drop(stubs);
                let all: Vec<_> = v.leaf_iter(u64::MAX, NO_DEADLINE).collect();
                let items = all.len() as i64;
                let expiring = all.iter().filter(|i| i.1.deadline != NO_DEADLINE).count() as i64;
                // Exactly as a load rebuilds it (`build_leaf_full`; keys of shortcut starts
                // do not count). An upper bound that counted every key here once kept full
                // leaves resident forever, and writers then ran out of room.
                if !accelkv_node::leaf_fits_full(&self.geo, &all) {
                    // Cannot happen (a sorted item is never larger than its log entry), but
                    // a leaf that could not be rebuilt stays.
                    self.word(off).store(w, Ordering::Release);
                    return Evict::NotNow;
                }
                drop(all);
                let mut ool = Vec::new();
                Tree::ool_refs(&v, &mut ool);
                ool.sort_unstable();
                ool.dedup();
                stubs = lock(&m.stubs);
                (items, expiring, ool)
            }
        };
        let stub = Stub {
            lid,
            page,
            version: newest,
            link: v.link(),
            left: self.left_word(off).load(Ordering::Acquire),
            items,
            expiring,
            retired: false,
        };
        let seq = stubs.next;
        stubs.next += 1;
        stubs.by_seq.insert(seq, stub);
        self.pt.set(lid, EVICTED | seq);
        drop(stubs);
        m.counters.evictions.fetch_add(1, Ordering::Relaxed);
        let freed = self.geo.node_size + ool.iter().map(|&(_, l)| l as usize).sum::<usize>();
        let mut g = vec![Garbage::Buffer(off)];
        g.extend(ool.into_iter().map(|(h, l)| Garbage::Value(h, l)));
        self.retire(g);
        Evict::Done(freed)
    }

    /// Moves the LIDs that arrived since the last round into the S3-FIFO queues: the
    /// small FIFO, or the main one for a LID the ghost FIFO remembers.
    fn absorb_arrivals(&self, m: &Mirror) {
        let arrived = std::mem::take(&mut *lock(&m.arrivals));
        if arrived.is_empty() {
            return;
        }
        let mut p = lock(&m.policy);
        for lid in arrived {
            if p.queued.insert(lid) {
                if p.ghost_set.remove(&lid) {
                    p.main.push_back(lid);
                } else {
                    p.small.push_back(lid);
                }
            }
        }
    }

    /// Counts a read's visit of a leaf (mirror cache statistics).
    #[inline]
    pub(crate) fn leaf_visit(&self) {
        if let Some(m) = self.mirror.get() {
            m.leaf_visit();
        }
    }

    /// Statistics of the mirror cache (zeros without one).
    pub(crate) fn mirror_stats(&self) -> MirrorStats {
        let Some(m) = self.mirror.get() else {
            return MirrorStats::default();
        };
        let c = &m.counters;
        let loads = c.loads.load(Ordering::Relaxed);
        MirrorStats {
            leaf_visits: c
                .leaf_visits
                .iter()
                .map(|h| h.0.load(Ordering::Relaxed))
                .sum(),
            loads,
            load_errors: c.load_errors.load(Ordering::Relaxed),
            load_us_mean: c.load_ns.load(Ordering::Relaxed) / loads.max(1) / 1000,
            load_us_max: c.load_ns_max.load(Ordering::Relaxed) / 1000,
            evictions: c.evictions.load(Ordering::Relaxed),
            evict_skipped: c.evict_skipped.load(Ordering::Relaxed),
            evicted_leaves: lock(&m.stubs).by_seq.len() as u64,
            resident_bytes: self.resident_bytes() as u64,
            budget_bytes: self.cfg.memory_limit as u64,
        }
    }

    /// Attaches the pager: from now on leaves may be evicted. Every resident leaf joins
    /// the main FIFO.
    pub(crate) fn attach_pager(&self, pager: Arc<dyn Pager>) -> bool {
        if self.mirror.set(Mirror::new(pager)).is_err() {
            return false;
        }
        if let Some(m) = self.mirror.get() {
            let bound = self.pt.lid_bound();
            let mut a = lock(&m.arrivals);
            a.extend(2..bound);
        }
        true
    }
}

enum Evict {
    /// Not a resident leaf any more (or never was): leave the queues.
    Gone,
    /// Evicted; the bytes it frees once reclaimed.
    Done(usize),
    /// Not evictable now (its state is not durable yet, a reader needs an older version,
    /// or a writer holds it).
    NotNow,
}

/// A leaf of a recovered tree that stays in the page file (bulk.rs).
pub(crate) struct StubSpec {
    pub(crate) lid: u64,
    pub(crate) page: u64,
    pub(crate) link: u64,
    pub(crate) left: u64,
    pub(crate) items: i64,
    pub(crate) expiring: i64,
}

impl Mirror {
    /// Reads page `page` through the pager.
    pub(crate) fn read_page(
        &self,
        page: u64,
        items: &mut crate::ItemSink<'_>,
    ) -> std::result::Result<(), String> {
        // No leaf has LID NO_LID, so the pager reads `page` itself.
        self.pager.read(NO_LID, page, items)
    }
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;

impl Tree {
    /// Maps `spec.lid` to a new stub at version 0 (a tree being built, not yet shared);
    /// returns the page-table entry.
    pub(crate) fn install_stub(&self, spec: StubSpec) -> Result<u64, crate::Error> {
        let m = self.mirror.get().ok_or(crate::Error::InvalidConfig(
            "a recovered tree with evicted leaves needs a pager".into(),
        ))?;
        let mut stubs = lock(&m.stubs);
        let seq = stubs.next;
        stubs.next += 1;
        stubs.by_seq.insert(
            seq,
            Stub {
                lid: spec.lid,
                page: spec.page,
                version: 0,
                link: spec.link,
                left: spec.left,
                items: spec.items,
                expiring: spec.expiring,
                retired: false,
            },
        );
        self.pt.set(spec.lid, EVICTED | seq);
        Ok(EVICTED | seq)
    }
}
