//! The two global version clocks of MVCC (Honeycomb §3.2).
//!
//! A writer takes its write version with a fetch-and-add on the global write version, makes
//! its change visible in node memory, and then *completes* it: it marks the version done in a
//! ring of completion slots and advances the global read version past every version that is
//! done and contiguous with it, in one step. Whoever completes the oldest missing version moves
//! the read version past everything completed after it, so a writer never waits for another writer
//! to be released: a writer the OS descheduled between taking and completing its version
//! holds back only the *visibility* of later writes, never their writers. Readers take the
//! global read version and ignore anything newer, so a reader at `rv` sees exactly the
//! writes with versions <= `rv`.
//!
//! Because the read version jumps over a whole run of done versions at once, a writer that
//! takes a *barrier* version first, completes a group of later versions, and completes the
//! barrier last makes the group visible at one instant (an atomic batch, `Tree::write_batch`).
//!
//! The blocking `Store` API completes, then waits until visible
//! ([`Versions::wait_visible`]); a caller that has other work (a server loop) completes and
//! answers once [`Versions::is_visible`] says so.
//!
//! A durable store *leases* versions (durable/, "Versions after a crash"): the read version
//! never passes the lease's limit ([`Versions::lease`]), so no reader, client or commit
//! ever sees a version the device has not promised never to issue again. Writers take
//! versions past the limit and complete them as usual; they become visible when the lease
//! is raised.
//!
//! Thread safety: lock-free. Only `begin_write` can wait, and only when `RING` versions are
//! taken and not yet visible (bounded memory for the ring).
//!
//! Invariants:
//! 1. The read version only grows, and moves from `r` to `e` only when every version in
//!    `r + 1 ..= e` was completed (one compare-and-swap, so a reader sees all of such a run
//!    or none of it).
//! 2. Slot `v % RING` holds `v` only after `v` completed; it is not reused until the read
//!    version has reached `v` (version `v + RING` is taken only once `read >= v`).
//! 3. A writer holding an uncompleted version never waits for a lock or for another writer's
//!    structural change, so every taken version is completed eventually.

use crate::backoff::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};

/// Completion slots: versions taken and not yet visible at any time.
pub(crate) const RING: u64 = 1 << 18;

/// Global write and read versions.
pub struct Versions {
    write: AtomicU64,
    read: AtomicU64,
    done: Box<[AtomicU64]>,
    /// The read version stops here until the lease is raised (`u64::MAX`: no lease).
    limit: AtomicU64,
}

impl Versions {
    /// Clocks starting at `v` (everything up to `v` is released).
    pub fn new(v: u64) -> Versions {
        Versions {
            write: AtomicU64::new(v),
            read: AtomicU64::new(v),
            // u64::MAX is never a version, so no slot starts out looking done.
            done: (0..RING).map(|_| AtomicU64::new(u64::MAX)).collect(),
            limit: AtomicU64::new(u64::MAX),
        }
    }

    /// Takes the next write version (waiting, in the rare case that `RING` versions are
    /// taken and not yet visible, until the oldest becomes visible; invariant 2).
    pub fn begin_write(&self) -> u64 {
        let wv = self.write.fetch_add(1, Ordering::AcqRel) + 1;
        let mut backoff = Backoff::new();
        // Slot `wv % RING` last held `wv - RING`, which nobody looks for once the read
        // version has reached it.
        while wv - self.read.load(Ordering::SeqCst) > RING {
            backoff.snooze();
        }
        wv
    }

    /// The last write version handed out.
    pub fn last_write(&self) -> u64 {
        self.write.load(Ordering::Acquire)
    }

    /// Marks `wv` done and advances the read version past every done version that follows
    /// it without a gap. Never waits.
    pub fn complete(&self, wv: u64) {
        self.done[(wv % RING) as usize].store(wv, Ordering::SeqCst);
        self.advance();
    }

