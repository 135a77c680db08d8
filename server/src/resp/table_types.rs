//! The command table's rows for lists and sorted sets (the base rows are in `table.rs`;
//! `table::table()` joins them), one command a line: name, Redis's arity, flags, key
//! positions, group, handler and summary.

use crate::resp::call::flag::*;
use crate::resp::call::row::{rows, ALL, ONE, R, RF, W, WF};
use crate::resp::call::Spec;

/// ZUNIONSTORE and its kind: the destination, then keys after `numkeys`.
const DST: (i32, i32, i32) = (1, 1, 1);
use crate::resp::commands::script::{eval, functions};
use crate::resp::commands::types::{list, list_move, zset, zset_ops, zset_range};

/// Key positions of LMPOP and BLMPOP are after `numkeys` (COMMAND's movablekeys).
const NUMKEYS: (i32, i32, i32) = (0, 0, 0);
/// BLPOP and BRPOP: every argument but the last (the timeout).
const BUT_LAST: (i32, i32, i32) = (1, -2, 1);
const TWO: (i32, i32, i32) = (1, 2, 1);

pub(crate) static LISTS: &[Spec] = rows! {
    "LPUSH",      -3, WF,               ONE,      "list", list::lpush,           "Pushes elements at the head; the length.";
    "RPUSH",      -3, WF,               ONE,      "list", list::rpush,           "Pushes elements at the tail; the length.";
    "LPUSHX",     -3, WF,               ONE,      "list", list::lpushx,          "Pushes at the head of an existing list.";
    "RPUSHX",     -3, WF,               ONE,      "list", list::rpushx,          "Pushes at the tail of an existing list.";
    "LPOP",       -2, WRITE | FAST,     ONE,      "list", list::lpop,            "Removes and answers the first elements.";
    "RPOP",       -2, WRITE | FAST,     ONE,      "list", list::rpop,            "Removes and answers the last elements.";
    "LLEN",       2,  RF,               ONE,      "list", list::llen,            "The number of elements.";
    "LRANGE",     4,  R,                ONE,      "list", list::lrange,          "The elements in a range of indices.";
    "LINDEX",     3,  R,                ONE,      "list", list::lindex,          "The element at an index.";
    "LSET",       4,  W,                ONE,      "list", list::lset,            "Replaces the element at an index.";
    "LINSERT",    5,  W,                ONE,      "list", list::linsert,         "Inserts before or after a pivot element.";
    "LREM",       4,  WRITE,            ONE,      "list", list::lrem,            "Removes elements equal to one.";
    "LTRIM",      4,  WRITE,            ONE,      "list", list::ltrim,           "Keeps only a range of indices.";
    "LPOS",       -3, R,                ONE,      "list", list::lpos,            "The indices of matching elements.";
    "LMOVE",      5,  W,                TWO,      "list", list_move::lmove,      "Moves an element between lists.";
    "RPOPLPUSH",  3,  W,                TWO,      "list", list_move::rpoplpush,  "Moves the last element to another list's head.";
    "LMPOP",      -4, WRITE,            NUMKEYS,  "list", list_move::lmpop,      "Pops from the first non-empty list.";
    "BLPOP",      -3, WRITE | NOSCRIPT, BUT_LAST, "list", list_move::blpop,      "LPOP of the first non-empty list, waiting for one.";
    "BRPOP",      -3, WRITE | NOSCRIPT, BUT_LAST, "list", list_move::brpop,      "RPOP of the first non-empty list, waiting for one.";
    "BLMOVE",     6,  W | NOSCRIPT,     TWO,      "list", list_move::blmove,     "LMOVE, waiting for an element.";
    "BRPOPLPUSH", 4,  W | NOSCRIPT,     TWO,      "list", list_move::brpoplpush, "RPOPLPUSH, waiting for an element.";
    "BLMPOP",     -5, WRITE | NOSCRIPT, NUMKEYS,  "list", list_move::blmpop,     "LMPOP, waiting for an element.";
};

