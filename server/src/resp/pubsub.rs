//! Pub/sub (Redis's PUBLISH, SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their kin): the server's
//! subscriptions, and each subscribed connection's queue of messages.
//!
//! A message goes from the publisher's thread into each receiver's queue, encoded for the
//! receiver's protocol (a RESP2 array or a RESP3 push), in the order PUBLISH took the
//! registry's lock: per channel, every receiver gets messages in publish order. The first
//! message of an empty queue posts to the receiver's event loop, which moves the queue into
//! the connection's output on its own thread (`Session::pushed`): nothing else crosses
//! threads, and a connection's replies and messages stay in the order they were made.
//!
//! Bounded: a receiver whose queue passes `client-output-buffer-limit pubsub`'s hard limit
//! (32 MiB, Redis's default) is disconnected, as Redis disconnects it, and its queue freed;
//! the loop moves a queue into the output only while the output is under `--max-output`.
//!
//! Thread safety: the registry is one mutex (PUBLISH, SUBSCRIBE and their kin take it once);
//! a queue is a mutex of its own, taken by publishers and by its connection's loop.

use crate::core::glob;
use accelkv_proto::resp::{self, Version};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Where a subscription lives: a channel, a pattern of channels, or a shard channel
/// (SSUBSCRIBE, SPUBLISH: one shard here, a namespace of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Channel,
    Pattern,
    Shard,
}

impl Space {
    fn index(self) -> usize {
        match self {
            Space::Channel => 0,
            Space::Pattern => 1,
            Space::Shard => 2,
        }
    }

    /// The reply kind of a subscription and of its end (`subscribe`, `unsubscribe`…).
    pub fn verbs(self) -> (&'static [u8], &'static [u8]) {
        match self {
            Space::Channel => (b"subscribe", b"unsubscribe"),
            Space::Pattern => (b"psubscribe", b"punsubscribe"),
            Space::Shard => (b"ssubscribe", b"sunsubscribe"),
        }
    }
}

/// What a loop does for a subscribed connection, callable from any thread.
pub struct PushTo {
    /// Asks the loop to move the connection's queue into its output.
    pub notify: Box<dyn Fn() + Send + Sync>,
    /// Asks the loop to close the connection.
    pub kill: Box<dyn Fn() + Send + Sync>,
}

/// One subscribed connection as publishers see it.
pub struct Subscriber {
    id: u64,
    resp3: AtomicBool,
    queue: Mutex<Vec<u8>>,
    /// The loop was asked to take the queue and has not yet.
    posted: AtomicBool,
    /// Past its limit: disconnected, nothing more queued.
    dead: AtomicBool,
    to: PushTo,
    /// Its queue's limit ([`PubSub::set_queue_limit`]).
    limit: Arc<AtomicUsize>,
}

impl Subscriber {
    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues one message made by `encode` for this subscriber's protocol.
    fn deliver(&self, encode: impl FnOnce(&mut Vec<u8>, Version)) {
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let limit = self.limit.load(Ordering::Relaxed);
        let v = match self.resp3.load(Ordering::Relaxed) {
            true => Version::Resp3,
            false => Version::Resp2,
        };
        let mut q = self.lock();
        encode(&mut q, v);
        if q.len() > limit {
            self.dead.store(true, Ordering::Relaxed);
            *q = Vec::new();
            drop(q);
            return (self.to.kill)();
        }
        drop(q);
        if !self.posted.swap(true, Ordering::AcqRel) {
            (self.to.notify)();
        }
    }

    /// Queues one message for this subscriber's protocol (client-side caching's
    /// invalidations, `tracking.rs`).
    pub fn deliver_any(&self, encode: impl FnOnce(&mut Vec<u8>, Version)) {
        self.deliver(encode)
    }

    /// Queues one message only if the subscriber speaks `v`.
    pub fn deliver_if(&self, v: Version, encode: impl FnOnce(&mut Vec<u8>, Version)) {
        if self.resp3.load(Ordering::Relaxed) == (v == Version::Resp3) {
            self.deliver(encode)
        }
    }

    /// Moves every queued message to `out` (on the connection's loop).
    pub fn take_into(&self, out: &mut Vec<u8>) {
        if !self.posted.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut q = self.lock();
        out.extend_from_slice(&q);
        q.clear();
        if q.capacity() > 64 << 10 {
            *q = Vec::new(); // a burst's memory is given back
        }
    }

