//! The RESP command set: what Redis clients send before their first real command (AUTH,
//! HELLO, CLIENT, SELECT, INFO, CONFIG GET, COMMAND, READONLY), the string commands, and the
//! ordered commands RANGE and FLOOR. Reads go through the loop's read door (`reads.rs`),
//! every write through the reservation station (`station.rs`), the one write door; runs of
//! GET and MGET are batched by `resp_batch.rs` before they reach here.

use crate::core::counters::OpClass;
use crate::core::ops::{Cond, Outcome, Ttl, Write};
use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::session::Session;
use accelkv_engine::{Found, ReadRef, Reply};
use accelkv_proto::resp::{self, Version};
use accelkv_tree::Error;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

/// Commands that change the store: refused while the disk is failing, and their replies
/// wait for durability (data directory, `sync` policy). Any other command after one of these
/// waits until the write is visible (read-your-writes within a connection).
const WRITE_COMMANDS: &[&[u8]] = &[
    b"SET",
    b"SETNX",
    b"GETSET",
    b"MSET",
    b"MSETNX",
    b"RENAME",
    b"RENAMENX",
    b"DEL",
    b"UNLINK",
    b"GETDEL",
    b"APPEND",
    b"SETRANGE",
    b"INCRBYFLOAT",
    b"CAS",
    b"FETCHADD",
    b"VECTOR",
    b"INCR",
    b"DECR",
    b"INCRBY",
    b"DECRBY",
    b"FLUSHALL",
    b"FLUSHDB",
    b"SETEX",
    b"PSETEX",
    b"GETEX",
    b"EXPIRE",
    b"PEXPIRE",
    b"EXPIREAT",
    b"PEXPIREAT",
    b"PERSIST",
];

/// Write commands that only remove: allowed past `maxmemory` (as Redis's commands without
/// the deny-oom flag).
const FREEING_COMMANDS: &[&[u8]] = &[
    b"DEL",
    b"UNLINK",
    b"GETDEL",
    b"FLUSHALL",
    b"FLUSHDB",
    b"EXPIRE",
    b"PEXPIRE",
    b"EXPIREAT",
    b"PEXPIREAT",
    b"PERSIST",
];

/// Whether the command named `name` writes (goes through the station).
pub fn is_write(name: &[u8]) -> bool {
    WRITE_COMMANDS.iter().any(|w| w.eq_ignore_ascii_case(name))
}

/// A command name or option in upper case (on the stack for anything short).
pub(crate) fn upper(a: &[u8]) -> SmallVec<[u8; 24]> {
    a.iter().map(u8::to_ascii_uppercase).collect()
}

/// Appends the RESP error for a store error.
pub fn err_store(out: &mut Vec<u8>, e: &Error) {
    match e {
        Error::OutOfMemory { .. } => {
            resp::error(out, "OOM command not allowed: memory limit reached")
        }
        other => resp::error(out, &format!("ERR {other}")),
    }
}

