//! Group commit (Retina §4.3 without a log): the tree tells the dirty-key observer about
//! every write before releasing it; the committer takes a snapshot at read version `V`,
//! takes every dirty key with a version <= `V`, images each leaf that holds one of them at
//! `V`, writes new extension pages, syncs, writes the leaf pages out of place, syncs, and
//! only then marks `V` durable, answers the writers waiting on it, and frees the slots of
//! pages the new ones shadow everywhere (cover.rs).
//!
//! Thread safety: one committer thread; writers only push to the dirty queue and wait on
//! the status. `disk` (cover, slabs, extension map) is locked for a whole commit, so commits
//! never interleave and versions reach the cover in order.
//!
//! Invariants:
//! 1. Every write with version <= `V` is in the queue when the committer reads `V` (the
//!    observer runs before the write's release; the queue mutex orders the two).
//! 2. A slot is reused only after the pages that shadow its page are durable.
//! 3. An extension page is durable before the first leaf page that names it.
//! 4. A failed commit changes nothing in `disk` but the slots it took, which go back to
//!    the free lists; its keys go back to the queue.
//! 5. Locks are taken in the order disk → queue → status, and never more than two at once.

use crate::cover::Cover;
use crate::error::{disk, Error, Result};
use crate::format::{
    class_for, encode_ext, encode_leaf, encode_slab, ext_len, leaf_len, ExtPage, ExtRef, LeafPage,
    PageValue, BLOCK,
};
use crate::io::Storage;
use crate::slab::Slabs;
use accelkv_tree::Store as Tree;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// When writes are acknowledged relative to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// A write is acknowledged after the pages it changed are durable (`fdatasync`); many
    /// writes share one sync (group commit). The default with a data directory.
    Sync,
    /// Pages are written and synced every interval; writes are acknowledged before they are
    /// durable, so a crash loses at most about one interval of acknowledged writes.
    Interval(Duration),
    /// Pages are written every millisecond but never synced (except by `flush` and on
    /// close); writes are acknowledged at once. A process crash (`kill -9`) loses the last
    /// millisecond or so (what was written is in the page cache); a power loss or kernel
    /// crash may lose or tear anything written since the last sync.
    None,
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

#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) dirty: Vec<(Vec<u8>, u64)>,
    pub(crate) poke: bool,
    pub(crate) shutdown: bool,
}

#[derive(Default)]
pub(crate) struct Status {
    pub(crate) durable: u64,
    pub(crate) failed: Option<Error>,
    pub(crate) callbacks: Vec<(u64, Callback)>,
}

/// What is on the device: kept by the committer, rebuilt by recovery.
pub(crate) struct Disk {
    pub(crate) slabs: Slabs,
    pub(crate) cover: Cover,
    /// Live leaf page → the extension pages it names.
    pub(crate) pages: HashMap<u64, Vec<u64>>,
    /// Live extension page → number of live leaf pages naming it.
    pub(crate) ext_refs: HashMap<u64, usize>,
    /// Key → its value's extension page, for keys whose newest durable value is one.
    pub(crate) ext_of: BTreeMap<Vec<u8>, ExtRef>,
}