    /// Bytes waiting for the connection's loop (a lock only when some were posted).
    fn waiting(&self) -> usize {
        match self.posted.load(Ordering::Relaxed) {
            true => self.lock().len(),
            false => 0,
        }
    }
}

/// Per space (`Space::index`), each name's subscribers.
type Spaces = [HashMap<Vec<u8>, Vec<Arc<Subscriber>>>; 3];

/// The server's subscriptions: per space, each name's subscribers; and the connections
/// in MONITOR mode (`monitor.rs`), which get every command through the same queues.
pub struct PubSub {
    spaces: Mutex<Spaces>,
    monitors: Mutex<Vec<Arc<Subscriber>>>,
    /// How many connections monitor: the dispatcher's one check while none does.
    monitoring: std::sync::atomic::AtomicUsize,
    /// Each subscriber's queue limit (bytes; `client-output-buffer-limit pubsub`'s hard
    /// limit, `usize::MAX` when 0), shared with every subscriber.
    queue_limit: Arc<AtomicUsize>,
}

impl Default for PubSub {
    fn default() -> Self {
        PubSub {
            spaces: Default::default(),
            monitors: Default::default(),
            monitoring: Default::default(),
            // `client-output-buffer-limit pubsub`'s hard limit, Redis's default.
            queue_limit: Arc::new(AtomicUsize::new(crate::resp::output_limits::PUBSUB_HARD)),
        }
    }
}

impl PubSub {
    /// Sets each subscriber's queue limit (0: none).
    pub fn set_queue_limit(&self, bytes: u64) {
        let b = usize::try_from(bytes).unwrap_or(usize::MAX);
        let b = if b == 0 { usize::MAX } else { b };
        self.queue_limit.store(b, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Spaces> {
        self.spaces.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, space: Space, name: &[u8], sub: &Arc<Subscriber>) {
        let mut sp = self.lock();
        sp[space.index()]
            .entry(name.to_vec())
            .or_default()
            .push(sub.clone());
    }

    fn remove(&self, space: Space, name: &[u8], id: u64) {
        let mut sp = self.lock();
        let m = &mut sp[space.index()];
        if let Some(v) = m.get_mut(name) {
            v.retain(|s| s.id != id);
            if v.is_empty() {
                m.remove(name);
            }
        }
    }

    /// Sends `msg` on `channel` (a shard channel when `shard`): to its subscribers, then
    /// to those of every matching pattern (channels only). How many received it.
    pub fn publish(&self, shard: bool, channel: &[u8], msg: &[u8]) -> usize {
        let sp = self.lock();
        let mut n = 0;
        let (space, kind): (Space, &[u8]) = match shard {
            true => (Space::Shard, b"smessage"),
            false => (Space::Channel, b"message"),
        };
        for sub in sp[space.index()].get(channel).into_iter().flatten() {
            sub.deliver(|out, v| {
                resp::push(out, 3, v);
                resp::bulk(out, Some(kind));
                resp::bulk(out, Some(channel));
                resp::bulk(out, Some(msg));
            });
            n += 1;
        }
        if !shard {
            for (pat, subs) in &sp[Space::Pattern.index()] {
                if !glob::matches(pat, channel) {
                    continue;
                }
                for sub in subs {
                    sub.deliver(|out, v| {
                        resp::push(out, 4, v);
                        resp::bulk(out, Some(b"pmessage"));
                        resp::bulk(out, Some(pat));
                        resp::bulk(out, Some(channel));
                        resp::bulk(out, Some(msg));
                    });
                    n += 1;
                }
            }
        }
        n
    }

    /// The names of `space` with a subscriber, matching `pattern` when given (PUBSUB
    /// CHANNELS, SHARDCHANNELS).
    pub fn names(&self, space: Space, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let sp = self.lock();
        let mut v: Vec<Vec<u8>> = sp[space.index()]
            .keys()
            .filter(|n| pattern.is_none_or(|p| glob::matches(p, n)))
            .cloned()
            .collect();
        v.sort_unstable();
        v
    }

    /// How many subscribe to `name` in `space` (PUBSUB NUMSUB, SHARDNUMSUB).
    pub fn count(&self, space: Space, name: &[u8]) -> usize {
        self.lock()[space.index()].get(name).map_or(0, Vec::len)
    }

    /// Connection `id`'s place as a subscriber, if it subscribes to `channel`.
    pub fn subscriber(&self, channel: &[u8], id: u64) -> Option<Arc<Subscriber>> {
        let sp = self.lock();
        sp[Space::Channel.index()]
            .get(channel)?
            .iter()
            .find(|s| s.id == id)
            .cloned()
    }

    /// Whether any connection monitors (one relaxed load).
    pub fn monitoring(&self) -> bool {
        self.monitoring.load(Ordering::Relaxed) > 0
    }

    /// Sends one MONITOR line (a simple string, in either protocol) to every monitor.
    pub fn feed_monitors(&self, line: &[u8]) {
        let m = self.monitors.lock().unwrap_or_else(|e| e.into_inner());
        for sub in m.iter() {
            sub.deliver(|out, _| {
                out.push(b'+');
                out.extend_from_slice(line);
                out.extend_from_slice(b"\r\n");
            });
        }
    }

    fn add_monitor(&self, sub: &Arc<Subscriber>) {
        let mut m = self.monitors.lock().unwrap_or_else(|e| e.into_inner());
        if !m.iter().any(|x| x.id == sub.id) {
            m.push(sub.clone());
            self.monitoring.store(m.len(), Ordering::Relaxed);
        }
    }

    fn remove_monitor(&self, id: u64) {
        let mut m = self.monitors.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|x| x.id != id);
        self.monitoring.store(m.len(), Ordering::Relaxed);
    }

    /// How many names `space` has subscribers for (PUBSUB NUMPAT, INFO).
    pub fn len(&self, space: Space) -> usize {
        self.lock()[space.index()].len()
    }
}

/// A connection's own subscriptions, and its place as a subscriber. Dropping it (the
/// connection closed) takes every subscription out of the registry.
pub struct Subscriptions {
    me: Arc<Subscriber>,
    registry: Arc<PubSub>,
    names: [BTreeSet<Vec<u8>>; 3],
    /// In MONITOR mode.
    monitor: bool,
}

impl Subscriptions {
    /// A connection `id` subscribing for the first time, its loop reached through `to`.
    pub fn new(registry: Arc<PubSub>, id: u64, resp3: bool, to: PushTo) -> Subscriptions {
        let me = Arc::new(Subscriber {
            id,
            resp3: AtomicBool::new(resp3),
            queue: Mutex::new(Vec::new()),
            posted: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            to,
            limit: registry.queue_limit.clone(),
        });
        Subscriptions {
            me,
            registry,
            names: Default::default(),
            monitor: false,
        }
    }