    /// Moves the read version past every done version that follows it without a gap, up to
    /// the lease's limit. The mark (or the limit) stored before and the loads here are
    /// SeqCst, so of two threads completing neighbouring versions at once (or one raising
    /// the limit), at least one sees the other's store: the read version is never left
    /// behind a done version it may reach (Dekker's argument).
    fn advance(&self) {
        loop {
            let r = self.read.load(Ordering::SeqCst);
            let limit = self.limit.load(Ordering::SeqCst);
            let mut e = r;
            while e - r < RING && e < limit && self.is_done(e + 1) {
                e += 1;
            }
            if e == r {
                return;
            }
            // Losing the race means someone else moved it; look again either way.
            let _ = self
                .read
                .compare_exchange(r, e, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// Whether `v` was completed (only meaningful for `v` within `RING` of the read version).
    #[inline]
    fn is_done(&self, v: u64) -> bool {
        self.done[(v % RING) as usize].load(Ordering::SeqCst) == v
    }

    /// Waits until every version in `from ..= to` is completed (a batch holding a barrier
    /// below `from` waits for the writers whose versions fell among its own; none of them
    /// waits for anything while it holds its version, invariant 3).
    pub fn wait_done(&self, from: u64, to: u64) {
        for v in from..=to {
            let mut backoff = Backoff::new();
            while !self.is_done(v) && !self.is_visible(v) {
                backoff.snooze();
            }
        }
    }

    /// Whether every version up to `wv` is visible to readers.
    #[inline]
    pub fn is_visible(&self, wv: u64) -> bool {
        self.read.load(Ordering::SeqCst) >= wv
    }

    /// Waits until `wv` is visible (`Store::wait_visible` is the store's, which also asks
    /// for the lease to be raised).
    #[cfg(test)]
    pub fn wait_visible(&self, wv: u64) {
        let mut backoff = Backoff::new();
        while !self.is_visible(wv) {
            backoff.snooze();
        }
    }

    /// Moves both clocks forward to `v` (recovery, before any write): no effect when they
    /// are already past it.
    pub fn advance_to(&self, v: u64) {
        self.write.fetch_max(v, Ordering::AcqRel);
        self.read.fetch_max(v, Ordering::SeqCst);
    }

    /// Lets the read version go up to `upto` and no further: the first call (before any
    /// write, when a durable store opens) sets the limit, later ones raise it (a lower
    /// `upto` is ignored). Versions completed above the old limit become visible now.
    pub fn lease(&self, upto: u64) {
        let cur = self.limit.load(Ordering::SeqCst);
        if cur == u64::MAX || upto > cur {
            self.limit.store(upto, Ordering::SeqCst);
        }
        self.advance();
    }

    /// The lease's limit (`u64::MAX`: none).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::SeqCst)
    }

    /// Whether `n` more versions, plus `slack` taken meanwhile by others, would all stay
    /// within the lease (an atomic batch must not straddle the limit: the read version
    /// would stop inside it).
    pub fn has_room(&self, n: u64, slack: u64) -> bool {
        self.last_write().saturating_add(n + slack) <= self.limit()
    }

    /// The global read version.
    #[inline]
    pub fn read_version(&self) -> u64 {
        self.read.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn releases_in_version_order() {
        let v = Arc::new(Versions::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let v = v.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let wv = v.begin_write();
                        v.complete(wv);
                        v.wait_visible(wv);
                        assert!(v.read_version() >= wv);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(v.read_version(), 4000);
        assert_eq!(v.last_write(), 4000);
    }

    #[test]
    fn a_stalled_version_holds_back_visibility_not_writers() {
        let v = Arc::new(Versions::new(10));
        let stalled = v.begin_write(); // 11, not completed yet
        let others = Arc::new(AtomicBool::new(false));
        let h = {
            let (v, others) = (v.clone(), others.clone());
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                for _ in 0..100 {
                    let wv = v.begin_write();
                    v.complete(wv); // never waits
                    taken.push(wv);
                }
                others.store(true, Ordering::SeqCst);
                taken
            })
        };
        let taken = h.join().unwrap();
        assert!(others.load(Ordering::SeqCst));
        assert_eq!(
            v.read_version(),
            10,
            "nothing after the stalled version is visible"
        );
        assert!(taken.iter().all(|&w| !v.is_visible(w)));
        v.complete(stalled);
        assert_eq!(
            v.read_version(),
            111,
            "completing it releases everything behind it"
        );
    }

    /// `threads` threads, each taking and completing `each` versions.
    fn spawn_writers(
        v: &Arc<Versions>,
        threads: usize,
        each: usize,
    ) -> Vec<std::thread::JoinHandle<()>> {
        (0..threads)
            .map(|_| {
                let v = v.clone();
                std::thread::spawn(move || {
                    for _ in 0..each {
                        let wv = v.begin_write();
                        v.complete(wv);
                    }
                })
            })
            .collect()
    }

    #[test]
    fn completion_races_never_strand_the_read_version() {
        for _ in 0..50 {
            let v = Arc::new(Versions::new(0));
            let handles = spawn_writers(&v, 4, 2000);
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(v.read_version(), 8000);
        }
    }

    #[test]
    fn a_barrier_releases_its_group_at_one_instant() {
        // A reader polling the read version never sees it inside the group: the barrier is
        // completed last, and the whole run becomes visible in one step.
        for _ in 0..200 {
            let v = Arc::new(Versions::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let (lo, hi) = (2u64, 9u64);
            let watcher = {
                let (v, stop) = (v.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        seen.push(v.read_version());
                    }
                    seen.push(v.read_version());
                    seen
                })
            };
            let barrier = v.begin_write(); // 1
            let group: Vec<u64> = (0..8).map(|_| v.begin_write()).collect(); // 2..=9
            for &g in group.iter().rev() {
                v.complete(g);
            }
            assert_eq!(v.read_version(), 0);
            v.wait_done(lo, hi);
            v.complete(barrier);
            stop.store(true, Ordering::SeqCst);
            let seen = watcher.join().unwrap();
            assert!(seen.iter().all(|&r| r == 0 || r == hi), "{seen:?}");
            assert_eq!(v.read_version(), hi);
        }
    }

    #[test]
    fn the_ring_bounds_versions_in_flight() {
        let v = Arc::new(Versions::new(0));
        let first = v.begin_write();
        for _ in 1..RING {
            let wv = v.begin_write();
            v.complete(wv);
        }
        // The next version would reuse the stalled one's slot: it waits until it is visible.
        let h = {
            let v = v.clone();
            std::thread::spawn(move || v.begin_write())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!h.is_finished());
        v.complete(first);
        assert_eq!(h.join().unwrap(), RING + 1);
        assert_eq!(v.read_version(), RING);
    }

    #[test]
    fn the_read_version_stops_at_the_lease() {
        let v = Versions::new(5);
        v.lease(8);
        let taken: Vec<u64> = (0..6).map(|_| v.begin_write()).collect(); // 6..=11
        for &w in &taken {
            v.complete(w);
        }
        assert_eq!(v.read_version(), 8, "completed past the limit, not visible");
        assert!(!v.is_visible(9));
        v.lease(7);
        assert_eq!(v.limit(), 8, "a lease is never lowered");
        v.lease(10);
        assert_eq!(v.read_version(), 10, "raising it releases what was done");
        v.lease(u64::MAX - 1);
        assert_eq!(v.read_version(), 11);
        assert!(v.has_room(5, 5));
    }

    #[test]
    fn raising_the_lease_races_completions_without_stranding() {
        // Writers complete versions while another thread raises the limit in small steps:
        // the read version never passes the limit and always ends at the last version.
        for _ in 0..50 {
            let v = Arc::new(Versions::new(0));
            v.lease(1);
            let stop = Arc::new(AtomicBool::new(false));
            let raiser = {
                let (v, stop) = (v.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let r = v.read_version();
                        assert!(r <= v.limit(), "read {r} past the limit");
                        v.lease(v.limit() + 7);
                    }
                })
            };
            let writers = spawn_writers(&v, 3, 2000);
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, Ordering::SeqCst);
            raiser.join().unwrap();
            v.lease(6000);
            assert_eq!(v.read_version(), 6000);
        }
    }
}
