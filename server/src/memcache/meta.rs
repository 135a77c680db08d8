//! memcached's meta commands (`mg`, `ms`, `md`, `ma`, `me`, `mn`) on the memcached port:
//! each runs through the reservation station as a memcached write (ops/memcache.rs), so a
//! read that answers a CAS unique or a TTL is ordered with the writes of its key, and the
//! reply echoes the return flags in the order the request gave them.
//!
//! Not supported (answered `CLIENT_ERROR`): `E` (a client-chosen CAS unique: uniques are
//! the store's versions) and `I` (stale items). `ma` and `ms` return `k`, `O` and `b`, and
//! `ma` its value with `v`; their `c`, `t`, `f` and `s` are not returned.

use crate::core::counters::OpClass;
use crate::core::ops::{Failure, ItemCond, ItemTtl, ItemWrite, Outcome};
use crate::core::shared::Shared;
use crate::memcache::door::{refused, store_error, ttl_of};
use crate::memcache::state::McSession;
use accelkv_proto::memcache::meta::SetMode;
use accelkv_proto::memcache::reply::{self, ItemInfo};
use accelkv_proto::memcache::{Meta, MetaCmd};
use std::borrow::Cow;
use std::io::Write as _;

/// Seconds an item with `deadline` has left (-1: no deadline), as `t` reports.
fn ttl_secs(deadline: u64) -> i64 {
    if deadline == 0 {
        return -1;
    }
    let now = accelkv_tree::now_ms();
    (deadline.saturating_sub(now).div_ceil(1000)) as i64
}

/// Runs one meta command, appending its reply to `out`.
pub fn run(sh: &Shared, s: &mut McSession, m: &Meta<'_>, out: &mut Vec<u8>) {
    let f = &m.flags;
    if m.cmd == MetaCmd::Noop {
        return reply::line(out, "MN");
    }
    if f.new_cas.is_some() || f.invalidate {
        return reply::line(
            out,
            "CLIENT_ERROR flags E and I are not supported (CAS uniques are the store's versions)",
        );
    }
    let mut kb = [0u8; 256];
    let key = m.key_into(&mut kb);
    match m.cmd {
        MetaCmd::Noop => {}
        MetaCmd::Get | MetaCmd::Debug => get(sh, s, m, key, out),
        MetaCmd::Set => set(sh, s, m, key, out),
        MetaCmd::Delete => delete(sh, s, m, key, out),
        MetaCmd::Arith => arith(sh, s, m, key, out),
    }
}

/// A meta reply of just a code (`HD`, `NF`, `EX`, ...), with the flags it echoes.
fn code(out: &mut Vec<u8>, m: &Meta<'_>, c: &str) {
    reply::meta(out, c, &m.flags, m.key, None, None)
}

/// `mg` and `me`: the item (and its flags, CAS, TTL as asked), after a touch when asked.
fn get(sh: &Shared, s: &mut McSession, m: &Meta<'_>, key: &[u8], out: &mut Vec<u8>) {
    let f = &m.flags;
    sh.count(OpClass::Get);
    let touch = f.ttl.map(ttl_of);
    let w = ItemWrite::Read { touch };
    let d = crate::memcache::door::station(sh, s, key, w, touch.is_some());
    let item = match d.outcome {
        Ok(Outcome::Item(i)) => i,
        Ok(_) => {
            if !f.quiet {
                code(out, m, "EN");
            }
            return;
        }
        Err(e) => return store_error(out, &e),
    };
    if m.cmd == MetaCmd::Debug {
        let _ = write!(out, "ME ");
        out.extend_from_slice(m.key);
        let _ = write!(
            out,
            " exp={} la=0 cas={} fetch=no cls=1 size={}\r\n",
            ttl_secs(item.deadline),
            item.cas,
            item.value.len()
        );
        return;
    }
    let info = ItemInfo {
        flags: item.flags,
        size: item.value.len(),
        cas: item.cas,
        ttl: ttl_secs(item.deadline),
    };
    // Quiet mode hides only the miss (`EN`), as memcached's.
    if f.ret_value {
        reply::meta(out, "VA", f, m.key, Some(&info), Some(&item.value));
    } else {
        reply::meta(out, "HD", f, m.key, Some(&info), None);
    }
}

