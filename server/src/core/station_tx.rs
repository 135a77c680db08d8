//! Transactions through the reservation station: a group of operations on any keys that
//! runs in isolation from every other write and is released to readers as one version
//! (Redis's MULTI/EXEC, and MSET, MSETNX, RENAME on their own).
//!
//! Isolation is two-phase locking on the station's slots: before an operation of the
//! transaction touches a key, the transaction owns the key's slot (waiting until whoever
//! drains it lets go), and it keeps every slot until it has written. Operations of other
//! threads on those keys wait in the slots' queues meanwhile and run right after, on the
//! transaction's result. Operations run on the burst's forwarded values (burst.rs), so a
//! later operation sees an earlier one's effect. At the end every changed key is written
//! back as one atomic batch (`Store::write_batch_unwaited`), so no reader, scan or durable
//! commit sees part of it.
//!
//! Thread safety and deadlock freedom: one transaction runs at a time (`tx_active`), so only
//! a transaction ever waits for a slot while owning others; an ordinary executor never
//! waits for anything while it owns a slot (it queues on busy slots and waits for those
//! answers only after releasing its own), so the slot a transaction waits for is always
//! released. The tree's batch gate closes only once the transaction owns everything it
//! needs.

use crate::core::burst::Burst;
use crate::core::station::{Done, Op, Station};
use accelkv_tree::{Error, Store};
use smallvec::SmallVec;
use std::sync::atomic::Ordering;

/// A transaction in progress: the slots it owns, the forwarded values of its keys, and per
/// operation (in order) its key's position and whether it changed the key.
pub struct Tx {
    owned: SmallVec<[usize; 16]>,
    burst: Burst<'static>,
    ops: SmallVec<[(usize, bool); 8]>,
}

/// What committing a transaction did.
#[derive(Debug)]
pub struct Committed {
    /// The version its writes are released at (0: it wrote nothing; its answers rest on
    /// [`Committed::seen`]).
    pub version: u64,
    /// The newest write version at commit: what an answer that wrote nothing rests on.
    pub seen: u64,
    /// Per operation, the error its key's write failed with, if it did (the operation's
    /// effect is lost; the others stand, as in Redis).
    pub failed: crate::core::burst::Errors,
}

impl Tx {
    /// Operations run so far.
    pub fn ops(&self) -> usize {
        self.ops.len()
    }
}

