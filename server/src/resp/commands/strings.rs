//! RESP string commands that map straight onto one read or one write: GET, MGET, the
//! SET variants without options, DEL, APPEND, SETRANGE, GETRANGE, the INCR family, EXISTS,
//! STRLEN, TYPE. (SET with options and the expiry commands are in `expire.rs`, the atomic
//! multi-key ones in `tx.rs`.) Runs of GET and MGET in a pipeline are batched by
//! `batch.rs` before they reach here.

use crate::core::counters::OpClass;
use crate::core::ops::{Cond, Outcome, Ttl, Write};
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::commands::types::access::WRONGTYPE;
use crate::resp::commands::types::keyspace::type_name;
use crate::resp::door::{get_value, through_station, write_one, Got, Ran};
use crate::resp::notify::{event, GENERIC, STRING};
use crate::resp::reply::{err_store, nil, ok, parse_i64, reply};
use accelkv_engine::{Found, ReadRef, Reply};
use accelkv_proto::resp;
use smallvec::SmallVec;
use std::borrow::Cow;

/// `GET key` (the pipeline's runs of GETs are its cheap case, `batch.rs`).
pub fn get(x: &mut Call<'_, '_>) {
    x.sh.count(OpClass::Get);
    crate::resp::door::get((x.sh, x.s), x.reads, x.args[1], false, x.out)
}

/// `MGET key [key ...]`: a collection's key, or a failed read, is a nil.
pub fn mget(x: &mut Call<'_, '_>) {
    resp::array(x.out, x.args.len() - 1);
    for k in &x.args[1..] {
        x.sh.count(OpClass::Get);
        crate::resp::door::get((x.sh, x.s), x.reads, k, true, x.out)
    }
}

pub fn setnx(x: &mut Call<'_, '_>) {
    x.sh.count(OpClass::Put);
    let w = Write::Set {
        value: Cow::Borrowed(x.args[2]),
        cond: Cond::IfAbsent,
        get: false,
        ttl: Ttl::Set(0),
    };
    let one = |out: &mut Vec<u8>| resp::integer(out, 1);
    let zero = |out: &mut Vec<u8>| resp::integer(out, 0);
    if write_one(x.sh, x.s, Op::new(x.args[1], w), x.out, one, zero) == Ran::Done {
        event(x.s, STRING, "set", x.args[1]);
    }
}

pub fn getset(x: &mut Call<'_, '_>) {
    x.sh.count(OpClass::Put);
    let w = Write::Set {
        value: Cow::Borrowed(x.args[2]),
        cond: Cond::Always,
        get: true,
        ttl: Ttl::Set(0),
    };
    let v = x.s.proto;
    if !matches!(
        write_one(x.sh, x.s, Op::new(x.args[1], w), x.out, ok, nil(v)),
        Ran::Failed
    ) {
        event(x.s, STRING, "set", x.args[1]);
    }
}

/// DEL and UNLINK: how many of the keys existed.
pub fn del(x: &mut Call<'_, '_>) {
    let sh = x.sh;
    let dels = x.args[1..].iter().map(|k| {
        sh.count(OpClass::Delete);
        Op::new(k, Write::Delete)
    });
    let mut n = 0;
    for (d, k) in through_station(sh, x.s, dels).into_iter().zip(&x.args[1..]) {
        match d.outcome {
            Ok(Outcome::Done) => {
                n += 1;
                event(x.s, GENERIC, "del", k);
            }
            Ok(Outcome::Skipped) => {}
            _ => return reply(x.out, &d, x.s.proto, ok, ok),
        }
    }
    resp::integer(x.out, n);
}

pub fn getdel(x: &mut Call<'_, '_>) {
    x.sh.count(OpClass::Delete);
    let v = x.s.proto;
    let op = Op::new(x.args[1], Write::GetDel);
    if write_one(x.sh, x.s, op, x.out, ok, nil(v)) == Ran::Old(true) {
        event(x.s, GENERIC, "del", x.args[1]);
    }
}

pub fn append(x: &mut Call<'_, '_>) {
    x.sh.count(OpClass::Update);
    let w = Write::Append(Cow::Borrowed(x.args[2]));
    if write_one(x.sh, x.s, Op::new(x.args[1], w), x.out, ok, ok) == Ran::Done {
        event(x.s, STRING, "append", x.args[1]);
    }
}

pub fn setrange(x: &mut Call<'_, '_>) {
    let Some(offset) = parse_i64(x.args[2]).filter(|n| *n >= 0) else {
        return resp::error(x.out, "ERR offset is out of range");
    };
    x.sh.count(OpClass::Update);
    let w = Write::SetRange {
        offset: offset as usize,
        patch: Cow::Borrowed(x.args[3]),
    };
    let ran = write_one(x.sh, x.s, Op::new(x.args[1], w), x.out, ok, ok);
    if ran == Ran::Done && !x.args[3].is_empty() {
        event(x.s, STRING, "setrange", x.args[1]);
    }
}

