#![cfg_attr(not(feature = "cluster"), allow(dead_code))]
//! RESP commands in cluster mode (docs/CLUSTER.md): how a command is classified (run here,
//! refused, or routed by its keys, from the command table: its `LOCAL` flag and its key
//! positions), and how a routed write is encoded as a replicated command with every
//! relative time made absolute (so each replica, and a replay after a restart, computes
//! the same deadline).

use crate::resp::call::flag::{LOCAL, WRITE};

/// How a command is served in cluster mode.
#[derive(Debug, PartialEq, Eq)]
pub enum Class<'a> {
    /// It touches no key: run on the node that received it.
    Local,
    /// Not served in cluster mode, and why.
    Refused(&'static str),
    /// It reads or writes these keys (all must be in one range). `upto` is the end of a
    /// RANGE/FLOOR (`None`: unbounded), which must be in the same range.
    Keyed {
        keys: Vec<&'a [u8]>,
        write: bool,
        upto: Option<Option<&'a [u8]>>,
    },
}

/// `ACCELKV.EXEC <command>…`: a transaction as the cluster carries it, each command
/// encoded as a replicated one (`core::route::encode`, relative times made absolute): its
/// replicas run them as MULTI … EXEC runs them, and its reply is EXEC's.
pub const TX: &[u8] = b"ACCELKV.EXEC";

/// The commands of an `ACCELKV.EXEC` (`None`: one does not decode).
pub fn tx_commands<'a>(args: &[&'a [u8]]) -> Option<Vec<Vec<&'a [u8]>>> {
    args[1..]
        .iter()
        .map(|c| crate::core::route::decode(c).map(|(_, a)| a))
        .collect()
}

/// Whether a command is of a collection type (hash, list, set, sorted set, stream, geo),
/// whose fields live in the reserved end of the key space in native mode (a transaction:
/// whether one of its commands is).
pub fn keeps_fields(args: &[&[u8]]) -> bool {
    if args[0].eq_ignore_ascii_case(TX) {
        return tx_commands(args).is_some_and(|c| c.iter().any(|c| keeps_fields(c)));
    }
    crate::resp::table::find(args[0]).is_some_and(|sp| {
        matches!(
            sp.group,
            "hash" | "list" | "set" | "sorted_set" | "stream" | "geo"
        )
    })
}

/// Native mode's refusal of a collection command whose key's range does not hold the
/// collections' fields (docs/CLUSTER.md "Collections in native mode").
pub fn fields_elsewhere_error(args: &[&[u8]]) -> String {
    format!(
        "ERR {} keeps its fields in another range, not the key's: in native mode collections are served in one range; start the cluster with --slots redis (docs/CLUSTER.md)",
        String::from_utf8_lossy(args[0]).to_uppercase()
    )
}

/// Classifies `args` (a decoded command, name first).
pub fn classify<'a>(args: &[&'a [u8]]) -> Class<'a> {
    if args[0].eq_ignore_ascii_case(TX) {
        return classify_tx(args);
    }
    let Some(spec) = crate::resp::table::find(args[0]) else {
        return Class::Local; // unknown: answered as unknown here
    };
    if spec.has(LOCAL) {
        return Class::Local;
    }
    match spec.name {
        // A node's own script cache (EVALSHA goes on as EVAL with the body found here).
        "SCRIPT" => return Class::Local,
        // MULTI, EXEC and DISCARD are the router's (cluster/node/tx.rs).
        "WATCH" => return Class::Refused("WATCH is not served in cluster mode yet"),
        "FCALL" | "FCALL_RO" => {
            return Class::Refused("functions are not served in cluster mode yet: use EVAL")
        }
        "FLUSHALL" | "FLUSHDB" => return Class::Refused("FLUSHALL is not served in cluster mode"),
        "SCAN" | "KEYS" | "RANDOMKEY" | "DBSIZE" => {
            return Class::Refused(
                "whole-keyspace commands are not served in cluster mode: use RANGE",
            )
        }
        "RANGE" | "FLOOR" if args.len() >= 3 => {
            let hi = (args[2] != b"+").then_some(args[2]);
            return Class::Keyed {
                keys: vec![args[1]],
                write: false,
                upto: Some(hi),
            };
        }
        _ => {}
    }
    let movable = crate::resp::db::movable_keys(spec);
    if spec.keys.0 <= 0 && !movable {
        return Class::Refused("this command is not served in cluster mode");
    }
    let keys: Vec<&[u8]> = match movable {
        true => crate::resp::db::key_positions(spec, args)
            .into_iter()
            .filter_map(|i| args.get(i).copied())
            .collect(),
        false => spec.keys_of(args).collect(),
    };
    if keys.is_empty() && spec.runs_script() {
        // Its keys choose its range, and its replicas run it: one that names none has
        // nowhere to run.
        return Class::Refused(
            "a script in cluster mode names the keys it uses (numkeys 1 or more)",
        );
    }
    if keys.is_empty() {
        return Class::Local; // a wrong argument count: answered here
    }
    // A script may write (one started read-only, EVAL_RO, may not): its replicas run it.
    let write = spec.has(WRITE) || (spec.runs_script() && !spec.name.ends_with("_RO"));
    Class::Keyed {
        keys,
        write,
        upto: None,
    }
}

