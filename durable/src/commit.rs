//! Group commit (Retina §4.3 without a log): the tree tells the dirty-key observer about
//! every write before releasing it; the committer takes a snapshot at read version `V`,
//! takes every dirty key with a version <= `V`, images each leaf that holds one of them at
//! `V`, writes new extension pages and the leaf pages out of place, tagged with the
//! commit's number and its count of leaf pages, syncs once, and only then marks `V`
//! durable, answers the writers waiting on it, and frees the slots of pages the new ones
//! shadow everywhere (cover.rs). Recovery uses a commit only if all of its leaf pages and
//! the extensions they name are intact, so a crash in the middle of a commit loses the
//! whole commit, never part of it (recovery.rs).
//!
//! Under the relaxed policies (`interval`, `none`) writers are answered before their
//! writes are on disk, but only while the window a crash could lose stays under the
//! policy's bound ([`SyncPolicy::max_lag`]): when the committer falls behind, writers wait
//! for it (backpressure) instead of the window growing.
//!
//! Thread safety: one committer thread; writers only push to the dirty queue and wait on
//! the status. `disk` (cover, slabs, extension map) is locked for a whole commit, so commits
//! never interleave and versions reach the cover in order.
//!
//! Invariants:
//! 1. Every write with version <= `V` is in the queue when the committer reads `V` (the
//!    observer runs before the write's release; the queue mutex orders the two).
//! 2. A slot is reused only after the pages that shadow its page are written (and, under
//!    `sync` and `interval`, synced): only the newest commit can be incomplete on the
//!    device, and the pages an incomplete commit would shadow are still there.
//! 3. Every write released before `durable_at` is durable: it is read before the snapshot
//!    of the last commit that succeeded.
//! 4. A failed commit changes nothing in `disk` but the slots it took, which go back to
//!    the free lists, and the commit number it used; its keys go back to the queue, so the
//!    next commit that succeeds images every range the failed one did.
//! 5. Locks are taken in the order disk → queue → status, and never more than two at once.

use crate::cover::Cover;
use crate::delta::DELTA_VALUE_MAX;
use crate::error::{disk, Error, Result};
use crate::format::{
    aligned_class_for, class_for, delta_item_len, delta_len, encode_delta_in, encode_ext,
    encode_leaf, encode_slab, ext_len, leaf_len, CommitTag, DeltaPage, ExtPage, ExtRef, LeafPage,
    PageValue, BLOCK,
};
use crate::images::{fence, DeltaAt};
use crate::index::{IndexedDelta, IndexedLeaf};
use crate::io::Storage;
use crate::slab::Slabs;
use accelkv_tree::Store as Tree;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// When writes are acknowledged relative to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// A write is acknowledged after the pages it changed are durable (`fdatasync`); many
    /// writes share one sync (group commit). The default with a data directory.
    Sync,
    /// Pages are written and synced every interval; writes are acknowledged before they are
    /// durable, while the oldest write not yet durable is younger than twice the interval
    /// (after that, writers wait for the page writer). A crash loses at most the writes
    /// acknowledged in the last two intervals.
    Interval(Duration),
    /// Pages are written every millisecond but never synced (except by `flush` and on
    /// close); writes are acknowledged before they are written, while the oldest write not
    /// yet written is younger than [`NONE_MAX_LAG`] (after that, writers wait). A process
    /// crash (`kill -9`) loses at most the writes acknowledged in the last
    /// [`NONE_MAX_LAG`] (what was written is in the page cache); a power loss or kernel
    /// crash may lose or tear anything written since the last sync.
    None,
}

/// How far (in time) the `none` policy lets the page writer fall behind the writes it
/// acknowledges before writers wait.
pub const NONE_MAX_LAG: Duration = Duration::from_millis(10);

impl SyncPolicy {
    /// The longest a write may stay acknowledged but not durable (written, under `none`)
    /// before later writers wait for the page writer: zero for `sync`, twice the interval
    /// for `interval`, [`NONE_MAX_LAG`] for `none`. What a crash can lose is the writes
    /// acknowledged within this window.
    pub fn max_lag(&self) -> Duration {
        match self {
            SyncPolicy::Sync => Duration::ZERO,
            SyncPolicy::Interval(d) => *d * 2,
            SyncPolicy::None => NONE_MAX_LAG,
        }
    }

    /// How often the page writer runs (zero: as soon as there are writes).
    fn period(&self) -> Duration {
        match self {
            SyncPolicy::Sync => Duration::ZERO,
            SyncPolicy::Interval(d) => *d,
            SyncPolicy::None => NONE_PERIOD,
        }
    }
}

impl std::str::FromStr for SyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<SyncPolicy, String> {
        match s {
            "sync" => Ok(SyncPolicy::Sync),
            "none" => Ok(SyncPolicy::None),
            _ => match s.strip_prefix("interval=") {
                Some(ms) => match ms.parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(SyncPolicy::Interval(Duration::from_millis(ms))),
                    _ => Err(format!(
                        "interval={ms}: expected a positive number of milliseconds"
                    )),
                },
                None => Err(format!(
                    "unknown sync policy {s:?}: expected sync, interval=<ms> or none"
                )),
            },
        }
    }
}

impl std::fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncPolicy::Sync => write!(f, "sync"),
            SyncPolicy::Interval(d) => write!(f, "interval={}", d.as_millis()),
            SyncPolicy::None => write!(f, "none"),
        }
    }
}

/// How often the `none` policy writes pages.
const NONE_PERIOD: Duration = Duration::from_millis(1);

/// Called once a version is durable (or its commit failed).
pub type Callback = Box<dyn FnOnce(Result<()>) + Send>;

/// A writer's callback waiting for durability (or, under a relaxed policy, for the page
/// writer to catch up): its version, since when it waits, the callback.
pub(crate) type Waiting = (u64, Instant, Callback);

#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) dirty: Vec<(Vec<u8>, u64)>,
    /// Keys whose leaves the next commit must image whole (the evictor's write-backs: a
    /// leaf is evicted only once a whole page images its newest state).
    pub(crate) whole: Vec<Vec<u8>>,
    pub(crate) poke: bool,
    pub(crate) shutdown: bool,
}

#[derive(Default)]
pub(crate) struct Status {
    pub(crate) durable: u64,
    pub(crate) failed: Option<Error>,
    pub(crate) callbacks: Vec<Waiting>,
}

