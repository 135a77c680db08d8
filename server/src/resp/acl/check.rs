//! The gate's ACL step: a command checked against its connection's user, as Redis's
//! `ACLCheckAllUserCommandPerm` does: the command (or its subcommand, or a `+cmd|arg`
//! first argument), then each key it names with the permission it needs (reading its
//! value, writing it, both, or neither: EXISTS reads no value), then each pub/sub channel
//! it names. A user whose rules allow everything is never asked (`Session::acl_open`).

use crate::core::acl::{Denied, Request, User, READ, WRITE};
use crate::resp::call::Spec;
use crate::resp::session::Session;
use crate::resp::subcommands;
use smallvec::SmallVec;

/// Checks `args` (`spec` at table position `pos`) against `user`. A refusal names the
/// argument position of the key or channel refused.
pub fn check(
    user: &User,
    table: &[Spec],
    spec: &'static Spec,
    pos: usize,
    args: &[&[u8]],
) -> Result<(), Denied> {
    let id = subcommands::stats_index(table, pos, args);
    let at = crate::resp::db::key_positions(spec, args);
    let keys: SmallVec<[(&[u8], u8); 4]> = at
        .iter()
        .enumerate()
        .filter_map(|(nth, &i)| Some((*args.get(i)?, key_needs(spec, args, nth))))
        .collect();
    let chans = channel_positions(spec, args);
    let channels: SmallVec<[(&[u8], bool); 4]> = chans
        .clone()
        .map(|i| (args[i], spec.name == "PSUBSCRIBE"))
        .collect();
    let first_arg = (id == pos).then(|| args.get(1).copied()).flatten();
    let r = Request {
        id,
        first_arg,
        keys: &keys,
        channels: &channels,
    };
    user.check(&r).map_err(|d| match d {
        Denied::Command => Denied::Command,
        Denied::Key(k) => Denied::Key(at[k]),
        Denied::Channel(c) => Denied::Channel(chans.start + c),
    })
}

/// [`check`] of a command without subcommands at table position `id` whose one argument is
/// a key it reads (GET), without looking its keys up by name: what the gather of GETs
/// across connections asks of each key (`adapter.rs`).
pub fn reads_key(user: &User, id: usize, key: &[u8]) -> bool {
    let keys = [(key, READ)];
    let r = Request {
        id,
        first_arg: Some(key),
        keys: &keys,
        channels: &[],
    };
    user.check(&r).is_ok()
}

/// The argument positions of the channels a command names: PUBLISH's and SPUBLISH's
/// first, every one of SUBSCRIBE, SSUBSCRIBE and PSUBSCRIBE (patterns, checked
/// literally); unsubscribing is never refused.
fn channel_positions(spec: &Spec, args: &[&[u8]]) -> std::ops::Range<usize> {
    match spec.name {
        "PUBLISH" | "SPUBLISH" => 1..2.min(args.len()),
        "SUBSCRIBE" | "SSUBSCRIBE" | "PSUBSCRIBE" => 1..args.len(),
        _ => 0..0,
    }
}

/// Write commands that read their key's value too (Redis's `ACCESS` key flag).
const WRITES_THAT_READ: &[&str] = &[
    "BITFIELD",
    "BLMPOP",
    "BLPOP",
    "BRPOP",
    "BZMPOP",
    "BZPOPMAX",
    "BZPOPMIN",
    "DECR",
    "DECRBY",
    "GETDEL",
    "GETEX",
    "GETSET",
    "HINCRBY",
    "HINCRBYFLOAT",
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "LMPOP",
    "LPOP",
    "MOVE",
    "RPOP",
    "SETBIT",
    "SPOP",
    "ZINCRBY",
    "ZMPOP",
    "ZPOPMAX",
    "ZPOPMIN",
];

/// Reads that look at no value (existence, type, sizes).
const READS_WITHOUT_VALUE: &[&str] = &[
    "EXISTS",
    "HEXISTS",
    "HLEN",
    "HSTRLEN",
    "LLEN",
    "OBJECT",
    "SCARD",
    "SISMEMBER",
    "STRLEN",
    "TOUCH",
    "TYPE",
    "WATCH",
    "XLEN",
    "ZCARD",
];

/// Commands whose first key is written from the others, which are only read.
const STORES: &[&str] = &[
    "BITOP",
    "GEOSEARCHSTORE",
    "SDIFFSTORE",
    "SINTERSTORE",
    "SUNIONSTORE",
    "ZDIFFSTORE",
    "ZINTERSTORE",
    "ZRANGESTORE",
    "ZUNIONSTORE",
    "PFMERGE",
];

/// Commands that take from their first key (read and removed) and write the second.
const MOVES: &[&str] = &[
    "LMOVE",
    "BLMOVE",
    "RPOPLPUSH",
    "BRPOPLPUSH",
    "SMOVE",
    "RENAME",
    "RENAMENX",
];

/// What the `nth` key of a command needs: READ, WRITE, both, or neither.
fn key_needs(spec: &Spec, args: &[&[u8]], nth: usize) -> u8 {
    let name = spec.name;
    if spec.runs_script() {
        return if name.ends_with("_RO") {
            READ
        } else {
            READ | WRITE
        };
    }
    if name == "MIGRATE" {
        return READ | WRITE;
    }
    if name == "MEMORY" {
        return 0;
    }
    if STORES.contains(&name) {
        return match (nth, name) {
            (0, "PFMERGE") => READ | WRITE,
            (0, _) => WRITE,
            _ => READ,
        };
    }
    if MOVES.contains(&name) {
        return if nth == 0 { READ | WRITE } else { WRITE };
    }
    match name {
        // The source is read; a STORE (STOREDIST) key is written.
        "COPY" | "SORT" | "GEORADIUS" | "GEORADIUSBYMEMBER" => {
            return if nth == 0 { READ } else { WRITE };
        }
        "SET" => {
            let get = args[3..].iter().any(|a| a.eq_ignore_ascii_case(b"GET"));
            return if get { READ | WRITE } else { WRITE };
        }
        // Reading a group's entries is a read, as Redis has it.
        "XREADGROUP" => return READ,
        // Only GET subcommands: a read.
        "BITFIELD" => {
            let writes = args[2..].iter().any(|a| {
                [&b"SET"[..], b"INCRBY"]
                    .iter()
                    .any(|w| a.eq_ignore_ascii_case(w))
            });
            return if writes { READ | WRITE } else { READ };
        }
        _ => {}
    }
    if spec.flags & crate::resp::call::flag::WRITE != 0 {
        if WRITES_THAT_READ.contains(&name) {
            READ | WRITE
        } else {
            WRITE
        }
    } else if READS_WITHOUT_VALUE.contains(&name) {
        0
    } else {
        READ
    }
}

/// Whether the connection's user may run `spec` reading every key (a selector allowing
/// the command with `~*` or `%R~*`): what SORT's BY and GET patterns need, as in Redis.
pub fn reads_every_key(s: &Session, table: &[Spec], spec: &'static Spec) -> bool {
    let Some(user) = s.user.as_ref().filter(|u| !u.open) else {
        return true;
    };
    let id = table
        .iter()
        .position(|t| std::ptr::eq(t, spec))
        .unwrap_or(0);
    std::iter::once(&user.root)
        .chain(&user.selectors)
        .any(|sel| sel.allowed(id) && sel.reads_every_key())
}