/// Counters of what the committer did.
#[derive(Default)]
pub struct Counters {
    /// Commits that wrote pages.
    pub commits: AtomicU64,
    /// Leaf pages written.
    pub leaf_pages: AtomicU64,
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
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tree's write observer: records dirty keys.
pub(crate) struct DirtyObserver(pub(crate) Arc<Core>);

impl accelkv_tree::WriteObserver for DirtyObserver {
    fn on_write(&self, key: &[u8], _value: Option<&[u8]>, version: u64) {
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

/// A leaf image planned for writing.
struct Planned {
    lid: u64,
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
    items: Vec<(Vec<u8>, Val)>,
}

enum Val {
    Inline(Vec<u8>),
    /// The key's durable extension, kept.
    Ext(ExtRef),
    /// An extension page written by this commit.
    NewExt(ExtRef),
}

impl Val {
    fn ext(&self) -> Option<ExtRef> {
        match self {
            Val::Ext(r) | Val::NewExt(r) => Some(*r),
            Val::Inline(_) => None,
        }
    }
}

impl Core {
    pub(crate) fn failed(&self) -> Option<Error> {
        lock(&self.status).failed.clone()
    }

    /// The outcome for a writer of `version`, if there is one yet: at once under policies
    /// other than `sync` (the failure, if the device is failing), `Ok` once the version is
    /// durable, the error while the device fails.
    fn settled(&self, s: &Status, version: u64) -> Option<Result<()>> {
        if self.policy != SyncPolicy::Sync {
            return Some(s.failed.clone().map_or(Ok(()), Err));
        }
        if s.durable >= version {
            return Some(Ok(()));
        }
        s.failed.clone().map(Err)
    }

    /// Blocks until `version` is durable (policy `Sync`) or its commit failed.
    pub(crate) fn wait(&self, version: u64) -> Result<()> {
        if let Some(r) = self.settled(&lock(&self.status), version) {
            return r;
        }
        // Lock order: queue before status (never the other way).
        self.poke();
        let mut s = lock(&self.status);
        loop {
            if let Some(r) = self.settled(&s, version) {
                return r;
            }
            s = self.done.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Calls `cb` once `version` is durable (at once under other policies).
    pub(crate) fn on_durable(&self, version: u64, cb: Callback) {
        let mut s = lock(&self.status);
        if let Some(r) = self.settled(&s, version) {
            drop(s);
            return cb(r);
        }
        s.callbacks.push((version, cb));
        drop(s);
        self.poke();
    }

    fn poke(&self) {
        lock(&self.queue).poke = true;
        self.wake.notify_one();
    }

    /// The committer thread's loop.
    pub(crate) fn run(self: &Arc<Core>, tree: &Tree) {
        // After a commit that found only unreleased writes, wait a little for their release
        // instead of spinning on them.
        let mut starved = false;
        loop {
            let failed = self.failed().is_some();
            let mut q = lock(&self.queue);
            let period = match self.policy {
                SyncPolicy::Interval(d) => Some(d),
                SyncPolicy::None => Some(NONE_PERIOD),
                SyncPolicy::Sync if failed => Some(Duration::from_millis(100)),
                SyncPolicy::Sync if starved => Some(Duration::from_micros(50)),
                SyncPolicy::Sync => None,
            };
            match period {
                Some(d) => {
                    if !q.shutdown {
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
                let _ = self.commit(tree, true);
                return;
            }
            let sync = self.policy != SyncPolicy::None;
            starved = matches!(self.commit(tree, sync), Ok((_, 0)))
                && !lock(&self.queue).dirty.is_empty();
        }
    }

    /// One group commit at the current read version; `sync` = with `fdatasync` barriers.
    /// Returns the version now durable (written, under `none`) and the keys it persisted.
    pub(crate) fn commit(&self, tree: &Tree, sync: bool) -> Result<(u64, usize)> {
        let mut d = lock(&self.disk);
        let snap = tree.snapshot();
        let v = snap.version();
        let mine = {
            let mut q = lock(&self.queue);
            let all = std::mem::take(&mut q.dirty);
            let (mine, later): (Vec<_>, Vec<_>) = all.into_iter().partition(|e| e.1 <= v);
            q.dirty = later;
            mine
        };
        if mine.is_empty() {
            // Nothing to write; a failed device is retried with a sync.
            if self.failed().is_some() {
                if let Err(e) = self.sync("retrying fdatasync") {
                    self.fail(v, e.clone());
                    return Err(e);
                }
            }
            self.succeed(v);
            return Ok((v, 0));
        }
        let mut keys: Vec<Vec<u8>> = mine.into_iter().map(|e| e.0).collect();
        keys.sort_unstable();
        keys.dedup();
        // Plan: image every leaf holding a dirty key, at `v`.
        let mut plans: Vec<Planned> = Vec::new();
        let mut i = 0;
        while i < keys.len() {
            let ext_of = &d.ext_of;
            let p = snap.leaf(&keys[i], |leaf| Planned {
                lid: leaf.lid,
                low: leaf.low.map(<[u8]>::to_vec),
                high: leaf.high.map(<[u8]>::to_vec),
                items: leaf
                    .items
                    .iter()
                    .map(|(k, val)| {
                        // A large value not written since the last commit keeps its durable
                        // extension page: no copy, no write.
                        let kept = (val.len() > self.inline_max)
                            .then(|| ext_of.get(*k))
                            .flatten()
                            .filter(|r| r.len as usize == val.len())
                            .filter(|_| keys.binary_search_by(|x| x.as_slice().cmp(k)).is_err());
                        let v = match kept {
                            Some(r) => Val::Ext(*r),
                            None => Val::Inline(val.to_vec()),
                        };
                        (k.to_vec(), v)
                    })
                    .collect(),
            });
            i += 1;
            while i < keys.len() && p.high.as_deref().is_none_or(|h| keys[i].as_slice() < h) {
                i += 1;
            }
            plans.push(p);
        }
        drop(snap);
        let mut taken = Taken::default();
        match self.write_plans(&mut d, &mut plans, &mut taken, v, sync) {
            Ok(()) => {
                self.apply(&mut d, &keys, plans, taken);
                self.counters.commits.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .keys
                    .fetch_add(keys.len() as u64, Ordering::Relaxed);
                drop(d);
                self.succeed(v);
                Ok((v, keys.len()))
            }
            Err(e) => {
                for off in taken.exts.into_iter().chain(taken.leaves) {
                    d.slabs.free(off);
                }
                drop(d);
                // Back to the queue, at `v`: the next commit's snapshot is at least that new.
                let mut q = lock(&self.queue);
                q.dirty.extend(keys.into_iter().map(|k| (k, v)));
                drop(q);
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                self.fail(v, e.clone());
                Err(e)
            }
        }
    }

    /// Takes a free slot of the class for `len` bytes, adding a slab (descriptor written and
    /// synced first) when there is none.
    fn take_slot(&self, d: &mut Disk, len: usize) -> Result<u64> {
        let class = class_for(len);
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
        // The whole slab is written once (zeros after the descriptor): later page writes
        // then overwrite allocated blocks, and their fdatasync has no block allocation to
        // journal (half the latency of writing into a hole on ext4, docs/BENCHMARKS.md).
        let mut slab = vec![0u8; d.slabs.slab_bytes() as usize];
        slab[..BLOCK as usize].copy_from_slice(&encode_slab(&desc));
        self.write(&slab, base, "writing a slab descriptor")?;
        self.sync("fdatasync after a slab descriptor")?;
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

    /// Writes the extension pages, syncs, writes the leaf pages, syncs. Records the slots it
    /// takes in `taken` (to free on failure, or to record on success).
    fn write_plans(
        &self,
        d: &mut Disk,
        plans: &mut [Planned],
        taken: &mut Taken,
        v: u64,
        sync: bool,
    ) -> Result<()> {
        // Extension pages for the large values the plan did not keep.
        for p in plans.iter_mut() {
            for (k, val) in p.items.iter_mut() {
                let Val::Inline(bytes) = val else { continue };
                if bytes.len() <= self.inline_max {
                    continue;
                }
                let page = ExtPage {
                    lid: p.lid,
                    version: v,
                    key: k,
                    anchor: p.low.as_deref(),
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
                *val = Val::NewExt(r);
            }
        }
        if sync && !taken.exts.is_empty() {
            self.sync("fdatasync of extension pages")?;
        }
        for p in plans.iter() {
            let page = LeafPage {
                lid: p.lid,
                version: v,
                low: p.low.as_deref(),
                high: p.high.as_deref(),
                items: p
                    .items
                    .iter()
                    .map(|(k, val)| {
                        (
                            k.as_slice(),
                            match val {
                                Val::Inline(b) => PageValue::Inline(b),
                                Val::Ext(r) | Val::NewExt(r) => PageValue::Ext(*r),
                            },
                        )
                    })
                    .collect(),
            };
            let off = self.take_slot(d, leaf_len(&page))?;
            taken.leaves.push(off);
            self.write(&encode_leaf(&page, off), off, "writing a leaf page")?;
            self.counters.leaf_pages.fetch_add(1, Ordering::Relaxed);
        }
        if sync {
            self.sync("fdatasync of leaf pages")?;
        }
        Ok(())
    }

    /// Records durable pages: the cover, extension references, freed slots.
    fn apply(&self, d: &mut Disk, dirty: &[Vec<u8>], plans: Vec<Planned>, taken: Taken) {
        let mut freed = Vec::new();
        for (p, off) in plans.into_iter().zip(taken.leaves) {
            let mut exts = Vec::new();
            for (k, val) in &p.items {
                if let Some(r) = val.ext() {
                    *d.ext_refs.entry(r.off).or_insert(0) += 1;
                    exts.push(r.off);
                }
                if let Val::NewExt(r) = val {
                    d.ext_of.insert(k.clone(), *r);
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
                    .binary_search_by(|(x, _)| x.cmp(k))
                    .is_ok_and(|i| p.items[i].1.ext().is_some());
                if !now_ext {
                    d.ext_of.remove(k);
                }
            }
            d.pages.insert(off, exts);
            freed.extend(d.cover.insert(p.low.as_deref(), p.high.as_deref(), off));
        }
        for page in freed {
            d.slabs.free(page);
            for e in d.pages.remove(&page).unwrap_or_default() {
                if let Some(n) = d.ext_refs.get_mut(&e) {
                    *n -= 1;
                    if *n == 0 {
                        d.ext_refs.remove(&e);
                        d.slabs.free(e);
                    }
                }
            }
        }
    }

    fn succeed(&self, v: u64) {
        let mut s = lock(&self.status);
        s.durable = s.durable.max(v);
        s.failed = None;
        let durable = s.durable;
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut s.callbacks)
            .into_iter()
            .partition(|c| c.0 <= durable);
        s.callbacks = wait;
        drop(s);
        self.done.notify_all();
        for (_, cb) in ready {
            cb(Ok(()));
        }
    }

    fn fail(&self, v: u64, e: Error) {
        let mut s = lock(&self.status);
        s.failed = Some(e.clone());
        let (hit, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut s.callbacks)
            .into_iter()
            .partition(|c| c.0 <= v);
        s.callbacks = wait;
        drop(s);
        self.done.notify_all();
        for (_, cb) in hit {
            cb(Err(e.clone()));
        }
    }
}

/// Slots a commit took.
#[derive(Default)]
struct Taken {
    exts: Vec<u64>,
    leaves: Vec<u64>,
}
