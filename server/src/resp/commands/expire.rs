//! Redis's expiry commands: SET with EX/PX/EXAT/PXAT/KEEPTTL, SETEX, PSETEX, GETEX,
//! EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT (NX, XX, GT, LT), PERSIST, TTL, PTTL, EXPIRETIME and
//! PEXPIRETIME, with Redis 7's argument checks and error text.
//!
//! Deadlines live in the store (a per-item field of the node format, docs/FORMAT.md), so
//! every read path hides an expired key by itself; these commands only turn Redis's
//! relative and absolute times into one absolute deadline in milliseconds since the Unix
//! epoch, taken from the clock when the command is parsed (as Redis does), and run as
//! writes through the reservation station.

use crate::core::counters::OpClass;
use crate::core::ops::{Cond, ExpireCond, Outcome, Ttl, Write};
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::door::{write_one, Ran};
use crate::resp::notify::{event, GENERIC, STRING};
use crate::resp::reply::{err_store, nil, ok, parse_i64, reply, upper};
use crate::resp::session::Session;
use accelkv_proto::resp;
use accelkv_tree::now_ms;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

/// How a time argument counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Seconds from now (EX, EXPIRE, SETEX).
    Secs,
    /// Milliseconds from now (PX, PEXPIRE, PSETEX).
    Millis,
    /// Unix time in seconds (EXAT, EXPIREAT).
    AtSecs,
    /// Unix time in milliseconds (PXAT, PEXPIREAT).
    AtMillis,
}

/// The absolute deadline for `n` in `unit`, or `None` when it overflows. A result at or
/// before the Unix epoch is clamped to 1 ms (already past; 0 would mean "no deadline").
fn deadline(n: i64, unit: Unit) -> Option<u64> {
    let ms = match unit {
        Unit::Secs | Unit::AtSecs => n.checked_mul(1000)?,
        Unit::Millis | Unit::AtMillis => n,
    };
    let abs = match unit {
        Unit::Secs | Unit::Millis => ms.checked_add(now_ms() as i64)?,
        Unit::AtSecs | Unit::AtMillis => ms,
    };
    Some(abs.max(1) as u64)
}

/// A SET-style time option's deadline: the number must be positive (Redis's "invalid
/// expire time in '<cmd>' command" otherwise).
fn positive_deadline(arg: &[u8], unit: Unit, cmd: &str, out: &mut Vec<u8>) -> Option<u64> {
    let d = parse_i64(arg)
        .filter(|n| *n > 0)
        .and_then(|n| deadline(n, unit));
    if d.is_none() {
        match parse_i64(arg) {
            None => resp::error(out, "ERR value is not an integer or out of range"),
            Some(_) => resp::error(out, &format!("ERR invalid expire time in '{cmd}' command")),
        }
    }
    d
}