/// Spins, then yields the core.
fn pause(round: &mut u32) {
    *round += 1;
    if *round < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl Station {
    /// Starts a transaction (waiting while another one runs).
    pub fn begin(&self) -> Tx {
        let mut round = 0;
        while self
            .tx_active
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            pause(&mut round);
        }
        Tx {
            owned: SmallVec::new(),
            burst: Burst::default(),
            ops: SmallVec::new(),
        }
    }

    /// Makes `tx` the owner of `key`'s slot, waiting until nobody else drains it.
    pub fn own(&self, tx: &mut Tx, key: &[u8]) {
        self.own_slot(tx, self.slot_of(key));
    }

    /// Removes every item (FLUSHALL) as one write, isolated from every other write: it owns
    /// every slot first, so no burst is between reading a value from before the clear and
    /// writing after it, and what others queued meanwhile runs after it, on the empty store.
    /// Returns the clear's version.
    pub fn clear(&self, store: &Store) -> Result<u64, Error> {
        let mut tx = self.begin();
        for i in 0..self.slot_count() {
            self.own_slot(&mut tx, i);
        }
        let r = store.clear().map(|(w, _)| w.version);
        if let Ok(v) = r {
            self.last_clear
                .fetch_max(v, std::sync::atomic::Ordering::Relaxed);
        }
        self.release(store, tx);
        r
    }

    /// The version of the last clear (FLUSHALL), 0 before any: what a key absent since
    /// then has as its version (WATCH tells a FLUSHALL from a write by it).
    pub fn last_clear(&self) -> u64 {
        self.last_clear.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn own_slot(&self, tx: &mut Tx, i: usize) {
        if tx.owned.contains(&i) {
            return;
        }
        self.take_slot(i);
        tx.owned.push(i);
    }

    /// Makes the caller the one draining slot `i`, waiting (spinning, then yielding) while
    /// another thread does.
    pub(crate) fn take_slot(&self, i: usize) {
        let mut round = 0;
        loop {
            let mut s = self.lock(i);
            if !s.busy {
                s.busy = true;
                return;
            }
            drop(s);
            pause(&mut round);
        }
    }

    /// Runs `op` inside `tx`: its outcome at once (its version is known only at commit).
    pub fn tx_run(&self, store: &Store, tx: &mut Tx, op: Op<'_>) -> Done {
        let i = self.tx_key(tx, op.key);
        let write = op.write.into_owned();
        let (i, outcome, changed) = tx
            .burst
            .apply_at(store, &self.registry, &self.stats, i, write);
        tx.ops.push((i, changed && outcome.is_ok()));
        Done {
            outcome,
            version: 0,
        }
    }

    /// Lends `f` the value and client flags `key` has in `tx` (`None`: absent or expired)
    /// without copying it: a read like [`Write::ReadItem`](crate::core::ops::Write) run
    /// through [`Station::tx_run`], but answered in place.
    pub fn tx_peek<R>(
        &self,
        store: &Store,
        tx: &mut Tx,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u32)>) -> R,
    ) -> Result<R, Error> {
        let i = self.tx_key(tx, std::borrow::Cow::Borrowed(key));
        tx.ops.push((i, false));
        tx.burst.peek(store, &self.stats, i, f)
    }

    /// Owns `key`'s slot for `tx` and finds the key's place in its burst: a key the
    /// transaction met before is found, not copied again; a new one is copied once (moved
    /// in when the caller built it).
    fn tx_key(&self, tx: &mut Tx, key: std::borrow::Cow<'_, [u8]>) -> usize {
        self.own(tx, &key);
        let keep = |k: std::borrow::Cow<'_, [u8]>| std::borrow::Cow::Owned(k.into_owned());
        tx.burst.slot(key, keep, None, &self.stats)
    }

    /// Calls `f` for the items in `[lo, hi)` as `tx` sees them, ascending, at most `limit`:
    /// the tree's newest (visible or not), with what `tx` changed and has not written yet
    /// in their place. Only for a range whose every writer first owns a slot `tx` owns (a
    /// collection's subkeys, written only under their metadata key's slot), so nobody
    /// changes it meanwhile.
    pub fn tx_scan(
        &self,
        store: &Store,
        tx: &Tx,
        (lo, hi): (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        let pending = tx.burst.pending_in(lo, hi);
        scan_with_pending(store, &pending, (lo, hi), limit, f)
    }

    /// [`Station::tx_scan`] backwards: the subkeys in `[lo, hi)` as `tx` sees them,
    /// descending, at most `limit` (the tree read from the end, merged with `tx`'s own
    /// writes from the end).
    pub fn tx_scan_rev(
        &self,
        store: &Store,
        tx: &Tx,
        (lo, hi): (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        let pending = tx.burst.pending_in(lo, hi);
        scan_rev_with_pending(store, &pending, (lo, hi), limit, f)
    }

    /// Writes `tx`'s changes as one atomic batch, then runs what others queued on its slots
    /// and releases them.
    pub fn commit(&self, store: &Store, tx: Tx) -> Committed {
        let (errors, version) = tx.burst.write_back_atomic(store, &self.stats);
        let failed = tx
            .ops
            .iter()
            .map(|&(i, changed)| if changed { errors[i].clone() } else { None })
            .collect();
        let seen = store.raw().last_write_version();
        self.release(store, tx);
        Committed {
            version,
            seen,
            failed,
        }
    }

    /// Drops `tx`'s changes (nothing was written) and releases its slots.
    pub fn abort(&self, store: &Store, tx: Tx) {
        self.release(store, tx);
    }

    fn release(&self, store: &Store, tx: Tx) {
        for &i in &tx.owned {
            self.drain(store, i, &mut []);
        }
        self.tx_active.store(false, Ordering::Release);
    }
}

/// A writer's own changes in a range, not written yet: each key (in key order) with its new
/// value (`None`: removed).
pub(crate) type Pending<'a> = [(&'a [u8], Option<&'a [u8]>)];

/// Lends `f` at most `limit` of the items in `[lo, hi)`, ascending: the tree's newest
/// (visible or not) with `pending` in their place (a transaction's, or one station
/// operation's, own changes).
pub(crate) fn scan_with_pending(
    store: &Store,
    pending: &Pending<'_>,
    (lo, hi): (&[u8], &[u8]),
    limit: usize,
    f: impl FnMut(&[u8], &[u8]),
) -> Result<(), Error> {
    if pending.is_empty() {
        // Nothing of the writer's own in the range: the tree's items as they are, lent to
        // `f` without copies.
        return store.scan_latest_with(lo, Some(hi), limit, f);
    }
    let mut tree: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    // Pending removals may hide tree items: read that many more.
    let want = limit.saturating_add(pending.len());
    store.scan_latest_with(lo, Some(hi), want, |k, v| {
        tree.push((k.to_vec(), v.to_vec()))
    })?;
    merge(&tree, pending.iter(), |p, t| p <= t, limit, f);
    Ok(())
}

/// [`scan_with_pending`] from the highest key down.
pub(crate) fn scan_rev_with_pending(
    store: &Store,
    pending: &Pending<'_>,
    (lo, hi): (&[u8], &[u8]),
    limit: usize,
    f: impl FnMut(&[u8], &[u8]),
) -> Result<(), Error> {
    // Pending removals may hide tree items: read that many more.
    let want = limit.saturating_add(pending.len());
    let tree = store.scan_rev_latest(lo, hi, want)?;
    merge(&tree, pending.iter().rev(), |p, t| p >= t, limit, f);
    Ok(())
}

/// Hands `f` at most `limit` items of `tree` (in scan order) merged with a transaction's
/// `pending` writes in the same order (`first(p, t)`: pending key `p` comes no later than
/// tree key `t`): a pending value replaces the tree's item of its key, a pending removal
/// hides it.
fn merge<'p>(
    tree: &[(Vec<u8>, Vec<u8>)],
    pending: impl Iterator<Item = &'p (&'p [u8], Option<&'p [u8]>)>,
    first: impl Fn(&[u8], &[u8]) -> bool,
    limit: usize,
    mut f: impl FnMut(&[u8], &[u8]),
) {
    let mut pending = pending.peekable();
    let (mut i, mut sent) = (0, 0);
    while sent < limit {
        match pending.peek() {
            Some(&&(k, v)) if i >= tree.len() || first(k, &tree[i].0) => {
                if i < tree.len() && tree[i].0 == k {
                    i += 1;
                }
                if let Some(v) = v {
                    f(k, v);
                    sent += 1;
                }
                pending.next();
            }
            _ if i < tree.len() => {
                f(&tree[i].0, &tree[i].1);
                sent += 1;
                i += 1;
            }
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::ops::vector::Registry;
    use crate::core::ops::{Outcome, Write};
    use crate::core::station::{Op, Station};
    use accelkv_tree::{Config, Store};
    use std::borrow::Cow;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_transaction_sees_its_own_writes_and_commits_once() {
        let st = Station::new(64, true, Registry::default());
        let s = Store::new(Config::default()).expect("store");
        s.put(b"a", b"5").expect("put");
        let mut tx = st.begin();
        let d = st.tx_run(&s, &mut tx, Op::new(b"a", Write::IncrBy(2)));
        assert_eq!(d.outcome, Ok(Outcome::Int(7)));
        let d = st.tx_run(&s, &mut tx, Op::new(b"b", Write::Put(Cow::Borrowed(b"x"))));
        assert_eq!(d.outcome, Ok(Outcome::Done));
        let d = st.tx_run(&s, &mut tx, Op::new(b"b", Write::Read));
        assert_eq!(d.outcome, Ok(Outcome::Old(Some(b"x".to_vec()))));
        assert_eq!(
            s.get(b"a").expect("get"),
            Some(b"5".to_vec()),
            "nothing written yet"
        );
        let c = st.commit(&s, tx);
        assert!(c.failed.iter().all(Option::is_none));
        s.wait_visible(c.version);
        assert_eq!(s.get(b"a").expect("get"), Some(b"7".to_vec()));
        assert_eq!(s.get(b"b").expect("get"), Some(b"x".to_vec()));
        // An aborted transaction writes nothing.
        let mut tx = st.begin();
        st.tx_run(&s, &mut tx, Op::new(b"a", Write::Remove));
        st.abort(&s, tx);
        assert_eq!(s.get(b"a").expect("get"), Some(b"7".to_vec()));
        assert!(!st.tx_active.load(Ordering::SeqCst));
    }

    /// A peek answers what the transaction holds for a key (its own pending write
    /// included) and writes nothing by itself.
    #[test]
    fn a_peek_sees_the_transactions_own_writes_and_writes_nothing() {
        let st = Station::new(64, true, Registry::default());
        let s = Store::new(Config::default()).expect("store");
        s.put(b"a", b"old").expect("put");
        let mut tx = st.begin();
        let own = |v: Option<(&[u8], u32)>| v.map(|(v, f)| (v.to_vec(), f));
        let got = st.tx_peek(&s, &mut tx, b"a", own).expect("peek");
        assert_eq!(got, Some((b"old".to_vec(), 0)));
        assert_eq!(st.tx_peek(&s, &mut tx, b"absent", own).expect("peek"), None);
        st.tx_run(
            &s,
            &mut tx,
            Op::new(b"a", Write::Put(Cow::Borrowed(b"new"))),
        );
        let got = st.tx_peek(&s, &mut tx, b"a", own).expect("peek");
        assert_eq!(got, Some((b"new".to_vec(), 0)));
        let c = st.commit(&s, tx);
        assert_eq!(c.failed.len(), 4, "one entry per operation, peeks included");
        s.wait_visible(c.version);
        assert_eq!(s.get(b"a").expect("get"), Some(b"new".to_vec()));
        // Peeks alone change nothing: no version is taken.
        let mut tx = st.begin();
        st.tx_peek(&s, &mut tx, b"a", own).expect("peek");
        assert_eq!(st.commit(&s, tx).version, 0);
    }

    /// Transactions that move one unit between two of four counters, against INCRBYs of
    /// 1000 on the same counters through the ordinary door on other threads, and a reader
    /// that sums the four at one snapshot: every sum it sees is a multiple of 1000 (a
    /// transfer seen in part would leave 999 or 1 over), and the final sum is exact (no
    /// INCRBY lost to a transaction's write-back).
    #[test]
    fn transfers_are_isolated_and_atomic_against_ordinary_writes() {
        let st = Arc::new(Station::new(8, true, Registry::default()));
        let s = Arc::new(Store::new(Config::default()).expect("store"));
        let keys: [&[u8]; 4] = [b"c0", b"c1", b"c2", b"c3"];
        for k in keys {
            s.put(k, b"1000").expect("put");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (s, stop) = (s.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut sums = 0;
                while !stop.load(Ordering::SeqCst) {
                    let snap = s.snapshot();
                    let sum: i64 = keys
                        .iter()
                        .map(|k| {
                            let v = snap.get(k).expect("get").expect("present");
                            std::str::from_utf8(&v)
                                .expect("utf8")
                                .parse::<i64>()
                                .expect("int")
                        })
                        .sum();
                    assert_eq!(sum % 1000, 0, "torn transfer: sum {sum}");
                    sums += 1;
                }
                sums
            })
        };
        let incrs: Vec<_> = (0..2)
            .map(|t| {
                let (st, s) = (st.clone(), s.clone());
                std::thread::spawn(move || {
                    for i in 0..2000usize {
                        let d = st.run_one(&s, Op::new(keys[(i + t) % 4], Write::IncrBy(1000)));
                        assert!(d.outcome.is_ok());
                    }
                })
            })
            .collect();
        let movers: Vec<_> = (0..2)
            .map(|t| {
                let (st, s) = (st.clone(), s.clone());
                std::thread::spawn(move || {
                    for i in 0..500usize {
                        let (from, to) = (keys[(i + t) % 4], keys[(i + t + 1 + t) % 4]);
                        let mut tx = st.begin();
                        st.tx_run(&s, &mut tx, Op::new(from, Write::IncrBy(-1)));
                        st.tx_run(&s, &mut tx, Op::new(to, Write::IncrBy(1)));
                        let c = st.commit(&s, tx);
                        assert!(c.failed.iter().all(Option::is_none));
                    }
                })
            })
            .collect();
        for h in incrs.into_iter().chain(movers) {
            h.join().expect("thread");
        }
        stop.store(true, Ordering::SeqCst);
        assert!(reader.join().expect("reader") > 0);
        let total: i64 = keys
            .iter()
            .map(|k| {
                let v = s.get_latest(k).expect("get").expect("present");
                std::str::from_utf8(&v)
                    .expect("utf8")
                    .parse::<i64>()
                    .expect("int")
            })
            .sum();
        assert_eq!(
            total,
            4000 + 4000 * 1000,
            "every INCRBY counted once, transfers sum to 0"
        );
    }
}
