//! KV-Direct's reservation station (§ "out-of-order execution" of the KV-Direct seed) in the
//! server's write dispatch. Operations in flight are indexed by a hash of their key into
//! slots (1024 by default); operations in one slot are chained and applied in arrival order,
//! so a hash collision can make a false dependency but never misses a true one.
//!
//! Data forwarding: the thread that finds a slot idle becomes its executor and drains the
//! chain in bursts. Within a burst each operation runs on the latest value the station holds
//! for its key (read from the tree once), and each key's final value is written back to the
//! tree once; only then does every operation of the burst get its answer. A burst of N
//! operations on one hot key costs one tree write, and each operation still has its own
//! linearizable result (all of a burst's operations take effect, in order, at its write).
//!
//! The station is the server's only door for writes (binary protocol and RESP alike), so
//! two event loops writing one key are ordered by its slot: no other write path exists that
//! could slip between a burst's read and its write-back.
//!
//! Thread safety: any thread may submit. An executor never waits for another slot while it
//! owns one (it finishes its own bursts first), so executors cannot deadlock.

use accelkv_tree::{Error, Store};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What an operation does to its key's value.
pub enum Effect {
    /// Leaves it.
    Keep,
    /// Replaces it (inserting the key if absent).
    Set(Vec<u8>),
    /// Removes the key.
    Remove,
}

/// Called once the operation's effect is in the tree: with the version of the write that
/// made it (the store's last write version when nothing was written: the value it saw may
/// come from a write not yet visible), or the error that write failed with. The version may
/// not be visible to readers yet (`Store::is_visible`): the caller answers once it is.
pub type Finish = Box<dyn FnOnce(Result<u64, Error>) + Send>;

/// An operation: given its key's current value, its effect and what to do when done.
pub type KeyFn = Box<dyn FnOnce(Option<&[u8]>) -> (Effect, Finish) + Send>;

/// One operation submitted to the station.
pub struct Op {
    /// The key it reads and writes.
    pub key: Vec<u8>,
    /// Whether its effect depends on the current value (false for a plain PUT: the station
    /// then skips reading the key from the tree).
    pub reads: bool,
    /// What it does.
    pub f: KeyFn,
}

impl Op {
    /// An operation that reads the current value.
    pub fn reading(key: Vec<u8>, f: KeyFn) -> Op {
        Op {
            key,
            reads: true,
            f,
        }
    }

    /// An operation whose effect does not depend on the current value (it sees `None`).
    pub fn blind(key: Vec<u8>, f: KeyFn) -> Op {
        Op {
            key,
            reads: false,
            f,
        }
    }
}

struct Slot {
    busy: bool,
    queue: VecDeque<Op>,
}

/// Counters.
#[derive(Debug, Default)]
pub struct StationStats {
    /// Operations executed.
    pub ops: AtomicU64,
    /// Tree writes issued (one per key per burst that changed it).
    pub tree_writes: AtomicU64,
    /// Operations that ran on a value forwarded from an earlier operation of their burst.
    pub forwarded: AtomicU64,
}

/// The reservation station.
pub struct Station {
    slots: Vec<Mutex<Slot>>,
    forwarding: bool,
    /// Counters.
    pub stats: StationStats,
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
    /// A station of `slots` slots (at least one); without `forwarding` every operation is
    /// its own burst (one tree write each).
    pub fn new(slots: usize, forwarding: bool) -> Station {
        Station {
            slots: (0..slots.max(1))
                .map(|_| {
                    Mutex::new(Slot {
                        busy: false,
                        queue: VecDeque::new(),
                    })
                })
                .collect(),
            forwarding,
            stats: StationStats::default(),
        }
    }

    fn slot_of(&self, key: &[u8]) -> usize {
        (key_hash(key) % self.slots.len() as u64) as usize
    }

    /// Enqueues `ops` (in order) and runs the bursts of every slot that was idle on this
    /// thread. Each operation's [`Finish`] runs, on whichever thread ran its burst, after its
    /// effect is in the tree; the caller waits for those it needs.
    pub fn submit(&self, store: &Store, ops: Vec<Op>) {
        let mut owned = Vec::new();
        for op in ops {
            let i = self.slot_of(&op.key);
            let mut s = self.slots[i].lock().unwrap_or_else(|e| e.into_inner());
            s.queue.push_back(op);
            if !s.busy {
                s.busy = true;
                owned.push(i);
            }
        }
        for i in owned {
            self.drain(store, i);
        }
    }