fn unit_of(opt: &[u8]) -> Option<Unit> {
    Some(match opt {
        b"EX" => Unit::Secs,
        b"PX" => Unit::Millis,
        b"EXAT" => Unit::AtSecs,
        b"PXAT" => Unit::AtMillis,
        _ => return None,
    })
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]`; `owned`: the value,
/// handed over whole (streamed), in place of `c[2]`.
pub fn set(sh: &Shared, s: &mut Session, c: &[&[u8]], owned: Option<Vec<u8>>, out: &mut Vec<u8>) {
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut ttl: Option<Ttl> = None;
    let mut i = 3;
    while i < c.len() {
        let opt = upper(c[i]);
        match (opt.as_slice(), unit_of(&opt)) {
            (b"NX", _) if !xx => nx = true,
            (b"XX", _) if !nx => xx = true,
            (b"GET", _) => get = true,
            (b"KEEPTTL", _) if ttl.is_none() => ttl = Some(Ttl::Keep),
            (_, Some(unit)) if ttl.is_none() && i + 1 < c.len() => {
                i += 1;
                let Some(d) = positive_deadline(c[i], unit, "set", out) else {
                    return;
                };
                ttl = Some(Ttl::Set(d));
            }
            _ => return resp::error(out, "ERR syntax error"),
        }
        i += 1;
    }
    sh.count(OpClass::Put);
    let value = owned.map_or(Cow::Borrowed(c[2]), Cow::Owned);
    let w = match (nx, xx, get, ttl) {
        (false, false, false, None) => Write::Put(value),
        _ => Write::Set {
            value,
            cond: if nx {
                Cond::IfAbsent
            } else if xx {
                Cond::IfPresent
            } else {
                Cond::Always
            },
            get,
            ttl: ttl.unwrap_or(Ttl::Set(0)),
        },
    };
    let v = s.proto;
    let ran = write_one(sh, s, Op::new(c[1], w), out, ok, nil(v));
    let applied = match (ran, nx, xx) {
        (Ran::Done, ..) => true,
        (Ran::Old(had), true, _) => !had,
        (Ran::Old(had), _, true) => had,
        (Ran::Old(_), false, false) => true,
        _ => false,
    };
    if applied {
        event(s, STRING, "set", c[1]);
        if matches!(ttl, Some(Ttl::Set(_))) {
            event(s, GENERIC, "expire", c[1]);
        }
    }
}

/// A run of plain `SET key value` commands of one connection (a pipeline's), as
/// [`set`] runs them one by one, but through the station as one batch whose tree writes
/// start where one interleaved descent for all their keys found them
/// (`Store::locate_writes`): the batch pays for its memory misses once. The writes run in
/// the pipeline's order (`Station::run_in_order`), so every ordering [`set`] has holds:
/// write versions rise in the order sent (a reader, and recovery after a crash, sees a
/// prefix of the pipeline), each answer once its write is in the tree, visibility parked
/// by the caller as for any write. Every SET of the run passed the gate (`gate.rs`: the
/// disk writable, under `maxmemory`, no reserved key).
pub fn set_run(sh: &Shared, s: &mut Session, sets: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
    let hot = sh.metrics().hot();
    let n = sets.len() as u64;
    hot.resp_commands.fetch_add(n, Relaxed);
    hot.set_batches.fetch_add(1, Relaxed);
    hot.set_batched.fetch_add(n, Relaxed);
    sh.count_n(OpClass::Put, sets.len());
    s.wrote = true;
    let keys: SmallVec<[&[u8]; 64]> = sets.iter().map(|(k, _)| *k).collect();
    let mut done: SmallVec<[Done; 64]> = SmallVec::new();
    {
        // Hints stay valid while the pin lives: until every write is answered.
        let pin = sh.view().pin();
        let mut hints: SmallVec<[Option<accelkv_tree::WriteHint<'_>>; 64]> =
            SmallVec::from_elem(None, sets.len());
        sh.view().locate_writes(&pin, &keys, &mut hints);
        let ops = sets.iter().zip(&hints).map(|(&(k, v), h)| Op {
            key: Cow::Borrowed(k),
            write: Write::Put(Cow::Borrowed(v)),
            hint: *h,
        });
        // In order: the pipeline's order is the order of the write versions.
        sh.writes().run_in_order(ops, &mut done);
    }
    let v = s.proto;
    for d in &done {
        s.unreleased = s.unreleased.max(d.version);
        reply(out, d, v, ok, nil(v));
    }
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
pub fn setex(sh: &Shared, s: &mut Session, c: &[&[u8]], millis: bool, out: &mut Vec<u8>) {
    let (unit, cmd) = if millis {
        (Unit::Millis, "psetex")
    } else {
        (Unit::Secs, "setex")
    };
    let Some(d) = positive_deadline(c[2], unit, cmd, out) else {
        return;
    };
    sh.count(OpClass::Put);
    let w = Write::Set {
        value: Cow::Borrowed(c[3]),
        cond: Cond::Always,
        get: false,
        ttl: Ttl::Set(d),
    };
    let v = s.proto;
    if write_one(sh, s, Op::new(c[1], w), out, ok, nil(v)) == Ran::Done {
        event(s, STRING, "set", c[1]);
        event(s, GENERIC, "expire", c[1]);
    }
}

/// `GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]`.
pub fn getex(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let change = match c.len() {
        2 => None,
        3 if upper(c[2]).as_slice() == b"PERSIST" => Some(0),
        4 => match unit_of(&upper(c[2])) {
            Some(unit) => match positive_deadline(c[3], unit, "getex", out) {
                Some(d) => Some(d),
                None => return,
            },
            None => return resp::error(out, "ERR syntax error"),
        },
        _ => return resp::error(out, "ERR syntax error"),
    };
    sh.count(if change.is_some() {
        OpClass::Update
    } else {
        OpClass::Get
    });
    let v = s.proto;
    let ran = write_one(sh, s, Op::new(c[1], Write::GetEx(change)), out, ok, nil(v));
    match change {
        Some(d) if ran == Ran::Old(true) => {
            let name = match d {
                0 => "persist",
                d if d <= accelkv_tree::now_ms() => "del",
                _ => "expire",
            };
            event(s, GENERIC, name, c[1]);
        }
        _ => {}
    }
}

/// `EXPIRE key seconds [NX|XX|GT|LT]` and PEXPIRE, EXPIREAT, PEXPIREAT: the name says the
/// unit. A time at or before now removes the key (and answers 1).
pub fn expire(sh: &Shared, s: &mut Session, c: &[&[u8]], name: &[u8], out: &mut Vec<u8>) {
    let (unit, cmd) = match name {
        b"EXPIRE" => (Unit::Secs, "expire"),
        b"PEXPIRE" => (Unit::Millis, "pexpire"),
        b"EXPIREAT" => (Unit::AtSecs, "expireat"),
        _ => (Unit::AtMillis, "pexpireat"),
    };
    let Some(n) = parse_i64(c[2]) else {
        return resp::error(out, "ERR value is not an integer or out of range");
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &c[3..] {
        match upper(opt).as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                let o = String::from_utf8_lossy(opt);
                return resp::error(out, &format!("ERR Unsupported option {o}"));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return resp::error(
            out,
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        );
    }
    if gt && lt {
        return resp::error(
            out,
            "ERR GT and LT options at the same time are not compatible",
        );
    }
    let Some(d) = deadline(n, unit) else {
        return resp::error(out, &format!("ERR invalid expire time in '{cmd}' command"));
    };
    let cond = ExpireCond { nx, xx, gt, lt };
    sh.count(OpClass::Update);
    let w = Write::Expire { deadline: d, cond };
    if write_one(sh, s, Op::new(c[1], w), out, one, zero) == Ran::Done {
        // A time already past removes the key (Redis's `del`).
        let name = match d <= accelkv_tree::now_ms() {
            true => "del",
            false => "expire",
        };
        event(s, GENERIC, name, c[1]);
    }
}

/// `PERSIST key`: removes the deadline; 1 if there was one.
pub fn persist(sh: &Shared, s: &mut Session, key: &[u8], out: &mut Vec<u8>) {
    sh.count(OpClass::Update);
    let w = Write::Expire {
        deadline: 0,
        cond: ExpireCond::IF_SOME,
    };
    if write_one(sh, s, Op::new(key, w), out, one, zero) == Ran::Done {
        event(s, GENERIC, "persist", key);
    }
}

fn one(out: &mut Vec<u8>) {
    resp::integer(out, 1)
}

fn zero(out: &mut Vec<u8>) {
    resp::integer(out, 0)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for an absent key, -1 for one without a deadline.
pub fn ttl(sh: &Shared, s: &mut Session, key: &[u8], name: &[u8], out: &mut Vec<u8>) {
    sh.count(OpClass::Get);
    let now = now_ms();
    let found = if s.tx.running.is_some() {
        // Inside EXEC: through the transaction, which sees its own writes.
        match crate::resp::write_door::run_op(sh, s, Op::new(key, Write::ReadDeadline)).outcome {
            Ok(Outcome::Deadline(d)) => d,
            Ok(_) => None,
            Err(e) => return err_store(out, &e),
        }
    } else {
        match sh.view().get_entry_with(key, now, |_, d| d) {
            Ok(d) => d,
            Err(e) => return err_store(out, &e),
        }
    };
    let n = match found {
        None => -2,
        Some(0) => -1,
        Some(d) => {
            let left = d.saturating_sub(now) as i64;
            match name {
                b"TTL" => (left + 500) / 1000,
                b"PTTL" => left,
                b"EXPIRETIME" => (d / 1000) as i64,
                _ => d as i64,
            }
        }
    };
    resp::integer(out, n);
}

/// The handlers of the commands above, as the command table names them.
pub mod cmd {
    use crate::resp::call::Call;

    /// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT n|KEEPTTL]` (its value moved in when
    /// streamed).
    pub fn set(x: &mut Call<'_, '_>) {
        super::set(x.sh, x.s, x.args, x.value.take(), x.out)
    }
    pub fn setex(x: &mut Call<'_, '_>) {
        super::setex(x.sh, x.s, x.args, false, x.out)
    }
    pub fn psetex(x: &mut Call<'_, '_>) {
        super::setex(x.sh, x.s, x.args, true, x.out)
    }
    pub fn getex(x: &mut Call<'_, '_>) {
        super::getex(x.sh, x.s, x.args, x.out)
    }
    pub fn expire(x: &mut Call<'_, '_>) {
        super::expire(x.sh, x.s, x.args, b"EXPIRE", x.out)
    }
    pub fn pexpire(x: &mut Call<'_, '_>) {
        super::expire(x.sh, x.s, x.args, b"PEXPIRE", x.out)
    }
    pub fn expireat(x: &mut Call<'_, '_>) {
        super::expire(x.sh, x.s, x.args, b"EXPIREAT", x.out)
    }
    pub fn pexpireat(x: &mut Call<'_, '_>) {
        super::expire(x.sh, x.s, x.args, b"PEXPIREAT", x.out)
    }
    pub fn persist(x: &mut Call<'_, '_>) {
        super::persist(x.sh, x.s, x.args[1], x.out)
    }
    pub fn ttl(x: &mut Call<'_, '_>) {
        super::ttl(x.sh, x.s, x.args[1], b"TTL", x.out)
    }
    pub fn pttl(x: &mut Call<'_, '_>) {
        super::ttl(x.sh, x.s, x.args[1], b"PTTL", x.out)
    }
    pub fn expiretime(x: &mut Call<'_, '_>) {
        super::ttl(x.sh, x.s, x.args[1], b"EXPIRETIME", x.out)
    }
    pub fn pexpiretime(x: &mut Call<'_, '_>) {
        super::ttl(x.sh, x.s, x.args[1], b"PEXPIRETIME", x.out)
    }
}
