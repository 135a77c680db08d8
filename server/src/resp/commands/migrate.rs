//! `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
//! AUTH2 username password] [KEYS key ...]`, as Redis 7 does it: each key's DUMP payload
//! and time to live are sent to the target as RESTORE commands (after AUTH and SELECT), in
//! one pipeline over the target's connection (kept for the next MIGRATE to it for 10 s, as
//! Redis keeps it: `migrate_sockets.rs`), and each key the target restored is removed here
//! unless COPY. Like Redis's, it holds the connection's event
//! loop while it waits for the target (at most `timeout` milliseconds per read or write).
//!
//! Where Redis runs nothing else meanwhile, accelkv's other loops keep serving: the keys'
//! versions are taken before they are read, and the removal is one transaction that first
//! checks them, so a key written by another client during its MIGRATE is left here (and
//! the reply says so) rather than removed with its new value.

use crate::resp::call::{Call, Handler};
use crate::resp::commands::migrate_sockets::Sockets;
use crate::resp::commands::tx::{unless_touched, versions, Watched};
use crate::resp::reply::{parse_i64, upper};
use accelkv_proto::resp::{self, Value};
use accelkv_proto::Limits;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Replies of any size (a DUMP payload as large as the largest value).
fn limits() -> Limits {
    Limits {
        max_value: usize::MAX / 4,
        max_bulk: usize::MAX / 4,
        max_array: usize::MAX / 4,
        ..Limits::default()
    }
}

/// The parsed command.
struct Migrate<'a> {
    host: &'a [u8],
    port: u16,
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    auth: Option<Vec<&'a [u8]>>,
    keys: Vec<&'a [u8]>,
}

fn parse<'a>(args: &[&'a [u8]]) -> Result<Migrate<'a>, &'static str> {
    let int = |a: &[u8]| parse_i64(a).ok_or("ERR value is not an integer or out of range");
    let mut m = Migrate {
        host: args[1],
        port: u16::try_from(int(args[2])?).map_err(|_| "ERR Invalid TCP port specified")?,
        db: int(args[4])?,
        timeout: Duration::from_millis(match int(args[5])? {
            n if n <= 0 => 1000,
            n => n as u64,
        }),
        copy: false,
        replace: false,
        auth: None,
        keys: vec![args[3]],
    };
    let mut i = 6;
    while i < args.len() {
        let left = args.len() - i - 1;
        match upper(args[i]).as_slice() {
            b"COPY" => m.copy = true,
            b"REPLACE" => m.replace = true,
            b"AUTH" if left >= 1 => {
                m.auth = Some(vec![args[i + 1]]);
                i += 1;
            }
            b"AUTH2" if left >= 2 => {
                m.auth = Some(vec![args[i + 1], args[i + 2]]);
                i += 2;
            }
            b"KEYS" => {
                if !args[3].is_empty() {
                    return Err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
                }
                m.keys = args[i + 1..].to_vec();
                break;
            }
            _ => return Err("ERR syntax error"),
        }
        i += 1;
    }
    Ok(m)
}

/// Runs `handler` on `args` (physical keys, as a handler sees them) within this call:
/// its reply, parsed.
fn inner(x: &mut Call<'_, '_>, handler: Handler, args: &[&[u8]]) -> Option<Value> {
    let mut out = Vec::new();
    let mut c = Call {
        sh: x.sh,
        s: &mut *x.s,
        args,
        reads: &mut *x.reads,
        out: &mut out,
        dispatch: x.dispatch,
        value: None,
    };
    handler(&mut c);
    resp::parse_reply(&out, &limits())
        .ok()
        .flatten()
        .map(|(v, _)| v)
}

/// `MIGRATE …`.
pub fn migrate(x: &mut Call<'_, '_>) {
    let m = match parse(x.args) {
        Ok(m) => m,
        Err(e) => return resp::error(x.out, e),
    };
    let watched = match versions(x.sh, &m.keys) {
        Ok(w) => w,
        Err(e) => return crate::resp::reply::err_store(x.out, &e),
    };
    // Each present key: (its key here, RESTORE's arguments).
    let mut sent: Vec<(&[u8], [Vec<u8>; 3])> = Vec::new();
    for k in &m.keys {
        let Some(Value::Bulk(Some(payload))) = inner(x, super::dump::dump, &[b"DUMP", k]) else {
            continue;
        };
        let ttl = match inner(x, super::expire::cmd::pttl, &[b"PTTL", k]) {
            Some(Value::Integer(t)) if t > 0 => t,
            _ => 0,
        };
        let shown = crate::resp::prefix::shown(k).to_vec();
        sent.push((k, [shown, ttl.to_string().into_bytes(), payload]));
    }
    if sent.is_empty() {
        return resp::simple(x.out, "NOKEY");
    }
    let replies = match transfer(&m, &sent, &x.s.global.migrate_sockets) {
        Ok(r) => r,
        Err(e) => return resp::error(x.out, &e),
    };
    // AUTH's and SELECT's replies first, then one per key: a key the target restored is
    // removed here; a refusal is the reply (the first one).
    let setup = usize::from(m.auth.is_some()) + 1;
    let mut error = replies[..setup].iter().find_map(target_error);
    let mut restored: Vec<&[u8]> = Vec::new();
    if error.is_none() {
        for ((k, _), r) in sent.iter().zip(&replies[setup..]) {
            match target_error(r) {
                Some(e) => error = error.or(Some(e)),
                None => restored.push(k),
            }
        }
    }
    if !m.copy && !restored.is_empty() {
        let watched: Vec<Watched> = watched
            .into_iter()
            .filter(|w| restored.contains(&w.0.as_slice()))
            .collect();
        let mut del: Vec<&[u8]> = vec![b"DEL"];
        del.extend(restored.iter().copied());
        if !remove(x, &watched, &del) {
            error = error.or(Some(
                "ERR a key was written here while it was migrated: it was copied, not moved".into(),
            ));
        }
    }
    match error {
        Some(e) => resp::error(x.out, &e),
        None => resp::simple(x.out, "OK"),
    }
}

