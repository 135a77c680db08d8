//! The RESP command table: every command this server answers, with Redis's arity (a
//! positive number: exactly that many arguments, the name included; negative: at least
//! that many), flags, key positions and a one-line summary. It answers COMMAND COUNT, INFO,
//! DOCS and LIST, and checks commands queued inside MULTI (an unknown command or a wrong
//! argument count aborts the transaction, as in Redis).

/// One command.
#[derive(Debug)]
pub struct Spec {
    /// The name, upper case.
    pub name: &'static str,
    /// Redis's arity.
    pub arity: i32,
    /// Flags as COMMAND INFO names them (`write`, `readonly`, `denyoom`, `fast`, ...), plus
    /// `no_multi` for the commands accelkv does not run inside a transaction.
    pub flags: &'static [&'static str],
    /// First key argument (0: none), last (-1: the last argument), step between keys.
    pub keys: (i32, i32, i32),
    /// Command group (COMMAND DOCS).
    pub group: &'static str,
    /// What it does (COMMAND DOCS).
    pub summary: &'static str,
}

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "denyoom", "fast"];
const DEL: &[&str] = &["write"];
const R: &[&str] = &["readonly"];
const RF: &[&str] = &["readonly", "fast"];
const FAST: &[&str] = &["fast"];
const CONN: &[&str] = &["noscript", "loading", "stale", "fast"];
const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const TX: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
/// Reads that do not go through a transaction's own view (they walk the keyspace or read
/// through the engine): refused inside MULTI.
const SCANS: &[&str] = &["readonly", "no_multi"];

const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
    group: &'static str,
    summary: &'static str,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        group,
        summary,
    }
}

const NONE: (i32, i32, i32) = (0, 0, 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);

