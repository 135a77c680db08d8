//! Introspection commands tools send: CLIENT INFO (this connection, in CLIENT LIST's line
//! format), CLIENT NO-EVICT (accepted: it changes nothing here), CONFIG
//! RESETSTAT, MEMORY USAGE and OBJECT ENCODING / REFCOUNT.

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::keyspace::{encoding_name, memory_usage};
use crate::resp::door::Got;
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// `CLIENT INFO`: this connection's CLIENT LIST line (the same fields, the same format).
pub fn client_info(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    if s.client.is_some() {
        s.note_client(Some("client|info"));
        let text = sh.clients().list(Some(&[s.id]), None, Some(me(s, c)));
        return resp::verbatim(out, text.as_bytes(), s.proto);
    }
    // No entry in the registry (a connection made inside the server, in tests).
    let name = s
        .name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let (flags, multi) = match &s.tx.queued {
        Some(q) => ("x", q.len() as i64),
        None => ("N", -1),
    };
    let resp = if s.proto == Version::Resp3 { 3 } else { 2 };
    let line = format!(
        "id={} name={name} db={} flags={flags} multi={multi} watch={} resp={resp} user=default lib-name= lib-ver=\n",
        s.id,
        s.selected,
        s.tx.watched.len(),
    );
    resp::verbatim(out, line.as_bytes(), s.proto);
}

/// `CLIENT LIST [TYPE normal|pubsub|master|replica] [ID id ...]`: every RESP connection,
/// one line each, in Redis's `key=value` format (its fields but the buffer and memory ones,
/// which accelkv does not keep per connection).
/// What the asking connection's own line shows of its command: the bytes it takes as a
/// RESP command (Redis's `qbuf` while it runs) and its arguments' bytes (`argv-mem`).
fn me(s: &Session, c: &[&[u8]]) -> crate::core::clients::Me {
    let digits = |n: usize| n.to_string().len();
    let qbuf = 3
        + digits(c.len())
        + c.iter()
            .map(|a| 5 + digits(a.len()) + a.len())
            .sum::<usize>();
    crate::core::clients::Me {
        id: s.id,
        qbuf,
        argv_mem: c.iter().map(|a| a.len()).sum(),
    }
}

pub fn client_list(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    s.note_client(Some("client|list"));
    let mut ids: Option<Vec<u64>> = None;
    let mut pubsub = None;
    let mut i = 2;
    while i < c.len() {
        let opt = c[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"TYPE" if i + 1 < c.len() => {
                let t = c[i + 1].to_ascii_lowercase();
                match t.as_slice() {
                    b"normal" => pubsub = Some(false),
                    b"pubsub" => pubsub = Some(true),
                    // No replicas or masters here.
                    b"master" | b"replica" => ids = Some(Vec::new()),
                    _ => {
                        let t = String::from_utf8_lossy(c[i + 1]);
                        return resp::error(out, &format!("ERR Unknown client type '{t}'"));
                    }
                }
                i += 2;
            }
            b"ID" if i + 1 < c.len() => {
                let mut v = ids.take().unwrap_or_default();
                for a in &c[i + 1..] {
                    match std::str::from_utf8(a)
                        .ok()
                        .and_then(|t| t.parse::<u64>().ok())
                    {
                        Some(n) if n > 0 => v.push(n),
                        _ => return resp::error(out, "ERR Invalid client ID"),
                    }
                }
                ids = Some(v);
                i = c.len();
            }
            _ => return resp::error(out, "ERR syntax error"),
        }
    }
    let text = sh.clients().list(ids.as_deref(), pubsub, Some(me(s, c)));
    resp::verbatim(out, text.as_bytes(), s.proto);
}

