//! The write path's fast path (Honeycomb §3.4 "fast-path insert", §3.5): traverse without
//! locks, lock the leaf by compare-and-swap on its lock word expecting the sequence number
//! seen during the traversal, append one entry to the log block and its slot (offset and
//! fingerprint) to the tail, take the write version, publish size, log count and unlock in
//! one store, complete the version (version.rs: visible to readers
//! once every older version is complete; `Store::put` waits for that, `put_unwaited` does not).
//!
//! Anything else — the log past its threshold, a full node, every log slot taken, a version
//! delta that would not fit, a delete in a leaf small enough to merge — goes to the
//! structural path (smo.rs).
//!
//! Invariants:
//! 1. The entry and its slot are fully written (version delta included) before the release
//!    store of the lock/used word that makes them visible.
//! 2. The write version is taken while holding the leaf lock, so entries in one buffer are
//!    in version order and every entry is newer than its buffer's node version.
//! 3. A writer that locked a buffer checks that the parent it came through is not
//!    superseded (superseded buffers stay locked forever). New buffers are created locked
//!    and unlocked only after the parent that routes to them is published, so a locked,
//!    current buffer with a current parent is the right leaf for the key.
//! 4. The item counters change while the write holds its leaf's lock (the structural path:
//!    the SMO mutex). `Tree::clear` takes both before it zeroes them, so a write is counted
//!    either before the clear (and zeroed with the items it removes) or after it (at a
//!    version above it, in the new tree), never against a tree it is not in.

use crate::backoff::Backoff;
use crate::locate::WriteHint;
use crate::tree::{Tree, ROOT};
use crate::values;
use accelkv_node::layout::*;
use accelkv_node::{encode_log_entry, encode_log_slot, log_entry_len, plan_append_fp};
use accelkv_node::{set_log_delta, ValueRef};
use std::sync::atomic::Ordering;

/// A write operation. Values carry an expiry deadline (ms since the Unix epoch, 0: none)
/// and client flags (0: none).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op<'a> {
    /// Insert or replace.
    Put(&'a [u8], u64, u32),
    /// Replace; absent (or expired) keys are left alone.
    Update(&'a [u8], u64, u32),
    /// Remove; absent keys are left alone.
    Delete,
    /// Remove only if the key's value has expired by this clock reading (the active sweep:
    /// a value written since the sweep looked is left alone).
    DeleteExpired(u64),
}

impl<'a> Op<'a> {
    /// The value the key has after the operation (`None` for a delete).
    pub(crate) fn value(&self) -> Option<&'a [u8]> {
        match *self {
            Op::Put(v, ..) | Op::Update(v, ..) => Some(v),
            Op::Delete | Op::DeleteExpired(_) => None,
        }
    }

    /// The deadline the key has after the operation.
    pub(crate) fn deadline(&self) -> u64 {
        match *self {
            Op::Put(_, d, _) | Op::Update(_, d, _) => d,
            Op::Delete | Op::DeleteExpired(_) => NO_DEADLINE,
        }
    }

    /// The client flags the key has after the operation.
    pub(crate) fn flags(&self) -> u32 {
        match *self {
            Op::Put(_, _, f) | Op::Update(_, _, f) => f,
            Op::Delete | Op::DeleteExpired(_) => 0,
        }
    }

    /// What the operation does to a key whose current value is `current` (`None`: absent),
    /// or `None` when it leaves the key alone. An expired value counts as absent, except
    /// that it is physically replaced or removed (and counted so).
    pub(crate) fn outcome(&self, current: Option<&ValueRef<'_>>) -> Option<Outcome> {
        // The clock is read only for a value that has a deadline.
        let expired = || {
            current
                .is_some_and(|v| v.deadline != NO_DEADLINE && v.is_expired(crate::clock::now_ms()))
        };
        match (*self, current.is_some()) {
            (Op::Put(..), false) => Some(Outcome::Inserted),
            (Op::Put(..), true) if expired() => Some(Outcome::Revived),
            (Op::Put(..), true) => Some(Outcome::Replaced),
            (Op::Update(..), true) if !expired() => Some(Outcome::Replaced),
            (Op::Delete, true) if expired() => Some(Outcome::Purged),
            (Op::Delete, true) => Some(Outcome::Deleted),
            (Op::DeleteExpired(now), true) => current
                .is_some_and(|v| v.is_expired(now))
                .then_some(Outcome::Purged),
            _ => None,
        }
    }
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The key was absent and is now present.
    Inserted,
    /// The key was present and its value was replaced.
    Replaced,
    /// The key was present and is now deleted.
    Deleted,
    /// The key was absent; nothing changed (update or delete).
    Absent,
    /// The key's value had expired and was replaced: absent before, present now.
    Revived,
    /// The key's value had expired and was removed: it was absent already to readers.
    Purged,
}