/// Removes the migrated keys in one transaction, unless one was written since its version
/// was taken (then nothing is removed): whether they were.
fn remove(x: &mut Call<'_, '_>, watched: &[Watched], del: &[&[u8]]) -> bool {
    let (sh, dispatch) = (x.sh, x.dispatch);
    let reads = &mut *x.reads;
    unless_touched(sh, x.s, watched, |s| {
        let mut out = Vec::new();
        let mut c = Call {
            sh,
            s,
            args: del,
            reads,
            out: &mut out,
            dispatch,
            value: None,
        };
        super::strings::del(&mut c);
    })
}

/// The error a reply from the target is, as MIGRATE reports it.
fn target_error(r: &Value) -> Option<String> {
    match r {
        Value::Error(e) => Some(format!("ERR Target instance replied with error: {e}")),
        _ => None,
    }
}

/// Sends AUTH, SELECT and the RESTOREs in one pipeline over the target's cached
/// connection (or a new one) and reads every reply; the connection is cached again when
/// all came back.
fn transfer(
    m: &Migrate<'_>,
    sent: &[(&[u8], [Vec<u8>; 3])],
    cache: &Sockets,
) -> Result<Vec<Value>, String> {
    let host = String::from_utf8_lossy(m.host).into_owned();
    let target = format!("{host}:{}", m.port);
    let connect_err = || "IOERR error or timeout connecting to the client".to_string();
    // A refused or unanswered connection shows when the request is written, as in Redis
    // (its connect does not wait).
    let write_err = || "IOERR error or timeout writing to target instance".to_string();
    let mut conn = match cache.take(&target) {
        Some(c) => c,
        None => {
            let addr = (host.as_str(), m.port)
                .to_socket_addrs()
                .map_err(|_| connect_err())?
                .next()
                .ok_or_else(connect_err)?;
            TcpStream::connect_timeout(&addr, m.timeout).map_err(|_| write_err())?
        }
    };
    let _ = conn.set_nodelay(true);
    conn.set_read_timeout(Some(m.timeout))
        .map_err(|_| connect_err())?;
    conn.set_write_timeout(Some(m.timeout))
        .map_err(|_| connect_err())?;
    let mut req = Vec::new();
    if let Some(auth) = &m.auth {
        let mut a: Vec<&[u8]> = vec![b"AUTH"];
        a.extend(auth.iter().copied());
        resp::command(&mut req, &a);
    }
    resp::command(&mut req, &[b"SELECT", m.db.to_string().as_bytes()]);
    for (_, [key, ttl, payload]) in sent {
        let mut a: Vec<&[u8]> = vec![b"RESTORE", key, ttl, payload];
        if m.replace {
            a.push(b"REPLACE");
        }
        resp::command(&mut req, &a);
    }
    conn.write_all(&req).map_err(|_| write_err())?;
    let want = sent.len() + 1 + usize::from(m.auth.is_some());
    let replies = read_replies(&mut conn, want)?;
    cache.put(target, conn);
    Ok(replies)
}

/// Reads `want` replies from the target.
fn read_replies(conn: &mut TcpStream, want: usize) -> Result<Vec<Value>, String> {
    let read_err = || "IOERR error or timeout reading to target instance".to_string();
    let limits = limits();
    let (mut buf, mut at, mut out) = (Vec::new(), 0, Vec::with_capacity(want));
    let mut chunk = [0u8; 16 << 10];
    while out.len() < want {
        match resp::parse_reply(&buf[at..], &limits) {
            Ok(Some((v, used))) => {
                out.push(v);
                at += used;
                continue;
            }
            Ok(None) => {}
            Err(_) => return Err(read_err()),
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(read_err()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(out)
}
