//! Connections parked on keys (Redis's blocking commands: BLPOP, BRPOP, BLMOVE, BZPOPMIN…):
//! a connection whose command found nothing to take parks here with its keys, a deadline
//! and a waker; a write that may have given one of those keys something to take wakes
//! every connection parked on it, and the timer thread wakes those whose deadline passed.
//! A woken connection runs its command again from the start (it either takes something,
//! answers its timeout, or parks again), so nothing is handed from one thread to another
//! but the wake itself.
//!
//! Commands that take what they find (every blocking command but XREAD) are served in the
//! order they parked, as Redis serves them: a write wakes the oldest of them on its key and
//! gives it the key's turn; when it has run (taken something, or parked again, or closed)
//! the turn passes to the next one parked on the key before the write's wake (or that
//! arrived while the turn was held, see [`Blocked::busy`]), until none is left. A new
//! command on a key whose turn is held parks behind the holder without looking, so a
//! client that pipelines a push and a pop does not take what an earlier client waits for.
//! XREAD takes nothing: all its parked readers are woken together.
//!
//! CLIENT UNBLOCK wakes one connection by its client id, after setting the flag it reads
//! when it runs again ([`Who::unblocked`]: answer as a timeout, or with an error).
//!
//! No wake is lost between a command finding its keys empty and parking: the command reads
//! [`Blocked::epoch`] before it looks, every wake bumps the epoch before it looks for
//! parked connections, and parking compares the epoch after registering (both sides
//! sequentially consistent: one of them sees the other). A wake that raced is a spurious
//! re-run, never a missed one.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// What wakes a parked connection (posts to its loop; callable from any thread).
pub type Waker = Box<dyn FnOnce() + Send>;

struct Parked {
    keys: Vec<Vec<u8>>,
    deadline: Option<Instant>,
    who: Who,
    wake: Waker,
}

/// Who parks: the connection's client id and its flag for CLIENT UNBLOCK, whether a
/// deletion of a key wakes it too (XREADGROUP: Redis's `unblock_on_nokey`), whether it takes
/// what it finds (served in order) and whether it parked behind a turn without looking.
#[derive(Clone, Default)]
pub struct Who {
    pub client: u64,
    pub on_nokey: bool,
    pub takes: bool,
    pub behind: bool,
    /// Set by CLIENT UNBLOCK before the wake: [`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`].
    pub unblocked: Arc<AtomicU8>,
}

/// CLIENT UNBLOCK's `TIMEOUT` (the default): the command answers as if it timed out.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK's `ERROR`: the command answers `-UNBLOCKED`.
pub const UNBLOCK_ERROR: u8 = 2;

/// A key's turn: held by one woken connection at a time; `bound`: the first ticket parked
/// after the latest wake of the key (those before it, and those parked behind, are served).
struct Turn {
    holder: u64,
    bound: u64,
}

#[derive(Default)]
struct Inner {
    by_key: HashMap<Vec<u8>, Vec<u64>>,
    parked: HashMap<u64, Parked>,
    deadlines: BTreeSet<(Instant, u64)>,
    next: u64,
    timer: bool,
    turns: HashMap<Vec<u8>, Turn>,
    /// Woken connections holding a turn: the keys they hold it for.
    holding: HashMap<u64, Vec<Vec<u8>>>,
}

/// The server's parked connections.
#[derive(Default)]
pub struct Blocked {
    inner: Mutex<Inner>,
    due: Condvar,
    epoch: AtomicU64,
    /// Tickets alive: parked, or woken and not yet run again (a turn's holder is one).
    waiting: AtomicUsize,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    /// The oldest connection on `k` that takes what it finds and may have the turn up to
    /// `bound`.
    fn next_taker(&self, k: &[u8], bound: u64) -> Option<u64> {
        let ts = self.by_key.get(k)?;
        ts.iter().copied().find(|t| {
            self.parked
                .get(t)
                .is_some_and(|p| p.who.takes && (*t < bound || p.who.behind))
        })
    }

    /// Gives `k`'s turn to the oldest taker parked on it (if any): its waker.
    fn pass(&mut self, k: &[u8], bound: u64) -> Option<Waker> {
        let t = self.next_taker(k, bound)?;
        self.grant(t, bound)
    }