/// What is on the device: kept by the committer, rebuilt by recovery.
pub(crate) struct Disk {
    pub(crate) slabs: Slabs,
    pub(crate) cover: Cover,
    /// Live leaf page → the extension pages it names.
    pub(crate) pages: HashMap<u64, Vec<u64>>,
    /// Live extension page → number of live leaf pages naming it.
    pub(crate) ext_refs: HashMap<u64, usize>,
    /// Key → its value's extension page, for keys whose newest durable value is one; in
    /// key order, so a commit walks a leaf's along its items.
    pub(crate) ext_of: BTreeMap<Vec<u8>, ExtRef>,
    /// The number of the last commit started (the next one takes the one after).
    pub(crate) seq: u64,
    /// Pages were written since the last `fdatasync` (a relaxed policy's commits): a commit
    /// asked to sync must sync even when it has nothing new to write.
    pub(crate) unsynced: bool,
    /// The slot of the clock page holding the version lease (none in a new file).
    pub(crate) clock: Option<u64>,
    /// The version lease on the device: no version above it was ever issued.
    pub(crate) lease: u64,
    /// What the live delta pages provide.
    pub(crate) delta: crate::delta::Book,
    /// The live leaf pages' slots, in bytes (with `ext_bytes`, what delta space is bounded
    /// against).
    pub(crate) leaf_bytes: u64,
    /// The live extension pages' slots, in bytes.
    pub(crate) ext_bytes: u64,
    /// Slabs written whole (zeros) since the last sync: their cache is dropped once synced.
    pub(crate) filled: Vec<u64>,
    /// The live leaf and delta pages' metadata, for the index a clean close writes.
    pub(crate) meta: HashMap<u64, IndexedLeaf>,
    pub(crate) dmeta: HashMap<u64, IndexedDelta>,
}

impl Disk {
    /// A new page file's: no slab, no page, no lease.
    pub(crate) fn empty(slab_size: u64) -> Disk {
        Disk {
            slabs: Slabs::new(slab_size),
            cover: Cover::new(),
            pages: HashMap::new(),
            ext_refs: HashMap::new(),
            ext_of: BTreeMap::new(),
            seq: 0,
            unsynced: false,
            clock: None,
            lease: 0,
            delta: crate::delta::Book::default(),
            leaf_bytes: 0,
            ext_bytes: 0,
            filled: Vec::new(),
            meta: HashMap::new(),
            dmeta: HashMap::new(),
        }
    }
}

/// Counters of what the committer did.
#[derive(Default)]
pub struct Counters {
    /// Commits that wrote pages.
    pub commits: AtomicU64,
    /// Leaf pages written.
    pub leaf_pages: AtomicU64,
    /// Delta pages written.
    pub delta_pages: AtomicU64,
    /// Extension pages written.
    pub ext_pages: AtomicU64,
    /// Bytes written to the device.
    pub bytes: AtomicU64,
    /// `fdatasync` calls.
    pub syncs: AtomicU64,
    /// Commits that failed.
    pub failures: AtomicU64,
    /// Dirty keys taken by commits (several writes of one key count once per commit).
    pub keys: AtomicU64,
    /// Writers that waited for the page writer to catch up (relaxed policies).
    pub stalls: AtomicU64,
    /// Microseconds writers spent waiting so (summed over writers).
    pub stall_us: AtomicU64,
    /// Microseconds the last commit took, snapshot to durable.
    pub last_commit_us: AtomicU64,
    /// When the last commit became durable, in ms since the Unix epoch (0: none yet).
    pub last_commit_at_ms: AtomicU64,
    /// The longest commit so far, in microseconds.
    pub max_commit_us: AtomicU64,
    /// Clock pages written (version leases taken).
    pub leases: AtomicU64,
}

/// The durability core shared by the store, the committer and the observer.
pub(crate) struct Core {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) policy: SyncPolicy,
    /// Values longer than this go to extension pages.
    pub(crate) inline_max: usize,
    pub(crate) queue: Mutex<Queue>,
    pub(crate) wake: Condvar,
    pub(crate) status: Mutex<Status>,
    pub(crate) done: Condvar,
    pub(crate) disk: Mutex<Disk>,
    pub(crate) counters: Counters,
    /// The clock `durable_at` counts from.
    pub(crate) epoch: Instant,
    /// Nanoseconds after `epoch` before which every released write is durable (the start
    /// of the last successful commit's snapshot): the age of the window a crash can lose.
    pub(crate) durable_at: AtomicU64,
    /// With a memory budget (`Config::evict`): the mirror cache's page images; freed slots
    /// then wait for the readers that may still read them (`freed_later`).
    pub(crate) mirror: Option<Arc<crate::mirror::Shared>>,
    /// Slots freed by commits whose last possible reader has finished, ready for reuse.
    pub(crate) freed_later: Arc<Mutex<Vec<u64>>>,
    /// Versions one clock page leases (`Options::version_lease`).
    pub(crate) lease_step: u64,
    /// When commits write delta pages (`Options::deltas`).
    pub(crate) deltas: crate::delta::Deltas,
}

/// Slots a commit freed while a reader of an evicted leaf of the old state (FLUSHALL) may
/// still read them: returned for reuse when the tree's epochs say no reader is left.
struct DeferredFree {
    to: Arc<Mutex<Vec<u64>>>,
    offs: Vec<u64>,
    /// The mirror's images, and the (LID, page) images among `offs` it keeps as gone until
    /// now: released before the slots can be reused.
    images: Arc<crate::mirror::Shared>,
    gone: Vec<(u64, u64)>,
}

