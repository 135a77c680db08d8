//! Keyspace notifications' classes and events as data (`notify.rs` makes and publishes
//! them): Redis's class bits, the server's `notify-keyspace-events` setting, an event
//! waiting for its command to commit.

use std::sync::atomic::{AtomicU32, Ordering};

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: DEL, EXPIRE, RENAME… (type-independent commands).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted-set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key removed by its expiry.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted for memory (accelkv evicts nothing: `noeviction` only).
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a read of a missing key.
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (accelkv has no modules).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key created.
pub const NEW: u32 = 1 << 14;
/// Not a Redis class: a connection tracks keys for client-side caching (`tracking.rs`), so
/// every event is collected, to invalidate its key, whatever else is announced.
pub const TRACKING: u32 = 1 << 30;
/// `A`: `g$lshzxetd`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The server's `notify-keyspace-events` classes (none by default, as Redis).
#[derive(Default)]
pub struct Notify {
    flags: AtomicU32,
}

/// One event waiting to be published: its class, its name, the key as the store keeps it.
#[derive(Debug)]
pub struct Event {
    pub class: u32,
    pub name: &'static str,
    pub key: Vec<u8>,
}

/// How many events a command had made when it started: a failed command's are dropped.
#[derive(Clone, Copy)]
pub struct Mark(pub(crate) usize);

impl Notify {
    /// The classes now.
    pub fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Whether an event of `class` is collected: published, or needed by tracking.
    pub fn wants(&self, class: u32) -> bool {
        let f = self.flags();
        (f & class != 0 && f & (KEYSPACE | KEYEVENT) != 0) || f & TRACKING != 0
    }

    /// Whether any connection tracks keys (`tracking.rs`): every event is then collected.
    pub fn set_tracking(&self, on: bool) {
        match on {
            true => self.flags.fetch_or(TRACKING, Ordering::Relaxed),
            false => self.flags.fetch_and(!TRACKING, Ordering::Relaxed),
        };
    }

    /// CONFIG SET notify-keyspace-events: Redis's class characters.
    pub fn set(&self, text: &[u8]) -> Result<(), &'static str> {
        let mut f = 0;
        for c in text {
            f |= match c {
                b'A' => ALL,
                b'g' => GENERIC,
                b'$' => STRING,
                b'l' => LIST,
                b's' => SET,
                b'h' => HASH,
                b'z' => ZSET,
                b'x' => EXPIRED,
                b'e' => EVICTED,
                b'K' => KEYSPACE,
                b'E' => KEYEVENT,
                b't' => STREAM,
                b'm' => KEY_MISS,
                b'd' => MODULE,
                b'n' => NEW,
                _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
            };
        }
        let keep = |old: u32| Some(f | (old & TRACKING));
        let _ = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, keep);
        Ok(())
    }

    /// CONFIG GET's form, Redis's order (`A` for all of `g$lshzxetd`).
    pub fn text(&self) -> String {
        let f = self.flags();
        let mut t = String::new();
        if f & ALL == ALL {
            t.push('A');
        } else {
            let classes = [
                (GENERIC, 'g'),
                (STRING, '$'),
                (LIST, 'l'),
                (SET, 's'),
                (HASH, 'h'),
                (ZSET, 'z'),
                (EXPIRED, 'x'),
                (EVICTED, 'e'),
                (STREAM, 't'),
                (MODULE, 'd'),
                (NEW, 'n'),
            ];
            t.extend(classes.iter().filter(|c| f & c.0 != 0).map(|c| c.1));
        }
        for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
            if f & bit != 0 {
                t.push(c);
            }
        }
        t
    }
}
