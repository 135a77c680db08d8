//! The memcached handlers' door into the core: every write (and versioned read) as an
//! item operation through the reservation station, noting what the replies rest on, and
//! refused while writes cannot run; store errors as memcached's `SERVER_ERROR`.

use crate::core::ops::typed::user_key_ok;
use crate::core::ops::Failure;
use crate::core::ops::{ItemTtl, ItemWrite, Outcome, Write};
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::memcache::state::McSession;
use accelkv_proto::memcache::{reply, Expiry, Exptime};

/// An exptime as an item's new deadline, now.
pub fn ttl_of(e: Exptime) -> ItemTtl {
    match e.at(accelkv_tree::now_ms()) {
        Expiry::Never => ItemTtl::Never,
        Expiry::Past => ItemTtl::Past,
        Expiry::At(d) => ItemTtl::At(d),
    }
}

/// Runs one memcached write through the reservation station.
pub fn write<'a>(sh: &Shared, s: &mut McSession, key: &'a [u8], w: ItemWrite<'a>) -> Done {
    station(sh, s, key, w, true)
}

/// Runs one memcached operation through the reservation station; `changes`: it may write
/// (so its reply waits for durability where the sync policy asks), false for a read.
pub fn station<'a>(
    sh: &Shared,
    s: &mut McSession,
    key: &'a [u8],
    w: ItemWrite<'a>,
    changes: bool,
) -> Done {
    if changes && !user_key_ok(key) {
        // The reserved part of the key space (`core/ops/typed.rs`) is not a client's to
        // write: memcached's answer for a key it refuses.
        return Done {
            outcome: Ok(Outcome::Failed(Failure::WrongType)),
            version: 0,
        };
    }
    s.wrote |= changes;
    let d = sh.writes().run_one(Op::new(key, Write::Item(w)));
    s.unreleased = s.unreleased.max(d.version);
    d
}

/// Why a write cannot run now (the disk is failing, or past `maxmemory`), as memcached's
/// server error.
pub fn refused(sh: &Shared, adds_memory: bool) -> Option<String> {
    if let Err(m) = sh.writable() {
        return Some(format!("SERVER_ERROR {m}"));
    }
    (adds_memory && sh.over_maxmemory())
        .then(|| "SERVER_ERROR out of memory storing object".to_string())
}

/// A store error as memcached's `SERVER_ERROR` line.
pub fn store_error(out: &mut Vec<u8>, e: &accelkv_tree::Error) {
    match e {
        accelkv_tree::Error::OutOfMemory { .. } => {
            reply::line(out, "SERVER_ERROR out of memory storing object")
        }
        other => reply::line(out, &format!("SERVER_ERROR {other}")),
    }
}

/// A classic write: refused while writes cannot run (the disk fails; past `maxmemory`, for
/// a write that can add memory), else run through the reservation station and answered by
/// `answer`; a store error is memcached's `SERVER_ERROR`. With `noreply` nothing is sent.
pub fn classic_write<'a>(
    sh: &Shared,
    s: &mut McSession,
    key: &'a [u8],
    w: ItemWrite<'a>,
    noreply: bool,
    out: &mut Vec<u8>,
    answer: impl FnOnce(&mut Vec<u8>, Outcome),
) {
    let mark = out.len();
    let adds_memory = !matches!(w, ItemWrite::Delete { .. } | ItemWrite::Touch { .. });
    match refused(sh, adds_memory) {
        Some(m) => reply::line(out, &m),
        None => match write(sh, s, key, w).outcome {
            Ok(o) => answer(out, o),
            Err(e) => store_error(out, &e),
        },
    }
    if noreply {
        out.truncate(mark);
    }
}