pub(crate) static ZSETS: &[Spec] = rows! {
    "ZADD",             -4, WF,                      ONE,      "sorted_set", zset::zadd,                   "Adds members with scores, or updates their scores.";
    "ZINCRBY",          4,  WF,                      ONE,      "sorted_set", zset::zincrby,                "Adds to a member's score; the new score.";
    "ZREM",             -3, WRITE | FAST,            ONE,      "sorted_set", zset::zrem,                   "Removes members; the number removed.";
    "ZSCORE",           3,  RF,                      ONE,      "sorted_set", zset::zscore,                 "A member's score.";
    "ZMSCORE",          -3, RF,                      ONE,      "sorted_set", zset::zmscore,                "The scores of several members.";
    "ZCARD",            2,  RF,                      ONE,      "sorted_set", zset::zcard,                  "The number of members.";
    "ZRANK",            -3, RF,                      ONE,      "sorted_set", zset::zrank,                  "A member's index by ascending score.";
    "ZREVRANK",         -3, RF,                      ONE,      "sorted_set", zset::zrevrank,               "A member's index by descending score.";
    "ZPOPMIN",          -2, WRITE | FAST,            ONE,      "sorted_set", zset::zpopmin,                "Removes and answers the lowest-scored members.";
    "ZPOPMAX",          -2, WRITE | FAST,            ONE,      "sorted_set", zset::zpopmax,                "Removes and answers the highest-scored members.";
    "ZMPOP",            -4, WRITE,                   NUMKEYS,  "sorted_set", zset::zmpop,                  "Pops from the first non-empty sorted set.";
    "BZPOPMIN",         -3, WRITE | NOSCRIPT | FAST, BUT_LAST, "sorted_set", zset::bzpopmin,               "ZPOPMIN of the first non-empty sorted set, waiting for one.";
    "BZPOPMAX",         -3, WRITE | NOSCRIPT | FAST, BUT_LAST, "sorted_set", zset::bzpopmax,               "ZPOPMAX of the first non-empty sorted set, waiting for one.";
    "BZMPOP",           -5, WRITE | NOSCRIPT,        NUMKEYS,  "sorted_set", zset::bzmpop,                 "ZMPOP, waiting for a member.";
    "ZRANGE",           -4, R,                       ONE,      "sorted_set", zset_range::zrange,           "Members in a range of ranks, scores or names.";
    "ZREVRANGE",        -4, R,                       ONE,      "sorted_set", zset_range::zrevrange,        "Members in a range of ranks, highest first.";
    "ZRANGEBYSCORE",    -4, R,                       ONE,      "sorted_set", zset_range::zrangebyscore,    "Members in a range of scores.";
    "ZREVRANGEBYSCORE", -4, R,                       ONE,      "sorted_set", zset_range::zrevrangebyscore, "Members in a range of scores, highest first.";
    "ZRANGEBYLEX",      -4, R,                       ONE,      "sorted_set", zset_range::zrangebylex,      "Members in a range of names.";
    "ZREVRANGEBYLEX",   -4, R,                       ONE,      "sorted_set", zset_range::zrevrangebylex,   "Members in a range of names, last first.";
    "ZRANGESTORE",      -5, W,                       TWO,      "sorted_set", zset_range::zrangestore,      "Stores a range of a sorted set.";
    "ZCOUNT",           4,  RF,                      ONE,      "sorted_set", zset_range::zcount,           "The number of members in a range of scores.";
    "ZLEXCOUNT",        4,  RF,                      ONE,      "sorted_set", zset_range::zlexcount,        "The number of members in a range of names.";
    "ZREMRANGEBYRANK",  4,  WRITE,                   ONE,      "sorted_set", zset_range::zremrangebyrank,  "Removes a range of ranks.";
    "ZREMRANGEBYSCORE", 4,  WRITE,                   ONE,      "sorted_set", zset_range::zremrangebyscore, "Removes a range of scores.";
    "ZREMRANGEBYLEX",   4,  WRITE,                   ONE,      "sorted_set", zset_range::zremrangebylex,   "Removes a range of names.";
    "ZUNION",           -3, R,                       NUMKEYS,  "sorted_set", zset_ops::zunion,             "The union of sorted sets.";
    "ZINTER",           -3, R,                       NUMKEYS,  "sorted_set", zset_ops::zinter,             "The intersection of sorted sets.";
    "ZDIFF",            -3, R,                       NUMKEYS,  "sorted_set", zset_ops::zdiff,              "The difference of sorted sets.";
    "ZUNIONSTORE",      -4, W,                       DST,      "sorted_set", zset_ops::zunionstore,        "Stores the union of sorted sets.";
    "ZINTERSTORE",      -4, W,                       DST,      "sorted_set", zset_ops::zinterstore,        "Stores the intersection of sorted sets.";
    "ZDIFFSTORE",       -4, W,                       DST,      "sorted_set", zset_ops::zdiffstore,         "Stores the difference of sorted sets.";
    "ZINTERCARD",       -3, R,                       NUMKEYS,  "sorted_set", zset_ops::zintercard,         "The size of the intersection of sorted sets.";
    "ZRANDMEMBER",      -2, R,                       ONE,      "sorted_set", zset_ops::zrandmember,        "Random members.";
    "ZSCAN",            -3, R,                       ONE,      "sorted_set", zset_ops::zscan,              "Members after a cursor.";
};

