//! DUMP and RESTORE in Redis's serialization (`accelkv_proto::rdb`, docs/FORMAT.md "DUMP
//! payloads"): a value dumped by Redis restores here and one dumped here restores in
//! Redis, for strings, lists, sets, sorted sets, hashes and streams with their consumer
//! groups (`stream_dump.rs`). DUMP reads the value at one snapshot; RESTORE checks the
//! payload, then removes, writes and sets the deadline in one transaction, a collection
//! through its own command's handler (HSET, SADD, RPUSH, ZADD), so it is packed or not as
//! that command would make it, a stream as its records.

use crate::core::counters::OpClass;
use crate::core::ops::typed::is_typed;
use crate::core::ops::{Cond, ExpireCond, Outcome, Ttl, Write};
use crate::core::shared::Shared;
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::commands::tx::{atomically, failed};
use crate::resp::commands::types::access::{fail, opened, Fail, Src};
use crate::resp::commands::types::encoding::{decode_score, Kind};
use crate::resp::commands::types::run::read;
use crate::resp::commands::types::zset::fmt_score;
use crate::resp::commands::types::{hash, list, set, stream_dump, zset};
use crate::resp::notify;
use crate::resp::reply::{parse_i64, upper};
use crate::resp::session::Session;
use crate::resp::write_door::run_op;
use accelkv_proto::rdb::{self, RdbError, Value};
use accelkv_proto::resp;
use std::borrow::Cow;

/// The value at `key` as DUMP carries it (`None`: absent).
pub(crate) fn value_at(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
) -> Result<Option<Value>, Fail> {
    let Some((v, flags)) = src.item(sh, s, key)? else {
        return Ok(None);
    };
    if !is_typed(flags) {
        return Ok(Some(Value::String(v)));
    }
    let m = opened(s, key, &v, flags)?;
    let fields = |s: &mut Session| src.fields(sh, s, key, &m);
    Ok(Some(match m.kind {
        Kind::Stream => Value::Stream(stream_dump::read(sh, s, src, (key, &m))?),
        Kind::Hash => Value::Hash(fields(s)?),
        Kind::Set => Value::Set(fields(s)?.into_iter().map(|(f, _)| f).collect()),
        Kind::List => Value::List(fields(s)?.into_iter().map(|(_, v)| v).collect()),
        Kind::ZSet => Value::ZSet(
            fields(s)?
                .into_iter()
                .filter_map(|(f, v)| decode_score(&v).map(|sc| (f, sc)))
                .collect(),
        ),
    }))
}

/// `DUMP key`: the value's serialization (nil if absent).
pub fn dump(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| value_at(sh, s, src, key),
        |out, v, proto| match v {
            Some(v) => resp::bulk(out, Some(&rdb::dump(&v))),
            None => resp::bulk_in(out, None, proto),
        },
    )
}

/// RESTORE's options.
struct Opts {
    replace: bool,
    absttl: bool,
}

fn options(args: &[&[u8]]) -> Result<Opts, &'static str> {
    let mut o = Opts {
        replace: false,
        absttl: false,
    };
    let (mut idle, mut freq) = (false, false);
    let mut i = 0;
    while i < args.len() {
        let more = i + 1 < args.len();
        match upper(args[i]).as_slice() {
            b"REPLACE" => o.replace = true,
            b"ABSTTL" => o.absttl = true,
            // Kept for compatibility: accelkv keeps no access clock, so they set nothing.
            b"IDLETIME" if more && !freq => {
                let n =
                    parse_i64(args[i + 1]).ok_or("ERR value is not an integer or out of range")?;
                if n < 0 {
                    return Err("ERR Invalid IDLETIME value, must be >= 0");
                }
                (idle, i) = (true, i + 1);
            }
            b"FREQ" if more && !idle => {
                let n =
                    parse_i64(args[i + 1]).ok_or("ERR value is not an integer or out of range")?;
                if !(0..=255).contains(&n) {
                    return Err("ERR Invalid FREQ value, must be >= 0 and <= 255");
                }
                (freq, i) = (true, i + 1);
            }
            _ => return Err("ERR syntax error"),
        }
        i += 1;
    }
    Ok(o)
}

/// The command that writes a restored collection, and its arguments after the key
/// (`None`: a string, written directly).
type Writer<'v> = (fn(&mut Call<'_, '_>), Vec<Cow<'v, [u8]>>);

fn writer(v: &Value) -> Option<Writer<'_>> {
    fn b(x: &[u8]) -> Cow<'_, [u8]> {
        Cow::Borrowed(x)
    }
    Some(match v {
        Value::String(_) | Value::Stream(_) => return None,
        Value::List(items) => (list::rpush, items.iter().map(|i| b(i)).collect()),
        Value::Set(items) => (set::sadd, items.iter().map(|i| b(i)).collect()),
        Value::Hash(pairs) => (
            hash::hset,
            pairs.iter().flat_map(|(f, v)| [b(f), b(v)]).collect(),
        ),
        Value::ZSet(items) => (
            zset::zadd,
            items
                .iter()
                .flat_map(|(m, sc)| [Cow::Owned(fmt_score(*sc).into_bytes()), b(m)])
                .collect(),
        ),
    })
}

