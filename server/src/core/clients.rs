//! The registry of RESP connections behind CLIENT LIST and CLIENT KILL. Each event loop
//! owns its connections; the registry only describes them (address, name, age, idle time,
//! protocol) to any loop, and CLIENT KILL asks the owning loop, through its mailbox, to
//! close one: the loop closes it on its own thread at its next turn, so no connection is
//! ever touched by two threads. Registering costs a lock at connect and close; a command
//! costs nothing here except CLIENT SETNAME/HELLO (the name) and, per read, one relaxed
//! store of the time (the idle time).
//!
//! Client eviction (Redis's `maxmemory-clients`) lives here too: each loop publishes what
//! its connections hold ([`Entry::measure`], once per turn and only when it changed), the
//! registry keeps the sum, and past the limit the largest connections not marked
//! `no-evict` are closed, largest first, until the rest fit ([`Clients::evict`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// How the registry reaches an event loop (its mailbox, in the network layer).
pub trait LoopHandle: Send + Sync {
    /// Asks the loop to close connection `id` at `slot` on its own thread.
    fn kill(&self, slot: usize, id: u64);
}

/// One RESP connection as other threads see it.
pub struct Entry {
    /// CLIENT ID.
    pub id: u64,
    /// The owning loop and the connection's place in it.
    loop_index: usize,
    slot: usize,
    conn_id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    /// The socket's file descriptor.
    fd: i32,
    created: Instant,
    /// Milliseconds after `created` of the last read.
    last_active: AtomicU64,
    name: Mutex<Vec<u8>>,
    /// The user it is logged in as.
    user: Mutex<Vec<u8>>,
    /// 2 or 3.
    resp: AtomicU8,
    /// The selected database (RESP's SELECT).
    db: std::sync::atomic::AtomicU16,
    /// What its session last noted about itself (CLIENT LIST's other fields).
    noted: Mutex<Noted>,
    /// CLIENT KILL (or a user's removal) chose it: it is no longer listed while its loop
    /// closes it.
    killed: AtomicBool,
    /// CLIENT NO-EVICT on: client eviction passes it by.
    no_evict: AtomicBool,
    /// Its memory as its loop last measured it.
    mem: Mem,
}

/// What a connection holds, as its loop last measured it (bytes).
#[derive(Default)]
struct Mem {
    /// Input read and not yet run (Redis's `qbuf`).
    qbuf: AtomicU64,
    /// Output not yet written: replies and queued pub/sub messages (Redis's `omem`).
    omem: AtomicU64,
    /// Everything: buffers at their allocated size, arguments read, MULTI's queue, watched
    /// keys, subscriptions (Redis's `tot-mem`; client eviction's measure).
    total: AtomicU64,
}

/// Bytes one watched key, subscription or tracking prefix counts in a connection's measure
/// (a list node and an entry, as Redis estimates them).
pub const PER_ENTRY: usize = 56;

/// One measure of a connection ([`Entry::measure`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    pub qbuf: u64,
    pub omem: u64,
    pub total: u64,
}

/// What a connection's session notes about itself for CLIENT LIST and CLIENT INFO: once
/// per input it ran, and when one of those commands asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Noted {
    /// Pub/sub subscriptions: channels, patterns, shard channels.
    pub subs: [usize; 3],
    /// Commands queued in MULTI (-1: not in MULTI).
    pub multi: i64,
    /// Keys WATCHed.
    pub watch: usize,
    /// Parked in a blocking command.
    pub blocked: bool,
    /// The last command, as Redis names it (`get`, `client|info`).
    pub cmd: &'static str,
    /// Bytes of the commands queued in MULTI.
    pub multi_mem: usize,
    /// CLIENT TRACKING: its REDIRECT (0: none; -1: not tracking).
    pub redir: i64,
    /// CLIENT SETINFO's LIB-NAME and LIB-VER.
    pub lib_name: Vec<u8>,
    pub lib_ver: Vec<u8>,
}