/// `CLIENT KILL ip:port` (the old form: `+OK` or `-ERR No such client`) and `CLIENT KILL
/// <filter> <value> ...` with ID, ADDR, LADDR, USER, SKIPME and
/// MAXAGE (the number of connections closed). The owning loops close them at their next
/// turn; the caller's own connection, when chosen, closes after this reply.
pub fn client_kill(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let text = |a: &[u8]| String::from_utf8_lossy(a).into_owned();
    if c.len() == 3 {
        let f = crate::core::clients::Filter {
            addr: Some(text(c[2])),
            ..Default::default()
        };
        let (n, me) = sh.clients().kill(&f, s.id);
        if me {
            s.quit = true;
        }
        return match n {
            0 => resp::error(out, "ERR No such client"),
            _ => resp::simple(out, "OK"),
        };
    }
    let mut f = crate::core::clients::Filter {
        skip: Some(s.id),
        ..Default::default()
    };
    let mut nobody = false;
    for pair in c[2..].chunks(2) {
        let [k, v] = pair else {
            return resp::error(out, "ERR syntax error");
        };
        let num = || {
            std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
        };
        match k.to_ascii_uppercase().as_slice() {
            b"ID" => match num() {
                Some(n) if n > 0 => f.id = Some(n),
                _ => return resp::error(out, "ERR client-id should be greater than 0"),
            },
            b"ADDR" => f.addr = Some(text(v)),
            b"LADDR" => f.laddr = Some(text(v)),
            b"USER" if sh.acl().get(v).is_none() => {
                return resp::error(out, &format!("ERR No such user '{}'", text(v)))
            }
            b"USER" => f.user = Some(v.to_vec()),
            b"TYPE" => match v.to_ascii_lowercase().as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"pubsub" => nobody = true,
                _ => return resp::error(out, &format!("ERR Unknown client type '{}'", text(v))),
            },
            b"MAXAGE" => match num() {
                Some(n) => f.max_age = Some(n),
                None => return resp::error(out, "ERR syntax error"),
            },
            b"SKIPME" => match v.to_ascii_lowercase().as_slice() {
                b"yes" => f.skip = Some(s.id),
                b"no" => f.skip = None,
                _ => return resp::error(out, "ERR syntax error"),
            },
            _ => return resp::error(out, "ERR syntax error"),
        }
    }
    if nobody {
        return resp::integer(out, 0);
    }
    let (n, me) = sh.clients().kill(&f, s.id);
    if me {
        s.quit = true;
    }
    resp::integer(out, n as i64);
}

/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`: a client parked in a blocking command answers
/// as if it timed out, or with `-UNBLOCKED`; 1 if it was parked, else 0.
pub fn client_unblock(sh: &Shared, c: &[&[u8]], out: &mut Vec<u8>) {
    let Some(id) = crate::resp::reply::parse_i64(c[2]) else {
        return resp::error(out, "ERR value is not an integer or out of range");
    };
    let how = match c.get(3).map(|a| a.to_ascii_uppercase()).as_deref() {
        None | Some(b"TIMEOUT") => crate::core::blocked::UNBLOCK_TIMEOUT,
        Some(b"ERROR") => crate::core::blocked::UNBLOCK_ERROR,
        Some(_) => return resp::error(out, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let done = u64::try_from(id).is_ok_and(|id| sh.blocked().unblock(id, how));
    resp::integer(out, i64::from(done));
}

/// `CLIENT NO-EVICT on|off` (client eviction passes the connection by) and `CLIENT
/// NO-TOUCH on|off` (accepted: accelkv keeps no access clock for it to spare).
pub fn client_switch(s: &Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let arg = c.get(2).map(|a| a.to_ascii_uppercase());
    let on = match (arg.as_deref(), c.len()) {
        (Some(b"ON"), 3) => true,
        (Some(b"OFF"), 3) => false,
        _ => return resp::error(out, "ERR syntax error"),
    };
    if c[1].eq_ignore_ascii_case(b"NO-EVICT") {
        if let Some(r) = &s.client {
            r.entry.set_no_evict(on);
        }
    }
    resp::simple(out, "OK")
}

/// `CONFIG RESETSTAT`: zeroes the server's request, error, connection and reservation
/// station counters and its latency histograms (INFO stats, /metrics). The store's
/// structural counters and the read engine's cache counters are left alone.
pub fn reset_stats(sh: &Shared, out: &mut Vec<u8>) {
    sh.metrics().reset();
    sh.clients().reset_stats();
    sh.writes().stats().reset();
    sh.reset_expired();
    resp::simple(out, "OK");
}

/// A key's item: its value, and its flags when it is a collection's metadata.
pub(crate) fn value(
    sh: &Shared,
    s: &mut Session,
    reads: &mut Reads,
    key: &[u8],
) -> Result<Option<(Vec<u8>, u32)>, accelkv_tree::Error> {
    match crate::resp::door::get_value(sh, s, reads, key) {
        Got::Str(v) => Ok(v.map(|v| (v, 0))),
        Got::Typed(v, f) => Ok(Some((v, f))),
        Got::Err(e) => Err(e),
    }
}