impl Drop for DeferredFree {
    fn drop(&mut self) {
        if !self.gone.is_empty() {
            let mut images = lock(&self.images.images);
            for &(lid, page) in &self.gone {
                images.release(lid, page);
            }
        }
        lock(&self.to).append(&mut self.offs);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tree's write observer: records dirty keys.
pub(crate) struct DirtyObserver(pub(crate) Arc<Core>);

impl accelkv_tree::WriteObserver for DirtyObserver {
    /// Every item removed: the empty key (below every key) is marked dirty, so the next
    /// commit images the leftmost leaf, and every other leaf of the new tree holds a key
    /// written since (dirty too): that commit's pages cover the whole key space and replace
    /// every page of the old tree.
    fn on_clear(&self, version: u64) {
        self.on_write(&[], None, 0, 0, version);
    }

    /// A writer waits for the version lease: the committer raises it at its next turn.
    fn on_lease_wait(&self) {
        self.0.poke();
    }

    fn on_write(
        &self,
        key: &[u8],
        _value: Option<&[u8]>,
        _deadline: u64,
        _flags: u32,
        version: u64,
    ) {
        let mut q = lock(&self.0.queue);
        let was_empty = q.dirty.is_empty();
        q.dirty.push((key.to_vec(), version));
        drop(q);
        // Only the `sync` committer waits for writes; the others run on a clock.
        if was_empty && self.0.policy == SyncPolicy::Sync {
            self.0.wake.notify_one();
        }
    }
}

/// A leaf image planned for writing, or the delta entries of a leaf: its items' keys and
/// copied values live back to back in one buffer (one allocation per leaf, not two per
/// item).
struct Planned {
    /// A whole image (a leaf page); else `items` are the leaf's changed keys only (delta
    /// entries).
    whole: bool,
    lid: u64,
    /// The leaf's fences (delta entries: only when `covered` is some).
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
    /// Delta entries with a leaf cache: the page the cover has alone providing the leaf's
    /// range, if one does (the entries may then complete the leaf's image, images.rs).
    covered: Option<u64>,
    bytes: Vec<u8>,
    /// In key order: the key's bytes, the value, its deadline (0: none), its client flags.
    items: Vec<(Span, Val, u64, u32)>,
}

/// A range of `Planned::bytes`.
#[derive(Clone, Copy)]
struct Span {
    at: u32,
    len: u32,
}

impl Planned {
    fn at(&self, s: Span) -> &[u8] {
        &self.bytes[s.at as usize..(s.at + s.len) as usize]
    }

    /// Copies `b` into the buffer.
    fn push(&mut self, b: &[u8]) -> Span {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        Span {
            at,
            len: b.len() as u32,
        }
    }
}

enum Val {
    /// Copied into the plan: written inline, or to a new extension page if large.
    Inline(Span),
    /// The key's durable extension, kept.
    Ext(ExtRef),
    /// An extension page written by this commit.
    NewExt(ExtRef),
    /// Deleted (delta entries only).
    Deleted,
}

impl Val {
    fn ext(&self) -> Option<ExtRef> {
        match self {
            Val::Ext(r) | Val::NewExt(r) => Some(*r),
            Val::Inline(_) | Val::Deleted => None,
        }
    }

    /// As a page holds it (`None`: deleted).
    fn page<'a>(&self, p: &'a Planned) -> Option<PageValue<'a>> {
        match self {
            Val::Inline(b) => Some(PageValue::Inline(p.at(*b))),
            Val::Ext(r) | Val::NewExt(r) => Some(PageValue::Ext(*r)),
            Val::Deleted => None,
        }
    }
}

impl Core {
    /// Every write with a version up to this one is durable (written, under `none`).
    pub(crate) fn durable_version(&self) -> u64 {
        lock(&self.status).durable
    }