    /// The connection's place as a subscriber (where its pushes are queued).
    pub fn me(&self) -> Arc<Subscriber> {
        self.me.clone()
    }

    /// Puts the connection in MONITOR mode (again: nothing changes).
    pub fn monitor(&mut self) {
        self.monitor = true;
        self.registry.add_monitor(&self.me);
    }

    /// Whether the connection monitors.
    pub fn monitors(&self) -> bool {
        self.monitor
    }

    /// Ends MONITOR mode (RESET).
    pub fn end_monitor(&mut self) {
        if std::mem::take(&mut self.monitor) {
            self.registry.remove_monitor(self.me.id);
        }
    }

    /// Subscribes to `name` in `space` (again: nothing changes).
    pub fn add(&mut self, space: Space, name: &[u8]) {
        if self.names[space.index()].insert(name.to_vec()) {
            self.registry.add(space, name, &self.me);
        }
    }

    /// Ends the subscription to `name` in `space` (none: nothing changes).
    pub fn remove(&mut self, space: Space, name: &[u8]) {
        if self.names[space.index()].remove(name) {
            self.registry.remove(space, name, self.me.id);
        }
    }

    /// The names subscribed to in `space`, in order.
    pub fn names(&self, space: Space) -> Vec<Vec<u8>> {
        self.names[space.index()].iter().cloned().collect()
    }

    /// Subscriptions to channels and patterns (what SUBSCRIBE's replies count), and to
    /// shard channels (what SSUBSCRIBE's count).
    pub fn counts(&self) -> (usize, usize) {
        let [c, p, s] = &self.names;
        (c.len() + p.len(), s.len())
    }

