//! The RESP command table: every command this server answers, with Redis's arity, flags,
//! key positions, a one-line summary and its handler. The one source of truth for RESP
//! commands: every command is looked up here once and the gate (`gate.rs`) checks its
//! arity and flags before the handler runs; COMMAND COUNT, INFO, DOCS and LIST answer from
//! it; cluster mode routes by its key positions and flags.

use crate::core::shared::Shared;
use crate::resp::call::flag::*;
use crate::resp::call::{Call, Spec};
use crate::resp::reply::wrong_args;
use crate::resp::session::Session;
use crate::resp::types::{hash, set};
use crate::resp::{
    atomics, bits, command, connection, expire, introspect, keys, rename, server, strings, tx,
};
use std::sync::OnceLock;

use crate::resp::call::row::{spec, ALL, NONE, ONE, R, RF, W, WF};

const DEL: u32 = WRITE;
const CONN: u32 = NOSCRIPT | LOADING | STALE | FAST;
const ADMINISTRATIVE: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const TX: u32 = NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY;
/// Reads that do not go through a transaction's own view (they walk the keyspace or read
/// through the engine): refused inside MULTI.
const SCANS: u32 = READONLY | NO_MULTI;

/// A handler written before the table drove dispatch: the server, the connection, the
/// command, the output.
type Plain = fn(&Shared, &mut Session, &[&[u8]], &mut Vec<u8>);

/// MSET and MSETNX: key-value pairs (an even count is a wrong number of arguments).
fn pairs(x: &mut Call<'_, '_>, run: Plain) {
    if x.args.len().is_multiple_of(2) {
        return wrong_args(x.out, x.args[0]);
    }
    run(x.sh, x.s, x.args, x.out)
}

/// A command with at most `max` arguments (its arity gives the least).
fn at_most(x: &mut Call<'_, '_>, max: usize, run: Plain) {
    if x.args.len() > max {
        return wrong_args(x.out, x.args[0]);
    }
    run(x.sh, x.s, x.args, x.out)
}

/// Every command: the base rows, then those of lists and sorted sets (`table_types.rs`).
pub fn table() -> &'static [Spec] {
    static ALL_ROWS: OnceLock<Vec<Spec>> = OnceLock::new();
    ALL_ROWS.get_or_init(|| {
        use crate::resp::table_types::{
            DATABASES, DEBUGGING, LISTS, SCRIPTING, SORTING, STREAMS, STRINGS_MORE, ZSETS,
        };
        [
            BASE,
            LISTS,
            ZSETS,
            SCRIPTING,
            DATABASES,
            DEBUGGING,
            SORTING,
            STRINGS_MORE,
            STREAMS,
        ]
        .concat()
    })
}