impl Entry {
    /// Notes activity now (a read).
    pub fn touch(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.created).as_millis() as u64;
        self.last_active.store(ms, Ordering::Relaxed);
    }

    pub fn set_name(&self, name: &[u8]) {
        let mut n = self.name.lock().unwrap_or_else(|e| e.into_inner());
        n.clear();
        n.extend_from_slice(name);
    }

    pub fn set_user(&self, user: &[u8]) {
        let mut u = self.user.lock().unwrap_or_else(|e| e.into_inner());
        u.clear();
        u.extend_from_slice(user);
    }

    fn user_is(&self, user: &[u8]) -> bool {
        *self.user.lock().unwrap_or_else(|e| e.into_inner()) == user
    }

    pub fn set_resp(&self, v: u8) {
        self.resp.store(v, Ordering::Relaxed);
    }

    pub fn set_db(&self, db: u16) {
        self.db.store(db, Ordering::Relaxed);
    }

    /// Whether it noted a pub/sub subscription.
    fn subscribed(&self) -> bool {
        let n = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        n.subs.iter().any(|&s| s > 0)
    }

    /// CLIENT NO-EVICT: whether client eviction may close it.
    pub fn set_no_evict(&self, on: bool) {
        self.no_evict.store(on, Ordering::Relaxed);
    }

    /// Publishes its loop's measure of it (only its own loop calls this), keeping the
    /// registry's sum: a relaxed load and nothing else when it did not change.
    pub fn measure(&self, clients: &Clients, m: Measured) {
        let was = self.mem.total.load(Ordering::Relaxed);
        if m.total != was {
            self.mem.total.store(m.total, Ordering::Relaxed);
            if m.total > was {
                clients.total.fetch_add(m.total - was, Ordering::Relaxed);
            } else {
                clients.total.fetch_sub(was - m.total, Ordering::Relaxed);
            }
        }
        if self.mem.qbuf.load(Ordering::Relaxed) != m.qbuf {
            self.mem.qbuf.store(m.qbuf, Ordering::Relaxed);
        }
        if self.mem.omem.load(Ordering::Relaxed) != m.omem {
            self.mem.omem.store(m.omem, Ordering::Relaxed);
        }
    }

    /// Notes the session's state (`f` changes what was noted).
    pub fn note(&self, f: impl FnOnce(&mut Noted)) {
        f(&mut self.noted.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The CLIENT LIST line (without the newline); `me`: the query buffer and argument
    /// bytes of the command asking, when this is its own connection.
    pub fn line(&self, me: Option<Me>) -> String {
        let age = self.created.elapsed();
        let idle = age
            .as_millis()
            .saturating_sub(u128::from(self.last_active.load(Ordering::Relaxed)))
            / 1000;
        let name = self.name.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.noted.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // Redis's flag letters, in its order: P pub/sub, x MULTI, b blocked, t tracking;
        // N none.
        let mut flags = String::new();
        for (on, c) in [
            (n.subs.iter().any(|&s| s > 0), 'P'),
            (n.multi >= 0, 'x'),
            (n.blocked, 'b'),
            (n.redir >= 0, 't'),
            (self.no_evict.load(Ordering::Relaxed), 'e'),
        ] {
            if on {
                flags.push(c);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let [sub, psub, ssub] = n.subs;
        let user = self.user.lock().unwrap_or_else(|e| e.into_inner());
        // The asking connection counts the command it runs; another its last measure.
        let (qbuf, argv_mem) = match me {
            Some(me) => (me.qbuf, me.argv_mem),
            None => (self.mem.qbuf.load(Ordering::Relaxed) as usize, 0),
        };
        let omem = self.mem.omem.load(Ordering::Relaxed);
        let tot =
            (self.mem.total.load(Ordering::Relaxed) as usize).max(qbuf + argv_mem + n.multi_mem);
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={idle} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} multi={} qbuf={} qbuf-free=0 argv-mem={} multi-mem={} rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem={tot} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&name),
            age.as_secs(),
            self.db.load(Ordering::Relaxed),
            n.multi,
            qbuf,
            argv_mem,
            n.multi_mem,
            if n.cmd.is_empty() { "NULL".to_string() } else { n.cmd.to_lowercase() },
            String::from_utf8_lossy(&user),
            n.redir,
            self.resp.load(Ordering::Relaxed),
            String::from_utf8_lossy(&n.lib_name),
            String::from_utf8_lossy(&n.lib_ver),
        )
    }
}