/// EVAL and its kind: the keys follow `numkeys` (movable).
pub(crate) static SCRIPTING: &[Spec] = rows! {
    "EVAL",       -3, NOSCRIPT | STALE,            NUMKEYS,   "scripting", eval::eval,       "Runs a Lua script atomically.";
    "EVALSHA",    -3, NOSCRIPT | STALE,            NUMKEYS,   "scripting", eval::evalsha,    "Runs a loaded Lua script by its SHA-1.";
    "EVAL_RO",    -3, NOSCRIPT | STALE | READONLY, NUMKEYS,   "scripting", eval::eval_ro,    "Runs a read-only Lua script.";
    "EVALSHA_RO", -3, NOSCRIPT | STALE | READONLY, NUMKEYS,   "scripting", eval::evalsha_ro, "Runs a loaded read-only Lua script.";
    "FUNCTION",   -2, NOSCRIPT,                    (0, 0, 0), "scripting", functions::function, "LOAD, LIST, DELETE, FLUSH, DUMP, RESTORE, STATS, KILL of function libraries.";
    "FCALL",      -3, NOSCRIPT | STALE,            NUMKEYS,   "scripting", functions::fcall,    "Runs a function of a loaded library.";
    "FCALL_RO",   -3, NOSCRIPT | STALE | READONLY, NUMKEYS,   "scripting", functions::fcall_ro, "Runs a read-only function.";
    "SCRIPT",     -2, NOSCRIPT,                    NUMKEYS,   "scripting", eval::script,     "LOAD, EXISTS, FLUSH or KILL scripts.";
};

/// Databases beyond SELECT (db.rs).
pub(crate) static DATABASES: &[Spec] = rows! {
    "MOVE",   3, WRITE | FAST, ONE,       "generic", crate::resp::commands::rename::move_cmd, "Moves a key to another database.";
    "SWAPDB", 3, WRITE | FAST, (0, 0, 0), "server",  crate::resp::commands::swapdb::swapdb,   "Swaps two databases' keys (O(1): a table of database numbers changes, no key moves).";
};

/// Testing hooks.
pub(crate) static DEBUGGING: &[Spec] = rows! {
    "LATENCY", -2, ADMIN | NOSCRIPT | LOADING | STALE, (0, 0, 0), "server", crate::resp::commands::latency::latency, "LATEST, HISTORY, RESET, GRAPH, DOCTOR, HISTOGRAM: latency events and per-command histograms.";
    "SLOWLOG", -2, ADMIN | LOADING | STALE, (0, 0, 0), "server", crate::resp::commands::slowlog::slowlog, "GET, LEN, RESET: the commands slower than slowlog-log-slower-than.";
    "MONITOR", 1, ADMIN | NOSCRIPT | LOADING | STALE, (0, 0, 0), "server", crate::resp::monitor::monitor, "Streams every command the server runs.";
    "LOLWUT", -1, READONLY | FAST, (0, 0, 0), "server", crate::resp::commands::lolwut::lolwut, "Georg Nees's Schotter, drawn in Braille, and the server's version.";
    "DEBUG", -2, ADMIN | NOSCRIPT | LOADING | STALE, (0, 0, 0), "server", crate::resp::commands::debug::debug, "SLEEP, SET-ACTIVE-EXPIRE, POPULATE, OBJECT.";
};

/// SORT (keys: the source, and STORE's destination; db.rs).
pub(crate) static SORTING: &[Spec] = rows! {
    "SORT",    -2, W, ONE, "generic", crate::resp::commands::types::sort::sort,    "Sorts a list, set or sorted set.";
    "SORT_RO", -2, R, ONE, "generic", crate::resp::commands::types::sort::sort_ro, "SORT without STORE.";
};

/// String commands added with the collection types.
pub(crate) static STRINGS_MORE: &[Spec] = rows! {
    "BITFIELD",    -2, W,  ONE,       "bitmap", crate::resp::commands::bitfield::bitfield,    "Reads, sets and increments integers at bit offsets.";
    "BITFIELD_RO", -2, RF, ONE,       "bitmap", crate::resp::commands::bitfield::bitfield_ro, "BITFIELD with GET only.";
    "LCS",         -3, R,  (1, 2, 1), "string", crate::resp::commands::lcs::lcs_command,      "The longest common subsequence of two strings.";
};

