//! The RESP command table: every command this server answers, one a line (`rows!`, in
//! `call.rs`): its name, Redis's arity, flags, key positions, group, handler (every one a
//! `fn(&mut Call)`) and a one-line summary. To add a command: a handler in its family's
//! file and one line here. The one source of truth for RESP
//! commands: every command is looked up here once and the gate (`gate.rs`) checks its
//! arity and flags before the handler runs; COMMAND COUNT, INFO, DOCS and LIST answer from
//! it; cluster mode routes by its key positions and flags.

use crate::resp::call::flag::*;
use crate::resp::call::Spec;
use crate::resp::commands::types::{hash, set};
use crate::resp::commands::{
    atomics, bits, command, connection, expire, introspect, keys, rename, replication, server,
    strings, sync, tx,
};
use std::sync::OnceLock;

use crate::resp::call::row::{rows, ALL, NONE, ONE, R, RF, W, WF};

const DEL: u32 = WRITE;
const CONN: u32 = NOSCRIPT | LOADING | STALE | FAST;
const ADMINISTRATIVE: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const TX: u32 = NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY;
/// Reads that do not go through a transaction's own view (they walk the keyspace or read
/// through the engine): refused inside MULTI.
const SCANS: u32 = READONLY | NO_MULTI;

/// Every command: the base rows, then those of lists and sorted sets (`table_types.rs`).
pub fn table() -> &'static [Spec] {
    static ALL_ROWS: OnceLock<Vec<Spec>> = OnceLock::new();
    ALL_ROWS.get_or_init(|| {
        use crate::resp::table_types::{
            DATABASES, DEBUGGING, GEO, HYPERLOGLOG, LISTS, PUBSUB, SCRIPTING, SERIALIZING, SORTING,
            STREAMS, STRINGS_MORE, ZSETS,
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
            PUBSUB,
            HYPERLOGLOG,
            GEO,
            SERIALIZING,
        ]
        .concat()
    })
}