/// `MEMORY USAGE key [SAMPLES n]`: the bytes the item takes in the store (its leaf entry and
/// any out-of-line value); nil for a missing key. `MEMORY STATS` gives what the store
/// counts (its bytes and the selected database's keys); DOCTOR, MALLOC-STATS and PURGE
/// answer as Redis does on an allocator without statistics to give.
pub fn memory(sh: &Shared, s: &mut Session, c: &[&[u8]], reads: &mut Reads, out: &mut Vec<u8>) {
    let sub = c[1].to_ascii_uppercase();
    let samples_ok = c.len() == 3
        || (c.len() == 5
            && c[3].eq_ignore_ascii_case(b"SAMPLES")
            && std::str::from_utf8(c[4]).is_ok_and(|n| n.parse::<u64>().is_ok()));
    match sub.as_slice() {
        b"USAGE" if samples_ok => match value(sh, s, reads, c[2]) {
            Ok(Some((v, f))) => resp::integer(out, memory_usage(sh, c[2], &v, f) as i64),
            Ok(None) => resp::bulk_in(out, None, s.proto),
            Err(e) => err_store(out, &e),
        },
        b"USAGE" => resp::error(out, "ERR syntax error"),
        b"STATS" if c.len() == 2 => memory_stats(sh, s, out),
        b"DOCTOR" if c.len() == 2 => resp::verbatim(
            out,
            b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.",
            s.proto,
        ),
        b"MALLOC-STATS" if c.len() == 2 => resp::verbatim(
            out,
            b"Stats not supported for the current allocator",
            s.proto,
        ),
        b"PURGE" if c.len() == 2 => resp::simple(out, "OK"),
        _ => {
            let sub = String::from_utf8_lossy(c[1]);
            resp::error(
                out,
                &format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try MEMORY HELP."),
            )
        }
    }
}

/// `MEMORY STATS`: the bytes the store takes and the keys of the selected database.
fn memory_stats(sh: &Shared, s: &Session, out: &mut Vec<u8>) {
    let used = sh.view().memory_used() as i64;
    let keys = crate::resp::commands::types::keyspace::user_keys(sh, s.db) as i64;
    resp::map(out, 3, s.proto);
    for (k, v) in [
        ("total.allocated", used),
        ("dataset.bytes", used),
        ("keys.count", keys),
    ] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::integer(out, v);
    }
}

/// Redis's encoding of a string value: `int` for a decimal 64-bit integer of at most 20
/// bytes, `embstr` up to 44 bytes, `raw` beyond.
pub fn encoding(v: &[u8]) -> &'static str {
    let int = v.len() <= 20
        && std::str::from_utf8(v).is_ok_and(|t| t.parse::<i64>().is_ok_and(|n| n.to_string() == t));
    if int {
        "int"
    } else if v.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// `OBJECT ENCODING key` and `OBJECT REFCOUNT key`; nil for a missing key.
pub fn object(sh: &Shared, s: &mut Session, c: &[&[u8]], reads: &mut Reads, out: &mut Vec<u8>) {
    let sub = c[1].to_ascii_uppercase();
    if c.len() == 3 && sub.as_slice() == b"FREQ" {
        // As Redis answers under a policy other than LFU (accelkv's is noeviction).
        return resp::error(
            out,
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        );
    }
    if c.len() == 3 && sub.as_slice() == b"IDLETIME" {
        return resp::error(
            out,
            "ERR accelkv does not track when a key was last read or written (OBJECT IDLETIME)",
        );
    }
    if c.len() != 3 || !matches!(sub.as_slice(), b"ENCODING" | b"REFCOUNT") {
        return resp::error(
            out,
            "ERR unknown subcommand or wrong number of arguments (accelkv offers OBJECT ENCODING, REFCOUNT and FREQ)",
        );
    }
    match value(sh, s, reads, c[2]) {
        Ok(Some((v, f))) if sub.as_slice() == b"ENCODING" => {
            let name = encoding_name(&v, f).unwrap_or_else(|| encoding(&v));
            resp::bulk(out, Some(name.as_bytes()))
        }
        Ok(Some((v, f))) => resp::integer(out, refcount(&v, f)),
        Ok(None) => resp::bulk_in(out, None, s.proto),
        Err(e) => err_store(out, &e),
    }
}

/// OBJECT REFCOUNT: Redis shares one object for each integer from 0 to 9,999 and reports
/// it with `INT_MAX` references; every other value has one.
fn refcount(v: &[u8], flags: u32) -> i64 {
    let shared = encoding_name(v, flags).is_none()
        && encoding(v) == "int"
        && std::str::from_utf8(v).is_ok_and(|t| t.parse::<u16>().is_ok_and(|n| n < 10_000));
    if shared {
        i64::from(i32::MAX)
    } else {
        1
    }
}

/// `MEMORY USAGE|STATS|DOCTOR ...`.
pub fn memory_cmd(x: &mut Call<'_, '_>) {
    memory(x.sh, x.s, x.args, x.reads, x.out)
}

/// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key`.
pub fn object_cmd(x: &mut Call<'_, '_>) {
    object(x.sh, x.s, x.args, x.reads, x.out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodings_follow_redis() {
        assert_eq!(super::encoding(b"12345"), "int");
        assert_eq!(super::encoding(b"-9223372036854775808"), "int");
        assert_eq!(super::encoding(b"007"), "embstr");
        assert_eq!(super::encoding(b"hello"), "embstr");
        assert_eq!(super::encoding(&[b'x'; 44]), "embstr");
        assert_eq!(super::encoding(&[b'x'; 45]), "raw");
    }
}