/// Streams (`types/stream.rs`, `types/stream_read.rs`); XREAD's keys follow STREAMS (db.rs).
pub(crate) static STREAMS: &[Spec] = rows! {
    "XADD",      -5, WF,           ONE,     "stream", crate::resp::commands::types::stream::xadd,           "Appends an entry; its id.";
    "XTRIM",     -4, WRITE,        ONE,     "stream", crate::resp::commands::types::stream::xtrim,          "Removes the oldest entries by length or id.";
    "XDEL",      -3, WRITE | FAST, ONE,     "stream", crate::resp::commands::types::stream::xdel,           "Removes entries by id.";
    "XLEN",      2,  RF,           ONE,     "stream", crate::resp::commands::types::stream::xlen,           "The number of entries.";
    "XRANGE",    -4, R,            ONE,     "stream", crate::resp::commands::types::stream_read::xrange,    "Entries with ids in a range.";
    "XREVRANGE", -4, R,            ONE,     "stream", crate::resp::commands::types::stream_read::xrevrange, "Entries with ids in a range, newest first.";
    "XREAD",     -4, READONLY,     NUMKEYS, "stream", crate::resp::commands::types::stream_read::xread,     "Entries after an id in each stream, waiting for one with BLOCK.";
    "XREADGROUP", -7, WRITE,       NUMKEYS, "stream", crate::resp::commands::types::stream_pel::xreadgroup, "Entries through a consumer group: new ones, or the consumer's pending history.";
    "XACK",       -4, WRITE | FAST, ONE,    "stream", crate::resp::commands::types::stream_pel::xack,       "Acknowledges pending entries: how many were pending.";
    "XPENDING",   -3, READONLY,    ONE,     "stream", crate::resp::commands::types::stream_pel::xpending,   "A group's pending entries: a summary, or a range with owners, idle times and counts.";
    "XCLAIM",     -6, WRITE | FAST, ONE,    "stream", crate::resp::commands::types::stream_claim::xclaim,   "Takes pending entries idle long enough for another consumer.";
    "XAUTOCLAIM", -6, WRITE | FAST, ONE,    "stream", crate::resp::commands::types::stream_claim::xautoclaim, "XCLAIM over the pending list from a cursor.";
    "XGROUP",     -2, WRITE,       (2, 2, 1), "stream", crate::resp::commands::types::stream_xgroup::xgroup, "CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER: manages consumer groups.";
    "XSETID",     -3, WRITE | DENYOOM | FAST, ONE, "stream", crate::resp::commands::types::stream_xgroup::xsetid, "Sets a stream's last id and counters.";
    "XINFO",      -2, READONLY,    (2, 2, 1), "stream", crate::resp::commands::types::stream_xgroup::xinfo,  "STREAM [FULL], GROUPS, CONSUMERS: what a stream and its groups hold.";
};

/// Pub/sub (`commands/pubsub.rs`): node-local in cluster mode (a message reaches the
/// subscribers of the node it was published on).
pub(crate) static PUBSUB: &[Spec] = rows! {
    "SUBSCRIBE",    -2, NOSCRIPT | LOADING | STALE | LOCAL,        (0, 0, 0), "pubsub", crate::resp::commands::pubsub::subscribe,    "Listens for messages on channels.";
    "PSUBSCRIBE",   -2, NOSCRIPT | LOADING | STALE | LOCAL,        (0, 0, 0), "pubsub", crate::resp::commands::pubsub::psubscribe,   "Listens for messages on channels matching patterns.";
    "SSUBSCRIBE",   -2, NOSCRIPT | LOADING | STALE | LOCAL,        (0, 0, 0), "pubsub", crate::resp::commands::pubsub::ssubscribe,   "Listens for messages on shard channels.";
    "UNSUBSCRIBE",  -1, NOSCRIPT | LOADING | STALE | LOCAL,        (0, 0, 0), "pubsub", crate::resp::commands::pubsub::unsubscribe,  "Stops listening on channels (none named: all).";
    "PUNSUBSCRIBE", -1, NOSCRIPT | LOADING | STALE | LOCAL,        (0, 0, 0), "pubsub", crate::resp::commands::pubsub::punsubscribe, "Stops listening on patterns (none named: all).";
    "SUNSUBSCRIBE", -1, NOSCRIPT | LOADING | STALE | LOCAL,        (0, 0, 0), "pubsub", crate::resp::commands::pubsub::sunsubscribe, "Stops listening on shard channels (none named: all).";
    "PUBLISH",       3, LOADING | STALE | FAST | LOCAL,            (0, 0, 0), "pubsub", crate::resp::commands::pubsub::publish,      "Sends a message to a channel's subscribers: how many got it.";
    "SPUBLISH",      3, LOADING | STALE | FAST | LOCAL,            (0, 0, 0), "pubsub", crate::resp::commands::pubsub::spublish,     "Sends a message to a shard channel's subscribers.";
    "PUBSUB",       -2, LOADING | STALE | LOCAL,                   (0, 0, 0), "pubsub", crate::resp::commands::pubsub::pubsub,       "CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB.";
};

