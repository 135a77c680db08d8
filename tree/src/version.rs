//! The two global version clocks of MVCC (Honeycomb §3.2).
//!
//! A writer takes its write version with a fetch-and-add on the global write version, makes
//! its change visible in node memory, and then *releases* it: it waits until every smaller
//! write version has been released and sets the global read version to its own. Readers take
//! the global read version and ignore anything newer, so a reader at `rv` sees exactly the
//! writes with versions <= `rv`.
//!
//! Thread safety: lock-free; `release` spins (then yields) until its turn.
//!
//! Invariants:
//! 1. The read version only grows, by exactly one per release, in write-version order.
//! 2. A writer holding an unreleased version never waits for a lock or for another writer's
//!    structural change, so the wait in `release` always ends.

use crate::backoff::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};

/// Global write and read versions.
pub struct Versions {
    write: AtomicU64,
    read: AtomicU64,
}

impl Versions {
    /// Clocks starting at `v` (everything up to `v` is released).
    pub fn new(v: u64) -> Versions {
        Versions {
            write: AtomicU64::new(v),
            read: AtomicU64::new(v),
        }
    }

    /// Takes the next write version.
    pub fn begin_write(&self) -> u64 {
        self.write.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The last write version handed out.
    pub fn last_write(&self) -> u64 {
        self.write.load(Ordering::Acquire)
    }

    /// Releases `wv` to readers once every smaller version is released.
    pub fn release(&self, wv: u64) {
        let mut backoff = Backoff::new();
        while self.read.load(Ordering::Acquire) != wv - 1 {
            backoff.snooze();
        }
        self.read.store(wv, Ordering::SeqCst);
    }

    /// Moves both clocks forward to `v` (recovery, before any write): no effect when they
    /// are already past it.
    pub fn advance_to(&self, v: u64) {
        self.write.fetch_max(v, Ordering::AcqRel);
        self.read.fetch_max(v, Ordering::SeqCst);
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
                        v.release(wv);
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
}
