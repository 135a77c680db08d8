//! ACL categories (`+@read`, `-@dangerous`, ACL CAT, COMMAND INFO's seventh field), as
//! Redis 7 gives them. A command's categories follow from its table row: its group (the
//! data type, `keyspace` for generic commands), its flags (`write`, `read`, `admin` and
//! `dangerous`, `fast` or `slow`), and the lists below for what the row does not say
//! (blocking commands, dangerous ones that are not administrative, a few exceptions, and
//! every subcommand's own). `tests/acl.rs` compares every command's categories with a
//! real redis-server's.

use crate::resp::call::flag::{ADMIN, FAST, READONLY, WRITE};
use crate::resp::call::Spec;

/// Redis's categories, in ACL CAT's order; a category's bit is `1 << index`.
pub const NAMES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// A category's bit, by name.
pub fn bit(name: &str) -> Option<u32> {
    NAMES.iter().position(|n| *n == name).map(|i| 1 << i)
}

fn b(name: &str) -> u32 {
    bit(name).unwrap_or(0)
}

/// Commands that block (Redis's `@blocking`).
const BLOCKING: &[&str] = &[
    "BLPOP",
    "BRPOP",
    "BRPOPLPUSH",
    "BLMOVE",
    "BLMPOP",
    "BZPOPMIN",
    "BZPOPMAX",
    "BZMPOP",
    "XREAD",
    "XREADGROUP",
    "WAIT",
    "WAITAOF",
];

/// Dangerous commands that are not administrative (those `COMMANDS` lists have their
/// categories there).
const DANGEROUS: &[&str] = &[
    "KEYS",
    "RESTORE",
    "MIGRATE",
    "SHUTDOWN",
    "MONITOR",
    "DEBUG",
    "SAVE",
    "BGSAVE",
    "BGREWRITEAOF",
];

/// Commands whose categories their row does not give (the containers' own are `slow`).
const COMMANDS: &[(&str, &str)] = &[
    ("CLUSTER", "slow"),
    ("COMMAND", "connection slow"),
    ("DBSIZE", "fast keyspace read"),
    ("EXEC", "slow transaction"),
    ("FLUSHALL", "dangerous keyspace slow write"),
    ("FLUSHDB", "dangerous keyspace slow write"),
    ("INFO", "dangerous slow"),
    ("LASTSAVE", "admin dangerous fast"),
    ("READONLY", "connection fast"),
    ("READWRITE", "connection fast"),
    ("ASKING", "connection fast"),
    ("ROLE", "admin dangerous fast"),
    ("REPLICAOF", "admin dangerous slow"),
    ("SLAVEOF", "admin dangerous slow"),
    ("SAVE", "admin dangerous slow"),
    ("BGSAVE", "admin dangerous slow"),
    ("SORT", "dangerous list set slow sortedset write"),
    ("SORT_RO", "dangerous list read set slow sortedset"),
    ("SWAPDB", "dangerous fast keyspace write"),
    ("WAIT", "connection slow"),
];