    /// Submits one operation per item, built by `make(item, reply)`, and waits until every
    /// one has called its `reply` (usually at once: the station runs on this thread unless
    /// another thread is draining a slot); returns the replies in item order (`None` for an
    /// operation dropped without replying).
    pub fn run<T, R: Send + 'static>(
        &self,
        store: &Store,
        items: Vec<T>,
        mut make: impl FnMut(T, Box<dyn FnOnce(R) + Send>) -> Op,
    ) -> Vec<Option<R>> {
        let n = items.len();
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, R)>(n);
        let ops = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let tx = tx.clone();
                make(
                    item,
                    Box::new(move |r| {
                        let _ = tx.send((i, r));
                    }),
                )
            })
            .collect();
        drop(tx);
        self.submit(store, ops);
        let mut done: Vec<Option<R>> = (0..n).map(|_| None).collect();
        for (i, r) in rx.iter().take(n) {
            done[i] = Some(r);
        }
        done
    }

    fn drain(&self, store: &Store, i: usize) {
        loop {
            let burst: Vec<Op> = {
                let mut s = self.slots[i].lock().unwrap_or_else(|e| e.into_inner());
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
            self.run_burst(store, burst);
        }
    }

    fn run_burst(&self, store: &Store, burst: Vec<Op>) {
        // Per distinct key, in order of first appearance: the latest value (None: absent),
        // whether it was read (or set) yet, whether the burst changed it, and why reading it
        // failed, if it did.
        struct KeyState {
            key: Vec<u8>,
            value: Option<Vec<u8>>,
            known: bool,
            dirty: bool,
            read_error: Option<Error>,
        }
        let mut keys: Vec<KeyState> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut finishes: Vec<(usize, Finish)> = Vec::with_capacity(burst.len());
        for Op { key, reads, f } in burst {
            self.stats.ops.fetch_add(1, Ordering::Relaxed);
            // The common burst of one key needs no index: it is built from the second key on.
            let found = if index.is_empty() {
                keys.first().filter(|k| k.key == key).map(|_| 0)
            } else {
                index.get(&key).copied()
            };
            let i = match found {
                Some(i) => {
                    self.stats.forwarded.fetch_add(1, Ordering::Relaxed);
                    i
                }
                None => {
                    if keys.len() == 1 {
                        index.insert(keys[0].key.clone(), 0);
                    }
                    if !keys.is_empty() {
                        index.insert(key.clone(), keys.len());
                    }
                    keys.push(KeyState {
                        key,
                        value: None,
                        known: false,
                        dirty: false,
                        read_error: None,
                    });
                    keys.len() - 1
                }
            };
            let k = &mut keys[i];
            if reads && !k.known {
                // The newest value, visible or not: every write of this key came through this
                // slot, so the newest is the one this operation follows.
                match store.get_latest(&k.key) {
                    Ok(v) => k.value = v,
                    Err(e) => k.read_error = Some(e),
                }
                k.known = true;
            }
            let cur = if reads { k.value.as_deref() } else { None };
            let (effect, finish) = f(cur);
            match effect {
                Effect::Keep => {}
                Effect::Set(v) => (k.value, k.known, k.dirty) = (Some(v), true, true),
                Effect::Remove => (k.value, k.known, k.dirty) = (None, true, true),
            }
            finishes.push((i, finish));
        }
        // Write each changed key back once.
        let outcomes: Vec<Result<u64, Error>> = keys
            .into_iter()
            .map(|k| match k.read_error {
                Some(e) => Err(e),
                None if !k.dirty => Ok(store.raw().last_write_version()),
                None => {
                    self.stats.tree_writes.fetch_add(1, Ordering::Relaxed);
                    match &k.value {
                        Some(v) => store.put_unwaited(&k.key, v).map(|w| w.version),
                        None => store.delete_unwaited(&k.key).map(|w| w.version),
                    }
                }
            })
            .collect();
        for (i, finish) in finishes {
            finish(outcomes[i].clone());
        }
    }
}