    /// Whether any subscription is left (Redis's pub/sub context).
    pub fn any(&self) -> bool {
        self.names.iter().any(|n| !n.is_empty())
    }

    /// Subscriptions per space: channels, patterns, shard channels (CLIENT LIST).
    pub fn per_space(&self) -> [usize; 3] {
        [0, 1, 2].map(|i| self.names[i].len())
    }

    /// Follows the connection's protocol (HELLO).
    pub fn set_resp3(&self, resp3: bool) {
        self.me.resp3.store(resp3, Ordering::Relaxed);
    }

    /// Moves the queued messages to `out`.
    pub fn take_into(&self, out: &mut Vec<u8>) {
        self.me.take_into(out)
    }

    /// Bytes of messages queued for its loop to send.
    pub fn queued(&self) -> usize {
        self.me.waiting()
    }

    /// Bytes it holds: its queue of messages, and each subscription at Redis's estimate of
    /// a dictionary entry (client eviction's measure).
    pub fn memory(&self) -> usize {
        let names: usize = self.names.iter().map(BTreeSet::len).sum();
        self.me.waiting() + names * crate::core::clients::PER_ENTRY
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.end_monitor();
        for space in [Space::Channel, Space::Pattern, Space::Shard] {
            for name in std::mem::take(&mut self.names[space.index()]) {
                self.registry.remove(space, &name, self.me.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn sub(reg: &Arc<PubSub>, id: u64, posts: &Arc<AtomicUsize>) -> Subscriptions {
        let (p, k) = (posts.clone(), posts.clone());
        let to = PushTo {
            notify: Box::new(move || {
                p.fetch_add(1, Ordering::SeqCst);
            }),
            kill: Box::new(move || {
                k.fetch_add(1000, Ordering::SeqCst);
            }),
        };
        Subscriptions::new(reg.clone(), id, false, to)
    }

    #[test]
    fn messages_reach_channels_and_patterns_in_order_and_post_once() {
        let reg = Arc::new(PubSub::default());
        let posts = Arc::new(AtomicUsize::new(0));
        let mut a = sub(&reg, 1, &posts);
        a.add(Space::Channel, b"news");
        a.add(Space::Pattern, b"n*");
        assert_eq!(reg.publish(false, b"news", b"1"), 2);
        assert_eq!(reg.publish(false, b"nope", b"2"), 1);
        assert_eq!(
            reg.publish(true, b"news", b"3"),
            0,
            "shard channels are apart"
        );
        assert_eq!(
            posts.load(Ordering::SeqCst),
            1,
            "one post until the loop takes them"
        );
        let mut out = Vec::new();
        a.take_into(&mut out);
        let want = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\n1\r\n\
*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\n1\r\n\
*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnope\r\n$1\r\n2\r\n";
        assert_eq!(out, want.to_vec());
        reg.publish(false, b"news", b"4");
        assert_eq!(posts.load(Ordering::SeqCst), 2);
        assert_eq!(reg.count(Space::Channel, b"news"), 1);
        drop(a);
        assert_eq!(reg.count(Space::Channel, b"news"), 0);
        assert_eq!(reg.len(Space::Pattern), 0);
        assert_eq!(reg.publish(false, b"news", b"5"), 0);
    }

    #[test]
    fn a_subscriber_past_its_limit_is_disconnected_and_freed() {
        let reg = Arc::new(PubSub::default());
        let posts = Arc::new(AtomicUsize::new(0));
        let mut a = sub(&reg, 1, &posts);
        a.add(Space::Channel, b"c");
        let big = vec![b'x'; 1 << 20];
        for _ in 0..40 {
            reg.publish(false, b"c", &big);
        }
        assert!(posts.load(Ordering::SeqCst) >= 1000, "killed");
        assert_eq!(a.me.waiting(), 0, "its queue freed");
        let mut out = Vec::new();
        a.take_into(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn resp3_receivers_get_pushes() {
        let reg = Arc::new(PubSub::default());
        let posts = Arc::new(AtomicUsize::new(0));
        let mut a = sub(&reg, 1, &posts);
        a.set_resp3(true);
        a.add(Space::Shard, b"s");
        assert_eq!(reg.publish(true, b"s", b"m"), 1);
        let mut out = Vec::new();
        a.take_into(&mut out);
        assert_eq!(
            out,
            b">3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nm\r\n".to_vec()
        );
    }
}