/// The commands of strings, keys, the server, hashes and sets, in the order
/// docs/PROTOCOL.md lists them.
static BASE: &[Spec] = &[
    spec(
        "AUTH",
        -2,
        CONN | NO_AUTH | LOCAL,
        NONE,
        "connection",
        "Authenticates the connection.",
        connection::auth,
    ),
    spec(
        "HELLO",
        -1,
        CONN | NO_AUTH | LOCAL,
        NONE,
        "connection",
        "Handshakes: protocol version, authentication, name.",
        connection::hello,
    ),
    spec(
        "QUIT",
        -1,
        CONN | NO_AUTH | LOCAL,
        NONE,
        "connection",
        "Closes the connection.",
        connection::quit,
    ),
    spec(
        "RESET",
        1,
        CONN | LOCAL,
        NONE,
        "connection",
        "Resets the connection's state.",
        connection::reset,
    ),
    spec(
        "PING",
        -1,
        FAST | LOCAL,
        NONE,
        "connection",
        "Answers PONG, or the argument.",
        connection::ping,
    ),
    spec(
        "ECHO",
        2,
        FAST | LOCAL,
        NONE,
        "connection",
        "Answers the argument.",
        connection::echo,
    ),
    spec(
        "SELECT",
        2,
        CONN | LOCAL,
        NONE,
        "connection",
        "Selects a database (0 to --databases - 1).",
        connection::select,
    ),
    spec(
        "READONLY",
        1,
        CONN | LOCAL,
        NONE,
        "cluster",
        "Accepted for cluster-aware clients.",
        connection::accept,
    ),
    spec(
        "READWRITE",
        1,
        CONN | LOCAL,
        NONE,
        "cluster",
        "Accepted for cluster-aware clients.",
        connection::accept,
    ),
    spec(
        "CLIENT",
        -2,
        CONN | LOCAL,
        NONE,
        "connection",
        "SETNAME, GETNAME, ID, SETINFO, INFO, LIST, KILL, NO-EVICT, TRACKING off.",
        connection::client,
    ),
    spec(
        "COMMAND",
        -1,
        ADMINISTRATIVE | LOCAL,
        NONE,
        "server",
        "COUNT, INFO, DOCS, LIST of this table.",
        |x| command::command(x.s, x.args, table(), find, x.out),
    ),
    spec(
        "CONFIG",
        -2,
        ADMINISTRATIVE | LOCAL,
        NONE,
        "server",
        "GET and SET of run-time settings.",
        server::config,
    ),
    spec(
        "INFO",
        -1,
        ADMINISTRATIVE | LOCAL,
        NONE,
        "server",
        "Server information and statistics.",
        server::info,
    ),
    spec(
        "MEMORY",
        -2,
        R,
        (2, 2, 1),
        "server",
        "MEMORY USAGE: the bytes a key's item takes.",
        |x| introspect::memory(x.sh, x.s, x.args, x.reads, x.out),
    ),
    spec(
        "OBJECT",
        -2,
        R,
        (2, 2, 1),
        "generic",
        "OBJECT ENCODING and REFCOUNT of a key.",
        |x| introspect::object(x.sh, x.s, x.args, x.reads, x.out),
    ),
    spec(
        "DBSIZE",
        1,
        RF,
        NONE,
        "server",
        "Number of keys.",
        server::dbsize,
    ),
    spec(
        "TIME",
        1,
        FAST | LOCAL,
        NONE,
        "server",
        "The server's clock.",
        server::time,
    ),
    spec(
        "CLUSTER",
        -2,
        CONN | LOCAL,
        NONE,
        "cluster",
        "Cluster mode: the range map (RANGES), its state (INFO), this node's id (MYID).",
        server::cluster,
    ),
    spec(
        "WAIT",
        3,
        FAST | LOCAL,
        NONE,
        "generic",
        "Answers 0: there are no replicas.",
        server::wait,
    ),
    spec(
        "SHUTDOWN",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI,
        NONE,
        "server",
        "Stops the server (NOSAVE: without the final flush).",
        server::shutdown,
    ),
    spec(
        "FLUSHALL",
        -1,
        WRITE | NO_MULTI,
        NONE,
        "server",
        "Removes every key.",
        server::flushall,
    ),
    spec(
        "FLUSHDB",
        -1,
        WRITE | NO_MULTI,
        NONE,
        "server",
        "Removes every key of the selected database.",
        server::flushdb,
    ),
    spec(
        "MULTI",
        1,
        TX,
        NONE,
        "transactions",
        "Starts a transaction.",
        tx::multi,
    ),
    spec(
        "EXEC",
        1,
        TX,
        NONE,
        "transactions",
        "Runs the queued commands atomically.",
        tx::exec_cmd,
    ),
    spec(
        "DISCARD",
        1,
        TX,
        NONE,
        "transactions",
        "Drops the queued commands.",
        tx::discard,
    ),
    spec(
        "WATCH",
        -2,
        TX,
        ALL,
        "transactions",
        "EXEC fails if one of these keys changes first.",
        tx::watch_cmd,
    ),
    spec(
        "UNWATCH",
        1,
        TX,
        NONE,
        "transactions",
        "Forgets the watched keys.",
        tx::unwatch,
    ),
    spec(
        "GET",
        2,
        RF,
        ONE,
        "string",
        "The value of a key.",
        strings::get,
    ),
    spec(
        "MGET",
        -2,
        RF,
        ALL,
        "string",
        "The values of keys.",
        strings::mget,
    ),
    spec(
        "SET",
        -3,
        W,
        ONE,
        "string",
        "Sets a value (NX, XX, GET; EX, PX, EXAT, PXAT, KEEPTTL).",
        |x| expire::set(x.sh, x.s, x.args, x.value.take(), x.out),
    ),
    spec(
        "SETEX",
        4,
        W,
        ONE,
        "string",
        "Sets a value that expires after seconds.",
        |x| expire::setex(x.sh, x.s, x.args, false, x.out),
    ),
    spec(
        "PSETEX",
        4,
        W,
        ONE,
        "string",
        "Sets a value that expires after milliseconds.",
        |x| expire::setex(x.sh, x.s, x.args, true, x.out),
    ),
    spec(
        "GETEX",
        -2,
        WRITE | FAST,
        ONE,
        "string",
        "The value of a key; changes its expiry (EX, PX, EXAT, PXAT, PERSIST).",
        |x| expire::getex(x.sh, x.s, x.args, x.out),
    ),
    spec(
        "SETNX",
        3,
        WF,
        ONE,
        "string",
        "Sets a value if the key is absent.",
        strings::setnx,
    ),
    spec(
        "GETSET",
        3,
        WF,
        ONE,
        "string",
        "Sets a value, answering the old one.",
        strings::getset,
    ),
    spec(
        "MSET",
        -3,
        W,
        (1, -1, 2),
        "string",
        "Sets several values atomically.",
        |x| pairs(x, tx::mset),
    ),
    spec(
        "MSETNX",
        -3,
        W,
        (1, -1, 2),
        "string",
        "Sets several values if all keys are absent.",
        |x| pairs(x, tx::msetnx),
    ),
    spec(
        "DEL",
        -2,
        DEL,
        ALL,
        "generic",
        "Removes keys.",
        strings::del,
    ),
    spec(
        "EXPIRE",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "Sets a key's expiry in seconds (NX, XX, GT, LT).",
        |x| expire::expire(x.sh, x.s, x.args, b"EXPIRE", x.out),
    ),
    spec(
        "PEXPIRE",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "Sets a key's expiry in milliseconds (NX, XX, GT, LT).",
        |x| expire::expire(x.sh, x.s, x.args, b"PEXPIRE", x.out),
    ),
    spec(
        "EXPIREAT",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "Sets a key's expiry to a Unix time in seconds (NX, XX, GT, LT).",
        |x| expire::expire(x.sh, x.s, x.args, b"EXPIREAT", x.out),
    ),
    spec(
        "PEXPIREAT",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "Sets a key's expiry to a Unix time in milliseconds (NX, XX, GT, LT).",
        |x| expire::expire(x.sh, x.s, x.args, b"PEXPIREAT", x.out),
    ),
    spec(
        "PERSIST",
        2,
        WRITE | FAST,
        ONE,
        "generic",
        "Removes a key's expiry.",
        |x| expire::persist(x.sh, x.s, x.args[1], x.out),
    ),
    spec(
        "TTL",
        2,
        RF,
        ONE,
        "generic",
        "Seconds until a key expires (-1: never, -2: absent).",
        |x| expire::ttl(x.sh, x.s, x.args[1], b"TTL", x.out),
    ),
    spec(
        "PTTL",
        2,
        RF,
        ONE,
        "generic",
        "Milliseconds until a key expires (-1: never, -2: absent).",
        |x| expire::ttl(x.sh, x.s, x.args[1], b"PTTL", x.out),
    ),
    spec(
        "EXPIRETIME",
        2,
        RF,
        ONE,
        "generic",
        "The Unix time in seconds a key expires at (-1: never, -2: absent).",
        |x| expire::ttl(x.sh, x.s, x.args[1], b"EXPIRETIME", x.out),
    ),
    spec(
        "PEXPIRETIME",
        2,
        RF,
        ONE,
        "generic",
        "The Unix time in milliseconds a key expires at (-1: never, -2: absent).",
        |x| expire::ttl(x.sh, x.s, x.args[1], b"PEXPIRETIME", x.out),
    ),
    spec(
        "UNLINK",
        -2,
        WRITE | FAST,
        ALL,
        "generic",
        "Removes keys.",
        strings::del,
    ),
    spec(
        "GETDEL",
        2,
        WRITE | FAST,
        ONE,
        "string",
        "Removes a key, answering its value.",
        strings::getdel,
    ),
    spec(
        "APPEND",
        3,
        WF,
        ONE,
        "string",
        "Appends to a value.",
        strings::append,
    ),
    spec(
        "SETRANGE",
        4,
        W,
        ONE,
        "string",
        "Overwrites part of a value.",
        strings::setrange,
    ),
    spec(
        "GETRANGE",
        4,
        R,
        ONE,
        "string",
        "Part of a value.",
        strings::getrange,
    ),
    spec(
        "SUBSTR",
        4,
        R,
        ONE,
        "string",
        "Part of a value (old name of GETRANGE).",
        strings::getrange,
    ),
    spec(
        "INCR",
        2,
        WF,
        ONE,
        "string",
        "Adds 1 to an integer value.",
        strings::incr,
    ),
    spec(
        "DECR",
        2,
        WF,
        ONE,
        "string",
        "Subtracts 1 from an integer value.",
        strings::decr,
    ),
    spec(
        "INCRBY",
        3,
        WF,
        ONE,
        "string",
        "Adds to an integer value.",
        strings::incrby,
    ),
    spec(
        "DECRBY",
        3,
        WF,
        ONE,
        "string",
        "Subtracts from an integer value.",
        strings::decrby,
    ),
    spec(
        "INCRBYFLOAT",
        3,
        WF,
        ONE,
        "string",
        "Adds to a floating-point value.",
        strings::incrbyfloat,
    ),
    spec(
        "STRLEN",
        2,
        RF,
        ONE,
        "string",
        "Length of a value.",
        strings::strlen,
    ),
    spec(
        "SETBIT",
        4,
        W,
        ONE,
        "bitmap",
        "Sets or clears one bit of a value; its old value.",
        bits::setbit,
    ),
    spec(
        "GETBIT",
        3,
        RF,
        ONE,
        "bitmap",
        "One bit of a value.",
        bits::getbit,
    ),
    spec(
        "BITCOUNT",
        -2,
        R,
        ONE,
        "bitmap",
        "Set bits of a value, in a byte or bit range.",
        bits::bitcount,
    ),
    spec(
        "BITPOS",
        -3,
        R,
        ONE,
        "bitmap",
        "First bit set or clear in a value, in a byte or bit range.",
        bits::bitpos,
    ),
    spec(
        "BITOP",
        -4,
        W,
        (2, -1, 1),
        "bitmap",
        "AND, OR, XOR or NOT of values into a key, atomically.",
        bits::bitop,
    ),
    spec(
        "EXISTS",
        -2,
        RF,
        ALL,
        "generic",
        "How many of the keys exist.",
        strings::exists,
    ),
    spec(
        "TYPE",
        2,
        RF,
        ONE,
        "generic",
        "The type of a key's value (string or none).",
        strings::type_of,
    ),
    spec(
        "RENAME",
        3,
        WRITE,
        (1, 2, 1),
        "generic",
        "Renames a key atomically.",
        |x| rename::rename(x.sh, x.s, x.args, false, x.out),
    ),
    spec(
        "RENAMENX",
        3,
        WRITE | FAST,
        (1, 2, 1),
        "generic",
        "Renames a key if the new name is free.",
        |x| rename::rename(x.sh, x.s, x.args, true, x.out),
    ),
    spec(
        "COPY",
        -3,
        W,
        (1, 2, 1),
        "generic",
        "Copies a key's value (any type) and deadline to another key.",
        |x| rename::copy(x.sh, x.s, x.args, x.out),
    ),
    spec(
        "SCAN",
        -2,
        SCANS,
        NONE,
        "generic",
        "Walks the keys in order from a cursor.",
        |x| keys::scan(x.sh, (&x.s.global.cursors, x.s.db), x.args, x.reads, x.out),
    ),
    spec(
        "KEYS",
        2,
        SCANS,
        NONE,
        "generic",
        "Keys matching a pattern.",
        |x| keys::keys(x.sh, x.s.db, x.args[1], x.out),
    ),
    spec(
        "RANDOMKEY",
        1,
        SCANS,
        NONE,
        "generic",
        "A random key.",
        |x| keys::random_key(x.sh, x.s, x.out),
    ),
    spec(
        "RANGE",
        -3,
        SCANS,
        NONE,
        "accelkv",
        "Items with keys in [from, to), in order.",
        |x| keys::range_in(x, false),
    ),
    spec(
        "FLOOR",
        -3,
        SCANS,
        NONE,
        "accelkv",
        "Items from the largest key <= from, in order.",
        |x| keys::range_in(x, true),
    ),
    spec(
        "CAS",
        4,
        WF,
        ONE,
        "accelkv",
        "Compare-and-swap of a value.",
        |x| atomics::cas(x.sh, x.s, x.args, x.out),
    ),
    spec(
        "FETCHADD",
        -3,
        WF,
        ONE,
        "accelkv",
        "Fetch-and-add of an integer element.",
        |x| at_most(x, 5, atomics::fetch_add),
    ),
    spec(
        "VECTOR",
        -6,
        W,
        ONE,
        "accelkv",
        "A KV-Direct vector operation on a value.",
        |x| at_most(x, 7, atomics::vector),
    ),
    spec(
        "HSET",
        -4,
        WF,
        ONE,
        "hash",
        "Sets fields of a hash; the number added.",
        hash::hset,
    ),
    spec(
        "HMSET",
        -4,
        WF,
        ONE,
        "hash",
        "Sets fields of a hash.",
        hash::hmset,
    ),
    spec(
        "HSETNX",
        4,
        WF,
        ONE,
        "hash",
        "Sets a field of a hash only if it is absent.",
        hash::hsetnx,
    ),
    spec(
        "HGET",
        3,
        RF,
        ONE,
        "hash",
        "The value of a field.",
        hash::hget,
    ),
    spec(
        "HMGET",
        -3,
        RF,
        ONE,
        "hash",
        "The values of fields.",
        hash::hmget,
    ),
    spec(
        "HDEL",
        -3,
        WRITE | FAST,
        ONE,
        "hash",
        "Removes fields; the number removed.",
        hash::hdel,
    ),
    spec(
        "HLEN",
        2,
        RF,
        ONE,
        "hash",
        "The number of fields.",
        hash::hlen,
    ),
    spec(
        "HEXISTS",
        3,
        RF,
        ONE,
        "hash",
        "Whether a field exists.",
        hash::hexists,
    ),
    spec(
        "HSTRLEN",
        3,
        RF,
        ONE,
        "hash",
        "The length of a field's value.",
        hash::hstrlen,
    ),
    spec(
        "HGETALL",
        2,
        R,
        ONE,
        "hash",
        "Every field and value.",
        hash::hgetall,
    ),
    spec("HKEYS", 2, R, ONE, "hash", "Every field.", hash::hkeys),
    spec("HVALS", 2, R, ONE, "hash", "Every value.", hash::hvals),
    spec(
        "HINCRBY",
        4,
        WF,
        ONE,
        "hash",
        "Adds an integer to a field.",
        hash::hincrby,
    ),
    spec(
        "HINCRBYFLOAT",
        4,
        WF,
        ONE,
        "hash",
        "Adds a float to a field.",
        hash::hincrbyfloat,
    ),
    spec(
        "HRANDFIELD",
        -2,
        R,
        ONE,
        "hash",
        "Random fields.",
        hash::hrandfield,
    ),
    spec(
        "HSCAN",
        -3,
        R,
        ONE,
        "hash",
        "Fields after a cursor.",
        hash::hscan,
    ),
    spec(
        "SADD",
        -3,
        WF,
        ONE,
        "set",
        "Adds members; the number added.",
        set::sadd,
    ),
    spec(
        "SREM",
        -3,
        WRITE | FAST,
        ONE,
        "set",
        "Removes members; the number removed.",
        set::srem,
    ),
    spec(
        "SCARD",
        2,
        RF,
        ONE,
        "set",
        "The number of members.",
        set::scard,
    ),
    spec(
        "SISMEMBER",
        3,
        RF,
        ONE,
        "set",
        "Whether a member is in the set.",
        set::sismember,
    ),
    spec(
        "SMISMEMBER",
        -3,
        RF,
        ONE,
        "set",
        "Whether each member is in the set.",
        set::smismember,
    ),
    spec("SMEMBERS", 2, R, ONE, "set", "Every member.", set::smembers),
    spec(
        "SRANDMEMBER",
        -2,
        R,
        ONE,
        "set",
        "Random members.",
        set::srandmember,
    ),
    spec(
        "SPOP",
        -2,
        WRITE | FAST,
        ONE,
        "set",
        "Removes and answers random members.",
        set::spop,
    ),
    spec(
        "SMOVE",
        4,
        WF,
        (1, 2, 1),
        "set",
        "Moves a member between sets.",
        set::smove,
    ),
    spec(
        "SINTER",
        -2,
        R,
        ALL,
        "set",
        "The intersection of sets.",
        set::sinter,
    ),
    spec(
        "SUNION",
        -2,
        R,
        ALL,
        "set",
        "The union of sets.",
        set::sunion,
    ),
    spec(
        "SDIFF",
        -2,
        R,
        ALL,
        "set",
        "The difference of sets.",
        set::sdiff,
    ),
    spec(
        "SINTERSTORE",
        -3,
        W,
        ALL,
        "set",
        "Stores the intersection of sets.",
        set::sinterstore,
    ),
    spec(
        "SUNIONSTORE",
        -3,
        W,
        ALL,
        "set",
        "Stores the union of sets.",
        set::sunionstore,
    ),
    spec(
        "SDIFFSTORE",
        -3,
        W,
        ALL,
        "set",
        "Stores the difference of sets.",
        set::sdiffstore,
    ),
    spec(
        "SINTERCARD",
        -3,
        R,
        (2, 2, 1),
        "set",
        "The size of the intersection of sets.",
        set::sintercard,
    ),
    spec(
        "SSCAN",
        -3,
        R,
        ONE,
        "set",
        "Members after a cursor.",
        set::sscan,
    ),
];