/// The commands of strings, keys, the server, hashes and sets, in the order
/// docs/PROTOCOL.md lists them.
static BASE: &[Spec] = rows! {
    "AUTH",         -2, CONN | NO_AUTH | LOCAL,                        NONE,       "connection",   connection::auth,         "Authenticates the connection.";
    "HELLO",        -1, CONN | NO_AUTH | LOCAL,                        NONE,       "connection",   connection::hello,        "Handshakes: protocol version, authentication, name.";
    "QUIT",         -1, CONN | NO_AUTH | LOCAL,                        NONE,       "connection",   connection::quit,         "Closes the connection.";
    "RESET",        1,  CONN | NO_AUTH | ALLOW_BUSY | LOCAL,           NONE,       "connection",   connection::reset,        "Resets the connection's state.";
    "PING",         -1, FAST | LOCAL,                                  NONE,       "connection",   connection::ping,         "Answers PONG, or the argument.";
    "ECHO",         2,  FAST | LOCAL,                                  NONE,       "connection",   connection::echo,         "Answers the argument.";
    "SELECT",       2,  CONN | LOCAL,                                  NONE,       "connection",   connection::select,       "Selects a database (0 to --databases - 1).";
    "READONLY",     1,  CONN | LOCAL,                                  NONE,       "cluster",      connection::accept,       "Accepted for cluster-aware clients.";
    "READWRITE",    1,  CONN | LOCAL,                                  NONE,       "cluster",      connection::accept,       "Accepted for cluster-aware clients.";
    "ASKING",       1,  CONN | LOCAL,                                  NONE,       "cluster",      connection::accept,       "Accepted for cluster-aware clients (no slot ever moves from an emulated cluster's one node).";
    "ACL",          -2, NOSCRIPT | LOADING | STALE | LOCAL,            NONE,       "server",       crate::resp::acl::command::acl, "Users and their permissions: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, DRYRUN, LOG, GENPASS, SAVE, LOAD.";
    "CLIENT",       -2, CONN | LOCAL,                                  NONE,       "connection",   connection::client,       "SETNAME, GETNAME, ID, SETINFO, INFO, LIST, KILL, UNBLOCK, NO-EVICT, TRACKING off.";
    "COMMAND",      -1, ADMINISTRATIVE | LOCAL,                        NONE,       "server",       command::command_cmd,     "COUNT, INFO, DOCS, LIST of this table.";
    "CONFIG",       -2, ADMINISTRATIVE | LOCAL,                        NONE,       "server",       server::config,           "GET and SET of run-time settings.";
    "INFO",         -1, ADMINISTRATIVE | LOCAL,                        NONE,       "server",       server::info,             "Server information and statistics.";
    "MEMORY",       -2, R,                                             (2, 2, 1),  "server",       introspect::memory_cmd,   "MEMORY USAGE: the bytes a key's item takes.";
    "OBJECT",       -2, R,                                             (2, 2, 1),  "generic",      introspect::object_cmd,   "OBJECT ENCODING and REFCOUNT of a key.";
    "DBSIZE",       1,  RF,                                            NONE,       "server",       server::dbsize,           "Number of keys.";
    "TIME",         1,  FAST | LOCAL,                                  NONE,       "server",       server::time,             "The server's clock.";
    "LASTSAVE",     1,  FAST | LOADING | STALE | LOCAL,                NONE,       "server",       server::lastsave,         "When the data last became durable (the data directory's last commit; else the start).";
    "CLUSTER",      -2, CONN | LOCAL,                                  NONE,       "cluster",      server::cluster,          "Cluster mode: the range map (RANGES), its state (INFO), this node's id (MYID).";
    "WAIT",         3,  FAST | LOCAL,                                  NONE,       "generic",      server::wait,             "Answers 0: there are no replicas.";
    "ROLE",         1,  NOSCRIPT | LOADING | STALE | FAST | LOCAL,     NONE,       "server",       replication::role,        "master and its offset, or slave with its primary, link state and offset.";
    "REPLICAOF",    3,  ADMIN | NOSCRIPT | STALE | NO_MULTI | LOCAL,   NONE,       "server",       replication::replicaof,   "Follows a Redis primary (full synchronization, then its stream); NO ONE stops and keeps the data.";
    "SLAVEOF",      3,  ADMIN | NOSCRIPT | STALE | NO_MULTI | LOCAL,   NONE,       "server",       replication::replicaof,   "REPLICAOF's old name.";
    "SAVE",         1,  ADMIN | NOSCRIPT | NO_MULTI | LOCAL,           NONE,       "server",       replication::save,        "Writes every database as an RDB file (dump.rdb in the data directory).";
    "BGSAVE",       -1, ADMIN | NOSCRIPT | LOCAL,                      NONE,       "server",       replication::bgsave,      "SAVE's snapshot now, its file written in the background.";
    "SYNC",         1,  ADMINISTRATIVE | NO_MULTI,                     NONE,       "server",       sync::sync,               "An RDB file of every database at one snapshot, after REPLCONF rdb-only 1 (redis-cli --rdb).";
    "PSYNC",        -3, ADMINISTRATIVE | NO_MULTI,                     NONE,       "server",       sync::psync,              "Refused: accelkv does not replicate (SYNC serves redis-cli --rdb).";
    "REPLCONF",     -1, ADMINISTRATIVE | ALLOW_BUSY,                   NONE,       "server",       sync::replconf,           "What the next SYNC sends: rdb-only, rdb-filter-only functions (capa and the like accepted).";
    "SHUTDOWN",     -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI, NONE,       "server",       server::shutdown,         "Stops the server (NOSAVE: without the final flush).";
    "FLUSHALL",     -1, WRITE | NO_MULTI,                              NONE,       "server",       server::flushall,         "Removes every key.";
    "FLUSHDB",      -1, WRITE | NO_MULTI,                              NONE,       "server",       server::flushdb,          "Removes every key of the selected database.";
    "MULTI",        1,  TX,                                            NONE,       "transactions", tx::multi,                "Starts a transaction.";
    "EXEC",         1,  TX,                                            NONE,       "transactions", tx::exec_cmd,             "Runs the queued commands atomically.";
    "DISCARD",      1,  TX,                                            NONE,       "transactions", tx::discard,              "Drops the queued commands.";
    "WATCH",        -2, TX,                                            ALL,        "transactions", tx::watch_cmd,            "EXEC fails if one of these keys changes first.";
    "UNWATCH",      1,  TX,                                            NONE,       "transactions", tx::unwatch,              "Forgets the watched keys.";
    "GET",          2,  RF,                                            ONE,        "string",       strings::get,             "The value of a key.";
    "MGET",         -2, RF,                                            ALL,        "string",       strings::mget,            "The values of keys.";
    "SET",          -3, W,                                             ONE,        "string",       expire::cmd::set,         "Sets a value (NX, XX, GET; EX, PX, EXAT, PXAT, KEEPTTL).";
    "SETEX",        4,  W,                                             ONE,        "string",       expire::cmd::setex,       "Sets a value that expires after seconds.";
    "PSETEX",       4,  W,                                             ONE,        "string",       expire::cmd::psetex,      "Sets a value that expires after milliseconds.";
    "GETEX",        -2, WRITE | FAST,                                  ONE,        "string",       expire::cmd::getex,       "The value of a key; changes its expiry (EX, PX, EXAT, PXAT, PERSIST).";
    "SETNX",        3,  WF,                                            ONE,        "string",       strings::setnx,           "Sets a value if the key is absent.";
    "GETSET",       3,  WF,                                            ONE,        "string",       strings::getset,          "Sets a value, answering the old one.";
    "MSET",         -3, W,                                             (1, -1, 2), "string",       tx::mset_cmd,             "Sets several values atomically.";
    "MSETNX",       -3, W,                                             (1, -1, 2), "string",       tx::msetnx_cmd,           "Sets several values if all keys are absent.";
    "DEL",          -2, DEL,                                           ALL,        "generic",      strings::del,             "Removes keys.";
    "EXPIRE",       -3, WRITE | FAST,                                  ONE,        "generic",      expire::cmd::expire,      "Sets a key's expiry in seconds (NX, XX, GT, LT).";
    "PEXPIRE",      -3, WRITE | FAST,                                  ONE,        "generic",      expire::cmd::pexpire,     "Sets a key's expiry in milliseconds (NX, XX, GT, LT).";
    "EXPIREAT",     -3, WRITE | FAST,                                  ONE,        "generic",      expire::cmd::expireat,    "Sets a key's expiry to a Unix time in seconds (NX, XX, GT, LT).";
    "PEXPIREAT",    -3, WRITE | FAST,                                  ONE,        "generic",      expire::cmd::pexpireat,   "Sets a key's expiry to a Unix time in milliseconds (NX, XX, GT, LT).";
    "PERSIST",      2,  WRITE | FAST,                                  ONE,        "generic",      expire::cmd::persist,     "Removes a key's expiry.";
    "TTL",          2,  RF,                                            ONE,        "generic",      expire::cmd::ttl,         "Seconds until a key expires (-1: never, -2: absent).";
    "PTTL",         2,  RF,                                            ONE,        "generic",      expire::cmd::pttl,        "Milliseconds until a key expires (-1: never, -2: absent).";
    "EXPIRETIME",   2,  RF,                                            ONE,        "generic",      expire::cmd::expiretime,  "The Unix time in seconds a key expires at (-1: never, -2: absent).";
    "PEXPIRETIME",  2,  RF,                                            ONE,        "generic",      expire::cmd::pexpiretime, "The Unix time in milliseconds a key expires at (-1: never, -2: absent).";
    "UNLINK",       -2, WRITE | FAST,                                  ALL,        "generic",      strings::del,             "Removes keys.";
    "GETDEL",       2,  WRITE | FAST,                                  ONE,        "string",       strings::getdel,          "Removes a key, answering its value.";
    "APPEND",       3,  WF,                                            ONE,        "string",       strings::append,          "Appends to a value.";
    "SETRANGE",     4,  W,                                             ONE,        "string",       strings::setrange,        "Overwrites part of a value.";
    "GETRANGE",     4,  R,                                             ONE,        "string",       strings::getrange,        "Part of a value.";
    "SUBSTR",       4,  R,                                             ONE,        "string",       strings::getrange,        "Part of a value (old name of GETRANGE).";
    "INCR",         2,  WF,                                            ONE,        "string",       strings::incr,            "Adds 1 to an integer value.";
    "DECR",         2,  WF,                                            ONE,        "string",       strings::decr,            "Subtracts 1 from an integer value.";
    "INCRBY",       3,  WF,                                            ONE,        "string",       strings::incrby,          "Adds to an integer value.";
    "DECRBY",       3,  WF,                                            ONE,        "string",       strings::decrby,          "Subtracts from an integer value.";
    "INCRBYFLOAT",  3,  WF,                                            ONE,        "string",       strings::incrbyfloat,     "Adds to a floating-point value.";
    "STRLEN",       2,  RF,                                            ONE,        "string",       strings::strlen,          "Length of a value.";
    "SETBIT",       4,  W,                                             ONE,        "bitmap",       bits::setbit,             "Sets or clears one bit of a value; its old value.";
    "GETBIT",       3,  RF,                                            ONE,        "bitmap",       bits::getbit,             "One bit of a value.";
    "BITCOUNT",     -2, R,                                             ONE,        "bitmap",       bits::bitcount,           "Set bits of a value, in a byte or bit range.";
    "BITPOS",       -3, R,                                             ONE,        "bitmap",       bits::bitpos,             "First bit set or clear in a value, in a byte or bit range.";
    "BITOP",        -4, W,                                             (2, -1, 1), "bitmap",       bits::bitop,              "AND, OR, XOR or NOT of values into a key, atomically.";
    "EXISTS",       -2, RF,                                            ALL,        "generic",      strings::exists,          "How many of the keys exist.";
    "TOUCH",        -2, RF,                                            ALL,        "generic",      strings::exists,          "How many of the keys exist (no access time is kept to update).";
    "TYPE",         2,  RF,                                            ONE,        "generic",      strings::type_of,         "The type of a key's value (string or none).";
    "RENAME",       3,  WRITE,                                         (1, 2, 1),  "generic",      rename::rename_cmd,       "Renames a key atomically.";
    "RENAMENX",     3,  WRITE | FAST,                                  (1, 2, 1),  "generic",      rename::renamenx,         "Renames a key if the new name is free.";
    "COPY",         -3, W,                                             (1, 2, 1),  "generic",      rename::copy_cmd,         "Copies a key's value (any type) and deadline to another key.";
    "SCAN",         -2, SCANS,                                         NONE,       "generic",      keys::scan_cmd,           "Walks the keys in order from a cursor.";
    "KEYS",         2,  SCANS,                                         NONE,       "generic",      keys::keys_cmd,           "Keys matching a pattern.";
    "RANDOMKEY",    1,  SCANS,                                         NONE,       "generic",      keys::randomkey,          "A random key.";
    "RANGE",        -3, SCANS,                                         NONE,       "accelkv",      keys::range_cmd,          "Items with keys in [from, to), in order.";
    "FLOOR",        -3, SCANS,                                         NONE,       "accelkv",      keys::floor,              "Items from the largest key <= from, in order.";
    "CAS",          4,  WF,                                            ONE,        "accelkv",      atomics::cas_cmd,         "Compare-and-swap of a value.";
    "FETCHADD",     -3, WF,                                            ONE,        "accelkv",      atomics::fetchadd,        "Fetch-and-add of an integer element.";
    "VECTOR",       -6, W,                                             ONE,        "accelkv",      atomics::vector_cmd,      "A KV-Direct vector operation on a value.";
    "HSET",         -4, WF,                                            ONE,        "hash",         hash::hset,               "Sets fields of a hash; the number added.";
    "HMSET",        -4, WF,                                            ONE,        "hash",         hash::hmset,              "Sets fields of a hash.";
    "HSETNX",       4,  WF,                                            ONE,        "hash",         hash::hsetnx,             "Sets a field of a hash only if it is absent.";
    "HGET",         3,  RF,                                            ONE,        "hash",         hash::hget,               "The value of a field.";
    "HMGET",        -3, RF,                                            ONE,        "hash",         hash::hmget,              "The values of fields.";
    "HDEL",         -3, WRITE | FAST,                                  ONE,        "hash",         hash::hdel,               "Removes fields; the number removed.";
    "HLEN",         2,  RF,                                            ONE,        "hash",         hash::hlen,               "The number of fields.";
    "HEXISTS",      3,  RF,                                            ONE,        "hash",         hash::hexists,            "Whether a field exists.";
    "HSTRLEN",      3,  RF,                                            ONE,        "hash",         hash::hstrlen,            "The length of a field's value.";
    "HGETALL",      2,  R,                                             ONE,        "hash",         hash::hgetall,            "Every field and value.";
    "HKEYS",        2,  R,                                             ONE,        "hash",         hash::hkeys,              "Every field.";
    "HVALS",        2,  R,                                             ONE,        "hash",         hash::hvals,              "Every value.";
    "HINCRBY",      4,  WF,                                            ONE,        "hash",         hash::hincrby,            "Adds an integer to a field.";
    "HINCRBYFLOAT", 4,  WF,                                            ONE,        "hash",         hash::hincrbyfloat,       "Adds a float to a field.";
    "HRANDFIELD",   -2, R,                                             ONE,        "hash",         hash::hrandfield,         "Random fields.";
    "HSCAN",        -3, R,                                             ONE,        "hash",         hash::hscan,              "Fields after a cursor.";
    "SADD",         -3, WF,                                            ONE,        "set",          set::sadd,                "Adds members; the number added.";
    "SREM",         -3, WRITE | FAST,                                  ONE,        "set",          set::srem,                "Removes members; the number removed.";
    "SCARD",        2,  RF,                                            ONE,        "set",          set::scard,               "The number of members.";
    "SISMEMBER",    3,  RF,                                            ONE,        "set",          set::sismember,           "Whether a member is in the set.";
    "SMISMEMBER",   -3, RF,                                            ONE,        "set",          set::smismember,          "Whether each member is in the set.";
    "SMEMBERS",     2,  R,                                             ONE,        "set",          set::smembers,            "Every member.";
    "SRANDMEMBER",  -2, R,                                             ONE,        "set",          set::srandmember,         "Random members.";
    "SPOP",         -2, WRITE | FAST,                                  ONE,        "set",          set::spop,                "Removes and answers random members.";
    "SMOVE",        4,  WF,                                            (1, 2, 1),  "set",          set::smove,               "Moves a member between sets.";
    "SINTER",       -2, R,                                             ALL,        "set",          set::sinter,              "The intersection of sets.";
    "SUNION",       -2, R,                                             ALL,        "set",          set::sunion,              "The union of sets.";
    "SDIFF",        -2, R,                                             ALL,        "set",          set::sdiff,               "The difference of sets.";
    "SINTERSTORE",  -3, W,                                             ALL,        "set",          set::sinterstore,         "Stores the intersection of sets.";
    "SUNIONSTORE",  -3, W,                                             ALL,        "set",          set::sunionstore,         "Stores the union of sets.";
    "SDIFFSTORE",   -3, W,                                             ALL,        "set",          set::sdiffstore,          "Stores the difference of sets.";
    "SINTERCARD",   -3, R,                                             (2, 2, 1),  "set",          set::sintercard,          "The size of the intersection of sets.";
    "SSCAN",        -3, R,                                             ONE,        "set",          set::sscan,               "Members after a cursor.";
};

/// Slots of the name index: a power of two, at least four times the table.
const SLOTS: usize = 1024;
/// The longest command name (GEORADIUSBYMEMBER_RO).
const MAX_NAME: usize = 20;

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
    if name.len() > MAX_NAME {
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
        assert!(
            crate::resp::subcommands::names(table()).len() <= crate::resp::cmdstats::MAX_COMMANDS
        );
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
        assert!(table.iter().all(|s| s.name.len() <= MAX_NAME));
        assert!(find(b"georadiusbymember_ro").is_some());
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