impl Outcome {
    /// Whether a live (unexpired) value was there before the write.
    pub(crate) fn existed(self) -> bool {
        matches!(self, Outcome::Replaced | Outcome::Deleted)
    }
}

/// Margin kept below the 40-bit version delta: a leaf whose node version is this close to
/// overflowing is merged instead of appended to.
const DELTA_MARGIN: u64 = 1 << 39;

impl Tree {
    /// Applies `op` to `key`; returns what happened and the write version (the read version
    /// at which absence was observed for `Outcome::Absent`). Waits first while an atomic
    /// batch is writing (batch.rs).
    pub(crate) fn write(&self, key: &[u8], op: Op<'_>) -> Result<(Outcome, u64), crate::Error> {
        self.write_hinted(key, op, None)
    }

    /// Waits while an atomic batch is writing (batch.rs).
    fn wait_for_batch(&self) {
        if self.gate.load(Ordering::SeqCst) {
            let mut backoff = Backoff::new();
            while self.gate.load(Ordering::SeqCst) {
                backoff.snooze();
            }
        }
    }

    /// [`Tree::write`] starting at the leaf a hint names (locate.rs), if it is still the
    /// key's: the write's own checks decide, and it descends as usual when they fail.
    pub(crate) fn write_hinted(
        &self,
        key: &[u8],
        op: Op<'_>,
        hint: Option<WriteHint<'_>>,
    ) -> Result<(Outcome, u64), crate::Error> {
        self.wait_for_batch();
        let mut tries = 0;
        let mut hint = hint;
        loop {
            match self.write_from(key, op, hint.take(), None) {
                // Over the mirror cache's budget: the evictor makes room (it was told by
                // the allocation that failed); wait for it, up to about five seconds.
                Err(crate::Error::OutOfMemory { .. })
                    if self.mirror.get().is_some() && tries < 5000 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                r => return r,
            }
        }
    }

    /// [`Tree::write`] without the batch gate (the batch's own writes).
    pub(crate) fn write_ungated(
        &self,
        key: &[u8],
        op: Op<'_>,
    ) -> Result<(Outcome, u64), crate::Error> {
        self.write_from(key, op, None, None)
    }

    /// Inserts or replaces `key` with `value`, a value over the inline limit that the tree
    /// keeps as it is instead of copying it out of line (a value streamed from a socket
    /// into its own allocation: the store never holds it twice). Unlike [`Tree::write`],
    /// a write over the memory limit is refused at once, without waiting for the mirror
    /// cache's evictor: the value is freed with the refusal.
    pub(crate) fn write_owned(
        &self,
        key: &[u8],
        value: Box<[u8]>,
        deadline: u64,
        flags: u32,
        hint: Option<WriteHint<'_>>,
    ) -> Result<(Outcome, u64), crate::Error> {
        if value.len() <= self.geo.max_inline_value {
            return self.write_hinted(key, Op::Put(&value, deadline, flags), hint);
        }
        self.wait_for_batch();
        // Observers read the value after the write drops its own pin: this one keeps the
        // adopted bytes from being reclaimed (if a later write replaces them) until then.
        let _pin = self.epochs.pin();
        let adopted = values::adopt(value);
        let Some((handle, len)) = adopted.out_of_line_ref() else {
            unreachable!("a value over the inline limit is adopted out of line");
        };
        // SAFETY: the allocation was just adopted and is not published: it lives until
        // `write_from` frees it on an error (after its last use of `bytes`) or stores it,
        // after which `_pin` keeps it from being reclaimed until this returns.
        let bytes = unsafe { values::bytes(handle, len) };
        self.write_from(key, Op::Put(bytes, deadline, flags), hint, Some(adopted))
    }