/// A transaction's class: a write of every key its commands name (refused if one is).
fn classify_tx<'a>(args: &[&'a [u8]]) -> Class<'a> {
    let Some(cmds) = tx_commands(args).filter(|c| !c.is_empty()) else {
        return Class::Refused("a transaction could not be decoded");
    };
    let mut keys = Vec::new();
    for c in &cmds {
        match classify(c) {
            Class::Keyed { upto: Some(_), .. } => {
                return Class::Refused("RANGE and FLOOR are not served inside MULTI")
            }
            Class::Keyed { keys: k, .. } => keys.extend(k),
            Class::Refused(why) => return Class::Refused(why),
            Class::Local => {}
        }
    }
    if keys.is_empty() {
        return Class::Refused("a transaction in cluster mode names at least one key");
    }
    Class::Keyed {
        keys,
        write: true,
        upto: None,
    }
}

/// `ACCELKV.ONCE <client> <seq> <command…>`: a write sent with a request id, applied at
/// most once however often it is sent (docs/CLUSTER.md, "Writes sent again").
pub const ONCE: &[u8] = b"ACCELKV.ONCE";

/// The request id and the command of an `ACCELKV.ONCE` (`Ok(None)`: not one; `Err`: one
/// whose id is not two numbers).
#[allow(clippy::type_complexity)]
pub fn once<'a, 'b>(args: &'b [&'a [u8]]) -> Result<Option<((u64, u64), &'b [&'a [u8]])>, String> {
    if !args[0].eq_ignore_ascii_case(ONCE) {
        return Ok(None);
    }
    let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u64>().ok();
    match args {
        [_, c, q, _, ..] => match (num(c), num(q)) {
            (Some(c), Some(q)) => Ok(Some(((c, q), &args[3..]))),
            _ => Err("ERR ACCELKV.ONCE takes a client id and a sequence number (integers)".into()),
        },
        _ => Err("ERR wrong number of arguments for 'accelkv.once' command".into()),
    }
}

/// `n` in `unit_ms` from `now`, if positive and representable (else the command keeps its
/// own argument, and every replica answers the same error or the same past deadline).
fn absolute(arg: &[u8], unit_ms: i64, now: u64) -> Option<Vec<u8>> {
    let n: i64 = std::str::from_utf8(arg).ok()?.parse().ok()?;
    if n <= 0 {
        return None;
    }
    let at = n.checked_mul(unit_ms)?.checked_add(now as i64)?;
    Some(at.to_string().into_bytes())
}

