//! Keyspace notifications (Redis's `notify-keyspace-events`): a command that changes a key
//! names the event as Redis's command does (`set`, `lpush`, `del`, `expire`…) with
//! [`event`]; the events wait in the connection's state until what made them is committed
//! (the command, or the EXEC or script it runs in: `dispatch.rs` publishes them then, in the
//! order they were made), and a failed command's are dropped ([`Mark`]). Each is published
//! as Redis publishes it, on `__keyspace@<db>__:<key>` (message: the event) and on
//! `__keyevent@<db>__:<event>` (message: the key), through pub/sub (`pubsub.rs`).
//!
//! Cost while off (the default): one relaxed load per event site. Classes that need a look
//! at the keys (`n`, new keys; `m`, reads of missing keys) are judged around the command in
//! `dispatch.rs` and cost two existence checks per key while on. The expiry sweep's
//! `expired` events come through [`expired`]; accelkv evicts nothing, so `e` never fires.

use crate::core::ops::{Outcome, Write};
use crate::core::shared::Shared;
use crate::core::station::Op;
use crate::resp::call::flag::WRITE;
use crate::resp::call::Spec;
use crate::resp::db::key_positions;
use crate::resp::prefix::DB_PREFIX;
use crate::resp::session::{RespGlobal, Session};
use crate::resp::write_door::run_op;

pub use crate::resp::notify_class::*;

/// A command's event `name` of `class` on `key` (as the store keeps it), published once
/// what made it is committed.
pub fn event(s: &mut Session, class: u32, name: &'static str, key: &[u8]) {
    if s.global.notify.wants(class) {
        s.events.push(Event {
            class,
            name,
            key: key.to_vec(),
        });
    }
}

/// A collection command's event `name` on `key`, then `del` when it left the key empty
/// (Redis removes an empty collection).
pub fn changed(s: &mut Session, class: u32, name: &'static str, key: &[u8], emptied: bool) {
    event(s, class, name, key);
    if emptied {
        event(s, GENERIC, "del", key);
    }
}

/// Whether events of `class` are wanted now.
pub fn wants(s: &Session, class: u32) -> bool {
    s.global.notify.wants(class)
}

/// Where a command's events start.
pub fn mark(s: &Session) -> Mark {
    Mark(s.events.len())
}

/// Puts the events made since `second` before those made from `first` to it (LMOVE:
/// Redis announces the destination's push before the source's pop).
pub fn push_first(s: &mut Session, first: Mark, second: Mark) {
    let (a, b) = (first.0.min(s.events.len()), second.0.min(s.events.len()));
    if a < b {
        s.events[a..].rotate_left(b - a);
    }
}

/// Drops the events made since `m` (the command failed: nothing it did is written).
pub fn drop_since(s: &mut Session, m: Mark) {
    s.events.truncate(m.0);
}

/// Publishes the connection's waiting events, in the order they were made, and tells the
/// connections tracking their keys (`tracking.rs`).
pub fn flush(sh: &Shared, s: &mut Session) {
    let mut events = std::mem::take(&mut s.events);
    if s.global.tracking.active() {
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(events.len());
        for e in &events {
            if !keys.contains(&e.key) {
                keys.push(e.key.clone());
            }
        }
        let to = crate::resp::tracking::Reach {
            pubsub: &s.global.pubsub,
            clients: sh.clients(),
        };
        s.global.tracking.changed(&to, s.id, &keys);
    }
    for e in events.drain(..) {
        publish(sh, &s.global, e.class, e.name, &e.key);
    }
    s.events = events; // its buffer kept for the next command
}

/// The expiry sweep removed `key`: `expired`, if wanted, and its trackers told.
pub fn expired(sh: &Shared, g: &RespGlobal, key: &[u8]) {
    if g.tracking.active() {
        let to = crate::resp::tracking::Reach {
            pubsub: &g.pubsub,
            clients: sh.clients(),
        };
        g.tracking.changed(&to, 0, &[key.to_vec()]);
    }
    if g.notify.wants(EXPIRED) {
        publish(sh, g, EXPIRED, "expired", key);
    }
}

/// What a command's `n` and `m` events are judged by: where its events start, and which
/// of its keys were absent before it ran (argument positions).
pub struct Probe {
    mark: Mark,
    absent: Vec<usize>,
}