/// `ms`: set, add, replace, append or prepend, with a CAS check when asked.
fn set(sh: &Shared, s: &mut McSession, m: &Meta<'_>, key: &[u8], out: &mut Vec<u8>) {
    let f = &m.flags;
    sh.count(OpClass::Put);
    if let Some(e) = refused(sh, true) {
        return reply::line(out, &e);
    }
    let w = match f.set_mode {
        SetMode::Append | SetMode::Prepend => ItemWrite::Concat {
            data: Cow::Borrowed(m.data),
            prepend: f.set_mode == SetMode::Prepend,
            cas: f.compare_cas,
        },
        mode => ItemWrite::Store {
            value: Cow::Borrowed(m.data),
            flags: f.set_flags.unwrap_or(0),
            ttl: f.ttl.map_or(ItemTtl::Never, ttl_of),
            cond: match mode {
                SetMode::Add => ItemCond::IfAbsent,
                SetMode::Replace => ItemCond::IfPresent,
                _ => ItemCond::Always,
            },
            cas: f.compare_cas,
        },
    };
    match crate::memcache::door::station(sh, s, key, w, true).outcome {
        Ok(Outcome::Done) if f.quiet => {}
        Ok(Outcome::Done) => code(out, m, "HD"),
        Ok(Outcome::Mismatch { absent: true }) => code(out, m, "NF"),
        Ok(Outcome::Mismatch { absent: false }) => code(out, m, "EX"),
        Ok(Outcome::Failed(Failure::TooLarge)) => {
            reply::line(out, "SERVER_ERROR out of memory storing object")
        }
        Ok(_) => code(out, m, "NS"),
        Err(e) => store_error(out, &e),
    }
}

/// `md`: delete, with a CAS check when asked.
fn delete(sh: &Shared, s: &mut McSession, m: &Meta<'_>, key: &[u8], out: &mut Vec<u8>) {
    let f = &m.flags;
    sh.count(OpClass::Delete);
    if let Some(e) = refused(sh, false) {
        return reply::line(out, &e);
    }
    let w = ItemWrite::Delete { cas: f.compare_cas };
    match crate::memcache::door::station(sh, s, key, w, true).outcome {
        Ok(Outcome::Done) if f.quiet => {}
        Ok(Outcome::Done) => code(out, m, "HD"),
        Ok(Outcome::Mismatch { absent: false }) => code(out, m, "EX"),
        Ok(_) => code(out, m, "NF"),
        Err(e) => store_error(out, &e),
    }
}

/// `ma`: incr or decr, creating a missing item when asked.
fn arith(sh: &Shared, s: &mut McSession, m: &Meta<'_>, key: &[u8], out: &mut Vec<u8>) {
    let f = &m.flags;
    sh.count(OpClass::Atomic);
    if let Some(e) = refused(sh, true) {
        return reply::line(out, &e);
    }
    let w = ItemWrite::Arith {
        delta: f.delta.unwrap_or(1),
        incr: !f.decr,
        cas: f.compare_cas,
        vivify: f.vivify.map(|t| (f.initial.unwrap_or(0), ttl_of(t))),
    };
    match crate::memcache::door::station(sh, s, key, w, true).outcome {
        // Quiet mode hides a success whole, its value too, but not the creation of a
        // missing item (as memcached's).
        Ok(Outcome::Uint(_)) if f.quiet => {}
        Ok(Outcome::Uint(n) | Outcome::Created(n)) if f.ret_value => {
            let text = n.to_string();
            reply::meta(out, "VA", f, m.key, None, Some(text.as_bytes()));
        }
        Ok(Outcome::Uint(_) | Outcome::Created(_)) => code(out, m, "HD"),
        Ok(Outcome::Failed(Failure::NotInteger)) => reply::line(
            out,
            "CLIENT_ERROR cannot increment or decrement non-numeric value",
        ),
        Ok(Outcome::Mismatch { absent: false }) => code(out, m, "EX"),
        Ok(_) => code(out, m, "NF"),
        Err(e) => store_error(out, &e),
    }
}