/// The value a payload holds, refused with Redis's errors when it is damaged, malformed or
/// empty, or more than the store's limits hold.
fn checked(sh: &Shared, key: &[u8], payload: &[u8]) -> Result<Value, Fail> {
    let value = match rdb::restore(payload) {
        Ok(v) => v,
        Err(RdbError::VersionOrChecksum) => {
            return Err(Fail::Reply(
                "ERR DUMP payload version or checksum are wrong".into(),
            ))
        }
        Err(RdbError::BadFormat) => return Err(Fail::Reply("ERR Bad data format".into())),
        Err(RdbError::Unsupported(t)) => {
            return Err(Fail::Reply(format!(
                "ERR Bad data format (RDB type {t} is not restored by accelkv yet)"
            )))
        }
    };
    let empty = match &value {
        Value::String(_) | Value::Stream(_) => false,
        Value::List(v) | Value::Set(v) => v.is_empty(),
        Value::Hash(v) => v.is_empty(),
        Value::ZSet(v) => v.is_empty(),
    };
    if empty {
        return Err(Fail::Reply("ERR Bad data format".into()));
    }
    if let Value::Stream(v) = &value {
        stream_dump::check(sh, key, v)?;
    }
    Ok(value)
}

/// RESTORE's options, value and deadline (0: none), or why it is refused.
fn prepared(x: &Call<'_, '_>) -> Result<(Opts, Value, u64), Fail> {
    let key = x.args[1];
    let reply = |e: &str| Fail::Reply(e.to_string());
    let o = options(&x.args[4..]).map_err(reply)?;
    let ttl =
        parse_i64(x.args[2]).ok_or_else(|| reply("ERR value is not an integer or out of range"))?;
    if ttl < 0 {
        return Err(reply("ERR Invalid TTL value, must be >= 0"));
    }
    // An existing key is refused before the payload is looked at, as in Redis (checked
    // again inside the transaction).
    if !o.replace && crate::resp::commands::tx::live(x.sh, key).unwrap_or(false) {
        return Err(reply("BUSYKEY Target key name already exists."));
    }
    let value = checked(x.sh, key, x.args[3])?;
    let deadline = match (ttl, o.absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => accelkv_tree::now_ms().saturating_add(t as u64),
    };
    Ok((o, value, deadline))
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`.
pub fn restore(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let (o, value, deadline) = match prepared(x) {
        Ok(p) => p,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Put);
    let (reads, dispatch) = (&mut *x.reads, x.dispatch);
    atomically(x.sh, x.s, x.out, |sh, s, out| {
        if !o.replace {
            let d = run_op(sh, s, Op::new(key, Write::ReadItem));
            if failed(out, &d) {
                return;
            }
            if matches!(d.outcome, Ok(Outcome::Item(_))) {
                return resp::error(out, "BUSYKEY Target key name already exists.");
            }
        }
        let d = run_op(sh, s, Op::new(key, Write::Delete));
        if failed(out, &d) {
            return;
        }
        if deadline != 0 && deadline <= accelkv_tree::now_ms() {
            if matches!(d.outcome, Ok(Outcome::Done)) {
                notify::event(s, notify::GENERIC, "del", key);
            }
            return resp::simple(out, "OK"); // already expired: nothing is made
        }
        // The commands that rebuild a collection announce nothing of their own: RESTORE
        // is one `restore` event.
        let events = notify::mark(s);
        match (&value, writer(&value)) {
            (Value::String(v), _) => {
                let w = Write::Set {
                    value: Cow::Borrowed(v),
                    cond: Cond::Always,
                    get: false,
                    ttl: Ttl::Set(deadline),
                };
                if !failed(out, &run_op(sh, s, Op::new(key, w))) {
                    notify::event(s, notify::GENERIC, "restore", key);
                    resp::simple(out, "OK");
                }
                return;
            }
            (Value::Stream(v), _) => {
                if let Err(e) = stream_dump::write(sh, s, key, v) {
                    return fail(out, &e);
                }
            }
            (_, Some((handler, rest))) => {
                let mut args: Vec<&[u8]> = vec![b"RESTORE", key];
                args.extend(rest.iter().map(|c| c.as_ref()));
                let mut reply = Vec::new();
                let mut c = Call {
                    sh,
                    s: &mut *s,
                    args: &args,
                    reads,
                    out: &mut reply,
                    dispatch,
                    value: None,
                };
                handler(&mut c);
                if reply.first() == Some(&b'-') {
                    return out.extend_from_slice(&reply);
                }
            }
            (_, None) => return,
        }
        if deadline != 0 {
            let w = Write::Expire {
                deadline,
                cond: ExpireCond::default(),
            };
            if failed(out, &run_op(sh, s, Op::new(key, w))) {
                return;
            }
        }
        notify::drop_since(s, events);
        notify::event(s, notify::GENERIC, "restore", key);
        resp::simple(out, "OK");
    })
}