pub(crate) fn parse_i64(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Runs `ops` through the reservation station (the one write door, so two loops writing one
/// key are ordered by its slot) and returns each one's answer once its effect is in the
/// tree, noting the newest version the replies rest on. The station usually runs them on
/// this thread; if another loop is draining a slot, this waits for that burst.
fn through_station<'a>(
    sh: &Shared,
    s: &mut Session,
    ops: impl IntoIterator<Item = Op<'a>>,
) -> SmallVec<[Done; 8]> {
    let mut done: SmallVec<[Done; 8]> = SmallVec::new();
    if s.tx.running.is_some() {
        for op in ops {
            done.push(crate::resp::tx::run_in_tx(sh, s, op));
        }
        return done;
    }
    sh.station().run(sh.store(), ops, &mut done);
    for d in &done {
        s.unreleased = s.unreleased.max(d.version);
    }
    done
}

/// Appends the reply to a write's outcome: `ok` for [`Outcome::Done`], `skipped` for
/// [`Outcome::Skipped`].
pub(crate) fn reply(
    out: &mut Vec<u8>,
    d: &Done,
    ver: Version,
    ok: impl FnOnce(&mut Vec<u8>),
    skipped: impl FnOnce(&mut Vec<u8>),
) {
    match &d.outcome {
        Err(e) => err_store(out, e),
        Ok(Outcome::Done) => ok(out),
        Ok(Outcome::Skipped) => skipped(out),
        Ok(Outcome::Old(v)) => resp::bulk_in(out, v.as_deref(), ver),
        Ok(Outcome::Int(n)) => resp::integer(out, *n),
        Ok(Outcome::Bytes(b)) => resp::bulk(out, Some(b)),
        Ok(Outcome::Failed(f)) => resp::error(out, &format!("ERR {f}")),
        Ok(other) => resp::error(
            out,
            &format!("ERR internal error: unexpected outcome {other:?}"),
        ),
    }
}

/// One write through the station, its reply appended to `out`.
pub(crate) fn write_one(
    sh: &Shared,
    s: &mut Session,
    op: Op<'_>,
    out: &mut Vec<u8>,
    ok: impl FnOnce(&mut Vec<u8>),
    skipped: impl FnOnce(&mut Vec<u8>),
) {
    let d = crate::resp::tx::run_in_tx(sh, s, op);
    s.unreleased = s.unreleased.max(d.version);
    reply(out, &d, s.proto, ok, skipped);
}

pub(crate) fn ok(out: &mut Vec<u8>) {
    resp::simple(out, "OK")
}

/// A null reply in the connection's protocol.
pub(crate) fn nil(v: Version) -> impl FnOnce(&mut Vec<u8>) {
    move |out| resp::bulk_in(out, None, v)
}

/// A read through the loop's read door: the owned reply. Through an engine's workers the
/// read is submitted instead and this answers a placeholder: the caller (`resp_batch.rs`)
/// sees `reads.submitted()`, drops the command's output and runs it again when answered.
pub(crate) fn read_one(sh: &Shared, reads: &mut Reads, req: ReadRef<'_>) -> Reply {
    let mut reply = Reply::Value(None);
    let _ = reads.run(sh.engine(), &[req], |_, f: Found<'_>| {
        reply = f.into_reply()
    });
    reply
}

/// Redis's error for an unknown command.
pub(crate) fn unknown_command(c: &[&[u8]]) -> String {
    let args: Vec<String> = c[1..]
        .iter()
        .take(3)
        .map(|a| format!("'{}'", String::from_utf8_lossy(a)))
        .collect();
    format!(
        "ERR unknown command '{}', with args beginning with: {}",
        String::from_utf8_lossy(c[0]),
        args.join(" ")
    )
}

/// The value of `key` for a command: inside a transaction, through it (seeing its own
/// writes, the key owned until the commit); otherwise through the loop's read door.
fn get_value(sh: &Shared, s: &mut Session, reads: &mut Reads, key: &[u8]) -> Reply {
    if s.tx.running.is_none() {
        return read_one(sh, reads, ReadRef::Get(key));
    }
    match crate::resp::tx::run_in_tx(sh, s, Op::new(key, Write::Read)).outcome {
        Ok(Outcome::Old(v)) => Reply::Value(v),
        Err(e) => Reply::Error(e),
        Ok(_) => Reply::Value(None),
    }
}

fn wrong_args(out: &mut Vec<u8>, name: &[u8]) {
    resp::error(
        out,
        &format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name).to_lowercase()
        ),
    );
}