/// What the connection asking for CLIENT LIST or INFO knows of its own command: the bytes
/// it took in the query buffer and its arguments' bytes (Redis's `qbuf` and `argv-mem`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Me {
    pub id: u64,
    pub qbuf: usize,
    pub argv_mem: usize,
}

/// Every RESP connection of the server.
#[derive(Default)]
pub struct Clients {
    map: Mutex<BTreeMap<u64, Arc<Entry>>>,
    mailboxes: OnceLock<Vec<Arc<dyn LoopHandle>>>,
    /// The connections' measures summed (bytes; INFO memory's `mem_clients_normal`).
    total: AtomicU64,
    /// `maxmemory-clients`, as [`ClientLimit::encode`] stores it (0: no limit).
    limit: AtomicU64,
    /// Connections client eviction closed (INFO stats' `evicted_clients`).
    evicted: AtomicU64,
}

/// `maxmemory-clients`: bytes, or a percentage of `maxmemory` (Redis's two forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientLimit {
    Bytes(u64),
    Percent(u64),
}

impl ClientLimit {
    const PERCENT: u64 = 1 << 63;

    fn encode(self) -> u64 {
        match self {
            ClientLimit::Bytes(b) => b & !Self::PERCENT,
            ClientLimit::Percent(p) => p | Self::PERCENT,
        }
    }

    fn decode(v: u64) -> ClientLimit {
        match v & Self::PERCENT {
            0 => ClientLimit::Bytes(v),
            _ => ClientLimit::Percent(v & !Self::PERCENT),
        }
    }

    /// The limit in bytes under `maxmemory` (0: none, as a percentage of no `maxmemory`).
    pub fn bytes(self, maxmemory: u64) -> u64 {
        match self {
            ClientLimit::Bytes(b) => b,
            ClientLimit::Percent(p) => maxmemory.saturating_mul(p) / 100,
        }
    }
}

impl std::fmt::Display for ClientLimit {
    /// As CONFIG GET shows it: `3000000`, `7%`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientLimit::Bytes(b) => write!(f, "{b}"),
            ClientLimit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Removes its entry from the registry when the connection goes.
pub struct Registration {
    pub entry: Arc<Entry>,
    clients: Arc<Clients>,
}

impl Registration {
    /// Publishes the connection's measure ([`Entry::measure`]).
    pub fn measure(&self, m: Measured) {
        self.entry.measure(&self.clients, m);
    }

    /// The registry it is in.
    pub fn clients(&self) -> &Clients {
        &self.clients
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.entry.measure(&self.clients, Measured::default());
        self.clients
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.entry.id);
    }
}

/// Which connections CLIENT KILL's filters select.
#[derive(Default)]
pub struct Filter {
    pub id: Option<u64>,
    pub addr: Option<String>,
    pub laddr: Option<String>,
    pub max_age: Option<u64>,
    /// Leave out the connection with this id (SKIPME yes).
    pub skip: Option<u64>,
    /// Only those logged in as this user.
    pub user: Option<Vec<u8>>,
    /// Only those with a pub/sub subscription.
    pub subscribed: bool,
}

impl Clients {
    /// The loops' mailboxes, once they exist (CLIENT KILL needs them).
    pub fn set_mailboxes(&self, m: Vec<Arc<dyn LoopHandle>>) {
        let _ = self.mailboxes.set(m);
    }

