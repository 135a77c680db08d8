//! Atomic batches: several writes released to readers as one step, so no reader, scan or
//! snapshot (and no durable commit, which images a snapshot) ever sees part of one. The
//! server's MULTI/EXEC, MSET and RENAME are built on it.
//!
//! How: the batch takes a *barrier* version first, which holds the read version below it;
//! applies each write through the ordinary write path (each gets its own version, taken
//! under its leaf lock, so leaf logs stay in version order); waits until every version
//! between the barrier and its last write is completed; then completes the barrier, and the
//! read version jumps over the whole run in one compare-and-swap (version.rs invariant 1).
//!
//! While the batch writes, a gate makes other writers wait before they take a version, so
//! only writers already past the gate (at most one per thread) can take versions among the
//! batch's: the completion ring (`RING` versions) cannot fill up behind the barrier, which
//! would deadlock the batch. A batch is limited to [`MAX_BATCH`] writes for the same reason.
//!
//! Thread safety: batches are serialised by `Tree::batch`; ordinary writers run until the
//! gate closes and finish the write they are in. Visibility of every other writer's writes
//! is held back while a batch writes (its barrier is the oldest open version), so batches
//! should be small.
//!
//! Under a version lease (version.rs) a batch starts only when all of its versions, and
//! one per thread for the writers past the gate, fit below the limit: the read version
//! stops at the limit, and must not stop inside a batch.
//!
//! Isolation from other writers is the caller's business: a batch does not read. The
//! server's reservation station, the one write door, gives its transactions the slots of
//! every key they touch before they run.

use crate::tree::Tree;
use crate::version::RING;
use crate::write::{Op, Outcome};
use smallvec::SmallVec;
use std::sync::atomic::Ordering;

/// The most writes one batch may hold.
pub const MAX_BATCH: usize = (RING / 4) as usize;

/// Versions other writers may take among a batch's (writers already past the gate: at most
/// one per thread), counted when a batch checks that it fits within the version lease.
const LEASE_SLACK: u64 = 1 << 16;

/// One write's result in a batch: its outcome and version, or its error.
pub(crate) type Written = Result<(Outcome, u64), crate::Error>;

/// Restores the gate and completes the barrier however the batch ends.
struct Open<'t> {
    tree: &'t Tree,
    barrier: u64,
    last: u64,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let t = self.tree;
        if self.last > self.barrier {
            t.versions.wait_done(self.barrier + 1, self.last);
        }
        t.versions.complete(self.barrier);
        t.gate.store(false, Ordering::SeqCst);
    }
}

impl Tree {
    /// Waits until `n` versions (and [`LEASE_SLACK`]) fit within the version lease, asking
    /// its holder to raise it meanwhile.
    fn wait_for_lease(&self, n: u64) {
        let mut backoff = crate::backoff::Backoff::new();
        while !self.versions.has_room(n, LEASE_SLACK) {
            self.observe_lease_wait();
            backoff.snooze();
        }
    }

    /// Applies `ops` in order as one atomic step; each write's outcome and version (for an
    /// outcome of `Absent`, the read version it was decided at), or its error (a write that
    /// fails changes nothing and the others still apply). Returns the batch's version: once
    /// it is visible, so is every write of the batch, and before that none is.
    pub(crate) fn write_batch(&self, ops: &[(&[u8], Op<'_>)]) -> (SmallVec<[Written; 8]>, u64) {
        debug_assert!(ops.len() <= MAX_BATCH);
        let _serial = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        self.gate.store(true, Ordering::SeqCst);
        self.wait_for_lease(ops.len() as u64 + 1);
        let mut open = Open {
            tree: self,
            barrier: self.versions.begin_write(),
            last: 0,
        };
        open.last = open.barrier;
        let mut results = SmallVec::with_capacity(ops.len());
        for (key, op) in ops {
            let r = self.write_ungated(key, *op);
            if let Ok((o, v)) = &r {
                if *o != Outcome::Absent {
                    open.last = open.last.max(*v);
                }
            }
            results.push(r);
        }
        let version = open.last;
        drop(open);
        // Garbage of the batch's structural writes waits for its version: retire it now.
        self.reclaim();
        (results, version)
    }
}