/// One command (a GET or MGET here is one outside a read batch: before AUTH, say).
pub fn command(sh: &Shared, s: &mut Session, c: &[&[u8]], reads: &mut Reads, out: &mut Vec<u8>) {
    sh.metrics()
        .hot()
        .resp_commands
        .fetch_add(1, Ordering::Relaxed);
    let Some(first) = c.first() else {
        return;
    };
    let name = upper(first);
    let argc = c.len();
    let store = sh.store();
    // Commands allowed before AUTH.
    match name.as_slice() {
        b"AUTH" => {
            let given = match argc {
                2 => c[1],
                3 => c[2], // AUTH username password: the user name is ignored
                _ => return wrong_args(out, &name),
            };
            if !sh.needs_auth() {
                resp::error(out, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            } else if sh.password_matches(given) {
                s.authed = true;
                resp::simple(out, "OK");
            } else {
                resp::error(
                    out,
                    "WRONGPASS invalid username-password pair or user is disabled.",
                );
            }
            return;
        }
        b"HELLO" => return hello(sh, s, c, out),
        b"QUIT" => {
            s.quit = true;
            return resp::simple(out, "OK");
        }
        b"PING" if !s.authed && sh.needs_auth() => {}
        _ => {}
    }
    if sh.needs_auth() && !s.authed {
        return resp::error(out, "NOAUTH Authentication required.");
    }
    if crate::resp::tx::intercept(sh, s, &name, c, reads, out) {
        return;
    }
    if WRITE_COMMANDS.contains(&name.as_slice()) {
        if let Err(m) = sh.writable() {
            return resp::error(out, &format!("ERR {m}"));
        }
        // Past maxmemory (noeviction): refuse what can add memory; deletes go on.
        if sh.over_maxmemory() && !FREEING_COMMANDS.contains(&name.as_slice()) {
            return resp::error(out, crate::resp::config::OOM);
        }
        s.wrote = true;
    }
    match name.as_slice() {
        b"PING" => match argc {
            1 => resp::simple(out, "PONG"),
            2 => resp::bulk(out, Some(c[1])),
            _ => wrong_args(out, &name),
        },
        b"ECHO" if argc == 2 => resp::bulk(out, Some(c[1])),
        b"SELECT" if argc == 2 => {
            if c[1] == b"0" {
                resp::simple(out, "OK")
            } else {
                resp::error(
                    out,
                    "ERR DB index is out of range (accelkv has one database, 0)",
                )
            }
        }
        b"READONLY" | b"READWRITE" => resp::simple(out, "OK"),
        b"CLIENT" if argc >= 2 => match upper(c[1]).as_slice() {
            b"SETNAME" if argc == 3 => {
                if c[2].iter().any(|b| *b <= b' ' || *b > b'~') {
                    return resp::error(
                        out,
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                }
                s.set_name(Some(c[2]));
                resp::simple(out, "OK")
            }
            b"LIST" => crate::resp::introspect::client_list(sh, s, c, out),
            b"KILL" if argc >= 3 => crate::resp::introspect::client_kill(sh, s, c, out),
            b"GETNAME" => resp::bulk_in(out, s.name.as_deref(), s.proto),
            b"ID" => resp::integer(out, s.id as i64),
            b"SETINFO" => resp::simple(out, "OK"),
            b"INFO" if argc == 2 => crate::resp::introspect::client_info(s, out),
            b"NO-EVICT" | b"TRACKING" => crate::resp::introspect::client_switch(c, out),
            _ => resp::error(out, "ERR unknown CLIENT subcommand"),
        },
        b"COMMAND" => crate::resp::command::command(s, c, out),
        b"MULTI" if argc == 1 => crate::resp::tx::multi(s, out),
        b"EXEC" if argc == 1 => resp::error(out, "ERR EXEC without MULTI"),
        b"DISCARD" if argc == 1 => resp::error(out, "ERR DISCARD without MULTI"),
        b"WATCH" if argc >= 2 => crate::resp::tx::watch(sh, s, &c[1..], out),
        b"UNWATCH" if argc == 1 => {
            s.tx.watched.clear();
            resp::simple(out, "OK")
        }
        b"RESET" if argc == 1 => {
            s.tx = Default::default();
            s.set_proto(Version::Resp2);
            s.set_name(None);
            s.authed = !sh.needs_auth();
            resp::simple(out, "RESET")
        }
        b"CONFIG" if argc >= 3 && c[1].eq_ignore_ascii_case(b"GET") => {
            crate::resp::config::get(sh, s, &c[2..], out)
        }
        b"CONFIG" if argc == 2 && c[1].eq_ignore_ascii_case(b"RESETSTAT") => {
            crate::resp::introspect::reset_stats(sh, out)
        }
        b"MEMORY" if argc >= 2 => crate::resp::introspect::memory(sh, s, c, reads, out),
        b"OBJECT" if argc >= 2 => crate::resp::introspect::object(sh, s, c, reads, out),
        b"CONFIG" if argc >= 2 && c[1].eq_ignore_ascii_case(b"SET") => {
            crate::resp::config::set(sh, c, out)
        }
        b"INFO" => {
            let text = crate::resp::config::info(sh, s, &c[1..]);
            resp::verbatim(out, text.as_bytes(), s.proto);
        }
        b"DBSIZE" => resp::integer(out, store.len() as i64),
        b"FLUSHALL" | b"FLUSHDB"
            if argc == 1 || (argc == 2 && matches!(upper(c[1]).as_slice(), b"SYNC" | b"ASYNC")) =>
        {
            // One write for the whole keyspace (Store::clear): atomic for readers, and the
            // old tree's memory is reclaimed in the background (ASYNC and SYNC alike).
            match sh.station().clear(store) {
                Ok(v) => {
                    s.unreleased = s.unreleased.max(v);
                    resp::simple(out, "OK")
                }
                Err(e) => err_store(out, &e),
            }
        }
        b"FLUSHALL" | b"FLUSHDB" => resp::error(out, "ERR syntax error"),
        b"GET" if argc == 2 => {
            sh.count(OpClass::Get);
            match get_value(sh, s, reads, c[1]) {
                Reply::Value(v) => resp::bulk_in(out, v.as_deref(), s.proto),
                Reply::Error(e) => err_store(out, &e),
                Reply::Items(_) => resp::bulk_in(out, None, s.proto),
            }
        }
        b"MGET" if argc >= 2 => {
            resp::array(out, argc - 1);
            for k in &c[1..] {
                sh.count(OpClass::Get);
                match get_value(sh, s, reads, k) {
                    Reply::Value(v) => resp::bulk_in(out, v.as_deref(), s.proto),
                    _ => resp::bulk_in(out, None, s.proto),
                }
            }
        }
        b"GET" | b"MGET" => wrong_args(out, &name),
        b"SET" if argc >= 3 => crate::resp::expire::set(sh, s, c, out),
        b"SETEX" | b"PSETEX" if argc == 4 => {
            crate::resp::expire::setex(sh, s, c, name.as_slice() == b"PSETEX", out)
        }
        b"GETEX" if argc >= 2 => crate::resp::expire::getex(sh, s, c, out),
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" if argc >= 3 => {
            crate::resp::expire::expire(sh, s, c, &name, out)
        }
        b"PERSIST" if argc == 2 => crate::resp::expire::persist(sh, s, c[1], out),
        b"TTL" | b"PTTL" | b"EXPIRETIME" | b"PEXPIRETIME" if argc == 2 => {
            crate::resp::expire::ttl(sh, s, c[1], &name, out)
        }
        b"SETNX" if argc == 3 => {
            sh.count(OpClass::Put);
            let w = Write::Set {
                value: Cow::Borrowed(c[2]),
                cond: Cond::IfAbsent,
                get: false,
                ttl: Ttl::Set(0),
            };
            let one = |out: &mut Vec<u8>| resp::integer(out, 1);
            let zero = |out: &mut Vec<u8>| resp::integer(out, 0);
            write_one(sh, s, Op::new(c[1], w), out, one, zero);
        }
        b"GETSET" if argc == 3 => {
            sh.count(OpClass::Put);
            let w = Write::Set {
                value: Cow::Borrowed(c[2]),
                cond: Cond::Always,
                get: true,
                ttl: Ttl::Set(0),
            };
            let v = s.proto;
            write_one(sh, s, Op::new(c[1], w), out, ok, nil(v));
        }
        b"MSET" if argc >= 3 && argc % 2 == 1 => crate::resp::tx::mset(sh, s, c, out),
        b"MSETNX" if argc >= 3 && argc % 2 == 1 => crate::resp::tx::msetnx(sh, s, c, out),
        b"RENAME" if argc == 3 => crate::resp::tx::rename(sh, s, c, false, out),
        b"RENAMENX" if argc == 3 => crate::resp::tx::rename(sh, s, c, true, out),
        b"DEL" | b"UNLINK" if argc >= 2 => {
            let dels = c[1..].iter().map(|k| {
                sh.count(OpClass::Delete);
                Op::new(k, Write::Delete)
            });
            let mut n = 0;
            for d in through_station(sh, s, dels) {
                match d.outcome {
                    Ok(Outcome::Done) => n += 1,
                    Ok(Outcome::Skipped) => {}
                    _ => return reply(out, &d, s.proto, ok, ok),
                }
            }
            resp::integer(out, n);
        }
        b"GETDEL" if argc == 2 => {
            sh.count(OpClass::Delete);
            let v = s.proto;
            write_one(sh, s, Op::new(c[1], Write::GetDel), out, ok, nil(v));
        }
        b"APPEND" if argc == 3 => {
            sh.count(OpClass::Update);
            let w = Write::Append(Cow::Borrowed(c[2]));
            write_one(sh, s, Op::new(c[1], w), out, ok, ok);
        }
        b"SETRANGE" if argc == 4 => {
            let Some(offset) = parse_i64(c[2]).filter(|n| *n >= 0) else {
                return resp::error(out, "ERR offset is out of range");
            };
            sh.count(OpClass::Update);
            let w = Write::SetRange {
                offset: offset as usize,
                patch: Cow::Borrowed(c[3]),
            };
            write_one(sh, s, Op::new(c[1], w), out, ok, ok);
        }
        b"INCRBYFLOAT" if argc == 3 => {
            let by = std::str::from_utf8(c[2])
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .filter(|f| f.is_finite());
            let Some(by) = by else {
                return resp::error(out, "ERR value is not a valid float");
            };
            sh.count(OpClass::Atomic);
            write_one(sh, s, Op::new(c[1], Write::IncrByFloat(by)), out, ok, ok);
        }
        b"GETRANGE" | b"SUBSTR" if argc == 4 => {
            let (Some(start), Some(end)) = (parse_i64(c[2]), parse_i64(c[3])) else {
                return resp::error(out, "ERR value is not an integer or out of range");
            };
            sh.count(OpClass::Get);
            match get_value(sh, s, reads, c[1]) {
                Reply::Value(v) => {
                    let v = v.unwrap_or_default();
                    resp::bulk(out, Some(byte_range(&v, start, end)));
                }
                Reply::Error(e) => err_store(out, &e),
                Reply::Items(_) => resp::bulk(out, Some(b"")),
            }
        }
        b"TYPE" if argc == 2 => match get_value(sh, s, reads, c[1]) {
            Reply::Value(Some(_)) => resp::simple(out, "string"),
            Reply::Error(e) => err_store(out, &e),
            _ => resp::simple(out, "none"),
        },
        b"SCAN" if argc >= 2 => crate::resp::keys::scan(sh, &s.global.cursors, c, reads, out),
        b"KEYS" if argc == 2 => crate::resp::keys::keys(sh, c[1], out),
        b"RANDOMKEY" if argc == 1 => crate::resp::keys::random_key(sh, s, out),
        b"TIME" if argc == 1 => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            resp::array(out, 2);
            resp::bulk(out, Some(now.as_secs().to_string().as_bytes()));
            resp::bulk(out, Some(now.subsec_micros().to_string().as_bytes()));
        }
        // No replicas: nothing to wait for.
        b"WAIT" if argc == 3 => resp::integer(out, 0),
        b"CLUSTER" if argc >= 2 => match sh.router() {
            Some(cl) => cl.command(&c[1..], s.proto, out),
            None => resp::error(out, "ERR This instance has cluster support disabled"),
        },
        b"EXISTS" if argc >= 2 && s.tx.running.is_some() => {
            let mut n = 0;
            for k in &c[1..] {
                if matches!(get_value(sh, s, reads, k), Reply::Value(Some(_))) {
                    n += 1;
                }
            }
            resp::integer(out, n);
        }
        b"EXISTS" if argc >= 2 => {
            let keys: SmallVec<[ReadRef<'_>; 8]> = c[1..].iter().map(|k| ReadRef::Get(k)).collect();
            let mut n = 0;
            let _ = reads.run(sh.engine(), &keys, |_, f| {
                if matches!(
                    f,
                    Found::Value(Some(_), _) | Found::Reply(Reply::Value(Some(_)))
                ) {
                    n += 1;
                }
            });
            resp::integer(out, n);
        }
        b"STRLEN" if argc == 2 => match get_value(sh, s, reads, c[1]) {
            Reply::Value(v) => resp::integer(out, v.map_or(0, |v| v.len()) as i64),
            Reply::Error(e) => err_store(out, &e),
            Reply::Items(_) => resp::integer(out, 0),
        },
        b"INCR" | b"DECR" | b"INCRBY" | b"DECRBY" => {
            let by = match (name.as_slice(), argc) {
                (b"INCR", 2) => Some(1),
                (b"DECR", 2) => Some(-1),
                (b"INCRBY", 3) => parse_i64(c[2]),
                (b"DECRBY", 3) => parse_i64(c[2]).and_then(i64::checked_neg),
                _ => return wrong_args(out, &name),
            };
            let Some(by) = by else {
                return resp::error(out, "ERR value is not an integer or out of range");
            };
            incr(sh, s, c[1], by, out);
        }
        b"CAS" if argc == 4 => crate::resp::atomics::cas(sh, s, c, out),
        b"FETCHADD" if (3..=5).contains(&argc) => crate::resp::atomics::fetch_add(sh, s, c, out),
        b"VECTOR" if argc == 6 || argc == 7 => crate::resp::atomics::vector(sh, s, c, out),
        b"RANGE" | b"FLOOR" if argc >= 3 => {
            crate::resp::keys::range(sh, c, name.as_slice() == b"FLOOR", reads, out)
        }
        // A known command with a wrong number of arguments (the arms above check arity).
        n if crate::resp::table::find(n).is_some() => wrong_args(out, &name),
        _ => resp::error(out, &unknown_command(c)),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`: switches the reply
/// protocol (2 or 3), authenticates and names the connection, as Redis 7 does, and answers
/// the server's properties (a map in RESP3, a flat array in RESP2).
fn hello(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let mut version = s.proto;
    if c.len() >= 2 {
        version = match parse_i64(c[1]) {
            Some(2) => Version::Resp2,
            Some(3) => Version::Resp3,
            Some(_) => {
                return resp::error(out, "NOPROTO sorry, this protocol version is not supported")
            }
            None => {
                return resp::error(
                    out,
                    "ERR Protocol version is not an integer or out of range",
                )
            }
        };
    }
    let (mut auth, mut name) = (None, None);
    let mut i = 2;
    while i < c.len() {
        match upper(c[i]).as_slice() {
            b"AUTH" if i + 2 < c.len() => {
                auth = Some(c[i + 2]);
                i += 3;
            }
            b"SETNAME" if i + 1 < c.len() => {
                name = Some(c[i + 1]);
                i += 2;
            }
            _ => {
                let opt = String::from_utf8_lossy(c[i]);
                return resp::error(out, &format!("ERR Syntax error in HELLO option '{opt}'"));
            }
        }
    }
    match (auth, sh.needs_auth()) {
        (Some(given), true) if !sh.password_matches(given) => {
            return resp::error(
                out,
                "WRONGPASS invalid username-password pair or user is disabled.",
            )
        }
        (Some(_), _) => s.authed = true,
        (None, true) if !s.authed => {
            return resp::error(
                out,
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            )
        }
        (None, _) => {}
    }
    if let Some(n) = name {
        s.set_name(Some(n));
    }
    s.set_proto(version);
    resp::map(out, 7, version);
    for (k, v) in [
        ("server", "accelkv"),
        ("version", env!("CARGO_PKG_VERSION")),
    ] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::bulk(out, Some(v.as_bytes()));
    }
    resp::bulk(out, Some(b"proto"));
    resp::integer(out, if version == Version::Resp3 { 3 } else { 2 });
    resp::bulk(out, Some(b"id"));
    resp::integer(out, s.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::bulk(out, Some(v.as_bytes()));
    }
    resp::bulk(out, Some(b"modules"));
    resp::array(out, 0);
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

/// INCRBY with overflow checked (Redis's behaviour: an error, the value unchanged): one
/// operation of the reservation station, like the binary protocol's fetch-and-add (a burst
/// of INCRs on one key is one tree write).
fn incr(sh: &Shared, s: &mut Session, key: &[u8], by: i64, out: &mut Vec<u8>) {
    sh.count(OpClass::Atomic);
    let v = s.proto;
    write_one(sh, s, Op::new(key, Write::IncrBy(by)), out, ok, nil(v));
}