/// Every command, in the order docs/PROTOCOL.md lists them.
pub static TABLE: &[Spec] = &[
    spec(
        "AUTH",
        -2,
        CONN,
        NONE,
        "connection",
        "Authenticates the connection.",
    ),
    spec(
        "HELLO",
        -1,
        CONN,
        NONE,
        "connection",
        "Handshakes: protocol version, authentication, name.",
    ),
    spec(
        "QUIT",
        -1,
        CONN,
        NONE,
        "connection",
        "Closes the connection.",
    ),
    spec(
        "RESET",
        1,
        CONN,
        NONE,
        "connection",
        "Resets the connection's state.",
    ),
    spec(
        "PING",
        -1,
        FAST,
        NONE,
        "connection",
        "Answers PONG, or the argument.",
    ),
    spec("ECHO", 2, FAST, NONE, "connection", "Answers the argument."),
    spec(
        "SELECT",
        2,
        CONN,
        NONE,
        "connection",
        "Selects database 0 (the only one).",
    ),
    spec(
        "READONLY",
        1,
        CONN,
        NONE,
        "cluster",
        "Accepted for cluster-aware clients.",
    ),
    spec(
        "READWRITE",
        1,
        CONN,
        NONE,
        "cluster",
        "Accepted for cluster-aware clients.",
    ),
    spec(
        "CLIENT",
        -2,
        CONN,
        NONE,
        "connection",
        "SETNAME, GETNAME, ID, SETINFO, INFO, LIST, KILL, NO-EVICT, TRACKING off.",
    ),
    spec(
        "COMMAND",
        -1,
        ADMIN,
        NONE,
        "server",
        "COUNT, INFO, DOCS, LIST of this table.",
    ),
    spec(
        "CONFIG",
        -2,
        ADMIN,
        NONE,
        "server",
        "GET and SET of run-time settings.",
    ),
    spec(
        "INFO",
        -1,
        ADMIN,
        NONE,
        "server",
        "Server information and statistics.",
    ),
    spec("DBSIZE", 1, RF, NONE, "server", "Number of keys."),
    spec("TIME", 1, FAST, NONE, "server", "The server's clock."),
    spec(
        "CLUSTER",
        -2,
        CONN,
        NONE,
        "cluster",
        "Cluster mode: the range map (RANGES), its state (INFO), this node's id (MYID).",
    ),
    spec(
        "WAIT",
        3,
        FAST,
        NONE,
        "generic",
        "Answers 0: there are no replicas.",
    ),
    spec(
        "FLUSHALL",
        -1,
        &["write", "no_multi"],
        NONE,
        "server",
        "Removes every key.",
    ),
    spec(
        "FLUSHDB",
        -1,
        &["write", "no_multi"],
        NONE,
        "server",
        "Removes every key.",
    ),
    spec(
        "MULTI",
        1,
        TX,
        NONE,
        "transactions",
        "Starts a transaction.",
    ),
    spec(
        "EXEC",
        1,
        TX,
        NONE,
        "transactions",
        "Runs the queued commands atomically.",
    ),
    spec(
        "DISCARD",
        1,
        TX,
        NONE,
        "transactions",
        "Drops the queued commands.",
    ),
    spec(
        "WATCH",
        -2,
        TX,
        ALL,
        "transactions",
        "EXEC fails if one of these keys changes first.",
    ),
    spec(
        "UNWATCH",
        1,
        TX,
        NONE,
        "transactions",
        "Forgets the watched keys.",
    ),
    spec("GET", 2, RF, ONE, "string", "The value of a key."),
    spec("MGET", -2, RF, ALL, "string", "The values of keys."),
    spec(
        "SET",
        -3,
        W,
        ONE,
        "string",
        "Sets a value (NX, XX, GET; EX, PX, EXAT, PXAT, KEEPTTL).",
    ),
    spec(
        "SETEX",
        4,
        W,
        ONE,
        "string",
        "Sets a value that expires after seconds.",
    ),
    spec(
        "PSETEX",
        4,
        W,
        ONE,
        "string",
        "Sets a value that expires after milliseconds.",
    ),
    spec(
        "GETEX",
        -2,
        &["write", "fast"],
        ONE,
        "string",
        "The value of a key; changes its expiry (EX, PX, EXAT, PXAT, PERSIST).",
    ),
    spec(
        "SETNX",
        3,
        WF,
        ONE,
        "string",
        "Sets a value if the key is absent.",
    ),
    spec(
        "GETSET",
        3,
        WF,
        ONE,
        "string",
        "Sets a value, answering the old one.",
    ),
    spec(
        "MSET",
        -3,
        W,
        (1, -1, 2),
        "string",
        "Sets several values atomically.",
    ),
    spec(
        "MSETNX",
        -3,
        W,
        (1, -1, 2),
        "string",
        "Sets several values if all keys are absent.",
    ),
    spec("DEL", -2, DEL, ALL, "generic", "Removes keys."),
    spec(
        "EXPIRE",
        -3,
        &["write", "fast"],
        ONE,
        "generic",
        "Sets a key's expiry in seconds (NX, XX, GT, LT).",
    ),
    spec(
        "PEXPIRE",
        -3,
        &["write", "fast"],
        ONE,
        "generic",
        "Sets a key's expiry in milliseconds (NX, XX, GT, LT).",
    ),
    spec(
        "EXPIREAT",
        -3,
        &["write", "fast"],
        ONE,
        "generic",
        "Sets a key's expiry to a Unix time in seconds (NX, XX, GT, LT).",
    ),
    spec(
        "PEXPIREAT",
        -3,
        &["write", "fast"],
        ONE,
        "generic",
        "Sets a key's expiry to a Unix time in milliseconds (NX, XX, GT, LT).",
    ),
    spec(
        "PERSIST",
        2,
        &["write", "fast"],
        ONE,
        "generic",
        "Removes a key's expiry.",
    ),
    spec(
        "TTL",
        2,
        RF,
        ONE,
        "generic",
        "Seconds until a key expires (-1: never, -2: absent).",
    ),
    spec(
        "PTTL",
        2,
        RF,
        ONE,
        "generic",
        "Milliseconds until a key expires (-1: never, -2: absent).",
    ),
    spec(
        "EXPIRETIME",
        2,
        RF,
        ONE,
        "generic",
        "The Unix time in seconds a key expires at (-1: never, -2: absent).",
    ),
    spec(
        "PEXPIRETIME",
        2,
        RF,
        ONE,
        "generic",
        "The Unix time in milliseconds a key expires at (-1: never, -2: absent).",
    ),
    spec(
        "UNLINK",
        -2,
        &["write", "fast"],
        ALL,
        "generic",
        "Removes keys.",
    ),
    spec(
        "GETDEL",
        2,
        &["write", "fast"],
        ONE,
        "string",
        "Removes a key, answering its value.",
    ),
    spec("APPEND", 3, WF, ONE, "string", "Appends to a value."),
    spec(
        "SETRANGE",
        4,
        W,
        ONE,
        "string",
        "Overwrites part of a value.",
    ),
    spec("GETRANGE", 4, R, ONE, "string", "Part of a value."),
    spec(
        "SUBSTR",
        4,
        R,
        ONE,
        "string",
        "Part of a value (old name of GETRANGE).",
    ),
    spec("INCR", 2, WF, ONE, "string", "Adds 1 to an integer value."),
    spec(
        "DECR",
        2,
        WF,
        ONE,
        "string",
        "Subtracts 1 from an integer value.",
    ),
    spec("INCRBY", 3, WF, ONE, "string", "Adds to an integer value."),
    spec(
        "DECRBY",
        3,
        WF,
        ONE,
        "string",
        "Subtracts from an integer value.",
    ),
    spec(
        "INCRBYFLOAT",
        3,
        WF,
        ONE,
        "string",
        "Adds to a floating-point value.",
    ),
    spec("STRLEN", 2, RF, ONE, "string", "Length of a value."),
    spec(
        "EXISTS",
        -2,
        RF,
        ALL,
        "generic",
        "How many of the keys exist.",
    ),
    spec(
        "TYPE",
        2,
        RF,
        ONE,
        "generic",
        "The type of a key's value (string or none).",
    ),
    spec(
        "RENAME",
        3,
        &["write"],
        (1, 2, 1),
        "generic",
        "Renames a key atomically.",
    ),
    spec(
        "RENAMENX",
        3,
        &["write", "fast"],
        (1, 2, 1),
        "generic",
        "Renames a key if the new name is free.",
    ),
    spec(
        "SCAN",
        -2,
        SCANS,
        NONE,
        "generic",
        "Walks the keys in order from a cursor.",
    ),
    spec(
        "KEYS",
        2,
        SCANS,
        NONE,
        "generic",
        "Keys matching a pattern.",
    ),
    spec("RANDOMKEY", 1, SCANS, NONE, "generic", "A random key."),
    spec(
        "RANGE",
        -3,
        SCANS,
        NONE,
        "accelkv",
        "Items with keys in [from, to), in order.",
    ),
    spec(
        "FLOOR",
        -3,
        SCANS,
        NONE,
        "accelkv",
        "Items from the largest key <= from, in order.",
    ),
    spec("CAS", 4, WF, ONE, "accelkv", "Compare-and-swap of a value."),
    spec(
        "FETCHADD",
        -3,
        WF,
        ONE,
        "accelkv",
        "Fetch-and-add of an integer element.",
    ),
    spec(
        "VECTOR",
        -6,
        W,
        ONE,
        "accelkv",
        "A KV-Direct vector operation on a value.",
    ),
];

/// The command named `name` (any case).
pub fn find(name: &[u8]) -> Option<&'static Spec> {
    TABLE
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

impl Spec {
    /// Whether `argc` arguments (the name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    /// Whether the command has `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_upper_case_and_found_in_any_case() {
        for (i, s) in TABLE.iter().enumerate() {
            assert_eq!(s.name, s.name.to_ascii_uppercase());
            assert!(TABLE[..i].iter().all(|t| t.name != s.name), "{}", s.name);
            assert!(std::ptr::eq(
                find(s.name.to_lowercase().as_bytes()).unwrap(),
                s
            ));
        }
        assert!(find(b"NOPE").is_none());
    }

    #[test]
    fn arity_follows_redis() {
        let get = find(b"get").unwrap();
        assert!(get.arity_ok(2) && !get.arity_ok(1) && !get.arity_ok(3));
        let mget = find(b"MGET").unwrap();
        assert!(mget.arity_ok(2) && mget.arity_ok(9) && !mget.arity_ok(1));
    }
}