    /// Wakes taker `t` with the turn of each of its keys that nobody holds (it may take
    /// from any of them, so no later taker runs on them beside it): its waker.
    fn grant(&mut self, t: u64, bound: u64) -> Option<Waker> {
        let keys = self.parked.get(&t)?.keys.clone();
        for k in keys {
            if let std::collections::hash_map::Entry::Vacant(e) = self.turns.entry(k) {
                self.holding.entry(t).or_default().push(e.key().clone());
                e.insert(Turn { holder: t, bound });
            }
        }
        self.take(t)
    }

    /// Ticket `t` ran after its wake: the turns it held pass on, each key's to its next
    /// taker (one given several keys' turns at once runs alone on them).
    fn settle(&mut self, t: u64) -> Vec<Waker> {
        let Some(keys) = self.holding.remove(&t) else {
            return Vec::new();
        };
        let mut freed = Vec::new();
        for k in keys {
            if self.turns.get(&k).is_some_and(|turn| turn.holder == t) {
                let bound = self.turns.remove(&k).map_or(0, |turn| turn.bound);
                freed.push((k, bound));
            }
        }
        let mut wakers = Vec::new();
        for (k, bound) in freed {
            if !self.turns.contains_key(&k) {
                wakers.extend(self.pass(&k, bound));
            }
        }
        wakers
    }

