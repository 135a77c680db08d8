//! DEBUG: the testing hooks tools rely on (SLEEP, SET-ACTIVE-EXPIRE, POPULATE, OBJECT,
//! HELP), and those Redis's own test suite calls (`debug_suite.rs`).

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::commands::debug_suite;
use crate::resp::commands::introspect::{encoding, value};
use crate::resp::commands::types::keyspace::encoding_name;
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use accelkv_proto::resp;

/// `DEBUG subcommand ...`: the testing hooks tools rely on. SLEEP blocks the connection's
/// loop as Redis blocks its server; SET-ACTIVE-EXPIRE stops or restarts the expiry sweep;
/// PAUSE-CRON stops or restarts every periodic job (the sweep, reclaim, idle timeouts);
/// POPULATE writes `count` keys `prefix:N` holding `value:N` (or `size` bytes) where absent;
/// OBJECT describes a key; RELOAD answers OK and changes nothing (the data directory is
/// always the durable copy: a restart, kill -9 included, reloads it).
pub fn debug(x: &mut crate::resp::call::Call<'_, '_>) {
    let c = x.args;
    let sub = c[1].to_ascii_uppercase();
    match (sub.as_slice(), c.len()) {
        (b"SLEEP", 3) => match std::str::from_utf8(c[2])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
        {
            Some(secs) if secs.is_finite() && secs >= 0.0 => {
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
                resp::simple(x.out, "OK")
            }
            _ => resp::error(x.out, "ERR value is not a valid float"),
        },
        (b"SET-ACTIVE-EXPIRE", 3) => match c[2] {
            b"0" | b"1" => {
                x.sh.set_active_expire(c[2] == b"1");
                resp::simple(x.out, "OK")
            }
            _ => resp::error(x.out, "ERR value is not an integer or out of range"),
        },
        (b"PAUSE-CRON", 3) => match c[2] {
            b"0" | b"1" => {
                x.sh.pause_cron(c[2] == b"1");
                resp::simple(x.out, "OK")
            }
            _ => resp::error(x.out, "ERR value is not an integer or out of range"),
        },
        // Redis's cron shrinks idle connections' reply buffers; accelkv resizes a
        // connection's buffers only at its own turn (a big one given back once written),
        // so there is no background resizing to switch: both forms are accepted.
        (b"REPLYBUFFER", 4) => match (c[2].to_ascii_uppercase().as_slice(), c[3]) {
            (b"RESIZING", b"0" | b"1") => resp::simple(x.out, "OK"),
            (b"PEAK-RESET-TIME", t)
                if t.eq_ignore_ascii_case(b"never")
                    || t.eq_ignore_ascii_case(b"reset")
                    || std::str::from_utf8(t).is_ok_and(|t| t.parse::<i64>().is_ok()) =>
            {
                resp::simple(x.out, "OK")
            }
            _ => resp::error(x.out, "ERR syntax error"),
        },
        (b"POPULATE", 3..=5) => populate(x),
        (b"OBJECT", 3) => debug_object(x.sh, x.s, c[2], x.reads, x.out),
        // A reload would load what the store holds now: its data directory (when it has
        // one) is always the durable copy, so there is nothing to save or load.
        (b"RELOAD", _) => resp::simple(x.out, "OK"),
        (b"DIGEST", 2) => debug_suite::digest(x),
        (b"DIGEST-VALUE", _) => debug_suite::digest_value(x),
        (b"PROTOCOL", 3) => debug_suite::protocol(x),
        (b"LISTPACK", 3) => debug_suite::listpack(x),
        (b"QUICKLIST-PACKED-THRESHOLD", 3) => debug_suite::quicklist_packed_threshold(x),
        (b"HELP", 2) => {
            let lines = [
                "DEBUG <subcommand> [<arg> ...]. Subcommands are:",
                "DIGEST",
                "DIGEST-VALUE <key> [<key> ...]",
                "LISTPACK <key>",
                "OBJECT <key>",
                "PAUSE-CRON <0|1>",
                "PROTOCOL <type>",
                "QUICKLIST-PACKED-THRESHOLD <size>",
                "REPLYBUFFER PEAK-RESET-TIME <never||reset|<time>>",
                "REPLYBUFFER RESIZING <0|1>",
                "RELOAD [<option> ...]",
                "POPULATE <count> [<prefix>] [<size>]",
                "SET-ACTIVE-EXPIRE <0|1>",
                "SLEEP <seconds>",
            ];
            resp::array(x.out, lines.len());
            for l in lines {
                resp::simple(x.out, l);
            }
        }
        _ => resp::error(
            x.out,
            &format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                String::from_utf8_lossy(c[1])
            ),
        ),
    }
}

/// DEBUG POPULATE count [prefix] [size].
fn populate(x: &mut crate::resp::call::Call<'_, '_>) {
    let c = x.args;
    let Some(count) = std::str::from_utf8(c[2])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
    else {
        return resp::error(x.out, "ERR value is not an integer or out of range");
    };
    let prefix = c.get(3).copied().unwrap_or(b"key");
    let size = match c.get(4).map(|a| {
        std::str::from_utf8(a)
            .ok()
            .and_then(|t| t.parse::<usize>().ok())
    }) {
        None => None,
        Some(Some(n)) if n <= x.sh.settings().limits.max_value => Some(n),
        Some(_) => return resp::error(x.out, "ERR value is out of range"),
    };
    let mut version = 0;
    for i in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{i}").as_bytes());
        let key = crate::resp::db::to_store(x.s.db, &key).into_owned();
        let mut value = format!("value:{i}").into_bytes();
        if let Some(n) = size {
            value.resize(n, 0);
        }
        let w = crate::core::ops::Write::Set {
            value: std::borrow::Cow::Owned(value),
            cond: crate::core::ops::Cond::IfAbsent,
            get: false,
            ttl: crate::core::ops::Ttl::Keep,
        };
        let done =
            x.sh.writes()
                .run_one(crate::core::station::Op::new(&key, w));
        if let Err(e) = done.outcome {
            return err_store(x.out, &e);
        }
        version = version.max(done.version);
    }
    x.s.unreleased = x.s.unreleased.max(version);
    // DEBUG is not a write command, but POPULATE writes: its OK waits for durability where
    // the sync policy asks, as a SET's would (a kill -9 after it lost keys it had answered).
    if version > 0 {
        x.s.wrote = true;
    }
    resp::simple(x.out, "OK")
}

/// DEBUG OBJECT key: what accelkv knows of a key, in Redis's `name:value` form.
fn debug_object(sh: &Shared, s: &mut Session, key: &[u8], reads: &mut Reads, out: &mut Vec<u8>) {
    match value(sh, s, reads, key) {
        Ok(Some((v, f))) => {
            let name = encoding_name(&v, f).unwrap_or_else(|| encoding(&v));
            let line = format!(
                "Value at:- refcount:1 encoding:{name} serializedlength:{} (accelkv keeps no LRU clock)",
                v.len()
            );
            resp::simple(out, &line)
        }
        Ok(None) => resp::error(out, "ERR no such key"),
        Err(e) => err_store(out, &e),
    }
}