    /// Registers a connection of loop `loop_index` at `slot`.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        self: &Arc<Self>,
        id: u64,
        (loop_index, slot, conn_id): (usize, usize, u64),
        (addr, laddr): (SocketAddr, SocketAddr),
        fd: i32,
    ) -> Registration {
        let entry = Arc::new(Entry {
            id,
            loop_index,
            slot,
            conn_id,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            last_active: AtomicU64::new(0),
            name: Mutex::new(Vec::new()),
            user: Mutex::new(b"default".to_vec()),
            resp: AtomicU8::new(2),
            db: Default::default(),
            noted: Mutex::new(Noted {
                multi: -1,
                redir: -1,
                ..Noted::default()
            }),
            killed: Default::default(),
            no_evict: Default::default(),
            mem: Mem::default(),
        });
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry.clone());
        Registration {
            entry,
            clients: self.clone(),
        }
    }

    /// CLIENT LIST's lines, in id order (only `ids` when given; only the connections with a
    /// pub/sub subscription, or only those without, when `pubsub` says which); `me`: the
    /// asking connection's own command.
    pub fn list(&self, ids: Option<&[u64]>, pubsub: Option<bool>, me: Option<Me>) -> String {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for e in map.values() {
            if e.killed.load(Ordering::Relaxed) {
                continue;
            }
            if ids.is_some_and(|ids| !ids.contains(&e.id)) {
                continue;
            }
            if pubsub.is_some_and(|p| p != e.subscribed()) {
                continue;
            }
            out.push_str(&e.line(me.filter(|m| m.id == e.id)));
            out.push('\n');
        }
        out
    }

    /// Whether connection `id` is open (and not being closed).
    pub fn exists(&self, id: u64) -> bool {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&id)
            .is_some_and(|e| !e.killed.load(Ordering::Relaxed))
    }

    /// Asks the loop of every connection `f` selects to close it; returns how many, and
    /// whether the caller's own is among them (the caller closes that one after its reply).
    pub fn kill(&self, f: &Filter, caller: u64) -> (usize, bool) {
        let chosen: Vec<Arc<Entry>> = {
            let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            map.values()
                // One already being closed is not chosen (nor counted) again.
                .filter(|e| !e.killed.load(Ordering::Relaxed))
                .filter(|e| f.id.is_none_or(|id| e.id == id))
                .filter(|e| f.addr.as_deref().is_none_or(|a| e.addr.to_string() == a))
                .filter(|e| f.laddr.as_deref().is_none_or(|a| e.laddr.to_string() == a))
                .filter(|e| f.max_age.is_none_or(|m| e.created.elapsed().as_secs() >= m))
                .filter(|e| f.skip != Some(e.id))
                .filter(|e| f.user.as_deref().is_none_or(|u| e.user_is(u)))
                .filter(|e| !f.subscribed || e.subscribed())
                .cloned()
                .collect()
        };
        let mut me = false;
        for e in &chosen {
            if e.id == caller {
                me = true;
                continue;
            }
            self.close(e);
        }
        (chosen.len(), me)
    }

    /// Marks `e` as being closed (no longer listed) and asks its loop to close it.
    fn close(&self, e: &Entry) {
        e.killed.store(true, Ordering::Relaxed);
        if let Some(m) = self.mailboxes.get().and_then(|m| m.get(e.loop_index)) {
            m.kill(e.slot, e.conn_id);
        }
    }

    /// `maxmemory-clients` now.
    pub fn limit(&self) -> ClientLimit {
        ClientLimit::decode(self.limit.load(Ordering::Relaxed))
    }

    pub fn set_limit(&self, l: ClientLimit) {
        self.limit.store(l.encode(), Ordering::Relaxed);
    }

    /// The connections' memory summed, as last measured.
    pub fn memory(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Connections closed by client eviction since start (or CONFIG RESETSTAT).
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    pub fn reset_stats(&self) {
        self.evicted.store(0, Ordering::Relaxed);
    }

    /// Whether the connections hold more than `maxmemory-clients` allows under
    /// `maxmemory`: two relaxed loads, for every loop turn.
    pub fn over(&self, maxmemory: u64) -> bool {
        let limit = self.limit().bytes(maxmemory);
        limit > 0 && self.memory() > limit
    }

    /// Client eviction: closes the largest connections not marked `no-evict`, largest
    /// first, until what the others hold fits `maxmemory-clients` under `maxmemory`.
    /// Connections of other loops are closed by their loop (as CLIENT KILL closes them);
    /// returns whether `caller`'s own is one, which the caller closes.
    pub fn evict(&self, maxmemory: u64, caller: u64) -> bool {
        let limit = self.limit().bytes(maxmemory);
        if limit == 0 {
            return false;
        }
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let live = map.values().filter(|e| !e.killed.load(Ordering::Relaxed));
        // Summed here, not taken from `total`: one being closed no longer counts.
        let mut held: u64 = live
            .clone()
            .map(|e| e.mem.total.load(Ordering::Relaxed))
            .sum();
        if held <= limit {
            return false;
        }
        let mut order: Vec<&Arc<Entry>> = live
            .filter(|e| !e.no_evict.load(Ordering::Relaxed))
            .collect();
        order.sort_by_key(|e| std::cmp::Reverse(e.mem.total.load(Ordering::Relaxed)));
        let mut me = false;
        for e in order {
            if held <= limit {
                break;
            }
            held = held.saturating_sub(e.mem.total.load(Ordering::Relaxed));
            self.evicted.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(id = e.id, addr = %e.addr, "client evicted: maxmemory-clients reached");
            if e.id == caller {
                e.killed.store(true, Ordering::Relaxed);
                me = true;
            } else {
                self.close(e);
            }
        }
        me
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(sizes: &[u64]) -> (Arc<Clients>, Vec<Registration>) {
        let clients = Arc::new(Clients::default());
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let regs: Vec<Registration> = sizes
            .iter()
            .enumerate()
            .map(|(i, &total)| {
                let id = i as u64 + 1;
                let r = clients.register(id, (0, i, id), (addr, addr), -1);
                r.measure(Measured {
                    total,
                    ..Measured::default()
                });
                r
            })
            .collect();
        (clients, regs)
    }

    fn listed(c: &Clients) -> Vec<u64> {
        let list = c.list(None, None, None);
        list.lines()
            .map(|l| l["id=".len()..l.find(' ').unwrap()].parse().unwrap())
            .collect()
    }

    #[test]
    fn the_largest_go_first_and_only_until_the_rest_fit() {
        let (c, regs) = registry(&[100, 400, 200, 300]);
        assert_eq!(c.memory(), 1000);
        assert!(!c.over(0), "no limit set");
        c.set_limit(ClientLimit::Bytes(600));
        assert!(c.over(0));
        // 1000 → closing 400 leaves 600: it fits.
        assert!(!c.evict(0, 99));
        assert_eq!(listed(&c), [1, 3, 4]);
        assert_eq!(c.evicted(), 1);
        // A no-evict connection is passed by, however large.
        regs[3].entry.set_no_evict(true);
        c.set_limit(ClientLimit::Bytes(350));
        assert!(
            c.evict(0, 3),
            "the caller's own is chosen: it closes itself"
        );
        assert_eq!(listed(&c), [4], "300 alone fits; the other two had to go");
        assert_eq!(c.evicted(), 3);
        drop(regs);
        assert_eq!(c.memory(), 0, "a connection gone takes its measure with it");
    }

    #[test]
    fn a_percentage_is_of_maxmemory_and_nothing_without_it() {
        let l = ClientLimit::Percent(10);
        assert_eq!(l.bytes(1000), 100);
        assert_eq!(l.bytes(0), 0);
        assert_eq!(ClientLimit::decode(l.encode()), l);
        assert_eq!(l.to_string(), "10%");
        let b = ClientLimit::Bytes(3_000_000);
        assert_eq!(ClientLimit::decode(b.encode()), b);
        assert_eq!(b.to_string(), "3000000");
    }
}