    /// [`Tree::write_ungated`] from `hint`'s leaf, if it is still the key's; `adopted` is
    /// the put's value already out of line ([`Tree::write_owned`]), owned by this call from
    /// here (stored, or freed on an error).
    fn write_from(
        &self,
        key: &[u8],
        op: Op<'_>,
        mut hint: Option<WriteHint<'_>>,
        adopted: Option<ValueRef<'static>>,
    ) -> Result<(Outcome, u64), crate::Error> {
        // The value as it will be stored: inline, or copied out of line once.
        let value: Option<ValueRef<'_>> = match op {
            Op::Put(v, d, f) | Op::Update(v, d, f) => {
                Some(if v.len() > self.geo.max_inline_value {
                    if d != NO_DEADLINE {
                        self.deadlines_seen.store(true, Ordering::Release);
                    }
                    // Out-of-line values count against the memory limit with the node buffers.
                    let used = self.resident_bytes();
                    let limit = if self.cfg.evict {
                        self.cfg.write_memory_limit()
                    } else {
                        self.cfg.memory_limit
                    };
                    if used + v.len() > limit {
                        if let Some(m) = self.mirror.get() {
                            m.pressure();
                        }
                        if let Some((handle, len)) = adopted.and_then(|a| a.out_of_line_ref()) {
                            // SAFETY: adopted by `write_owned`, never published; `v` (its
                            // bytes) is not used after this.
                            unsafe { values::free(handle, len) };
                        }
                        return Err(crate::Error::OutOfMemory {
                            limit: self.cfg.memory_limit,
                        });
                    }
                    self.ool_bytes.fetch_add(v.len() as u64, Ordering::Relaxed);
                    match adopted {
                        Some(a) => a.with_deadline(d).with_flags(f),
                        None => values::alloc(v).with_deadline(d).with_flags(f),
                    }
                } else {
                    if d != NO_DEADLINE {
                        self.deadlines_seen.store(true, Ordering::Release);
                    }
                    ValueRef::inline(v).with_deadline(d).with_flags(f)
                })
            }
            Op::Delete | Op::DeleteExpired(_) => None,
        };
        let free_unused = |v: Option<ValueRef<'_>>| {
            if let Some((handle, len)) = v.and_then(|v| v.out_of_line_ref()) {
                self.ool_bytes.fetch_sub(u64::from(len), Ordering::Relaxed);
                // SAFETY: never published, so no reader or buffer references it.
                unsafe { values::free(handle, len) };
            }
        };
        let entry_len = log_entry_len(key.len(), value.as_ref());
        let fp = accelkv_node::fingerprint(key);
        // A write visits one leaf (the mirror cache's hit ratio counts writes' loads too).
        self.leaf_visit();
        let mut backoff = Backoff::new();
        loop {
            let pin = self.epochs.pin();
            let hinted = hint.is_some();
            let (off, parent) = match hint.take() {
                // An earlier descent's leaf (locate.rs): the checks below decide.
                Some(h) => (h.leaf, h.parent),
                // Traverse the newest versions without locks.
                None => match self.descend(key, &pin) {
                    Ok(at) => at,
                    Err(e) => {
                        drop(pin);
                        free_unused(value);
                        return Err(e);
                    }
                },
            };
            let word = self.word(off);
            let w = word.load(Ordering::Acquire);
            if is_locked(w)
                || word
                    .compare_exchange(w, locked(w), Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            {
                drop(pin);
                if !hinted {
                    backoff.snooze();
                }
                continue;
            }
            if let Some(p) = parent {
                if is_locked(self.word(p).load(Ordering::Acquire)) {
                    word.store(w, Ordering::Release);
                    drop(pin);
                    backoff.snooze();
                    continue;
                }
            }
            let view = self.view(off, &pin);
            let plan = plan_append_fp(&view, key, fp);
            let Some(outcome) = op.outcome(plan.current.as_ref()) else {
                word.store(w, Ordering::Release);
                let rv = self.versions.read_version();
                drop(pin);
                free_unused(value);
                return Ok((Outcome::Absent, rv));
            };
            let old_deadline = plan.current.map(|v| v.deadline);
            let used = used_of(w);
            let (slot_at, log_limit) = view.next_log_slot();
            let needs_smo = view.log_len() >= self.geo.log_threshold
                || used + entry_len > log_limit
                || plan.log_entries >= view.log_capacity()
                || self.versions.last_write() + DELTA_MARGIN - view.version() > MAX_VERSION_DELTA
                || (value.is_none() && parent.is_some() && self.underfull(&view));
            if needs_smo {
                word.store(w, Ordering::Release);
                drop(pin);
                // The structural path owns `value` from here (stores or frees it).
                return self.smo_write(key, op, value);
            }
            // SAFETY: we hold the leaf lock; the entry goes past the published `used` and
            // its slot below the published log slots (and above the entry: `log_limit`).
            let dst = unsafe { self.tail_mut(off, used, entry_len) };
            encode_log_entry(dst, &plan, key, value.as_ref());
            // SAFETY: as above.
            let slot = unsafe { self.tail_mut(off, slot_at, LOG_SLOT_SIZE) };
            encode_log_slot(slot, used, plan.fp);
            let wv = self.versions.begin_write();
            set_log_delta(dst, wv - view.version());
            // Counted before the unlock (invariant 4).
            self.count(outcome, old_deadline, &op);
            let count = plan.log_entries + 1;
            word.store(
                unlocked_append(w, used + entry_len, count),
                Ordering::Release,
            );
            drop(pin);
            crate::failpoint::hit(crate::failpoint::WRITE_UNLOCKED);
            self.observe(key, &op, wv);
            self.complete(key, wv);
            return Ok((outcome, wv));
        }
    }

    /// Whether a leaf's items are below the size at which a merge joins it with a sibling:
    /// a delete there restructures at once, so a leaf emptied by deletes is merged away
    /// even when no later write reaches it.
    fn underfull(&self, view: &accelkv_node::NodeView<'_>) -> bool {
        let items = view.sorted_len() + LEAF_SLOT_SIZE * view.item_count();
        items < self.geo.leaf_capacity() * self.cfg.merge_below_pct / 100
    }

    /// The leaf for `key` in the newest versions and the parent it was reached through
    /// (none: the root is the leaf).
    #[inline]
    fn descend(
        &self,
        key: &[u8],
        pin: &crate::epoch::Pin<'_>,
    ) -> Result<(u64, Option<u64>), crate::Error> {
        let mut off = self.pt.get(ROOT);
        let mut parent = None;
        loop {
            let child = match self.interior_route(off, key, pin) {
                Some(child) => child,
                None => {
                    let v = self.view(off, pin);
                    if v.is_leaf() {
                        return Ok((off, parent));
                    }
                    v.child_for(key)
                }
            };
            parent = Some(off);
            off = self.page(child)?;
        }
    }

    /// Keeps the item counters: `outcome` of `op` on a key whose stored value was `old`.
    pub(crate) fn count(&self, outcome: Outcome, old_deadline: Option<u64>, op: &Op<'_>) {
        let had = i64::from(old_deadline.is_some_and(|d| d != NO_DEADLINE));
        let has = i64::from(op.deadline() != NO_DEADLINE);
        if had != has {
            self.expiring.fetch_add(has - had, Ordering::Relaxed);
        }
        match outcome {
            Outcome::Inserted => self.items.fetch_add(1, Ordering::Relaxed),
            Outcome::Deleted | Outcome::Purged => self.items.fetch_sub(1, Ordering::Relaxed),
            Outcome::Replaced | Outcome::Revived | Outcome::Absent => 0,
        };
    }
}