    /// Takes ticket `t` out of every index; its waker.
    fn take(&mut self, t: u64) -> Option<Waker> {
        let p = self.parked.remove(&t)?;
        for k in &p.keys {
            if let Some(v) = self.by_key.get_mut(k) {
                v.retain(|&x| x != t);
                if v.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
        if let Some(d) = p.deadline {
            self.deadlines.remove(&(d, t));
        }
        Some(p.wake)
    }
}

/// A parked connection's place; dropping it (the connection closed, or it ran again)
/// takes it out.
pub struct Ticket {
    of: Weak<Blocked>,
    id: u64,
}

impl Ticket {
    /// Whether it is still parked (not woken, timed out or unblocked).
    pub fn parked(&self) -> bool {
        self.of
            .upgrade()
            .is_some_and(|b| lock(&b.inner).parked.contains_key(&self.id))
    }
}

impl Drop for Ticket {
    /// Leaves the registry, or (woken and run) passes on the turns it held.
    fn drop(&mut self) {
        if let Some(b) = self.of.upgrade() {
            let mut g = lock(&b.inner);
            g.take(self.id);
            let wakers = g.settle(self.id);
            drop(g);
            // Counted from parking until now, woken or not (Redis counts a client blocked
            // until its command has run).
            b.waiting.fetch_sub(1, Ordering::SeqCst);
            for w in wakers {
                w();
            }
        }
    }
}

impl Blocked {
    /// Read before a blocking command looks at its keys; handed back to [`Blocked::park`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Connections parked now, or woken and not yet run again (INFO's `blocked_clients`).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Keys connections are parked on, and those of them with a connection that a deletion
    /// of the key wakes (INFO's `total_blocking_keys` and `total_blocking_keys_on_nokey`).
    pub fn keys(&self) -> (usize, usize) {
        let g = lock(&self.inner);
        let on_nokey = g
            .by_key
            .values()
            .filter(|ts| {
                ts.iter()
                    .any(|t| g.parked.get(t).is_some_and(|p| p.who.on_nokey))
            })
            .count();
        (g.by_key.len(), on_nokey)
    }

    /// Parks a connection on `keys` until a wake of one of them or `deadline` (`None`:
    /// forever); `seen`: the epoch read before the keys were found empty (a wake since then
    /// wakes it at once).
    pub fn park(
        self: &Arc<Self>,
        (keys, who): (Vec<Vec<u8>>, Who),
        deadline: Option<Instant>,
        seen: u64,
        wake: Waker,
    ) -> Ticket {
        let mut g = lock(&self.inner);
        let id = g.next;
        g.next += 1;
        for k in &keys {
            g.by_key.entry(k.clone()).or_default().push(id);
        }
        if let Some(d) = deadline {
            g.deadlines.insert((d, id));
            if !g.timer {
                g.timer = true;
                let weak = Arc::downgrade(self);
                let spawned = std::thread::Builder::new()
                    .name("accelkv-blocked".into())
                    .spawn(move || run_timer(weak));
                g.timer = spawned.is_ok();
            }
            self.due.notify_one();
        }
        g.parked.insert(
            id,
            Parked {
                keys,
                deadline,
                who,
                wake,
            },
        );
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let raced = self.epoch.load(Ordering::SeqCst) != seen;
        let now = if raced { g.take(id) } else { None };
        drop(g);
        if let Some(w) = now {
            w();
        }
        Ticket {
            of: Arc::downgrade(self),
            id,
        }
    }

    /// Whether a woken connection holds the turn of one of `keys`: a command that takes
    /// what it finds parks behind it without looking.
    pub fn busy(&self, keys: &[&[u8]]) -> bool {
        // A turn's holder is a ticket not yet dropped, so counted in `waiting`.
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let g = lock(&self.inner);
        keys.iter().any(|k| g.turns.contains_key(*k))
    }

    /// `keys` may have something to take now (their writes are committed): wakes every
    /// reader parked on one of them, and gives each key's turn to its oldest taker (one
    /// holds it already: the turn reaches every taker parked until now).
    pub fn wake<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut g = lock(&self.inner);
        let bound = g.next;
        let mut wakers = Vec::new();
        let mut readers = Vec::new();
        for k in keys {
            if let Some(turn) = g.turns.get_mut(k) {
                turn.bound = bound;
            } else {
                wakers.extend(g.pass(k, bound));
            }
            let ts = g.by_key.get(k).into_iter().flatten().copied();
            readers.extend(ts.filter(|t| g.parked.get(t).is_some_and(|p| !p.who.takes)));
        }
        readers.sort_unstable();
        readers.dedup();
        wakers.extend(readers.into_iter().filter_map(|t| g.take(t)));
        drop(g);
        for w in wakers {
            w();
        }
    }

    /// CLIENT UNBLOCK: wakes the connection of client `client` if it is parked, flagged
    /// `how` ([`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`]); whether it was.
    pub fn unblock(&self, client: u64, how: u8) -> bool {
        let mut g = lock(&self.inner);
        let Some(t) = g
            .parked
            .iter()
            .find(|p| p.1.who.client == client)
            .map(|p| *p.0)
        else {
            return false;
        };
        if let Some(p) = g.parked.get(&t) {
            p.who.unblocked.store(how, Ordering::SeqCst);
        }
        let w = g.take(t);
        drop(g);
        if let Some(w) = w {
            w();
        }
        true
    }

    /// Wakes every parked connection (FLUSHALL, SWAPDB-like changes, shutdown).
    pub fn wake_all(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let mut g = lock(&self.inner);
        let ids: Vec<u64> = g.parked.keys().copied().collect();
        let wakers: Vec<Waker> = ids.into_iter().filter_map(|t| g.take(t)).collect();
        drop(g);
        for w in wakers {
            w();
        }
    }
}

/// The timer: wakes connections whose deadline passed; ends with the server.
fn run_timer(weak: Weak<Blocked>) {
    loop {
        let Some(b) = weak.upgrade() else { return };
        let mut g = lock(&b.inner);
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(&(d, t)) = g.deadlines.first() {
            if d > now {
                break;
            }
            due.extend(g.take(t));
        }
        // At most a second asleep, so a server that is gone lets the thread end.
        let wait = g
            .deadlines
            .first()
            .map_or(Duration::from_secs(1), |&(d, _)| d - now)
            .min(Duration::from_secs(1));
        if due.is_empty() {
            let _ = b.due.wait_timeout(g, wait);
            continue;
        }
        drop(g);
        for w in due {
            w();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn waker(tx: &mpsc::Sender<u32>, n: u32) -> Waker {
        let tx = tx.clone();
        Box::new(move || {
            let _ = tx.send(n);
        })
    }

    #[test]
    fn wakes_those_parked_on_a_key_in_order_and_only_once() {
        let b = Arc::new(Blocked::default());
        let (tx, rx) = mpsc::channel();
        let e = b.epoch();
        let _t1 = b.park(
            (vec![b"a".to_vec()], Who::default()),
            None,
            e,
            waker(&tx, 1),
        );
        let _t2 = b.park(
            (
                vec![b"b".to_vec(), b"a".to_vec()],
                Who {
                    client: 9,
                    on_nokey: true,
                    ..Who::default()
                },
            ),
            None,
            e,
            waker(&tx, 2),
        );
        let _t3 = b.park(
            (vec![b"c".to_vec()], Who::default()),
            None,
            e,
            waker(&tx, 3),
        );
        assert_eq!(b.waiting(), 3);
        assert_eq!(b.keys(), (3, 2));
        b.wake([&b"a"[..]]);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 2]);
        b.wake([&b"a"[..], b"b"]);
        assert_eq!(rx.try_iter().count(), 0, "woken once");
        // A woken connection counts until it has run again (its ticket goes).
        assert_eq!(b.waiting(), 3);
        drop((_t1, _t2));
        assert_eq!(b.waiting(), 1);
    }

    fn taker() -> Who {
        Who {
            takes: true,
            ..Who::default()
        }
    }

    /// Takers are woken one at a time in the order they parked; the turn reaches each one
    /// parked before the wake (or behind the turn) once, never one that parked again.
    #[test]
    fn takers_get_the_turn_in_order_one_at_a_time() {
        let b = Arc::new(Blocked::default());
        let (tx, rx) = mpsc::channel();
        let e = b.epoch();
        let k = || vec![b"k".to_vec()];
        let t1 = b.park((k(), taker()), None, e, waker(&tx, 1));
        let t2 = b.park(
            (vec![b"j".to_vec(), b"k".to_vec()], taker()),
            None,
            e,
            waker(&tx, 2),
        );
        let reader = b.park((k(), Who::default()), None, e, waker(&tx, 9));
        b.wake([&b"k"[..]]);
        assert_eq!(
            rx.try_iter().collect::<Vec<_>>(),
            vec![1, 9],
            "the oldest taker and every reader"
        );
        assert!(b.busy(&[b"k"]) && !b.busy(&[b"x"]));
        // Another write while the turn is held wakes nobody more.
        b.wake([&b"k"[..]]);
        assert_eq!(rx.try_iter().count(), 0);
        // A taker arriving now parks behind; the holder ran and parked again.
        let t3 = b.park(
            (
                k(),
                Who {
                    behind: true,
                    ..taker()
                },
            ),
            None,
            b.epoch(),
            waker(&tx, 3),
        );
        let t1 = {
            let again = b.park((k(), taker()), None, b.epoch(), waker(&tx, 11));
            drop(t1);
            again
        };
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![2]);
        // t2 also waits on j: it holds j's turn too.
        assert!(b.busy(&[b"j"]));
        drop(t2);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![3], "the one behind");
        drop(t3);
        assert_eq!(rx.try_iter().count(), 0, "not the one that parked again");
        assert!(!b.busy(&[b"k", b"j"]));
        assert_eq!(
            b.waiting(),
            2,
            "t1 parked again, the reader woken but not run"
        );
        drop((t1, reader));
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn unblock_wakes_one_client_by_id_with_its_flag_set() {
        let b = Arc::new(Blocked::default());
        let (tx, rx) = mpsc::channel();
        let who = Who {
            client: 42,
            ..Who::default()
        };
        let flag = who.unblocked.clone();
        let t = b.park((vec![b"k".to_vec()], who), None, b.epoch(), waker(&tx, 1));
        assert!(!b.unblock(41, UNBLOCK_ERROR));
        assert_eq!(flag.load(Ordering::SeqCst), 0);
        assert!(b.unblock(42, UNBLOCK_ERROR));
        assert_eq!(
            (rx.try_recv(), flag.load(Ordering::SeqCst)),
            (Ok(1), UNBLOCK_ERROR)
        );
        assert_eq!((b.waiting(), b.keys()), (1, (0, 0)));
        assert!(!b.unblock(42, UNBLOCK_TIMEOUT), "parked no more");
        drop(t);
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn a_wake_between_looking_and_parking_is_not_lost() {
        let b = Arc::new(Blocked::default());
        let (tx, rx) = mpsc::channel();
        let seen = b.epoch();
        b.wake([&b"k"[..]]); // a push committed after the command found the key empty
        let t = b.park(
            (vec![b"k".to_vec()], Who::default()),
            None,
            seen,
            waker(&tx, 7),
        );
        assert_eq!(rx.try_recv(), Ok(7));
        assert_eq!(b.keys(), (0, 0));
        drop(t);
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn deadlines_wake_and_dropped_tickets_leave() {
        let b = Arc::new(Blocked::default());
        let (tx, rx) = mpsc::channel();
        let e = b.epoch();
        let soon = Instant::now() + Duration::from_millis(30);
        let t = b.park(
            (vec![b"k".to_vec()], Who::default()),
            Some(soon),
            e,
            waker(&tx, 1),
        );
        let gone = b.park(
            (vec![b"k".to_vec()], Who::default()),
            None,
            e,
            waker(&tx, 2),
        );
        drop(gone);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(1));
        assert!(Instant::now() >= soon);
        assert_eq!((b.waiting(), b.keys()), (1, (0, 0)));
        drop(t);
        assert_eq!(b.waiting(), 0);
        b.wake([&b"k"[..]]);
        assert!(rx.try_recv().is_err(), "a dropped ticket is never woken");
    }
}
