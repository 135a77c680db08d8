//! Client-side caching (Redis 6's CLIENT TRACKING): the server remembers which tracking
//! connections read which keys, and when a key changes it tells them, once, to drop it
//! (`invalidate` with the key). In BCAST mode a connection names key prefixes instead and
//! hears of every change under them. The message is a RESP3 push on the connection itself,
//! or, with REDIRECT, goes to another connection subscribed to `__redis__:invalidate` (a
//! pub/sub message there in RESP2, a push in RESP3); FLUSHALL and FLUSHDB invalidate
//! everything (`invalidate` with a null).
//!
//! How changes are seen: every write names what it changes as a keyspace event
//! (`notify.rs`); while any connection tracks, the events are collected whatever
//! `notify-keyspace-events` says (and batches of SETs and GETs run one by one, as they do
//! while events are announced), and each committed command's keys are invalidated here.
//! The expiry sweep's removals come the same way. Reads are noted after a read command
//! ran, from its key positions. The table of keys is bounded (`TABLE_MAX_KEYS`, Redis's
//! `tracking-table-max-keys` default): past it, the oldest noted keys are invalidated
//! and forgotten, as Redis does.

use crate::core::clients::Clients;
use crate::resp::notify_class::Notify;
use crate::resp::pubsub::{PubSub, Subscriber};
use accelkv_proto::resp::{self, Version};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Most keys remembered for the connections that track them.
pub const TABLE_MAX_KEYS: usize = 1_000_000;

/// The channel a REDIRECT target subscribes to.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// A connection's tracking options (CLIENT TRACKING ON …).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Client id the invalidations go to (0: the connection itself).
    pub redirect: u64,
    pub bcast: bool,
    /// BCAST's prefixes (none: every key).
    pub prefixes: Vec<Vec<u8>>,
    pub optin: bool,
    pub optout: bool,
    /// Not told of its own writes.
    pub noloop: bool,
}

/// One tracking connection as the registry sees it.
struct Target {
    opts: Options,
    /// The connection's own queue (its pushes).
    me: Arc<Subscriber>,
}

#[derive(Default)]
struct Table {
    /// Each key read by tracking connections: when it was noted (a sequence number) and
    /// who read it.
    keys: HashMap<Vec<u8>, (u64, Vec<u64>)>,
    /// The keys in the order noted (oldest first), to bound the table. An entry whose
    /// number is not its key's any more (the key was told and forgotten since) is stale:
    /// skipped, and dropped when stale entries outnumber live ones.
    order: VecDeque<(u64, Vec<u8>)>,
    next: u64,
    targets: HashMap<u64, Target>,
}

impl Table {
    /// Notes that `id` read `key`.
    fn note(&mut self, key: &[u8], id: u64) {
        match self.keys.get_mut(key) {
            Some((_, ids)) if ids.contains(&id) => {}
            Some((_, ids)) => ids.push(id),
            None => {
                self.next += 1;
                self.keys.insert(key.to_vec(), (self.next, vec![id]));
                self.order.push_back((self.next, key.to_vec()));
                if self.order.len() > 2 * self.keys.len() + 1024 {
                    let keys = &self.keys;
                    self.order
                        .retain(|(n, k)| keys.get(k).is_some_and(|(m, _)| m == n));
                }
            }
        }
    }

    /// The oldest key still noted, taken out of the order.
    fn oldest(&mut self) -> Option<Vec<u8>> {
        while let Some((n, k)) = self.order.pop_front() {
            if self.keys.get(&k).is_some_and(|(m, _)| *m == n) {
                return Some(k);
            }
        }
        None
    }
}

/// The server's tracking state.
#[derive(Default)]
pub struct Tracking {
    /// Connections tracking now (one relaxed load where nobody tracks).
    on: AtomicUsize,
    table: Mutex<Table>,
}

/// How invalidations reach connections: their queues, and whether a REDIRECT target is
/// still connected.
pub struct Reach<'a> {
    pub pubsub: &'a PubSub,
    pub clients: &'a Clients,
}

/// Invalidations to send: the target's queue, its REDIRECT, the keys (`None`: everything),
/// and whether it gathers a BCAST connection's keys.
type Outbox = Vec<(Arc<Subscriber>, u64, Option<Vec<Vec<u8>>>, bool)>;

impl Tracking {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any connection tracks.
    #[inline(always)]
    pub fn active(&self) -> bool {
        self.on.load(Ordering::Relaxed) > 0
    }

    /// Connection `id` tracks with `opts`, its own pushes going to `me`; `notify` collects
    /// every event from now on.
    pub fn start(&self, id: u64, opts: Options, me: Arc<Subscriber>, notify: &Notify) {
        let mut t = self.lock();
        t.targets.insert(id, Target { opts, me });
        self.counted(&t, notify);
    }

    /// Connection `id` stops tracking (CLIENT TRACKING OFF, RESET, its close); the keys it
    /// read are forgotten as they change.
    pub fn stop(&self, id: u64, notify: &Notify) {
        let mut t = self.lock();
        t.targets.remove(&id);
        self.counted(&t, notify);
    }

    /// Notes how many track, under the table's lock (so a start and a stop at once
    /// leave `notify` as the last of them says).
    fn counted(&self, t: &Table, notify: &Notify) {
        self.on.store(t.targets.len(), Ordering::Relaxed);
        notify.set_tracking(!t.targets.is_empty());
    }

    /// How many keys are remembered (INFO's `tracking_total_keys`).
    pub fn keys(&self) -> usize {
        self.lock().keys.len()
    }