/// Every subcommand's categories, as Redis 7.2 gives them (a subcommand's differ from
/// its container's in ways no row says: CONFIG GET is administrative, CONFIG HELP not).
const SUBCOMMANDS: &[(&str, &str)] = &[
    ("acl|cat", "slow"),
    ("acl|deluser", "admin dangerous slow"),
    ("acl|dryrun", "admin dangerous slow"),
    ("acl|genpass", "slow"),
    ("acl|getuser", "admin dangerous slow"),
    ("acl|help", "slow"),
    ("acl|list", "admin dangerous slow"),
    ("acl|load", "admin dangerous slow"),
    ("acl|log", "admin dangerous slow"),
    ("acl|save", "admin dangerous slow"),
    ("acl|setuser", "admin dangerous slow"),
    ("acl|users", "admin dangerous slow"),
    ("acl|whoami", "slow"),
    ("client|caching", "connection slow"),
    ("client|getname", "connection slow"),
    ("client|getredir", "connection slow"),
    ("client|help", "connection slow"),
    ("client|id", "connection slow"),
    ("client|info", "connection slow"),
    ("client|kill", "admin connection dangerous slow"),
    ("client|list", "admin connection dangerous slow"),
    ("client|no-evict", "admin connection dangerous slow"),
    ("client|no-touch", "connection slow"),
    ("client|pause", "admin connection dangerous slow"),
    ("client|reply", "connection slow"),
    ("client|setinfo", "connection slow"),
    ("client|setname", "connection slow"),
    ("client|tracking", "connection slow"),
    ("client|trackinginfo", "connection slow"),
    ("client|unblock", "admin connection dangerous slow"),
    ("client|unpause", "admin connection dangerous slow"),
    ("command|count", "connection slow"),
    ("command|docs", "connection slow"),
    ("command|getkeys", "connection slow"),
    ("command|help", "connection slow"),
    ("command|info", "connection slow"),
    ("command|list", "connection slow"),
    ("config|get", "admin dangerous slow"),
    ("config|help", "slow"),
    ("config|resetstat", "admin dangerous slow"),
    ("config|rewrite", "admin dangerous slow"),
    ("config|set", "admin dangerous slow"),
    ("function|delete", "scripting slow write"),
    ("function|dump", "scripting slow"),
    ("function|flush", "scripting slow write"),
    ("function|help", "scripting slow"),
    ("function|kill", "scripting slow"),
    ("function|list", "scripting slow"),
    ("function|load", "scripting slow write"),
    ("function|restore", "scripting slow write"),
    ("function|stats", "scripting slow"),
    ("latency|doctor", "admin dangerous slow"),
    ("latency|graph", "admin dangerous slow"),
    ("latency|help", "slow"),
    ("latency|histogram", "admin dangerous slow"),
    ("latency|history", "admin dangerous slow"),
    ("latency|latest", "admin dangerous slow"),
    ("latency|reset", "admin dangerous slow"),
    ("memory|doctor", "slow"),
    ("memory|help", "slow"),
    ("memory|malloc-stats", "slow"),
    ("memory|purge", "slow"),
    ("memory|stats", "slow"),
    ("memory|usage", "read slow"),
    ("object|encoding", "keyspace read slow"),
    ("object|freq", "keyspace read slow"),
    ("object|help", "keyspace slow"),
    ("object|idletime", "keyspace read slow"),
    ("object|refcount", "keyspace read slow"),
    ("pubsub|channels", "pubsub slow"),
    ("pubsub|help", "slow"),
    ("pubsub|numpat", "pubsub slow"),
    ("pubsub|numsub", "pubsub slow"),
    ("pubsub|shardchannels", "pubsub slow"),
    ("pubsub|shardnumsub", "pubsub slow"),
    ("script|debug", "scripting slow"),
    ("script|exists", "scripting slow"),
    ("script|flush", "scripting slow"),
    ("script|help", "scripting slow"),
    ("script|kill", "scripting slow"),
    ("script|load", "scripting slow"),
    ("slowlog|get", "admin dangerous slow"),
    ("slowlog|help", "slow"),
    ("slowlog|len", "admin dangerous slow"),
    ("slowlog|reset", "admin dangerous slow"),
    ("xgroup|create", "slow stream write"),
    ("xgroup|createconsumer", "slow stream write"),
    ("xgroup|delconsumer", "slow stream write"),
    ("xgroup|destroy", "slow stream write"),
    ("xgroup|help", "slow stream"),
    ("xgroup|setid", "slow stream write"),
    ("xinfo|consumers", "read slow stream"),
    ("xinfo|groups", "read slow stream"),
    ("xinfo|help", "slow stream"),
    ("xinfo|stream", "read slow stream"),
];

fn parse(cats: &str) -> u32 {
    cats.split(' ').map(b).fold(0, |a, c| a | c)
}

/// The categories of `spec` (a `container` of subcommands or not), or of its subcommand
/// `sub` (upper case).
pub fn of(spec: &Spec, sub: Option<&str>, container: bool) -> u32 {
    if let Some(sub) = sub {
        let full = format!("{}|{}", spec.name, sub).to_lowercase();
        if let Some((_, cats)) = SUBCOMMANDS.iter().find(|(n, _)| *n == full) {
            return parse(cats);
        }
    }
    if let Some((_, cats)) = COMMANDS.iter().find(|(n, _)| *n == spec.name) {
        return parse(cats);
    }
    if container {
        return b("slow");
    }
    let mut c = group(spec.group);
    // A script's commands are what read or write, not the script.
    if !spec.runs_script() {
        for (f, name) in [(WRITE, "write"), (READONLY, "read")] {
            if spec.flags & f != 0 {
                c |= b(name);
            }
        }
    }
    if spec.flags & ADMIN != 0 {
        c |= b("admin") | b("dangerous");
    }
    if DANGEROUS.contains(&spec.name) {
        c |= b("dangerous");
    }
    c |= if spec.flags & FAST != 0 {
        b("fast")
    } else {
        b("slow")
    };
    if BLOCKING.contains(&spec.name) {
        c |= b("blocking");
    }
    c
}

/// The category of a table group.
fn group(g: &str) -> u32 {
    b(match g {
        "generic" => "keyspace",
        "sorted_set" => "sortedset",
        "transactions" => "transaction",
        "string" | "list" | "set" | "hash" | "bitmap" | "hyperloglog" | "geo" | "stream"
        | "pubsub" | "scripting" | "connection" => g,
        _ => return 0,
    })
}

/// The names of categories `bits`, in ACL CAT's order.
pub fn names(bits: u32) -> impl Iterator<Item = &'static str> + Clone {
    NAMES
        .iter()
        .enumerate()
        .filter(move |(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| *n)
}