pub fn incrbyfloat(x: &mut Call<'_, '_>) {
    // An infinite increment parses (Redis then answers that it would produce Infinity).
    let by = std::str::from_utf8(x.args[2])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|f| !f.is_nan());
    let Some(by) = by else {
        return resp::error(x.out, "ERR value is not a valid float");
    };
    x.sh.count(OpClass::Atomic);
    let op = Op::new(x.args[1], Write::IncrByFloat(by));
    if write_one(x.sh, x.s, op, x.out, ok, ok) == Ran::Done {
        event(x.s, STRING, "incrbyfloat", x.args[1]);
    }
}

/// GETRANGE and SUBSTR.
pub fn getrange(x: &mut Call<'_, '_>) {
    let (Some(start), Some(end)) = (parse_i64(x.args[2]), parse_i64(x.args[3])) else {
        return resp::error(x.out, "ERR value is not an integer or out of range");
    };
    x.sh.count(OpClass::Get);
    match get_value(x.sh, x.s, x.reads, x.args[1]) {
        Got::Str(v) => {
            let v = v.unwrap_or_default();
            resp::bulk(x.out, Some(byte_range(&v, start, end)));
        }
        Got::Typed(..) => resp::error(x.out, WRONGTYPE),
        Got::Err(e) => err_store(x.out, &e),
    }
}

pub fn type_of(x: &mut Call<'_, '_>) {
    match get_value(x.sh, x.s, x.reads, x.args[1]) {
        Got::Str(Some(_)) => resp::simple(x.out, "string"),
        Got::Typed(v, f) => resp::simple(x.out, type_name(&v, f)),
        Got::Err(e) => err_store(x.out, &e),
        Got::Str(None) => resp::simple(x.out, "none"),
    }
}

/// EXISTS: inside a transaction each key through it, otherwise all as one read batch.
pub fn exists(x: &mut Call<'_, '_>) {
    let mut n = 0;
    if x.s.tx.running.is_some() {
        for k in &x.args[1..] {
            if matches!(
                get_value(x.sh, x.s, x.reads, k),
                Got::Str(Some(_)) | Got::Typed(..)
            ) {
                n += 1;
            }
        }
        return resp::integer(x.out, n);
    }
    let keys: SmallVec<[ReadRef<'_>; 8]> = x.args[1..].iter().map(|k| ReadRef::Get(k)).collect();
    let _ = x.sh.read(x.reads, &keys, |_, f| {
        if matches!(
            f,
            Found::Value(Some(_), _) | Found::Reply(Reply::Value(Some(_)))
        ) {
            n += 1;
        }
    });
    resp::integer(x.out, n);
}

pub fn strlen(x: &mut Call<'_, '_>) {
    match get_value(x.sh, x.s, x.reads, x.args[1]) {
        Got::Str(v) => resp::integer(x.out, v.map_or(0, |v| v.len()) as i64),
        Got::Typed(..) => resp::error(x.out, WRONGTYPE),
        Got::Err(e) => err_store(x.out, &e),
    }
}

pub fn incr(x: &mut Call<'_, '_>) {
    incr_by(x, 1)
}

pub fn decr(x: &mut Call<'_, '_>) {
    incr_by(x, -1)
}

pub fn incrby(x: &mut Call<'_, '_>) {
    match parse_i64(x.args[2]) {
        Some(by) => incr_by(x, by),
        None => resp::error(x.out, "ERR value is not an integer or out of range"),
    }
}

pub fn decrby(x: &mut Call<'_, '_>) {
    match parse_i64(x.args[2]).and_then(i64::checked_neg) {
        Some(by) => incr_by(x, by),
        None => resp::error(x.out, "ERR value is not an integer or out of range"),
    }
}

/// INCRBY with overflow checked (Redis's behaviour: an error, the value unchanged): one
/// operation of the reservation station, like the binary protocol's fetch-and-add (a burst
/// of INCRs on one key is one tree write).
fn incr_by(x: &mut Call<'_, '_>, by: i64) {
    x.sh.count(OpClass::Atomic);
    let v = x.s.proto;
    let op = Op::new(x.args[1], Write::IncrBy(by));
    if write_one(x.sh, x.s, op, x.out, ok, nil(v)) == Ran::Done {
        event(x.s, STRING, "incrby", x.args[1]);
    }
}

/// Redis's GETRANGE: `start..=end` with negative offsets from the end, clamped.
fn byte_range(v: &[u8], start: i64, end: i64) -> &[u8] {
    let n = v.len() as i64;
    let at = |i: i64| if i < 0 { (n + i).max(0) } else { i };
    let (s, e) = (at(start), at(end).min(n - 1));
    if n == 0 || s > e || s >= n {
        return b"";
    }
    &v[s as usize..=e as usize]
}
