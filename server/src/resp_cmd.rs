//! The RESP command set: what Redis clients send before their first real command (AUTH,
//! HELLO, CLIENT, SELECT, INFO, CONFIG GET, COMMAND, READONLY), the string commands, and the
//! ordered commands RANGE and FLOOR. Consecutive GETs and MGETs of a pipeline go to the
//! engine as one batch; everything else runs in order.

use crate::exec::wait_all;
use crate::state::{OpClass, Shared};
use crate::station::{Effect, Finish, KeyFn};
use accelkv_engine::{ReadEngine, Reply, Request as EngineRequest, Sink};
use accelkv_proto::resp;
use accelkv_tree::Error;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Per-connection RESP state.
#[derive(Clone)]
pub struct Session {
    pub id: u64,
    pub authed: bool,
    pub name: Option<Vec<u8>>,
    /// QUIT was received: close after the reply.
    pub quit: bool,
    /// A write command ran since the connection last waited for durability.
    pub wrote: bool,
}

/// Commands that change the store: refused while the disk is failing, and their replies
/// wait for durability (data directory, `sync` policy).
const WRITE_COMMANDS: &[&[u8]] = &[
    b"SET",
    b"SETNX",
    b"GETSET",
    b"MSET",
    b"DEL",
    b"INCR",
    b"DECR",
    b"INCRBY",
    b"DECRBY",
    b"FLUSHALL",
    b"FLUSHDB",
];

fn upper(a: &[u8]) -> Vec<u8> {
    a.to_ascii_uppercase()
}

fn err_store(out: &mut Vec<u8>, e: &Error) {
    match e {
        Error::OutOfMemory { .. } => {
            resp::error(out, "OOM command not allowed: memory limit reached")
        }
        other => resp::error(out, &format!("ERR {other}")),
    }
}