/// HyperLogLog (`commands/hll.rs`): string values in Redis's HLL format.
pub(crate) static HYPERLOGLOG: &[Spec] = rows! {
    "PFADD",      -2, WF,              ONE,       "hyperloglog", crate::resp::commands::hll::pfadd,      "Adds elements to a HyperLogLog: 1 if it changed.";
    "PFCOUNT",    -2, READONLY,        ALL,       "hyperloglog", crate::resp::commands::hll::pfcount,    "The approximate number of distinct elements (of the union).";
    "PFMERGE",    -2, W,               ALL,       "hyperloglog", crate::resp::commands::hll::pfmerge,    "Merges HyperLogLogs into the first key.";
    "PFDEBUG",     3, W | ADMIN,       (2, 2, 1), "hyperloglog", crate::resp::commands::hll::pfdebug,    "GETREG, DECODE, ENCODING or TODENSE of a HyperLogLog.";
    "PFSELFTEST",  1, ADMIN,           (0, 0, 0), "hyperloglog", crate::resp::commands::hll::pfselftest, "Runs the HyperLogLog self test.";
};

/// Geo (`commands/geo/`): sorted sets whose scores are geohashes; GEORADIUS's STORE keys
/// are found by db.rs.
pub(crate) static GEO: &[Spec] = rows! {
    "GEOADD",               -5, W,  ONE,       "geo", crate::resp::commands::geo::geoadd,                      "Adds members at longitudes and latitudes.";
    "GEOPOS",               -2, R,  ONE,       "geo", crate::resp::commands::geo::geopos,                      "Members' longitudes and latitudes.";
    "GEODIST",              -4, R,  ONE,       "geo", crate::resp::commands::geo::geodist,                     "The distance between two members.";
    "GEOHASH",              -2, R,  ONE,       "geo", crate::resp::commands::geo::geohash,                     "Members' geohash strings.";
    "GEOSEARCH",            -7, R,  ONE,       "geo", crate::resp::commands::geo::search::geosearch,           "Members inside a circle or a box.";
    "GEOSEARCHSTORE",       -8, W,  (1, 2, 1), "geo", crate::resp::commands::geo::search::geosearchstore,      "GEOSEARCH's members stored as a sorted set.";
    "GEORADIUS",            -6, W,  ONE,       "geo", crate::resp::commands::geo::search::georadius,           "Members within a radius of a position (STORE: stored).";
    "GEORADIUS_RO",         -6, R,  ONE,       "geo", crate::resp::commands::geo::search::georadius_ro,        "GEORADIUS without STORE.";
    "GEORADIUSBYMEMBER",    -5, W,  ONE,       "geo", crate::resp::commands::geo::search::georadiusbymember,   "Members within a radius of a member (STORE: stored).";
    "GEORADIUSBYMEMBER_RO", -5, R,  ONE,       "geo", crate::resp::commands::geo::search::georadiusbymember_ro, "GEORADIUSBYMEMBER without STORE.";
};

/// DUMP and RESTORE (`commands/dump.rs`): Redis's serialization.
pub(crate) static SERIALIZING: &[Spec] = rows! {
    "DUMP",    2,  R, ONE, "generic", crate::resp::commands::dump::dump,    "A value in Redis's DUMP serialization.";
    "RESTORE", -4, W, ONE, "generic", crate::resp::commands::dump::restore, "Makes a key from a DUMP serialization.";
    "MIGRATE", -6, WRITE, (3, 3, 1), "generic", crate::resp::commands::migrate::migrate, "Moves keys to another Redis-protocol server (DUMP there as RESTORE).";
};