/// Before a command runs, while `n` or `m` is on: the keys it names that are absent.
pub fn before(sh: &Shared, s: &mut Session, spec: &Spec, args: &[&[u8]]) -> Option<Probe> {
    let f = s.global.notify.flags();
    if f & (NEW | KEY_MISS) == 0 || f & (KEYSPACE | KEYEVENT) == 0 {
        return None;
    }
    let write = spec.has(WRITE);
    if (write && f & NEW == 0) || (!write && f & KEY_MISS == 0) {
        return None;
    }
    // A script's or function's own commands announce what they do.
    if spec.runs_script() {
        return None;
    }
    let absent = key_positions(spec, args)
        .into_iter()
        .filter(|&at| !exists(sh, s, args[at]))
        .collect();
    Some(Probe {
        mark: mark(s),
        absent,
    })
}

/// After it ran: a write's keys that exist now are `new` (before the command's own events,
/// as Redis makes the key first); a read's absent keys are `keymiss`.
pub fn after(sh: &Shared, s: &mut Session, spec: &Spec, args: &[&[u8]], p: Probe) {
    if !spec.has(WRITE) {
        for at in p.absent {
            event(s, KEY_MISS, "keymiss", args[at]);
        }
        return;
    }
    let mut new: Vec<Event> = Vec::new();
    for at in p.absent {
        if exists(sh, s, args[at]) && !new.iter().any(|e| e.key == args[at]) {
            new.push(Event {
                class: NEW,
                name: "new",
                key: args[at].to_vec(),
            });
        }
    }
    let at = p.mark.0.min(s.events.len());
    s.events.splice(at..at, new);
}

/// Whether `key` holds anything, as the command sees it (inside a transaction, through it).
fn exists(sh: &Shared, s: &mut Session, key: &[u8]) -> bool {
    if s.tx.running.is_none() {
        return matches!(sh.view().get_with(key, |_| ()), Ok(Some(())));
    }
    let op = Op::new(key, Write::ReadItem);
    matches!(run_op(sh, s, op).outcome, Ok(Outcome::Item(_)))
}

/// The physical database and the client's name of a key as the store keeps it (`None`:
/// not a client's key: a collection's subkey or a reserved record).
pub fn split(key: &[u8]) -> Option<(u16, &[u8])> {
    match key.strip_prefix(&DB_PREFIX) {
        Some(rest) if rest.len() >= 2 => Some((u16::from_be_bytes([rest[0], rest[1]]), &rest[2..])),
        Some(_) => None,
        None if key.starts_with(&[0xFF, 0xFF]) => None,
        None => Some((0, key)),
    }
}

/// Publishes one event as Redis does: on the key's channel, then on the event's.
fn publish(sh: &Shared, g: &RespGlobal, class: u32, name: &str, key: &[u8]) {
    let f = g.notify.flags();
    if f & class == 0 {
        return;
    }
    let Some((physical, user)) = split(key) else {
        return;
    };
    let Some(db) = g.dbs.logical(physical, sh.settings().databases) else {
        return;
    };
    if f & KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{db}__:").into_bytes();
        chan.extend_from_slice(user);
        g.pubsub.publish(false, &chan, name.as_bytes());
    }
    if f & KEYEVENT != 0 {
        let chan = format!("__keyevent@{db}__:{name}");
        g.pubsub.publish(false, chan.as_bytes(), user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_read_and_written_as_redis_does() {
        let n = Notify::default();
        for (set, got) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("nKm", "nKm"),
            ("Ag$K", "AK"),
        ] {
            n.set(set.as_bytes()).unwrap();
            assert_eq!(n.text(), got, "{set}");
        }
        assert!(n.set(b"Kq").is_err());
        assert_eq!(n.text(), "AK", "a refused value changes nothing");
    }

    #[test]
    fn wanted_only_with_a_channel_kind() {
        let n = Notify::default();
        n.set(b"A").unwrap();
        assert!(!n.wants(STRING), "neither K nor E: nothing is published");
        n.set(b"Kl").unwrap();
        assert!(n.wants(LIST) && !n.wants(STRING));
    }

    #[test]
    fn keys_split_into_database_and_name() {
        assert_eq!(split(b"foo"), Some((0, &b"foo"[..])));
        assert_eq!(split(b"\xFF\xFE\x00\x03bar"), Some((3, &b"bar"[..])));
        assert_eq!(split(b"\xFF\xFF\x00\x00dbmap"), None);
        assert_eq!(split(b"\xFF\xFE\x00"), None);
    }
}