    pub(crate) fn failed(&self) -> Option<Error> {
        lock(&self.status).failed.clone()
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// How long ago the window a crash can lose opened: every write released before then is
    /// durable (written, under `none`).
    pub(crate) fn lag(&self) -> Duration {
        let at = self.durable_at.load(Ordering::Acquire);
        Duration::from_nanos(self.now_ns().saturating_sub(at))
    }

    /// Whether writers must wait for the page writer before being answered: always under
    /// `sync`; under the relaxed policies, while the window is older than the policy allows.
    pub(crate) fn must_wait(&self) -> bool {
        self.policy == SyncPolicy::Sync || self.lag() > self.policy.max_lag()
    }

    /// The outcome for a writer of `version`, if there is one yet: `Ok` once the version is
    /// durable or, under a relaxed policy, while the window is within bounds; the error
    /// while the device fails.
    fn settled(&self, s: &Status, version: u64) -> Option<Result<()>> {
        if let Some(e) = &s.failed {
            // Under `sync` a write made durable before the failure is still answered `Ok`.
            if self.policy != SyncPolicy::Sync || s.durable < version {
                return Some(Err(e.clone()));
            }
        }
        if s.durable >= version || !self.must_wait() {
            return Some(Ok(()));
        }
        None
    }

    fn stalled(&self, since: Instant) {
        if self.policy != SyncPolicy::Sync {
            self.counters.stalls.fetch_add(1, Ordering::Relaxed);
            self.counters
                .stall_us
                .fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
    }

    /// Blocks until `version` is durable (policy `sync`), until the page writer is within
    /// the policy's window (relaxed policies), or until its commit failed.
    pub(crate) fn wait(&self, version: u64) -> Result<()> {
        if let Some(r) = self.settled(&lock(&self.status), version) {
            return r;
        }
        let since = Instant::now();
        // Lock order: queue before status (never the other way).
        self.poke();
        let mut s = lock(&self.status);
        loop {
            if let Some(r) = self.settled(&s, version) {
                drop(s);
                self.stalled(since);
                return r;
            }
            s = self.done.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Calls `cb` once [`Core::wait`] would return for `version` (at once when it would).
    pub(crate) fn on_durable(&self, version: u64, cb: Callback) {
        let mut s = lock(&self.status);
        if let Some(r) = self.settled(&s, version) {
            drop(s);
            return cb(r);
        }
        s.callbacks.push((version, Instant::now(), cb));
        drop(s);
        self.poke();
    }

    pub(crate) fn poke(&self) {
        lock(&self.queue).poke = true;
        self.wake.notify_one();
    }

    /// The committer thread's loop.
    pub(crate) fn run(self: &Arc<Core>, tree: &Tree) {
        // After a commit that found only unreleased writes, wait a little for their release
        // instead of spinning on them.
        let mut starved = false;
        // Relaxed policies: commits start one period apart (snapshot to snapshot), so the
        // window a crash can lose is the period plus one commit, not the period plus two.
        let mut last = Instant::now();
        loop {
            let failed = self.failed().is_some();
            let mut q = lock(&self.queue);
            let period = match self.policy {
                SyncPolicy::Sync if failed => Some(Duration::from_millis(100)),
                SyncPolicy::Sync if starved => Some(Duration::from_micros(50)),
                SyncPolicy::Sync => None,
                p => Some(p.period().saturating_sub(last.elapsed())),
            };
            match period {
                Some(d) => {
                    // A writer waiting for the page writer (poke) cuts the wait short.
                    if !q.shutdown && !q.poke && !d.is_zero() {
                        q = self
                            .wake
                            .wait_timeout(q, d)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
                None => {
                    while q.dirty.is_empty() && !q.poke && !q.shutdown {
                        q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
            let shutdown = q.shutdown;
            q.poke = false;
            drop(q);
            if shutdown {
                if self.commit(tree, true).is_ok() {
                    self.fold_deltas(tree);
                }
                return;
            }
            last = Instant::now();
            let sync = self.policy != SyncPolicy::None;
            // Before and after the commit: every version taken is followed by its dirty key,
            // which either wakes this loop or is taken by the commit, so one of the two
            // checks sees it (a writer past the lease also pokes).
            self.keep_lease(tree);
            starved = matches!(self.commit(tree, sync), Ok((_, 0)))
                && !lock(&self.queue).dirty.is_empty();
            self.keep_lease(tree);
        }
    }

    /// At a clean close, one more commit images whole every leaf that has delta entries,
    /// so the index names no delta page and the next open reads neither delta pages nor
    /// the leaf pages under them (docs/ARCHITECTURE.md, "The index of a clean close"). It
    /// writes only the leaves with entries, as a Redis SHUTDOWN writes its snapshot.
    fn fold_deltas(&self, tree: &Tree) {
        let keys = lock(&self.disk).delta.keys();
        if !keys.is_empty() {
            lock(&self.queue).whole.extend(keys);
            let _ = self.commit(tree, true);
        }
    }

    /// Takes a new version lease once half of the current one is used; a device error
    /// fails the store as a failed commit does (the next turn retries).
    fn keep_lease(&self, tree: &Tree) {
        let used = tree
            .last_write_version()
            .saturating_add(self.lease_step / 2);
        if used > tree.version_lease() {
            if let Err(e) = self.renew_lease(tree) {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                self.fail(0, e);
            }
        }
    }

    /// Writes a clock page leasing the versions up to `lease_step` past the last one
    /// issued, syncs it (under every policy: a lease is what a crash must not lose), then
    /// frees the previous clock page and lets the tree's read version go up to the new
    /// lease (versions taken meanwhile become visible).
    pub(crate) fn renew_lease(&self, tree: &Tree) -> Result<()> {
        let mut d = lock(&self.disk);
        let lease = tree
            .last_write_version()
            .max(tree.read_version())
            .max(d.lease)
            .saturating_add(self.lease_step);
        let off = self.take_slot(&mut d, crate::format::HEADER)?;
        let written = self
            .write(
                &crate::format::encode_clock(lease, off),
                off,
                "writing a clock page",
            )
            .and_then(|()| self.sync("fdatasync of a clock page"));
        if let Err(e) = written {
            d.slabs.free(off);
            return Err(e);
        }
        // The sync made every page written before it durable too.
        d.unsynced = false;
        if let Some(old) = d.clock.replace(off) {
            d.slabs.free(old);
        }
        d.lease = lease;
        drop(d);
        self.counters.leases.fetch_add(1, Ordering::Relaxed);
        tree.lease_versions(lease);
        Ok(())
    }

    /// One group commit at the current read version; `sync` = with an `fdatasync` at the
    /// end. Returns the version now durable (written, under `none`) and the keys it
    /// persisted.
    pub(crate) fn commit(&self, tree: &Tree, sync: bool) -> Result<(u64, usize)> {
        let mut d = lock(&self.disk);
        // Read before the snapshot: every write released before `at` is in it.
        let at = self.now_ns();
        let snap = tree.snapshot();
        let v = snap.version();
        let (mine, mut whole) = {
            let mut q = lock(&self.queue);
            let all = std::mem::take(&mut q.dirty);
            let (mine, later): (Vec<_>, Vec<_>) = all.into_iter().partition(|e| e.1 <= v);
            q.dirty = later;
            (mine, std::mem::take(&mut q.whole))
        };
        if mine.is_empty() && whole.is_empty() {
            return self.nothing_to_write(&mut d, v, at, sync);
        }
        let mut keys: Vec<Vec<u8>> = mine.into_iter().map(|e| e.0).collect();
        keys.sort_unstable();
        keys.dedup();
        // Besides the leaves the policy images whole: the evictor's write-backs, and the
        // leaves whose entries keep the oldest delta pages alive past the space limit.
        if self.deltas.on() {
            let limit = self.deltas.byte_limit(d.leaf_bytes + d.ext_bytes);
            whole.extend(d.delta.retiring(limit));
        }
        whole.sort_unstable();
        whole.dedup();
        // A leaf cache that is evicting (its resident bytes past three quarters of the
        // budget): a leaf touched now is likely cold, and an evicted leaf with entries costs
        // each of its misses a read of every delta page it has entries in, more than its
        // whole image costs the committer (docs/BENCHMARKS.md, "Delta pages under a memory
        // budget"). Whole images then; delta entries while the data fits.
        let pressed = self.mirror.is_some()
            && self
                .deltas
                .pressed(tree.resident_bytes(), tree.config().memory_limit);
        let plans = self.plan(&snap, &d, &keys, &whole, pressed);
        drop(snap);
        let mut plans = match plans {
            Ok(p) => p,
            // An evicted leaf that cannot be read back: the commit fails as a disk error
            // would.
            Err(e) => return Err(self.failed_commit(keys, whole, v, e)),
        };
        d.seq += 1;
        let cuts = self.delta_cuts(&plans);
        let tag = CommitTag {
            seq: d.seq,
            pages: (plans.iter().filter(|p| p.whole).count() + cuts.len()) as u32,
        };
        let mut taken = Taken {
            tag,
            ..Taken::default()
        };
        match self.write_plans(&mut d, &mut plans, &cuts, &mut taken, v, tag, sync) {
            Ok(()) => {
                self.apply(tree, &mut d, &keys, plans, &cuts, taken, v);
                self.counters.commits.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .keys
                    .fetch_add(keys.len() as u64, Ordering::Relaxed);
                drop(d);
                let took = self.now_ns().saturating_sub(at) / 1000;
                self.counters.last_commit_us.store(took, Ordering::Relaxed);
                let at_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                self.counters
                    .last_commit_at_ms
                    .store(at_ms, Ordering::Relaxed);
                self.counters
                    .max_commit_us
                    .fetch_max(took, Ordering::Relaxed);
                self.succeed(v, at);
                Ok((v, keys.len()))
            }
            Err(e) => {
                for off in taken
                    .exts
                    .into_iter()
                    .chain(taken.leaves.into_iter().map(|l| l.0))
                    .chain(taken.deltas)
                {
                    d.slabs.free(off);
                }
                drop(d);
                Err(self.failed_commit(keys, whole, v, e))
            }
        }
    }

    /// A commit at `v` failed with `e`: its keys go back to the queue at `v` (the next
    /// commit's snapshot is at least that new), and the failure is counted and reported to
    /// the writers it holds. Returns `e`.
    fn failed_commit(&self, keys: Vec<Vec<u8>>, whole: Vec<Vec<u8>>, v: u64, e: Error) -> Error {
        let mut q = lock(&self.queue);
        q.dirty.extend(keys.into_iter().map(|k| (k, v)));
        q.whole.extend(whole);
        drop(q);
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        self.fail(v, e.clone());
        e
    }

    /// A commit with nothing new to write; but earlier commits' pages may still be unsynced
    /// (the last write of a `none` store taken by a periodic commit just before close), and
    /// a failed device is retried with a sync.
    fn nothing_to_write(&self, d: &mut Disk, v: u64, at: u64, sync: bool) -> Result<(u64, usize)> {
        if sync && d.unsynced {
            if let Err(e) = self.sync("fdatasync of earlier commits") {
                self.fail(v, e.clone());
                return Err(e);
            }
            d.unsynced = false;
        }
        if self.failed().is_some() {
            if let Err(e) = self.sync("retrying fdatasync") {
                self.fail(v, e.clone());
                return Err(e);
            }
        }
        self.succeed(v, at);
        Ok((v, 0))
    }

    /// Plans a commit at `snap`: every leaf holding a key of `keys` (dirty, sorted) or of
    /// `whole` (sorted), imaged whole or as delta entries for its dirty keys. A leaf is
    /// imaged whole when `whole` names it, when the commit holds a FLUSHALL (the empty key:
    /// every page of the old tree must be shadowed), when delta pages are off, when the leaf
    /// cache is `pressed` (past `Deltas::budget_percent`), or when its entries would pass
    /// the leaf's limit.
    fn plan(
        &self,
        snap: &accelkv_tree::Snapshot<'_>,
        d: &Disk,
        keys: &[Vec<u8>],
        whole: &[Vec<u8>],
        pressed: bool,
    ) -> Result<Vec<Planned>> {
        let clear = keys.first().is_some_and(|k| k.is_empty());
        let mut plans = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < keys.len() || j < whole.len() {
            let at = match (keys.get(i), whole.get(j)) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => unreachable!("one of them has a key left"),
            };
            let (p, i2, j2) = snap
                .leaf(at, |leaf| {
                    let end = |ks: &[Vec<u8>], from: usize| {
                        from + ks[from..]
                            .iter()
                            .take_while(|k| leaf.high.is_none_or(|h| k.as_slice() < h))
                            .count()
                    };
                    let (i2, j2) = (end(keys, i), end(whole, j));
                    let dirty = &keys[i..i2];
                    let as_whole = clear || pressed || j2 > j || !self.deltas.on() || {
                        let limit = self.deltas.leaf_limit(leaf.items.len());
                        d.delta.count_in(leaf.low, leaf.high, limit + 1) + dirty.len() > limit
                    };
                    let p = if as_whole {
                        self.image(leaf, &d.ext_of, dirty)
                    } else {
                        let mut p = Core::changes(leaf, dirty);
                        if self.mirror.is_some() {
                            p.covered = d.cover.exactly(leaf.low, leaf.high);
                            p.low = leaf.low.map(<[u8]>::to_vec);
                            p.high = leaf.high.map(<[u8]>::to_vec);
                        }
                        p
                    };
                    (p, i2, j2)
                })
                .map_err(|e| Error::Disk(e.to_string()))?;
            (i, j) = (i2, j2);
            plans.push(p);
        }
        Ok(plans)
    }

    /// The whole image of `leaf`; `dirty` are its keys written since the last commit.
    fn image(
        &self,
        leaf: &accelkv_tree::LeafImage<'_>,
        ext_of: &BTreeMap<Vec<u8>, ExtRef>,
        dirty: &[Vec<u8>],
    ) -> Planned {
        let mut p = Planned {
            whole: true,
            lid: leaf.lid,
            low: leaf.low.map(<[u8]>::to_vec),
            high: leaf.high.map(<[u8]>::to_vec),
            covered: None,
            bytes: Vec::with_capacity(
                leaf.items
                    .iter()
                    .map(|(k, v, ..)| k.len() + v.len().min(self.inline_max + 1))
                    .sum(),
            ),
            items: Vec::with_capacity(leaf.items.len()),
        };
        // The leaf's items, its keys' durable extensions and the dirty keys are all in key
        // order: one walk along the three, no lookup per item.
        let from = leaf.low.map_or(Bound::Unbounded, Bound::Included);
        let mut exts = ext_of.range::<[u8], _>((from, Bound::Unbounded)).peekable();
        let mut dirty = dirty.iter().peekable();
        for (k, val, deadline, flags) in &leaf.items {
            let large = val.len() > self.inline_max;
            let mut durable = None;
            if large {
                while exts.next_if(|(e, _)| e.as_slice() < *k).is_some() {}
                durable = exts.next_if(|(e, _)| e.as_slice() == *k).map(|(_, r)| r);
                while dirty.next_if(|d| d.as_slice() < *k).is_some() {}
            }
            // A large value not written since the last commit keeps its durable extension
            // page: no copy, no write.
            let kept = durable
                .filter(|r| r.len as usize == val.len())
                .filter(|_| dirty.peek().is_none_or(|d| d.as_slice() != *k));
            let key = p.push(k);
            let v = match kept {
                Some(r) => Val::Ext(*r),
                None => Val::Inline(p.push(val)),
            };
            p.items.push((key, v, *deadline, *flags));
        }
        p
    }

    /// The delta entries of `leaf`: each dirty key's value at the snapshot, or a deletion.
    fn changes(leaf: &accelkv_tree::LeafImage<'_>, dirty: &[Vec<u8>]) -> Planned {
        let mut p = Planned {
            whole: false,
            lid: leaf.lid,
            low: None,
            high: None,
            covered: None,
            bytes: Vec::new(),
            items: Vec::with_capacity(dirty.len()),
        };
        let mut items = leaf.items.iter().peekable();
        for k in dirty {
            while items.next_if(|(x, ..)| *x < k.as_slice()).is_some() {}
            let key = p.push(k);
            match items.next_if(|(x, ..)| *x == k.as_slice()) {
                Some((_, v, deadline, flags)) => {
                    let v = Val::Inline(p.push(v));
                    p.items.push((key, v, *deadline, *flags));
                }
                None => p.items.push((key, Val::Deleted, 0, 0)),
            }
        }
        p
    }

    /// The commit's delta entries (plan, item) in key order, cut into pages of at most
    /// [`DELTA_PAGE_BYTES`](crate::delta::DELTA_PAGE_BYTES) (a single larger entry gets a
    /// page of its own).
    fn delta_cuts(&self, plans: &[Planned]) -> Vec<Vec<(usize, usize)>> {
        let mut cuts: Vec<Vec<(usize, usize)>> = Vec::new();
        let mut bytes = usize::MAX;
        // A large value becomes an extension reference when the pages are written.
        let placeholder = PageValue::Ext(ExtRef {
            off: 0,
            len: 0,
            crc: 0,
        });
        for (i, p) in plans.iter().enumerate().filter(|(_, p)| !p.whole) {
            for (j, (k, val, deadline, flags)) in p.items.iter().enumerate() {
                let value = match val {
                    Val::Inline(b) if b.len as usize > DELTA_VALUE_MAX => Some(placeholder),
                    v => v.page(p),
                };
                let n = delta_item_len(&(p.at(*k), value, *deadline, *flags));
                if bytes.saturating_add(n) > crate::delta::DELTA_PAGE_BYTES {
                    cuts.push(Vec::new());
                    bytes = crate::format::HEADER;
                }
                bytes += n;
                cuts.last_mut().expect("pushed above").push((i, j));
            }
        }
        cuts
    }

    /// Takes a free slot of the class for `len` bytes, adding a slab when there is none.
    fn take_slot(&self, d: &mut Disk, len: usize) -> Result<u64> {
        self.take_slot_of(d, len, class_for(len))
    }

    /// Takes a free slot of `class` (for `len` bytes), adding a slab when there is none.
    fn take_slot_of(&self, d: &mut Disk, len: usize, class: u8) -> Result<u64> {
        for off in std::mem::take(&mut *lock(&self.freed_later)) {
            d.slabs.free(off);
        }
        if class > d.slabs.max_class() {
            return Err(Error::Config(format!(
                "a {len}-byte page exceeds the page file's largest slot"
            )));
        }
        if let Some(off) = d.slabs.alloc(class) {
            return Ok(off);
        }
        let desc = d.slabs.next_slab(class);
        let base = d.slabs.base(desc.index);
        // Under the syncing policies the whole slab is written once (zeros after the
        // descriptor): later page writes then overwrite allocated blocks, and their
        // fdatasync has no block allocation to journal (half the latency of writing into a
        // hole on ext4, docs/BENCHMARKS.md). Under `none`, which never syncs, the zeros
        // would only double the bytes written: the descriptor alone. No sync of its own
        // either way: the commit's sync makes the descriptor durable with the pages in the
        // slab, and a commit whose pages are not all durable is not used.
        let fill = if self.policy == SyncPolicy::None {
            BLOCK
        } else {
            d.slabs.slab_bytes()
        };
        let mut slab = vec![0u8; fill as usize];
        slab[..BLOCK as usize].copy_from_slice(&encode_slab(&desc));
        self.write(&slab, base, "writing a slab descriptor")?;
        if fill > BLOCK {
            d.filled.push(base);
        }
        d.slabs.add_slab(desc);
        d.slabs
            .alloc(class)
            .ok_or_else(|| Error::Config("new slab has no slot".into()))
    }

    /// Writes `b` at `off`, counting the bytes; `what` names it in the error.
    fn write(&self, b: &[u8], off: u64, what: &str) -> Result<()> {
        self.storage.write_at(b, off).map_err(|e| disk(what, e))?;
        self.counters
            .bytes
            .fetch_add(b.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// `fdatasync`, counted; `what` names it in the error.
    fn sync(&self, what: &str) -> Result<()> {
        self.storage.sync().map_err(|e| disk(what, e))?;
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the extension pages, then the leaf pages, then the delta pages (`cuts`), then
    /// syncs (with `sync`). Records the slots it takes in `taken` (to free on failure, or to
    /// record on success). One sync is enough: recovery uses the commit only if every leaf
    /// and delta page it wrote and every extension they name is intact, whatever order the
    /// device made them durable in.
    #[allow(clippy::too_many_arguments)]
    fn write_plans(
        &self,
        d: &mut Disk,
        plans: &mut [Planned],
        cuts: &[Vec<(usize, usize)>],
        taken: &mut Taken,
        v: u64,
        tag: CommitTag,
        sync: bool,
    ) -> Result<()> {
        // Extension pages for the large values the plan did not keep.
        for p in plans.iter_mut() {
            for j in 0..p.items.len() {
                let (k, Val::Inline(b), ..) = p.items[j] else {
                    continue;
                };
                // Small enough values stay in the commit's own block: inline in a leaf
                // page, or (up to `DELTA_VALUE_MAX`) in the delta entry, moving to an
                // extension page when their leaf is next imaged whole.
                let max = if p.whole {
                    self.inline_max
                } else {
                    DELTA_VALUE_MAX.max(self.inline_max)
                };
                if b.len as usize <= max {
                    continue;
                }
                let bytes = p.at(b);
                let page = ExtPage {
                    lid: p.lid,
                    version: v,
                    commit: CommitTag { pages: 0, ..tag },
                    key: p.at(k),
                    anchor: if p.whole { p.low.as_deref() } else { None },
                    value: bytes,
                };
                let off = self.take_slot(d, ext_len(&page))?;
                taken.exts.push(off);
                self.write(&encode_ext(&page, off), off, "writing an extension page")?;
                self.counters.ext_pages.fetch_add(1, Ordering::Relaxed);
                let r = ExtRef {
                    off,
                    len: bytes.len() as u32,
                    crc: crc32c::crc32c(bytes),
                };
                p.items[j].1 = Val::NewExt(r);
            }
        }
        for p in plans.iter().filter(|p| p.whole) {
            let page = LeafPage {
                lid: p.lid,
                version: v,
                commit: tag,
                low: p.low.as_deref(),
                high: p.high.as_deref(),
                items: p
                    .items
                    .iter()
                    .filter_map(|(k, val, deadline, flags)| {
                        Some((p.at(*k), val.page(p)?, *deadline, *flags))
                    })
                    .collect(),
            };
            let off = self.take_slot(d, leaf_len(&page))?;
            let bytes = encode_leaf(&page, off);
            taken.leaves.push((off, bytes.len() as u32));
            self.write(&bytes, off, "writing a leaf page")?;
            self.counters.leaf_pages.fetch_add(1, Ordering::Relaxed);
        }
        self.write_deltas(d, plans, cuts, taken, v, tag)?;
        if sync {
            self.sync("fdatasync of a commit")?;
            // A slab's zeros went to the cache as large folios; once synced they are
            // dropped, so that the slab's page writes dirty only their own pages (issue
            // 57: writeback sent whole folios, 11× the bytes written, docs/BENCHMARKS.md).
            for base in d.filled.drain(..) {
                self.storage.drop_cached(base, d.slabs.slab_bytes());
            }
        }
        d.unsynced = !sync;
        Ok(())
    }

    /// Writes the delta pages, one per cut of the plans' delta entries.
    fn write_deltas(
        &self,
        d: &mut Disk,
        plans: &[Planned],
        cuts: &[Vec<(usize, usize)>],
        taken: &mut Taken,
        v: u64,
        tag: CommitTag,
    ) -> Result<()> {
        for cut in cuts {
            let page = DeltaPage {
                version: v,
                commit: tag,
                items: cut
                    .iter()
                    .map(|&(i, j)| {
                        let p = &plans[i];
                        let (k, val, deadline, flags) = &p.items[j];
                        (p.at(*k), val.page(p), *deadline, *flags)
                    })
                    .collect(),
            };
            // In a slot that never straddles a device page: under `sync` a commit's delta
            // page is often all it writes before its fdatasync, and a 2,560-byte slot
            // straddles two device pages half the time.
            let class = aligned_class_for(delta_len(&page));
            let off = self.take_slot_of(d, delta_len(&page), class)?;
            taken.deltas.push(off);
            let bytes = encode_delta_in(&page, off, class);
            taken.delta_lens.push(bytes.len() as u32);
            self.write(&bytes, off, "writing a delta page")?;
            self.counters.delta_pages.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Records durable pages: the cover, extension references, freed slots.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        tree: &Tree,
        d: &mut Disk,
        dirty: &[Vec<u8>],
        plans: Vec<Planned>,
        cuts: &[Vec<(usize, usize)>],
        taken: Taken,
        v: u64,
    ) {
        let mut freed = Vec::new();
        // Extension references the new pages add and the freed pages drop: a leaf imaged
        // again names mostly the same extensions, so the two lists mostly cancel (below).
        let (mut named, mut unnamed) = (Vec::new(), Vec::new());
        // Delta pages left with no entry (superseded by newer entries or whole images).
        let mut slots = Vec::new();
        Core::apply_deltas(
            d,
            &plans,
            cuts,
            &taken.deltas,
            &mut named,
            &mut unnamed,
            &mut slots,
        );
        let mut images = self.mirror.as_ref().map(|m| lock(&m.images));
        let whole = plans.iter().filter(|p| p.whole);
        for (p, &(off, len)) in whole.zip(&taken.leaves) {
            d.delta.drop_range(
                p.low.as_deref(),
                p.high.as_deref(),
                &mut unnamed,
                &mut slots,
            );
            if let Some(i) = images.as_mut() {
                let (low, high) = (fence(p.low.as_deref()), fence(p.high.as_deref()));
                i.record(p.lid, off, len, v, low, high);
            }
            let mut exts = Vec::new();
            for (k, val, ..) in &p.items {
                if let Some(r) = val.ext() {
                    exts.push(r.off);
                }
                if let Val::NewExt(r) = val {
                    d.ext_of.insert(p.at(*k).to_vec(), *r);
                }
            }
            // Keys written since the last commit whose value is no longer an extension
            // (inline now, or deleted) lose their entry; every other key kept its extension
            // (the plan reuses only what `ext_of` names) or got a new one (above).
            let from =
                dirty.partition_point(|k| p.low.as_deref().is_some_and(|l| k.as_slice() < l));
            for k in dirty[from..]
                .iter()
                .take_while(|k| p.high.as_deref().is_none_or(|h| k.as_slice() < h))
            {
                let now_ext = p
                    .items
                    .binary_search_by(|(x, ..)| p.at(*x).cmp(k))
                    .is_ok_and(|i| p.items[i].1.ext().is_some());
                if !now_ext {
                    d.ext_of.remove(k);
                }
            }
            d.meta.insert(
                off,
                IndexedLeaf {
                    off,
                    len,
                    version: v,
                    commit: taken.tag,
                    items: p.items.len() as u32,
                    expiring: p.items.iter().filter(|i| i.2 != 0).count() as u32,
                    has_ext: !exts.is_empty(),
                    low: p.low.clone(),
                    high: p.high.clone(),
                },
            );
            named.extend_from_slice(&exts);
            d.leaf_bytes += d.slabs.slot_bytes_at(off);
            d.pages.insert(off, exts);
            freed.extend(d.cover.insert(p.low.as_deref(), p.high.as_deref(), off));
        }
        let mut gone = Vec::new();
        for page in freed {
            // Before the entries change: a gone image keeps those that completed it.
            if let Some(lid) = images.as_mut().and_then(|i| i.forget(page)) {
                gone.push((lid, page));
            }
            slots.push(page);
            if let Some(exts) = d.pages.remove(&page) {
                d.leaf_bytes -= d.slabs.slot_bytes_at(page);
                unnamed.extend(exts);
            }
        }
        if let Some(i) = images.as_mut() {
            Core::complete_images(i, &plans, cuts, &taken, v);
        }
        drop(images);
        Core::count_refs(d, named, unnamed, &mut slots);
        for (cut, (&off, &len)) in cuts.iter().zip(taken.deltas.iter().zip(&taken.delta_lens)) {
            let has_ext = cut
                .iter()
                .any(|&(i, j)| plans[i].items[j].1.ext().is_some());
            let commit = taken.tag;
            let delta = IndexedDelta {
                off,
                len,
                version: v,
                commit,
                has_ext,
            };
            d.dmeta.insert(off, delta);
        }
        for off in &slots {
            d.meta.remove(off);
            d.dmeta.remove(off);
        }
        if let Some(m) = &self.mirror {
            // A reader of an evicted leaf of an older state may still read these.
            tree.raw().retire(Box::new(DeferredFree {
                to: self.freed_later.clone(),
                offs: slots,
                images: m.clone(),
                gone,
            }));
        } else {
            for off in slots {
                d.slabs.free(off);
            }
        }
    }

    /// The leaf cache's side of a commit (images.rs), once its freed pages are forgotten:
    /// whole images supersede the entries in their ranges, the commit's entries become
    /// their keys' newest, and a leaf whose changes all went to entries completing its
    /// recorded image may be evicted at `v`.
    fn complete_images(
        i: &mut crate::images::Images,
        plans: &[Planned],
        cuts: &[Vec<(usize, usize)>],
        taken: &Taken,
        v: u64,
    ) {
        for p in plans.iter().filter(|p| p.whole) {
            i.imaged_whole(p.low.as_deref(), p.high.as_deref());
        }
        for ((cut, &page), &len) in cuts.iter().zip(&taken.deltas).zip(&taken.delta_lens) {
            for &(pi, j) in cut {
                let p = &plans[pi];
                i.delta_written(p.at(p.items[j].0), DeltaAt { page, len });
            }
        }
        for p in plans.iter().filter(|p| !p.whole) {
            if let Some(page) = p.covered {
                i.completed(p.lid, page, v, p.low.as_deref(), p.high.as_deref());
            }
        }
    }

    /// Records the commit's delta pages (`offs`, one per cut) in the delta book and the
    /// keys' extensions: references the entries add go onto `named`, those of the entries
    /// they supersede onto `unnamed`, pages left with no entry onto `slots`.
    #[allow(clippy::too_many_arguments)]
    fn apply_deltas(
        d: &mut Disk,
        plans: &[Planned],
        cuts: &[Vec<(usize, usize)>],
        offs: &[u64],
        named: &mut Vec<u64>,
        unnamed: &mut Vec<u64>,
        slots: &mut Vec<u64>,
    ) {
        for (cut, &off) in cuts.iter().zip(offs) {
            let mut entries = Vec::with_capacity(cut.len());
            for &(i, j) in cut {
                let p = &plans[i];
                let (k, val, ..) = &p.items[j];
                let k = p.at(*k).to_vec();
                // A delta entry's large value is always a new extension page.
                match val {
                    Val::NewExt(r) => d.ext_of.insert(k.clone(), *r),
                    _ => d.ext_of.remove(&k),
                };
                entries.push((k, val.ext().map(|r| r.off)));
            }
            let slot = d.slabs.slot_bytes_at(off);
            d.delta.add_page(off, slot, entries, named, unnamed, slots);
        }
    }

    /// Adds one reference to each extension in `named` and drops one from each in
    /// `unnamed` (a multiset each), pushing onto `slots` the extensions left with none.
    /// Both are sorted and walked together, so a reference that moves from a freed page to
    /// its new image touches no counter: a commit that images a leaf of 140 extension
    /// values again costs a sort, not 280 probes of a large hash table.
    fn count_refs(d: &mut Disk, mut named: Vec<u64>, mut unnamed: Vec<u64>, slots: &mut Vec<u64>) {
        named.sort_unstable();
        unnamed.sort_unstable();
        let (mut a, mut b) = (named.iter().peekable(), unnamed.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x == y => {
                    a.next();
                    b.next();
                }
                (Some(&&x), y) if y.is_none_or(|&&y| x < y) => {
                    a.next();
                    let n = d.ext_refs.entry(x).or_insert(0);
                    *n += 1;
                    if *n == 1 {
                        d.ext_bytes += d.slabs.slot_bytes_at(x);
                    }
                }
                (_, Some(&&y)) => {
                    b.next();
                    if let Some(n) = d.ext_refs.get_mut(&y) {
                        *n -= 1;
                        if *n == 0 {
                            d.ext_refs.remove(&y);
                            d.ext_bytes -= d.slabs.slot_bytes_at(y);
                            slots.push(y);
                        }
                    }
                }
                (_, None) => return,
            }
        }
    }

    /// Marks `v` durable, with every write released before `at` (ns after `epoch`), and
    /// answers the writers whose wait is over.
    fn succeed(&self, v: u64, at: u64) {
        let mut s = lock(&self.status);
        s.durable = s.durable.max(v);
        s.failed = None;
        self.durable_at.fetch_max(at, Ordering::AcqRel);
        let all = std::mem::take(&mut s.callbacks);
        let mut ready = Vec::new();
        for (version, since, cb) in all {
            match self.settled(&s, version) {
                Some(_) => ready.push((since, cb)),
                None => s.callbacks.push((version, since, cb)),
            }
        }
        drop(s);
        self.done.notify_all();
        for (since, cb) in ready {
            self.stalled(since);
            cb(Ok(()));
        }
    }

    fn fail(&self, v: u64, e: Error) {
        let mut s = lock(&self.status);
        s.failed = Some(e.clone());
        // Under a relaxed policy every waiting writer learns of the failure (new writes are
        // refused while it lasts); under `sync`, those whose version the commit held.
        let relaxed = self.policy != SyncPolicy::Sync;
        let (hit, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut s.callbacks)
            .into_iter()
            .partition(|c| relaxed || c.0 <= v);
        s.callbacks = wait;
        drop(s);
        self.done.notify_all();
        for (_, _, cb) in hit {
            cb(Err(e.clone()));
        }
    }
}

/// Slots a commit took.
#[derive(Default)]
struct Taken {
    exts: Vec<u64>,
    /// Delta pages, one per cut, and their lengths.
    deltas: Vec<u64>,
    delta_lens: Vec<u32>,
    /// The commit's tag.
    tag: CommitTag,
    /// Leaf pages: offset and length.
    leaves: Vec<(u64, u32)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sorted walk gives the counts (and frees the slots) that adding every reference
    /// and then dropping every one would.
    #[test]
    fn counting_references_matches_adding_then_dropping() {
        let mut seed = 7u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..300 {
            let mut d = Disk::empty(crate::format::MIN_SLAB);
            for e in 0..12 {
                let n = next(3) as usize;
                if n > 0 {
                    d.ext_refs.insert(e, n);
                }
            }
            let named: Vec<u64> = (0..next(20)).map(|_| next(12)).collect();
            // Dropped references are ones older pages hold: a commit frees only pages
            // written before it (its own leaves' ranges are disjoint).
            let mut have: Vec<u64> = d
                .ext_refs
                .iter()
                .flat_map(|(&e, &n)| std::iter::repeat_n(e, n))
                .collect();
            let unnamed: Vec<u64> = (0..next(20).min(have.len() as u64))
                .map(|_| have.swap_remove(next(have.len() as u64) as usize))
                .collect();
            let mut want = d.ext_refs.clone();
            let mut want_freed = Vec::new();
            for e in &named {
                *want.entry(*e).or_insert(0) += 1;
            }
            for e in &unnamed {
                let n = want.get_mut(e).unwrap();
                *n -= 1;
                if *n == 0 {
                    want.remove(e);
                    want_freed.push(*e);
                }
            }
            let mut freed = Vec::new();
            Core::count_refs(&mut d, named, unnamed, &mut freed);
            want_freed.sort_unstable();
            freed.sort_unstable();
            assert_eq!(d.ext_refs, want);
            assert_eq!(freed, want_freed);
        }
    }
}