    /// How many prefixes BCAST connections follow (INFO's `tracking_total_prefixes`).
    pub fn prefixes(&self) -> usize {
        self.lock()
            .targets
            .values()
            .map(|t| t.opts.prefixes.len())
            .sum()
    }

    /// Connection `id` read `keys` (stored keys): it is told when they change.
    pub fn read(&self, to: &Reach<'_>, id: u64, keys: &[&[u8]]) {
        let mut out = Outbox::new();
        {
            let mut t = self.lock();
            for k in keys {
                t.note(k, id);
            }
            while t.keys.len() > TABLE_MAX_KEYS {
                let Some(old) = t.oldest() else {
                    break;
                };
                collect(&mut t, &old, 0, false, &mut out);
            }
        }
        send(to, out);
    }

    /// `keys` (stored keys) changed, by connection `writer` (0: the server's expiry).
    pub fn changed(&self, to: &Reach<'_>, writer: u64, keys: &[Vec<u8>]) {
        let mut out = Outbox::new();
        {
            let mut t = self.lock();
            for k in keys {
                collect(&mut t, k, writer, true, &mut out);
            }
        }
        send(to, out);
    }

    /// Every key changed (FLUSHALL, FLUSHDB): every tracking connection is told to drop
    /// everything.
    pub fn flushed(&self, to: &Reach<'_>) {
        let out: Outbox = {
            let mut t = self.lock();
            t.keys.clear();
            t.order.clear();
            t.targets
                .values()
                .map(|tg| (tg.me.clone(), tg.opts.redirect, None, false))
                .collect()
        };
        send(to, out);
    }
}

/// Adds to `out` whom a change of `key` by `writer` tells: the connections that read it
/// (forgotten now; one message per key, as Redis sends them), and the BCAST ones whose
/// prefix covers it (`bcast`; one message per command, its keys together).
fn collect(t: &mut Table, key: &[u8], writer: u64, bcast: bool, out: &mut Outbox) {
    let readers = t.keys.remove(key).map(|(_, ids)| ids).unwrap_or_default();
    let shown = crate::resp::prefix::shown(key).to_vec();
    for id in readers {
        match t.targets.get(&id) {
            Some(tg) if !(tg.opts.bcast || (tg.opts.noloop && id == writer)) => out.push((
                tg.me.clone(),
                tg.opts.redirect,
                Some(vec![shown.clone()]),
                false,
            )),
            _ => {}
        }
    }
    if !bcast {
        return;
    }
    for (id, tg) in &t.targets {
        let covered =
            tg.opts.prefixes.is_empty() || tg.opts.prefixes.iter().any(|p| shown.starts_with(p));
        if !tg.opts.bcast || !covered || (tg.opts.noloop && *id == writer) {
            continue;
        }
        let same = |(s, r, _, b): &&mut (Arc<Subscriber>, u64, Option<Vec<Vec<u8>>>, bool)| {
            *b && Arc::ptr_eq(s, &tg.me) && *r == tg.opts.redirect
        };
        match out.iter_mut().find(same) {
            Some((_, _, Some(keys), _)) => keys.push(shown.clone()),
            Some(_) => {}
            None => out.push((
                tg.me.clone(),
                tg.opts.redirect,
                Some(vec![shown.clone()]),
                true,
            )),
        }
    }
}

/// Sends the invalidations: to the connection itself (RESP3 pushes; a RESP2 connection is
/// sent nothing, as Redis sends it nothing), or to its REDIRECT target if that is
/// subscribed to `__redis__:invalidate`; when the target has gone, the connection itself
/// is told (`tracking-redir-broken` and the target's id, RESP3), as Redis tells it.
fn send(to: &Reach<'_>, out: Outbox) {
    for (me, redirect, keys, _) in out {
        let encode = |o: &mut Vec<u8>, v: Version, message: bool| {
            if message && v == Version::Resp2 {
                resp::array(o, 3);
                resp::bulk(o, Some(b"message"));
                resp::bulk(o, Some(CHANNEL));
            } else {
                resp::push(o, 2, v);
                resp::bulk(o, Some(b"invalidate"));
            }
            match &keys {
                Some(k) => {
                    resp::array(o, k.len());
                    for key in k {
                        resp::bulk(o, Some(key));
                    }
                }
                None => resp::bulk_in(o, None, v),
            }
        };
        if redirect == 0 {
            me.deliver_if(Version::Resp3, |o, v| encode(o, v, false));
        } else if let Some(target) = to.pubsub.subscriber(CHANNEL, redirect) {
            target.deliver_any(|o, v| encode(o, v, true));
        } else if !to.clients.exists(redirect) {
            me.deliver_if(Version::Resp3, |o, v| {
                resp::push(o, 2, v);
                resp::bulk(o, Some(b"tracking-redir-broken"));
                resp::integer(o, redirect as i64);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn the_order_stays_bounded_when_keys_are_told_and_read_again() {
        let mut t = Table::default();
        t.note(b"kept", 1);
        for _ in 0..100_000 {
            t.note(b"hot", 1);
            t.keys.remove(b"hot".as_slice()); // told of a change: forgotten
        }
        assert!(
            t.order.len() <= 2 * t.keys.len() + 1024 + 1,
            "{}",
            t.order.len()
        );
        // The oldest still noted is the one kept, not a stale entry.
        assert_eq!(t.oldest().as_deref(), Some(b"kept".as_slice()));
        assert_eq!(t.oldest(), None);
    }
}
