//! KV-Direct's reservation station (§ "out-of-order execution" of the KV-Direct seed) in the
//! server's write dispatch. Operations in flight are indexed by a hash of their key into
//! slots (1024 by default); operations in one slot are chained and applied in arrival order,
//! so a hash collision can make a false dependency but never misses a true one.
//!
//! Data forwarding: the thread that finds a slot idle becomes its executor and runs the
//! slot's operations in bursts. Within a burst each operation runs on the latest value the
//! station holds for its key (read from the tree once), and each key's final value is
//! written back to the tree once; only then does every operation of the burst get its
//! answer. A burst of N operations on one hot key costs one tree write, and each operation
//! still has its own linearizable result (all of a burst's operations take effect, in order,
//! at its write).
//!
//! The station is the server's only door for writes (binary protocol and RESP alike), so
//! two event loops writing one key are ordered by its slot: no other write path exists that
//! could slip between a burst's read and its write-back.
//!
//! Run to completion: an operation whose slot is idle runs on the caller's thread with its
//! operands borrowed from the request, and its answer lands in the caller's buffer — no copy,
//! no allocation, no other thread. Only an operation whose slot another thread is draining
//! is copied ([`Write::into_owned`]) into that slot's queue; that thread runs it and sends
//! the answer back, and the caller waits for it (the one wait a loop can have on another
//! thread's behalf, as long as one burst).
//!
//! Thread safety: any thread may submit. An executor never waits for another slot while it
//! owns one (it finishes its own bursts first), so executors cannot deadlock.

use crate::core::burst::{Applied, Burst};
pub use crate::core::op::{Done, Op, StationStats};
use crate::core::ops::vector::Registry;
#[cfg(test)]
use crate::core::ops::{Outcome, Ttl, Write};
use accelkv_tree::Store;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

/// Where an answer goes: the submitting thread's buffer, or back over a channel to a thread
/// whose operation waited in this slot's queue.
enum To {
    Here(usize),
    There(Sender<(usize, Done)>, usize),
}

/// The channel answers of queued operations come back on.
type Back = (Sender<(usize, Done)>, Receiver<(usize, Done)>);

struct Queued {
    op: Op<'static>,
    to: Sender<(usize, Done)>,
    index: usize,
}

pub(crate) struct Slot {
    pub(crate) busy: bool,
    queue: VecDeque<Queued>,
}

/// The reservation station.
pub struct Station {
    slots: Vec<Mutex<Slot>>,
    /// Held by the one transaction running (station_tx.rs).
    pub(crate) tx_active: std::sync::atomic::AtomicBool,
    forwarding: bool,
    pub(crate) registry: Registry,
    /// Counters.
    pub stats: StationStats,
    /// The version of the last clear (FLUSHALL; station_tx.rs), 0 before any.
    pub(crate) last_clear: std::sync::atomic::AtomicU64,
}