/// Slots of the name index: a power of two, at least four times the table.
const SLOTS: usize = 1024;

/// FNV-1a of a name, upper-cased on the way (so any case finds it).
fn hash_upper(name: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h = (h ^ u32::from(b.to_ascii_uppercase())).wrapping_mul(0x0100_0193);
    }
    h as usize
}

/// The table's index by name: open addressing over [`SLOTS`] slots, each the entry's
/// position plus one (0: empty). Built once.
fn index() -> &'static [u16; SLOTS] {
    static INDEX: OnceLock<[u16; SLOTS]> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut slots = [0u16; SLOTS];
        for (i, s) in table().iter().enumerate() {
            let mut at = hash_upper(s.name.as_bytes()) % SLOTS;
            while slots[at] != 0 {
                at = (at + 1) % SLOTS;
            }
            slots[at] = i as u16 + 1;
        }
        slots
    })
}

/// The command named `name` (any case): one hash and, almost always, one comparison.
/// GET's and SET's entries, found once.
fn common() -> &'static [&'static Spec; 2] {
    static COMMON: OnceLock<[&'static Spec; 2]> = OnceLock::new();
    COMMON.get_or_init(|| {
        let by_name = |n: &str| table().iter().find(|s| s.name == n).expect("in the table");
        [by_name("GET"), by_name("SET")]
    })
}

/// A command's position in [`table()`] (INFO commandstats counts by it).
pub fn position(spec: &'static Spec) -> usize {
    (spec as *const Spec as usize - table().as_ptr() as usize) / std::mem::size_of::<Spec>()
}

pub fn find(name: &[u8]) -> Option<&'static Spec> {
    if let [a, b, c] = *name {
        // GET and SET, what pipelines send most, without hashing: a byte ORed with 0x20
        // equals a lower-case letter only when it is that letter in either case.
        let w = u32::from_le_bytes([a, b, c, 0]) | 0x0020_2020;
        if w == u32::from_le_bytes(*b"get\0") {
            return Some(common()[0]);
        }
        if w == u32::from_le_bytes(*b"set\0") {
            return Some(common()[1]);
        }
    }
    if name.len() > 16 {
        return None; // longer than any command's name
    }
    let slots = index();
    let mut at = hash_upper(name) % SLOTS;
    loop {
        let s = &table()[usize::from(slots[at]).checked_sub(1)?];
        if s.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(s);
        }
        at = (at + 1) % SLOTS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_fit_commandstats() {
        assert!(table().len() <= crate::resp::cmdstats::MAX_COMMANDS);
        for (i, s) in table().iter().enumerate() {
            assert_eq!(position(find(s.name.as_bytes()).unwrap()), i);
        }
    }

    #[test]
    fn names_are_unique_upper_case_and_found_in_any_case() {
        let table = table();
        for (i, s) in table.iter().enumerate() {
            assert_eq!(s.name, s.name.to_ascii_uppercase());
            assert!(table[..i].iter().all(|t| t.name != s.name), "{}", s.name);
            assert!(std::ptr::eq(
                find(s.name.to_lowercase().as_bytes()).unwrap(),
                s
            ));
        }
        assert!(find(b"NOPE").is_none());
        assert!(find(b"GEt").is_some_and(|s| s.name == "GET"));
        assert!(find(b"sET").is_some_and(|s| s.name == "SET"));
        assert!(find(b"G\x05T").is_none() && find(b"SE\x14").is_none());
        assert!(find(b"").is_none());
        assert!(find(b"ACCELKV.SPLIT.TOO.LONG.NAME").is_none());
        assert!(table.len() * 4 <= SLOTS);
        assert!(table.iter().all(|s| s.name.len() <= 16));
    }

    #[test]
    fn arity_follows_redis() {
        let get = find(b"get").unwrap();
        assert!(get.arity_ok(2) && !get.arity_ok(1) && !get.arity_ok(3));
        let mget = find(b"MGET").unwrap();
        assert!(mget.arity_ok(2) && mget.arity_ok(9) && !mget.arity_ok(1));
    }

    #[test]
    fn flags_say_what_writes_and_what_may_run_past_maxmemory() {
        let is_write = |name: &[u8]| find(name).is_some_and(|s| s.has(WRITE));
        for w in [
            "SET", "MSET", "APPEND", "INCR", "RENAME", "GETEX", "DEL", "EXPIRE",
        ] {
            assert!(is_write(w.as_bytes()), "{w}");
        }
        for r in ["GET", "MGET", "SCAN", "PING", "MEMORY", "OBJECT"] {
            assert!(!is_write(r.as_bytes()), "{r}");
        }
        // As in Redis: commands that only remove or rename may run past maxmemory.
        for free in [
            "DEL", "UNLINK", "GETDEL", "FLUSHALL", "EXPIRE", "PERSIST", "RENAME", "RENAMENX",
            "GETEX",
        ] {
            assert!(!find(free.as_bytes()).unwrap().has(DENYOOM), "{free}");
        }
        for add in ["SET", "SETNX", "MSET", "APPEND", "INCR", "SETRANGE"] {
            assert!(find(add.as_bytes()).unwrap().has(DENYOOM), "{add}");
        }
        assert!(find(b"auth").unwrap().has(NO_AUTH) && !find(b"get").unwrap().has(NO_AUTH));
    }
}