/// The command as it is replicated: relative times made absolute at `now` (ms since the
/// Unix epoch): SET/GETEX `EX`/`PX` become `PXAT`, SETEX/PSETEX become SET … PXAT,
/// EXPIRE/PEXPIRE become PEXPIREAT.
pub fn normalize(args: &[&[u8]], now: u64) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let name = crate::resp::reply::upper(args[0]);
    match &name[..] {
        b"SET" | b"GETEX" => {
            let start = if &name[..] == b"SET" { 3 } else { 2 };
            let mut i = start;
            while i + 1 < out.len() {
                let unit = match &crate::resp::reply::upper(&out[i])[..] {
                    b"EX" => 1000,
                    b"PX" => 1,
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                if let Some(at) = absolute(&out[i + 1], unit, now) {
                    out[i] = b"PXAT".to_vec();
                    out[i + 1] = at;
                }
                i += 2;
            }
        }
        b"SETEX" | b"PSETEX" if out.len() == 4 => {
            let unit = if &name[..] == b"SETEX" { 1000 } else { 1 };
            if let Some(at) = absolute(&out[2], unit, now) {
                out = vec![
                    b"SET".to_vec(),
                    out[1].clone(),
                    out[3].clone(),
                    b"PXAT".to_vec(),
                    at,
                ];
            }
        }
        b"EXPIRE" | b"PEXPIRE" if out.len() >= 3 => {
            let unit = if &name[..] == b"EXPIRE" { 1000 } else { 1 };
            if let Some(at) = absolute(&out[2], unit, now) {
                out[0] = b"PEXPIREAT".to_vec();
                out[2] = at;
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::route::{decode, encode};
    use accelkv_proto::resp::Version;

    fn strs(v: &[Vec<u8>]) -> Vec<String> {
        v.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    #[test]
    fn relative_times_become_absolute() {
        let now = 1_000_000;
        let n = |a: &[&str]| {
            let a: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            strs(&normalize(&a, now))
        };
        assert_eq!(
            n(&["SET", "k", "v", "EX", "10"]),
            ["SET", "k", "v", "PXAT", "1010000"]
        );
        assert_eq!(
            n(&["set", "k", "v", "nx", "px", "5"]),
            ["set", "k", "v", "nx", "PXAT", "1000005"]
        );
        assert_eq!(
            n(&["SET", "k", "EX", "EX", "1"]),
            ["SET", "k", "EX", "PXAT", "1001000"]
        );
        assert_eq!(
            n(&["SETEX", "k", "2", "v"]),
            ["SET", "k", "v", "PXAT", "1002000"]
        );
        assert_eq!(
            n(&["PSETEX", "k", "2", "v"]),
            ["SET", "k", "v", "PXAT", "1000002"]
        );
        assert_eq!(
            n(&["EXPIRE", "k", "3", "NX"]),
            ["PEXPIREAT", "k", "1003000", "NX"]
        );
        assert_eq!(
            n(&["GETEX", "k", "PX", "7"]),
            ["GETEX", "k", "PXAT", "1000007"]
        );
        // Errors and non-positive times stay as sent: every replica answers alike.
        assert_eq!(
            n(&["SET", "k", "v", "EX", "0"]),
            ["SET", "k", "v", "EX", "0"]
        );
        assert_eq!(n(&["SETEX", "k", "x", "v"]), ["SETEX", "k", "x", "v"]);
        assert_eq!(n(&["EXPIRE", "k", "-1"]), ["EXPIRE", "k", "-1"]);
        assert_eq!(
            n(&["EXPIRE", "k", "9223372036854775807"]),
            ["EXPIRE", "k", "9223372036854775807"]
        );
        assert_eq!(n(&["INCR", "k"]), ["INCR", "k"]);
    }

    #[test]
    fn commands_round_trip_and_garbage_is_refused() {
        let args = vec![b"SET".to_vec(), b"k\r\n".to_vec(), Vec::new()];
        let b = encode(&args, Version::Resp3);
        let (v, back) = decode(&b).unwrap();
        assert_eq!(v, Version::Resp3);
        assert_eq!(back, args.iter().map(|a| &a[..]).collect::<Vec<_>>());
        assert!(decode(&b[..b.len() - 1]).is_none());
        assert!(decode(&[9, 0, 0, 0, 0]).is_none());
        assert!(decode(&[2, 0, 0, 0, 0]).is_none());
    }

    #[test]
    fn commands_are_classified_by_their_keys() {
        let c = |a: &[&str]| {
            let a: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            match classify(&a) {
                Class::Local => "local".to_string(),
                Class::Refused(_) => "refused".to_string(),
                Class::Keyed { keys, write, upto } => format!(
                    "{} {:?} {:?}",
                    if write { "write" } else { "read" },
                    keys.iter()
                        .map(|k| String::from_utf8_lossy(k))
                        .collect::<Vec<_>>(),
                    upto.map(|u| u.map(|u| String::from_utf8_lossy(u).into_owned()))
                ),
            }
        };
        assert_eq!(c(&["PING"]), "local");
        assert_eq!(c(&["hello", "3"]), "local");
        assert_eq!(c(&["GET", "a"]), r#"read ["a"] None"#);
        assert_eq!(c(&["MSET", "a", "1", "b", "2"]), r#"write ["a", "b"] None"#);
        assert_eq!(c(&["DEL", "a", "b"]), r#"write ["a", "b"] None"#);
        assert_eq!(c(&["RANGE", "a", "+"]), r#"read ["a"] Some(None)"#);
        assert_eq!(
            c(&["RANGE", "a", "m", "LIMIT", "3"]),
            r#"read ["a"] Some(Some("m"))"#
        );
        assert_eq!(c(&["WATCH", "a"]), "refused");
        assert_eq!(c(&["EVAL", "return 1", "0"]), "refused");
        assert_eq!(
            c(&["EVAL", "return 1", "2", "a", "b", "x"]),
            r#"write ["a", "b"] None"#
        );
        assert_eq!(c(&["EVAL_RO", "return 1", "1", "a"]), r#"read ["a"] None"#);
        assert_eq!(
            c(&["BLMPOP", "0", "2", "a", "b", "LEFT"]),
            r#"write ["a", "b"] None"#
        );
        assert_eq!(c(&["SCAN", "0"]), "refused");
        assert_eq!(c(&["FLUSHALL"]), "refused");
        assert_eq!(c(&["NOSUCH", "x"]), "local");
    }
}