/// FNV-1a 64 of a key: the station's hash.
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Station {
    /// A station of `slots` slots (at least one) whose vector operations use `registry`;
    /// without `forwarding` every operation is its own burst (one tree write each).
    pub fn new(slots: usize, forwarding: bool, registry: Registry) -> Station {
        Station {
            slots: (0..slots.max(1))
                .map(|_| {
                    Mutex::new(Slot {
                        busy: false,
                        queue: VecDeque::new(),
                    })
                })
                .collect(),
            tx_active: std::sync::atomic::AtomicBool::new(false),
            forwarding,
            registry,
            stats: StationStats::default(),
            last_clear: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn slot_of(&self, key: &[u8]) -> usize {
        (key_hash(key) % self.slots.len() as u64) as usize
    }

    pub(crate) fn lock(&self, i: usize) -> std::sync::MutexGuard<'_, Slot> {
        self.slots[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one operation; its answer once its effect is in the tree. On an idle slot (the
    /// common case) it runs here as a burst of one; otherwise it waits in the slot's queue
    /// as [`Station::run`] makes it.
    pub fn run_one(&self, store: &Store, op: Op<'_>) -> Done {
        let slot = self.slot_of(&op.key);
        {
            let mut s = self.lock(slot);
            if s.busy {
                drop(s);
                let mut done: SmallVec<[Done; 1]> = SmallVec::new();
                self.run(store, std::iter::once(op), &mut done);
                return done.pop().unwrap_or_else(Done::lost);
            }
            s.busy = true;
        }
        let mut answer = [Done::lost()];
        self.run_burst(store, std::iter::once((To::Here(0), op)), &mut answer);
        self.drain(store, slot, &mut answer);
        let [d] = answer;
        d
    }

    /// Runs `ops` one after another in the order given, each taking effect (its write
    /// version) after the one before it, and appends their answers to `done` in that order.
    /// A pipeline's writes on one connection go this way (resp/commands/expire.rs `set_run`): a
    /// reader never sees a later one without the earlier ones, and the durable state after
    /// a crash, a prefix of the writes by version, is a prefix of the pipeline too.
    /// [`Station::run`] may reorder operations on different keys (slot by slot) and write a
    /// burst's keys back in any order, which neither promise survives.
    pub fn run_in_order<'a, A: smallvec::Array<Item = Done>>(
        &self,
        store: &Store,
        ops: impl IntoIterator<Item = Op<'a>>,
        done: &mut SmallVec<A>,
    ) {
        for op in ops {
            done.push(self.run_one(store, op));
        }
    }

    /// Runs `ops` (in order per key) and appends their answers to `done` in the same order,
    /// each once its effect is in the tree. Operations on idle slots run on this thread;
    /// the rest wait in the queues of the threads draining their slots, and this returns
    /// once those threads have answered them.
    pub fn run<'a, A: smallvec::Array<Item = Done>>(
        &self,
        store: &Store,
        ops: impl IntoIterator<Item = Op<'a>>,
        done: &mut SmallVec<A>,
    ) {
        let base = done.len();
        // The operations this thread runs (slot, position, op), and the slots it owns.
        // Inline room for a whole pipeline's batch (resp/batch.rs runs up to 64).
        let mut mine: SmallVec<[(usize, usize, Option<Op<'a>>); 64]> = SmallVec::new();
        let mut owned: SmallVec<[usize; 64]> = SmallVec::new();
        let mut back: Option<Back> = None;
        let mut waiting = 0;
        let mut n = 0;
        for (i, op) in ops.into_iter().enumerate() {
            n += 1;
            let slot = self.slot_of(&op.key);
            if owned.contains(&slot) {
                mine.push((slot, i, Some(op)));
                continue;
            }
            let mut s = self.lock(slot);
            if s.busy {
                // Another thread drains this slot: it runs the operation after those queued.
                let (tx, _) = back.get_or_insert_with(channel);
                s.queue.push_back(Queued {
                    op: Op {
                        key: Cow::Owned(op.key.into_owned()),
                        write: op.write.into_owned(),
                        hint: None,
                    },
                    to: tx.clone(),
                    index: i,
                });
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
                waiting += 1;
            } else {
                s.busy = true;
                drop(s);
                owned.push(slot);
                mine.push((slot, i, Some(op)));
            }
        }
        done.extend((0..n).map(|_| Done::lost()));
        let answers = &mut done[base..];
        // Each owned slot's operations in order (sorting by slot keeps positions ascending
        // within a slot, since positions are unique), as one burst; then whatever other
        // threads queued meanwhile; then the slot is released.
        mine.sort_unstable_by_key(|m| (m.0, m.1));
        let mut at = 0;
        while at < mine.len() {
            let slot = mine[at].0;
            let end = at + mine[at..].iter().take_while(|m| m.0 == slot).count();
            let ops = mine[at..end]
                .iter_mut()
                .filter_map(|m| Some((To::Here(m.1), m.2.take()?)));
            if self.forwarding {
                self.run_burst(store, ops, answers);
            } else {
                for op in ops {
                    self.run_burst(store, std::iter::once(op), answers);
                }
            }
            self.drain(store, slot, answers);
            at = end;
        }
        if let Some((tx, rx)) = back {
            drop(tx);
            for (i, d) in rx.iter().take(waiting) {
                if let Some(a) = answers.get_mut(i) {
                    *a = d;
                }
            }
        }
    }

    /// Runs what other threads queued on slot `i` (which this thread owns), then releases it.
    pub(crate) fn drain(&self, store: &Store, i: usize, answers: &mut [Done]) {
        loop {
            let burst: SmallVec<[Queued; 8]> = {
                let mut s = self.lock(i);
                if s.queue.is_empty() {
                    s.busy = false;
                    return;
                }
                if self.forwarding {
                    s.queue.drain(..).collect()
                } else {
                    s.queue.pop_front().into_iter().collect()
                }
            };
            let ops = burst.into_iter().map(|q| (To::There(q.to, q.index), q.op));
            self.run_burst(store, ops, answers);
        }
    }

    fn run_burst<'b>(
        &self,
        store: &Store,
        burst: impl Iterator<Item = (To, Op<'b>)>,
        answers: &mut [Done],
    ) {
        let mut keys = Burst::default();
        let mut results: SmallVec<[(To, Applied); 16]> = SmallVec::new();
        for (to, op) in burst {
            let applied = keys.apply(store, &self.registry, &self.stats, op);
            results.push((to, applied));
        }
        let written = keys.write_back(store, &self.stats);
        let seen = store.raw().last_write_version();
        // Drained in place: moving the vector out would copy its inline buffer.
        for (to, (i, outcome, changed)) in results.drain(..) {
            let d = match (outcome, &written[i]) {
                (Err(e), _) => Done {
                    outcome: Err(e),
                    version: 0,
                },
                (Ok(_), Err(e)) if changed => Done {
                    outcome: Err(e.clone()),
                    version: 0,
                },
                (Ok(o), Ok(v)) if changed => Done {
                    outcome: Ok(o),
                    version: *v,
                },
                // Decided without writing: it rests on whatever it saw, perhaps a write of
                // this burst or an earlier one not yet visible.
                (Ok(o), Ok(v)) => Done {
                    outcome: Ok(o),
                    version: (*v).max(seen),
                },
                (Ok(o), Err(_)) => Done {
                    outcome: Ok(o),
                    version: seen,
                },
            };
            match to {
                To::Here(j) => {
                    if let Some(a) = answers.get_mut(j) {
                        *a = d;
                    }
                }
                To::There(tx, j) => {
                    let _ = tx.send((j, d));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ops::vector::{Elem, Overflow};
    use crate::core::ops::{Cond, Effect};
    use accelkv_tree::Config;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn store() -> Store {
        Store::new(Config::default()).expect("store")
    }

    fn run(st: &Station, s: &Store, ops: Vec<Op<'_>>) -> Vec<Done> {
        let mut done: SmallVec<[Done; 4]> = SmallVec::new();
        st.run(s, ops, &mut done);
        done.into_vec()
    }

    /// A pipeline's writes take effect in the order sent: their versions rise with their
    /// positions, whatever slots their keys hash to and however often a key repeats (run
    /// slot by slot, as `run` does, they would not: the crash torture found recoveries that
    /// were no prefix of a pipeline).
    #[test]
    fn in_order_runs_give_versions_in_the_order_sent() {
        for forwarding in [true, false] {
            let (st, s) = (Station::new(64, forwarding, Registry::default()), store());
            let keys: Vec<Vec<u8>> = (0..40u32)
                .map(|i| format!("key:{}", (i * 7919) % 23).into_bytes())
                .collect();
            let ops: Vec<Op<'_>> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| Op::new(k, Write::Put(Cow::Owned(i.to_le_bytes().to_vec()))))
                .collect();
            let mut done: SmallVec<[Done; 4]> = SmallVec::new();
            st.run_in_order(&s, ops, &mut done);
            let versions: Vec<u64> = done.iter().map(|d| d.version).collect();
            assert!(
                versions.windows(2).all(|w| w[0] < w[1]),
                "versions out of the order sent: {versions:?}"
            );
            for (i, k) in keys.iter().enumerate().rev().take(5) {
                let last = keys.iter().rposition(|x| x == k).expect("present");
                let got = s.get_latest(k).expect("get").expect("value");
                assert_eq!(got, last.to_le_bytes().to_vec(), "key {i}");
            }
        }
    }

    #[test]
    fn a_burst_on_one_key_is_one_tree_write_with_forwarding() {
        for forwarding in [true, false] {
            let (st, s) = (Station::new(64, forwarding, Registry::default()), store());
            let ops: Vec<Op<'_>> = (0..10).map(|_| Op::new(b"n", Write::IncrBy(1))).collect();
            let done = run(&st, &s, ops);
            let ints: Vec<_> = done.iter().map(|d| d.outcome.clone().ok()).collect();
            let want: Vec<_> = (1..=10).map(|n| Some(Outcome::Int(n))).collect();
            assert_eq!(ints, want);
            assert_eq!(s.get_latest(b"n").expect("get"), Some(b"10".to_vec()));
            let writes = st.stats.tree_writes.load(Ordering::Relaxed);
            assert_eq!(writes, if forwarding { 1 } else { 10 });
            // Every answer's version is one the store has made visible or will.
            let newest = done.iter().map(|d| d.version).max().unwrap_or(0);
            s.wait_visible(newest);
        }
    }

    /// The model's fetch-and-add: the new 8 bytes, or `None` when it fails.
    fn model_add(cur: Option<&Vec<u8>>, elem: Elem, o: Overflow, d: i64) -> Option<[u8; 8]> {
        let old = match cur {
            None => [0u8; 8],
            Some(v) => <[u8; 8]>::try_from(v.as_slice()).ok()?,
        };
        Some(if elem == Elem::U64 {
            let a = u64::from_le_bytes(old);
            match o {
                Overflow::Wrap => a.wrapping_add_signed(d),
                Overflow::Checked => a.checked_add_signed(d)?,
                Overflow::Saturate => a.saturating_add_signed(d),
            }
            .to_le_bytes()
        } else {
            let a = i64::from_le_bytes(old);
            match o {
                Overflow::Wrap => a.wrapping_add(d),
                Overflow::Checked => a.checked_add(d)?,
                Overflow::Saturate => a.saturating_add(d),
            }
            .to_le_bytes()
        })
    }

    /// Fetch-and-adds (which update the 8 bytes a burst owns in place) against a model
    /// written here with Rust's own integer arithmetic: random runs over two keys of U64
    /// and I64 adds under every overflow policy, deltas at the types' edges, PUTs of 8-byte
    /// and other values and DELETEs between them, with forwarding (one burst) and without.
    #[test]
    fn fetch_adds_match_a_model() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..200 {
            let mut ops: Vec<(Vec<u8>, Write<'static>)> = Vec::new();
            for _ in 0..24 {
                let key = vec![b'c', (next() % 2) as u8];
                let r = next();
                let w = match r % 10 {
                    0 => Write::Put(Cow::Owned(next().to_le_bytes().to_vec())),
                    1 => Write::Put(Cow::Owned(vec![1, 2, 3])),
                    2 => Write::Delete,
                    _ => Write::FetchAdd {
                        elem: [Elem::U64, Elem::I64][(r >> 8) as usize % 2],
                        overflow: [Overflow::Wrap, Overflow::Checked, Overflow::Saturate]
                            [(r >> 16) as usize % 3],
                        delta: [1, -1, i64::MAX, i64::MIN, next() as i64][(r >> 24) as usize % 5],
                    },
                };
                ops.push((key, w));
            }
            // What the model answers: each fetch-and-add's original bytes (None: failed).
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut want = Vec::new();
            for (k, w) in &ops {
                match w {
                    Write::Put(v) => {
                        model.insert(k.clone(), v.to_vec());
                    }
                    Write::Delete => {
                        model.remove(k);
                    }
                    Write::FetchAdd {
                        elem,
                        overflow,
                        delta,
                    } => {
                        let old = model.get(k).cloned();
                        match model_add(old.as_ref(), *elem, *overflow, *delta) {
                            Some(new) => {
                                let o = old.map_or([0; 8], |v| v.try_into().unwrap_or([0; 8]));
                                want.push(Some(o));
                                model.insert(k.clone(), new.to_vec());
                            }
                            None => want.push(None),
                        }
                    }
                    _ => unreachable!(),
                }
            }
            for forwarding in [true, false] {
                let (st, s) = (Station::new(64, forwarding, Registry::default()), store());
                let done = run(
                    &st,
                    &s,
                    ops.iter().map(|(k, w)| Op::new(k, w.clone())).collect(),
                );
                let got: Vec<_> = ops
                    .iter()
                    .zip(&done)
                    .filter(|(o, _)| matches!(o.1, Write::FetchAdd { .. }))
                    .map(|(_, d)| match &d.outcome {
                        Ok(Outcome::Fetched(b)) => Some(*b),
                        _ => None,
                    })
                    .collect();
                assert_eq!(got, want, "round {round}, forwarding {forwarding}");
                for k in [b"c\0", b"c\x01"] {
                    let v = s.get_latest(&k[..]).expect("get");
                    assert_eq!(v.as_ref(), model.get(&k[..]), "round {round}");
                }
            }
        }
    }

    /// Random writes on a few keys, from several threads at once, against a model: each
    /// thread's operations on its own keys are checked in order; INCRs on the shared key
    /// sum exactly.
    #[test]
    fn concurrent_submitters_match_a_model() {
        let st = Arc::new(Station::new(4, true, Registry::default()));
        let s = Arc::new(store());
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let (st, s) = (st.clone(), s.clone());
                std::thread::spawn(move || {
                    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                    let mut rng = 0x9e37_79b9u32.wrapping_mul(u32::from(t) + 1);
                    for round in 0..300u32 {
                        let mut ops = Vec::new();
                        let mut expect = Vec::new();
                        for _ in 0..8 {
                            rng ^= rng << 13;
                            rng ^= rng >> 17;
                            rng ^= rng << 5;
                            let key = vec![b'k', t, (rng % 6) as u8];
                            let val = round.to_le_bytes().to_vec();
                            let w = match rng % 4 {
                                0 => Write::Put(Cow::Owned(val.clone())),
                                1 => Write::Delete,
                                2 => Write::Set {
                                    value: Cow::Owned(val.clone()),
                                    cond: Cond::IfAbsent,
                                    get: true,
                                    ttl: Ttl::Set(0),
                                },
                                _ => Write::Cas {
                                    expected: model.get(&key).cloned().map(Cow::Owned),
                                    new: Cow::Owned(val.clone()),
                                },
                            };
                            let (e, o) = w.clone().apply(
                                model.get(&key).map(Vec::as_slice),
                                0,
                                &Registry::default(),
                                usize::MAX,
                            );
                            match e {
                                Effect::Keep | Effect::SetDeadline(_) => {}
                                Effect::Set(v, _) | Effect::SetItem(v, ..) => {
                                    model.insert(key.clone(), v.into_owned());
                                }
                                Effect::Remove => {
                                    model.remove(&key);
                                }
                            }
                            expect.push(o);
                            ops.push(Op {
                                key: Cow::Owned(key),
                                write: w,
                                hint: None,
                            });
                            ops.push(Op::new(b"shared", Write::IncrBy(1)));
                        }
                        let done = run(&st, &s, ops);
                        let got: Vec<_> = done
                            .iter()
                            .step_by(2)
                            .map(|d| d.outcome.clone().expect("write"))
                            .collect();
                        assert_eq!(got, expect);
                    }
                    for (k, v) in &model {
                        assert_eq!(s.get_latest(k).expect("get").as_ref(), Some(v));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let total = s.get_latest(b"shared").expect("get");
        assert_eq!(total, Some(b"9600".to_vec()));
        assert!(st.stats.ops.load(Ordering::Relaxed) >= 9600);
    }
}
