//! The durability side of the mirror cache (Retina §3.4, issue 18): what the committer, the
//! pager (pager.rs) and the evictor thread share, and the evictor, which keeps the store
//! under its memory budget (`Config::memory_limit` with `Config::evict`).
//!
//! A leaf may be evicted once a commit persisted its newest state: as a whole image, or as
//! delta entries completing its last image (images.rs). The committer records, for every
//! leaf page it writes, (LID → page, version), raises the version when it writes the leaf's
//! changes as delta entries, and forgets a page when it frees it. The evictor asks the tree
//! for victims (S3-FIFO, `accelkv_tree` mirror.rs) and names the page of each; a leaf with
//! writes newer than its last commit is passed over until the next commit persists them, so
//! eviction never writes anything itself and the no-WAL argument is unchanged: an evicted
//! leaf's page is a live page of the cover and its entries live entries of delta pages, and
//! they stay live because nothing can change the leaf without reading it back first.
//!
//! Lock order: the committer's `disk` before `images`; the evictor takes the tree's SMO
//! latch, then `images`. Nothing takes the latch after `images`.

use crate::commit::Core;
use crate::images::Images;
use accelkv_tree::Store as Tree;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the tree's pager, the committer and the evictor share.
pub(crate) struct Shared {
    pub(crate) images: Mutex<Images>,
    poked: Mutex<bool>,
    wake: Condvar,
    stop: AtomicBool,
    /// Leaves the evictor had imaged by a commit because no page held their newest state,
    /// or because a load read delta pages for them.
    pub(crate) write_backs: std::sync::atomic::AtomicU64,
    /// Keys of leaves whose load read delta pages: the evictor has them imaged whole.
    compact: Mutex<Vec<Vec<u8>>>,
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            images: Mutex::new(Images::default()),
            poked: Mutex::new(false),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            write_backs: std::sync::atomic::AtomicU64::new(0),
            compact: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn poke(&self) {
        *lock(&self.poked) = true;
        self.wake.notify_one();
    }

    /// A load read delta pages for the leaf holding `key`: have it imaged whole.
    pub(crate) fn compact(&self, key: Vec<u8>) {
        lock(&self.compact).push(key);
    }

    /// Stops the evictor thread.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.poke();
    }
}

/// The evictor thread: every 10 ms, or at once when told the store is over its budget,
/// evicts down to 95% of the budget; leaves whose newest state is not imaged yet are queued
/// for the next commit (write-back), which it asks for at once.
pub(crate) fn run_evictor(tree: Arc<Tree>, core: Arc<Core>, shared: Arc<Shared>) {
    let budget = tree.config().memory_limit;
    let target = budget / 20 * 19;
    while !shared.stop.load(Ordering::SeqCst) {
        {
            let mut p = lock(&shared.poked);
            if !*p {
                p = shared
                    .wake
                    .wait_timeout(p, Duration::from_millis(10))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *p = false;
        }
        // Leaves whose loads read delta pages are imaged whole while the cache is pressed
        // (when commits image whole anyway, `Deltas::budget_percent`).
        let compact = std::mem::take(&mut *lock(&shared.compact));
        let pressed = core.deltas.pressed(tree.resident_bytes(), budget);
        if !compact.is_empty() && pressed {
            shared
                .write_backs
                .fetch_add(compact.len() as u64, Ordering::Relaxed);
            lock(&core.queue).whole.extend(compact);
        }
        if !tree.over_budget() {
            // Under the budget: only the queues take in the leaves that arrived.
            tree.evict(usize::MAX, &mut |_, _, _| None);
            continue;
        }
        let mut write_back: Vec<Vec<u8>> = Vec::new();
        // A leaf with writes no commit has taken yet waits for the next one, which writes
        // them (as entries or whole); only a leaf whose committed state no page and entries
        // hold is asked to be imaged whole.
        let durable = core.durable_version();
        tree.evict(target, &mut |lid, version, first| {
            let page = lock(&shared.images).page_of(lid, version);
            if let (None, Some(k), true) = (page, first, version <= durable) {
                write_back.push(k.to_vec());
            }
            page
        });
        if !write_back.is_empty() {
            // Leaves whose newest state no page and entries persist (a split left a half
            // that no write has touched since, or the leaf's range changed since its last
            // image): the next commit images them whole, through a key each.
            shared
                .write_backs
                .fetch_add(write_back.len() as u64, Ordering::Relaxed);
            lock(&core.queue).whole.extend(write_back);
        }
        if tree.over_budget() {
            core.poke();
        }
    }
}