fn parse_i64(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Executes pipelined commands in order, appending every reply to `out`: runs of GET/MGET
/// go to the engine as one batch, runs of other commands to a writer thread as one job.
pub fn execute(
    sh: &Arc<Shared>,
    s: &mut Session,
    cmds: &[Vec<&[u8]>],
    sink: &Arc<Sink>,
    out: &mut Vec<u8>,
) {
    let is_read = |c: &Vec<&[u8]>| match c.first() {
        Some(n) if n.eq_ignore_ascii_case(b"GET") => c.len() == 2,
        Some(n) if n.eq_ignore_ascii_case(b"MGET") => c.len() >= 2,
        _ => false,
    };
    let mut i = 0;
    while i < cmds.len() && !s.quit {
        let authed = s.authed || sh.settings.password.is_none();
        let start = i;
        if authed && is_read(&cmds[i]) {
            while i < cmds.len() && is_read(&cmds[i]) {
                i += 1;
            }
            read_batch(sh, &cmds[start..i], sink, out);
            continue;
        }
        while i < cmds.len() && !(authed && is_read(&cmds[i])) {
            i += 1;
        }
        let owned: Vec<Vec<Vec<u8>>> = cmds[start..i]
            .iter()
            .map(|c| c.iter().map(|a| a.to_vec()).collect())
            .collect();
        let (shared, mut session) = (sh.clone(), s.clone());
        let (session, part) = sh.writers.run(move || {
            let mut o = Vec::new();
            for c in &owned {
                if session.quit {
                    break;
                }
                let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                command(&shared, &mut session, &args, &mut o);
            }
            (session, o)
        });
        *s = session;
        out.extend_from_slice(&part);
    }
}

fn read_batch(sh: &Shared, cmds: &[Vec<&[u8]>], sink: &Arc<Sink>, out: &mut Vec<u8>) {
    let mut reqs = Vec::new();
    for c in cmds {
        for k in &c[1..] {
            sh.count(OpClass::Get);
            reqs.push((reqs.len() as u64, EngineRequest::get(k)));
        }
    }
    let n = reqs.len();
    let admitted = sh.admit(n);
    let mut values: Vec<Option<Reply>> = vec![None; n];
    if admitted {
        sh.engine.submit(sink, reqs);
        for c in wait_all(sink, n) {
            values[c.tag as usize] = Some(c.reply);
        }
        sh.release(n);
    }
    let mut next = 0;
    for c in cmds {
        let mget = c[0].eq_ignore_ascii_case(b"MGET");
        if !admitted {
            resp::error(out, "BUSY server has too many operations in flight");
            next += c.len() - 1;
            continue;
        }
        if mget {
            resp::array(out, c.len() - 1);
        }
        for _ in 1..c.len() {
            match values[next].take() {
                Some(Reply::Value(v)) => resp::bulk(out, v.as_deref()),
                Some(Reply::Error(_)) if mget => resp::bulk(out, None),
                Some(Reply::Error(e)) => err_store(out, &e),
                _ => resp::bulk(out, None),
            }
            next += 1;
        }
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

/// One command that is not part of a read batch.
fn command(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    sh.metrics.resp_commands.fetch_add(1, Ordering::Relaxed);
    let Some(first) = c.first() else {
        return;
    };
    let name = upper(first);
    let argc = c.len();
    let store = &sh.store;
    // Commands allowed before AUTH.
    match name.as_slice() {
        b"AUTH" => {
            let given = match argc {
                2 => c[1],
                3 => c[2], // AUTH username password: the user name is ignored
                _ => return wrong_args(out, &name),
            };
            match &sh.settings.password {
                None => resp::error(out, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
                Some(p) if p.as_bytes() == given => {
                    s.authed = true;
                    resp::simple(out, "OK");
                }
                Some(_) => resp::error(out, "WRONGPASS invalid username-password pair or user is disabled."),
            }
            return;
        }
        b"HELLO" => {
            if argc >= 2 && c[1] != b"2" {
                return resp::error(out, "NOPROTO unsupported protocol version");
            }
            // HELLO [2 [AUTH user pass]]: authenticate if asked.
            if argc >= 5 && upper(c[2]) == b"AUTH" {
                if sh.settings.password.as_deref().map(str::as_bytes) != Some(c[4]) {
                    return resp::error(
                        out,
                        "WRONGPASS invalid username-password pair or user is disabled.",
                    );
                }
                s.authed = true;
            }
            resp::array(out, 14);
            for (k, v) in [
                ("server", "accelkv"),
                ("version", env!("CARGO_PKG_VERSION")),
            ] {
                resp::bulk(out, Some(k.as_bytes()));
                resp::bulk(out, Some(v.as_bytes()));
            }
            resp::bulk(out, Some(b"proto"));
            resp::integer(out, 2);
            resp::bulk(out, Some(b"id"));
            resp::integer(out, s.id as i64);
            for (k, v) in [("mode", "standalone"), ("role", "master")] {
                resp::bulk(out, Some(k.as_bytes()));
                resp::bulk(out, Some(v.as_bytes()));
            }
            resp::bulk(out, Some(b"modules"));
            resp::array(out, 0);
            return;
        }
        b"QUIT" => {
            s.quit = true;
            return resp::simple(out, "OK");
        }
        b"PING" if !s.authed && sh.settings.password.is_some() => {}
        _ => {}
    }
    if sh.settings.password.is_some() && !s.authed {
        return resp::error(out, "NOAUTH Authentication required.");
    }
    if WRITE_COMMANDS.contains(&name.as_slice()) {
        if let Err(m) = sh.writable() {
            return resp::error(out, &format!("ERR {m}"));
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
                s.name = Some(c[2].to_vec());
                resp::simple(out, "OK")
            }
            b"GETNAME" => resp::bulk(out, s.name.as_deref()),
            b"ID" => resp::integer(out, s.id as i64),
            b"SETINFO" => resp::simple(out, "OK"),
            _ => resp::error(out, "ERR unknown CLIENT subcommand"),
        },
        b"COMMAND" => resp::array(out, 0),
        b"CONFIG" if argc == 3 && upper(c[1]) == b"GET" => {
            // redis-benchmark asks for `save` and `appendonly`.
            let key = c[2].to_vec();
            let value: &[u8] = match upper(&key).as_slice() {
                b"SAVE" => b"",
                // No append-only file: durability is the page file (--data-dir).
                b"APPENDONLY" => b"no",
                _ => return resp::array(out, 0),
            };
            resp::array(out, 2);
            resp::bulk(out, Some(&key));
            resp::bulk(out, Some(value));
        }
        b"INFO" => {
            let mut text = String::from("# Server\r\nredis_version:7.0.0\r\naccelkv_version:");
            text.push_str(env!("CARGO_PKG_VERSION"));
            text.push_str("\r\n# Persistence\r\n");
            text.push_str(&sh.persistence_text());
            text.push_str("# Stats\r\n");
            text.push_str(&sh.stats_text());
            text.push_str(&format!(
                "# Keyspace\r\ndb0:keys={},expires=0\r\n",
                store.len()
            ));
            resp::bulk(out, Some(text.as_bytes()));
        }
        b"DBSIZE" => resp::integer(out, store.len() as i64),
        b"FLUSHALL" | b"FLUSHDB" => {
            loop {
                let batch = store.scan(b"", None, 1024);
                if batch.is_empty() {
                    break;
                }
                for (k, _) in batch {
                    let _g = sh.stripe(&k);
                    let _ = store.delete(&k);
                }
            }
            resp::simple(out, "OK");
        }
        b"GET" if argc == 2 => {
            sh.count(OpClass::Get);
            match store.get(c[1]) {
                Ok(v) => resp::bulk(out, v.as_deref()),
                Err(e) => err_store(out, &e),
            }
        }
        b"MGET" if argc >= 2 => {
            resp::array(out, argc - 1);
            for k in &c[1..] {
                sh.count(OpClass::Get);
                resp::bulk(out, store.get(k).ok().flatten().as_deref());
            }
        }
        b"GET" | b"MGET" => wrong_args(out, &name),
        b"SET" if argc >= 3 => set(sh, c, out),
        b"SETNX" if argc == 3 => {
            sh.count(OpClass::Put);
            let _g = sh.stripe(c[1]);
            match store.get(c[1]) {
                Ok(Some(_)) => resp::integer(out, 0),
                Ok(None) => match store.put(c[1], c[2]) {
                    Ok(_) => resp::integer(out, 1),
                    Err(e) => err_store(out, &e),
                },
                Err(e) => err_store(out, &e),
            }
        }
        b"GETSET" if argc == 3 => {
            sh.count(OpClass::Put);
            let _g = sh.stripe(c[1]);
            match store
                .get(c[1])
                .and_then(|old| store.put(c[1], c[2]).map(|_| old))
            {
                Ok(old) => resp::bulk(out, old.as_deref()),
                Err(e) => err_store(out, &e),
            }
        }
        b"MSET" if argc >= 3 && argc % 2 == 1 => {
            for kv in c[1..].chunks(2) {
                sh.count(OpClass::Put);
                let _g = sh.stripe(kv[0]);
                if let Err(e) = store.put(kv[0], kv[1]) {
                    return err_store(out, &e);
                }
            }
            resp::simple(out, "OK");
        }
        b"DEL" if argc >= 2 => {
            let mut n = 0;
            for k in &c[1..] {
                sh.count(OpClass::Delete);
                let _g = sh.stripe(k);
                match store.delete(k) {
                    Ok(w) if w.existed => n += 1,
                    Ok(_) => {}
                    Err(e) => return err_store(out, &e),
                }
            }
            resp::integer(out, n);
        }
        b"EXISTS" if argc >= 2 => {
            let mut n = 0;
            for k in &c[1..] {
                if store.get_with(k, |_| ()).ok().flatten().is_some() {
                    n += 1;
                }
            }
            resp::integer(out, n);
        }
        b"STRLEN" if argc == 2 => match store.get_with(c[1], <[u8]>::len) {
            Ok(v) => resp::integer(out, v.unwrap_or(0) as i64),
            Err(e) => err_store(out, &e),
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
            incr(sh, c[1], by, out);
        }
        b"RANGE" if argc == 3 || argc == 5 => {
            let Some(limit) = limit_arg(c, 3, out) else {
                return;
            };
            sh.count(OpClass::Scan);
            let items = store.scan(
                c[1],
                Some(c[2]),
                limit.min(sh.settings.limits.max_scan_items),
            );
            items_reply(out, &items);
        }
        b"FLOOR" if argc == 3 || argc == 5 => {
            let Some(limit) = limit_arg(c, 3, out) else {
                return;
            };
            sh.count(OpClass::Floor);
            let items = store.scan_floor(c[1], c[2], limit.min(sh.settings.limits.max_scan_items));
            items_reply(out, &items);
        }
        _ => {
            let args: Vec<String> = c[1..]
                .iter()
                .take(3)
                .map(|a| format!("'{}'", String::from_utf8_lossy(a)))
                .collect();
            resp::error(
                out,
                &format!(
                    "ERR unknown command '{}', with args beginning with: {}",
                    String::from_utf8_lossy(first),
                    args.join(" ")
                ),
            );
        }
    }
}

fn limit_arg(c: &[&[u8]], at: usize, out: &mut Vec<u8>) -> Option<usize> {
    if c.len() <= at {
        return Some(usize::MAX);
    }
    if upper(c[at]) != b"LIMIT" {
        resp::error(out, "ERR syntax error (expected LIMIT n)");
        return None;
    }
    match parse_i64(c[at + 1]) {
        Some(n) if n >= 0 => Some(n as usize),
        _ => {
            resp::error(out, "ERR LIMIT must be a non-negative integer");
            None
        }
    }
}

fn items_reply(out: &mut Vec<u8>, items: &[(Vec<u8>, Vec<u8>)]) {
    resp::array(out, items.len() * 2);
    for (k, v) in items {
        resp::bulk(out, Some(k));
        resp::bulk(out, Some(v));
    }
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|KEEPTTL]`.
fn set(sh: &Shared, c: &[&[u8]], out: &mut Vec<u8>) {
    let (mut nx, mut xx, mut get) = (false, false, false);
    for opt in &c[3..] {
        match upper(opt).as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GET" => get = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" | b"KEEPTTL" => {
                return resp::error(
                    out,
                    "ERR expiry (EX/PX/EXAT/PXAT/KEEPTTL) is not supported by accelkv yet",
                )
            }
            _ => return resp::error(out, "ERR syntax error"),
        }
    }
    if nx && xx {
        return resp::error(out, "ERR syntax error");
    }
    sh.count(OpClass::Put);
    let store = &sh.store;
    let _g = sh.stripe(c[1]);
    let old = if nx || xx || get {
        match store.get(c[1]) {
            Ok(v) => v,
            Err(e) => return err_store(out, &e),
        }
    } else {
        None
    };
    let skip = (nx && old.is_some()) || (xx && old.is_none());
    if !skip {
        if let Err(e) = store.put(c[1], c[2]) {
            return err_store(out, &e);
        }
    }
    match (get, skip) {
        (true, _) => resp::bulk(out, old.as_deref()),
        (false, true) => resp::bulk(out, None),
        (false, false) => resp::simple(out, "OK"),
    }
}

/// INCRBY with overflow checked (Redis's behaviour: an error, the value unchanged).
/// INCR and friends: one operation of the reservation station, like the binary protocol's
/// fetch-and-add (a burst of INCRs on one key is one tree write).
fn incr(sh: &Shared, key: &[u8], by: i64, out: &mut Vec<u8>) {
    sh.count(OpClass::Atomic);
    type Reply = Box<dyn FnOnce(&mut Vec<u8>) + Send>;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Reply>(1);
    let f: KeyFn = Box::new(move |cur| {
        let fail = |tx: std::sync::mpsc::SyncSender<Reply>, m: &'static str| -> (Effect, Finish) {
            let r: Reply = Box::new(move |o| resp::error(o, m));
            (Effect::Keep, Box::new(move |_| drop(tx.send(r))))
        };
        let cur = match cur {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return fail(tx, "ERR value is not an integer or out of range"),
            },
        };
        let Some(next) = cur.checked_add(by) else {
            return fail(tx, "ERR increment or decrement would overflow");
        };
        let finish: Finish = Box::new(move |r| {
            let r: Reply = match r {
                Ok(_) => Box::new(move |o| resp::integer(o, next)),
                Err(e) => Box::new(move |o| err_store(o, &e)),
            };
            let _ = tx.send(r);
        });
        (Effect::Set(next.to_string().into_bytes()), finish)
    });
    sh.station.submit(sh, vec![(key.to_vec(), f)]);
    match rx.recv() {
        Ok(r) => r(out),
        Err(_) => resp::error(out, "ERR internal error: the write was lost"),
    }
}
