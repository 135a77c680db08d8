//! The everyday RESP commands against the real server, with Redis's replies and errors:
//! strings (APPEND, GETRANGE, SETRANGE, GETDEL, INCRBYFLOAT), the keyspace (TYPE, UNLINK,
//! KEYS, RANDOMKEY, SCAN with MATCH/COUNT/TYPE), TIME, WAIT, COMMAND COUNT; every command of
//! `resp_commands()` is known; and SCAN under concurrent inserts and deletes returns every key
//! that exists throughout exactly once, and no key twice.

mod common;

use accelkv_proto::resp::Value;
use common::{bulk, err_starts, RespConn as Conn, Server};
use std::collections::{BTreeSet, HashSet};

#[test]
fn string_and_keyspace_commands_answer_as_redis() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    assert_eq!(c.str(&["APPEND", "s", "Hello"]), Value::Integer(5));
    assert_eq!(c.str(&["APPEND", "s", " World"]), Value::Integer(11));
    assert_eq!(c.str(&["GETRANGE", "s", "0", "3"]), bulk("Hell"));
    assert_eq!(c.str(&["GETRANGE", "s", "-3", "-1"]), bulk("rld"));
    assert_eq!(c.str(&["GETRANGE", "s", "0", "-1"]), bulk("Hello World"));
    assert_eq!(c.str(&["GETRANGE", "s", "10", "100"]), bulk("d"));
    assert_eq!(c.str(&["GETRANGE", "s", "5", "3"]), bulk(""));
    assert_eq!(c.str(&["GETRANGE", "nosuch", "0", "-1"]), bulk(""));
    assert_eq!(c.str(&["SETRANGE", "s", "6", "Redis"]), Value::Integer(11));
    assert_eq!(c.str(&["GET", "s"]), bulk("Hello Redis"));
    assert_eq!(c.str(&["SETRANGE", "pad", "3", "x"]), Value::Integer(4));
    assert_eq!(
        c.str(&["GET", "pad"]),
        Value::Bulk(Some(b"\0\0\0x".to_vec()))
    );
    assert!(err_starts(
        &c.str(&["SETRANGE", "s", "-1", "x"]),
        "ERR offset is out of range"
    ));
    assert_eq!(c.str(&["TYPE", "s"]), Value::Simple("string".into()));
    assert_eq!(c.str(&["TYPE", "nosuch"]), Value::Simple("none".into()));
    assert_eq!(c.str(&["GETDEL", "s"]), bulk("Hello Redis"));
    assert_eq!(c.str(&["GETDEL", "s"]), Value::Bulk(None));
    assert_eq!(c.str(&["SET", "f", "10.50"]), Value::Simple("OK".into()));
    assert_eq!(c.str(&["INCRBYFLOAT", "f", "0.1"]), bulk("10.6"));
    assert_eq!(c.str(&["INCRBYFLOAT", "f", "-5"]), bulk("5.6"));
    assert_eq!(c.str(&["INCRBYFLOAT", "g", "3"]), bulk("3"));
    assert!(err_starts(
        &c.str(&["INCRBYFLOAT", "f", "x"]),
        "ERR value is not a valid float"
    ));
    assert!(err_starts(
        &c.str(&["INCRBYFLOAT", "pad", "1"]),
        "ERR value is not a valid float"
    ));
    assert_eq!(c.str(&["UNLINK", "f", "g", "nosuch"]), Value::Integer(2));
    for k in ["user:1", "user:2", "user:10", "item:1"] {
        c.str(&["SET", k, "v"]);
    }
    let arr = |v: &[&str]| Value::Array(Some(v.iter().map(|s| bulk(s)).collect()));
    assert_eq!(c.str(&["KEYS", "user:?"]), arr(&["user:1", "user:2"]));
    assert_eq!(
        c.str(&["KEYS", "*:1*"]),
        arr(&["item:1", "user:1", "user:10"])
    );
    assert!(matches!(c.str(&["RANDOMKEY"]), Value::Bulk(Some(_))));
    match c.str(&["TIME"]) {
        Value::Array(Some(t)) => assert_eq!(t.len(), 2),
        other => panic!("TIME: {other:?}"),
    }
    assert_eq!(c.str(&["WAIT", "0", "0"]), Value::Integer(0));
    assert!(err_starts(
        &c.str(&["CLUSTER", "INFO"]),
        "ERR This instance has cluster support disabled"
    ));
    let count = accelkv_server::resp_commands().len() as i64;
    assert_eq!(c.str(&["COMMAND", "COUNT"]), Value::Integer(count));
    // SCAN: MATCH filters what a COUNT's worth of keys holds; TYPE other than string: none.
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let r = c.str(&["SCAN", &cursor, "MATCH", "user:*", "COUNT", "2"]);
        let Value::Array(Some(parts)) = r else {
            panic!("SCAN: {r:?}")
        };
        let (Value::Bulk(Some(next)), Value::Array(Some(keys))) = (&parts[0], &parts[1]) else {
            panic!("SCAN reply {parts:?}")
        };
        seen.extend(keys.iter().cloned());
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, vec![bulk("user:1"), bulk("user:10"), bulk("user:2")]);
    let r = c.str(&["SCAN", "0", "TYPE", "hash", "COUNT", "100"]);
    assert_eq!(
        r,
        Value::Array(Some(vec![bulk("0"), Value::Array(Some(vec![]))]))
    );
    assert!(err_starts(
        &c.str(&["SCAN", "999999"]),
        "ERR invalid cursor"
    ));
    assert!(err_starts(&c.str(&["SCAN", "x"]), "ERR invalid cursor"));
    assert!(err_starts(
        &c.str(&["SCAN", "0", "COUNT", "0"]),
        "ERR value is not an integer"
    ));
    assert!(err_starts(
        &c.str(&["SCAN", "0", "BOGUS", "1"]),
        "ERR syntax error"
    ));
}

#[test]
fn every_listed_command_is_known() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    for name in accelkv_server::resp_commands() {
        let name = name.name;
        // Both end the connection (SHUTDOWN the server) without an error to check, and
        // MONITOR turns it into a stream of every later command's line.
        if name == "QUIT" || name == "SHUTDOWN" || name == "MONITOR" {
            continue;
        }
        let r = c.str(&[name]);
        assert!(
            !matches!(&r, Value::Error(e) if e.contains("unknown command")),
            "{name}: {r:?}"
        );
    }
    let r = c.str(&["ECHO"]);
    assert!(
        err_starts(&r, "ERR wrong number of arguments for 'echo' command"),
        "{r:?}"
    );
    let r = c.str(&["NOSUCHCOMMAND", "a"]);
    assert!(err_starts(
        &r,
        "ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'a'"
    ));
}

/// Keys that exist throughout a scan are returned exactly once, whatever is inserted and
/// deleted meanwhile, and no key is returned twice; COUNT varies per call.
#[test]
fn scan_under_concurrent_writes_returns_each_lasting_key_once() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    let lasting: BTreeSet<String> = (0..10_000).map(|i| format!("k:{i:05}")).collect();
    for chunk in lasting.iter().collect::<Vec<_>>().chunks(500) {
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for k in chunk {
            args.push(k.as_bytes());
            args.push(b"v");
        }
        assert_eq!(c.call(&args), Value::Simple("OK".into()));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (stop, mut w) = (stop.clone(), Conn::new(&srv));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Keys between and around the lasting ones come and go.
                let k = format!("k:{:05}x{}", (i * 7919) % 10_000, i % 3);
                w.str(&["SET", &k, "n"]);
                if i.is_multiple_of(2) {
                    w.str(&["DEL", &k]);
                }
                i += 1;
            }
        })
    };
    for round in 0..3u64 {
        let mut got: Vec<String> = Vec::new();
        let mut cursor = "0".to_string();
        let mut x = round + 1;
        loop {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let count = (x >> 33) % 500 + 1;
            let r = c.str(&["SCAN", &cursor, "COUNT", &count.to_string()]);
            let Value::Array(Some(parts)) = r else {
                panic!("SCAN: {r:?}")
            };
            let (Value::Bulk(Some(next)), Value::Array(Some(keys))) = (&parts[0], &parts[1]) else {
                panic!("SCAN reply {parts:?}")
            };
            for k in keys {
                let Value::Bulk(Some(k)) = k else {
                    panic!("key {k:?}")
                };
                got.push(String::from_utf8(k.clone()).unwrap());
            }
            cursor = String::from_utf8(next.clone()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        let unique: HashSet<&String> = got.iter().collect();
        assert_eq!(unique.len(), got.len(), "a key came twice in round {round}");
        let found: BTreeSet<String> = got.into_iter().filter(|k| lasting.contains(k)).collect();
        assert_eq!(found, lasting, "round {round}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
}

/// RANGE reads a whole range in pages (CURSOR), never silently cut: without LIMIT a range
/// bigger than `--max-scan-items` is an error; `+` is the open upper bound; FLOOR too.
#[test]
fn range_pages_with_a_cursor_and_is_never_silently_cut() {
    let srv = Server::start(&["--max-scan-items", "100"]);
    let mut c = Conn::new(&srv);
    let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for i in 0..250 {
        args.push(format!("r{i:03}").into_bytes());
        args.push(format!("{i}").into_bytes());
    }
    let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&a), Value::Simple("OK".into()));
    let flat_len = |v: &Value| match v {
        Value::Array(Some(items)) => items.len() / 2,
        other => panic!("{other:?}"),
    };
    // Within the cap: everything; with LIMIT: at most LIMIT.
    assert_eq!(flat_len(&c.str(&["RANGE", "r000", "r050"])), 50);
    assert_eq!(flat_len(&c.str(&["RANGE", "r000", "+", "LIMIT", "7"])), 7);
    assert_eq!(flat_len(&c.str(&["FLOOR", "r100x", "+", "LIMIT", "3"])), 3);
    // More than the cap without paging: an error, not a silent cut.
    assert!(err_starts(
        &c.str(&["RANGE", "r000", "+"]),
        "ERR the range holds more than 100"
    ));
    assert!(err_starts(
        &c.str(&["RANGE", "r000", "+", "LIMIT", "1000"]),
        "ERR the range holds"
    ));
    assert!(err_starts(
        &c.str(&["FLOOR", "r000", "+"]),
        "ERR the range holds"
    ));
    assert!(err_starts(
        &c.str(&["FLOOR", "a", "+", "CURSOR"]),
        "ERR CURSOR pages RANGE"
    ));
    assert!(err_starts(
        &c.str(&["RANGE", "a", "b", "LIMIT"]),
        "ERR syntax error"
    ));
    // Pages: every key once, in order, the last page's cursor nil.
    let mut keys = Vec::new();
    let mut from = b"r000".to_vec();
    let mut pages = 0;
    loop {
        let r = c.call(&[b"RANGE", &from, b"+", b"CURSOR"]);
        let Value::Array(Some(parts)) = r else {
            panic!("{r:?}")
        };
        let Value::Array(Some(items)) = &parts[1] else {
            panic!("{parts:?}")
        };
        for kv in items.chunks(2) {
            let Value::Bulk(Some(k)) = &kv[0] else {
                panic!("{kv:?}")
            };
            keys.push(k.clone());
        }
        pages += 1;
        match &parts[0] {
            Value::Bulk(Some(next)) => from = next.clone(),
            Value::Bulk(None) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(pages, 3);
    let want: Vec<Vec<u8>> = (0..250).map(|i| format!("r{i:03}").into_bytes()).collect();
    assert_eq!(keys, want);
}

/// `maxmemory` with `noeviction`: set at run time, writes that add memory are refused with
/// Redis's OOM error (RESP and binary alike) while reads and deletes go on; 0 lifts it.
#[test]
fn maxmemory_refuses_writes_and_keeps_reads_and_deletes() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    let map = |v: Value| match v {
        Value::Array(Some(items)) => items
            .chunks(2)
            .map(|kv| match (&kv[0], &kv[1]) {
                (Value::Bulk(Some(k)), Value::Bulk(Some(v))) => (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let all = map(c.str(&["CONFIG", "GET", "*"]));
    assert!(
        all.iter()
            .any(|(k, v)| k == "maxmemory-policy" && v == "noeviction"),
        "{all:?}"
    );
    let mm = map(c.str(&["CONFIG", "GET", "maxmemory*"]));
    let names: Vec<&str> = mm.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["maxmemory", "maxmemory-policy", "maxmemory-clients"],
        "{mm:?}"
    );
    assert_eq!(c.str(&["SET", "kept", "v"]), Value::Simple("OK".into()));
    assert_eq!(
        c.str(&["CONFIG", "SET", "maxmemory", "1kb"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        map(c.str(&["CONFIG", "GET", "maxmemory"])),
        vec![("maxmemory".into(), "1024".into())]
    );
    let oom = Value::Error("OOM command not allowed when used memory > 'maxmemory'.".into());
    assert_eq!(c.str(&["SET", "new", "v"]), oom);
    assert_eq!(c.str(&["INCR", "n"]), oom);
    assert_eq!(c.str(&["GET", "kept"]), bulk("v"));
    let mut b = accelkv_client::Client::connect(srv.bin, None).unwrap();
    let err = b.put(b"bin", b"v").unwrap_err().to_string();
    assert!(err.contains("OOM"), "{err}");
    assert_eq!(b.get(b"kept").unwrap(), Some(b"v".to_vec()));
    assert_eq!(c.str(&["DEL", "kept"]), Value::Integer(1));
    assert!(err_starts(
        &c.str(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        "ERR CONFIG SET failed"
    ));
    assert!(err_starts(
        &c.str(&["CONFIG", "SET", "maxmemory", "lots"]),
        "ERR CONFIG SET failed"
    ));
    assert!(err_starts(
        &c.str(&["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option"
    ));
    assert_eq!(
        c.str(&["CONFIG", "SET", "maxmemory", "0"]),
        Value::Simple("OK".into())
    );
    assert_eq!(c.str(&["SET", "new", "v"]), Value::Simple("OK".into()));
    b.put(b"bin", b"v").unwrap();
}

/// `--memory-limit`: once the store's memory is used up, writes fail with an OOM error
/// and the server goes on serving reads.
#[test]
fn the_hard_memory_limit_refuses_writes_and_keeps_serving() {
    let srv = Server::start(&["--memory-limit", "4MiB"]);
    let mut c = Conn::new(&srv);
    let value = "x".repeat(1000);
    let mut refused = None;
    for i in 0..20_000 {
        let k = format!("k{i:06}");
        match c.str(&["SET", &k, &value]) {
            Value::Simple(ok) if ok == "OK" => {}
            Value::Error(e) => {
                refused = Some((i, e));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let (n, e) = refused.expect("4 MiB held 20 MB of values");
    assert!(e.starts_with("OOM"), "{e}");
    assert!(n > 100, "refused after only {n} writes");
    assert_eq!(c.str(&["GET", "k000000"]), bulk(&value));
    assert_eq!(c.str(&["PING"]), Value::Simple("PONG".into()));
}

/// INFO answers the sections asked for, as Redis names them.
#[test]
fn info_sections() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    c.str(&["SET", "a", "1"]);
    let text = |v: Value| match v {
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let all = text(c.str(&["INFO"]));
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Keyspace",
    ] {
        assert!(all.contains(section), "{section} missing from {all}");
    }
    let mem = text(c.str(&["INFO", "memory"]));
    assert!(
        mem.starts_with("# Memory\r\n") && mem.contains("maxmemory_policy:noeviction"),
        "{mem}"
    );
    assert!(!mem.contains("# Stats"), "{mem}");
    let two = text(c.str(&["INFO", "clients", "keyspace"]));
    assert!(two.contains("connected_clients:1\r\n"), "{two}");
    assert!(two.contains("db0:keys=1,expires=0"), "{two}");
    assert!(!two.contains("# Server"), "{two}");
    // As Redis writes several sections: an empty line between them, none after the last.
    assert!(two.starts_with("# Clients\r\n"), "{two}");
    assert!(two.contains("\r\n\r\n# Keyspace\r\n"), "{two}");
    assert!(two.ends_with("avg_ttl=0\r\n"), "{two}");
    assert!(all.contains("\r\n\r\n# Clients\r\n"), "{all}");
    assert_eq!(text(c.str(&["INFO", "nosuch"])), "");
}

/// accelkv's atomics and vector operations over RESP, answering as the binary protocol's.
#[test]
fn cas_fetchadd_and_vector_over_resp() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    // CAS.
    c.str(&["SET", "k", "old"]);
    assert_eq!(c.str(&["CAS", "k", "nope", "new"]), Value::Integer(0));
    assert_eq!(c.str(&["CAS", "k", "old", "new"]), Value::Integer(1));
    assert_eq!(c.str(&["GET", "k"]), bulk("new"));
    assert_eq!(c.str(&["CAS", "absent", "x", "y"]), Value::Integer(0));
    // FETCHADD: 8-byte little-endian integers; the original value back.
    assert_eq!(c.str(&["FETCHADD", "n", "5"]), bulk("0"));
    assert_eq!(c.str(&["FETCHADD", "n", "-2"]), bulk("5"));
    assert_eq!(
        c.str(&["GET", "n"]),
        Value::Bulk(Some(3u64.to_le_bytes().to_vec()))
    );
    assert_eq!(c.str(&["FETCHADD", "s", "-1", "I64"]), bulk("0"));
    assert_eq!(c.str(&["FETCHADD", "s", "0", "i64"]), bulk("-1"));
    let max = u64::MAX.to_le_bytes();
    c.call(&[b"SET", b"m", &max]);
    let r = c.str(&["FETCHADD", "m", "1", "CHECKED"]);
    assert!(err_starts(&r, "ERR integer overflow"), "{r:?}");
    assert_eq!(
        c.str(&["FETCHADD", "m", "1", "SATURATE"]),
        bulk(&u64::MAX.to_string())
    );
    assert!(err_starts(
        &c.str(&["FETCHADD", "k", "1"]),
        "ERR fetch-and-add needs an 8-byte value"
    ));
    assert!(err_starts(
        &c.str(&["FETCHADD", "n", "1", "F64"]),
        "ERR syntax error"
    ));
    // VECTOR on a u32 vector.
    let v: Vec<u8> = [1u32, 2, 3, 4]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    c.call(&[b"SET", b"v", &v]);
    let zero = 0u32.to_le_bytes();
    let sum = c.call(&[b"VECTOR", b"v", b"reduce", b"u32", b"add", &zero]);
    assert_eq!(sum, Value::Bulk(Some(10u32.to_le_bytes().to_vec())));
    let ten = 10u32.to_le_bytes();
    let orig = c.call(&[b"VECTOR", b"v", b"s2v", b"u32", b"add", &ten]);
    assert_eq!(orig, Value::Bulk(Some(v.clone())));
    let now: Vec<u8> = [11u32, 12, 13, 14]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(c.str(&["GET", "v"]), Value::Bulk(Some(now)));
    let twelve = 12u32.to_le_bytes();
    let gt: Vec<u8> = [13u32, 14].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        c.call(&[b"VECTOR", b"v", b"filter", b"u32", b"gt", &twelve]),
        Value::Bulk(Some(gt))
    );
    assert_eq!(
        c.call(&[b"VECTOR", b"absent", b"reduce", b"u32", b"add", &zero]),
        Value::Bulk(None)
    );
    let r = c.call(&[b"VECTOR", b"v", b"reduce", b"u32", b"nosuch", &zero]);
    assert!(err_starts(&r, "ERR unknown function 'nosuch'"), "{r:?}");
    assert!(err_starts(
        &c.str(&["VECTOR", "v", "bogus", "u32", "add", "x"]),
        "ERR syntax error"
    ));
}

#[test]
fn introspection_commands() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    c.str(&["SET", "n", "12345"]);
    c.str(&["SET", "s", "hello"]);
    let long = "x".repeat(100);
    c.str(&["SET", "l", &long]);
    assert_eq!(c.str(&["OBJECT", "ENCODING", "n"]), bulk("int"));
    assert_eq!(c.str(&["OBJECT", "ENCODING", "s"]), bulk("embstr"));
    assert_eq!(c.str(&["OBJECT", "ENCODING", "l"]), bulk("raw"));
    assert_eq!(c.str(&["OBJECT", "ENCODING", "nope"]), Value::Bulk(None));
    assert_eq!(c.str(&["OBJECT", "REFCOUNT", "s"]), Value::Integer(1));
    // No LFU policy (noeviction): Redis's own refusal.
    assert!(err_starts(
        &c.str(&["OBJECT", "FREQ", "s"]),
        "ERR An LFU maxmemory policy is not selected"
    ));
    assert!(err_starts(
        &c.str(&["OBJECT", "NOPE", "s"]),
        "ERR unknown subcommand"
    ));
    let small = match c.str(&["MEMORY", "USAGE", "s"]) {
        Value::Integer(n) => n,
        other => panic!("MEMORY USAGE: {other:?}"),
    };
    let big = match c.str(&["MEMORY", "USAGE", "l", "SAMPLES", "5"]) {
        Value::Integer(n) => n,
        other => panic!("MEMORY USAGE: {other:?}"),
    };
    assert!(small >= 6 && big >= 101 && big > small, "{small} {big}");
    assert_eq!(c.str(&["MEMORY", "USAGE", "nope"]), Value::Bulk(None));
    c.str(&["CLIENT", "SETNAME", "me"]);
    match c.str(&["CLIENT", "INFO"]) {
        Value::Bulk(Some(line)) => {
            let line = String::from_utf8(line).unwrap();
            assert!(
                line.contains("name=me ") && line.contains("resp=2"),
                "{line}"
            );
        }
        other => panic!("CLIENT INFO: {other:?}"),
    }
    assert_eq!(
        c.str(&["CLIENT", "NO-EVICT", "on"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        c.str(&["CLIENT", "TRACKING", "off"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        c.str(&["CLIENT", "TRACKING", "on"]),
        Value::Simple("OK".into())
    );
    assert_eq!(c.str(&["CLIENT", "GETREDIR"]), Value::Integer(0));
    assert_eq!(
        c.str(&["CLIENT", "NO-TOUCH", "on"]),
        Value::Simple("OK".into())
    );
    assert!(err_starts(
        &c.str(&["CLIENT", "NO-TOUCH", "maybe"]),
        "ERR syntax error"
    ));
    assert!(matches!(c.str(&["CLIENT", "HELP"]), Value::Array(Some(l)) if l.len() > 20));
    assert!(err_starts(
        &c.str(&["CLIENT", "SETINFO", "lib-name"]),
        "ERR wrong number of arguments for 'client|setinfo' command"
    ));
    assert!(err_starts(
        &c.str(&["CLIENT", "NOSUCH"]),
        "ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP."
    ));
    // RESETSTAT zeroes the command counter INFO reports.
    for _ in 0..10 {
        c.str(&["GET", "s"]);
    }
    assert_eq!(c.str(&["CONFIG", "RESETSTAT"]), Value::Simple("OK".into()));
    let Value::Bulk(Some(info)) = c.str(&["INFO", "stats"]) else {
        panic!("INFO")
    };
    let info = String::from_utf8(info).unwrap();
    let processed: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .expect("total_commands_processed")
        .trim()
        .parse()
        .unwrap();
    assert!(processed <= 2, "{processed}");
}

fn text(v: Value) -> String {
    match v {
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    }
}

/// The `field=value` pairs of each CLIENT LIST line.
fn clients(c: &mut Conn) -> Vec<std::collections::HashMap<String, String>> {
    text(c.str(&["CLIENT", "LIST"]))
        .lines()
        .map(|l| {
            l.split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// CLIENT LIST shows every connection, whichever event loop owns it; CLIENT KILL closes
/// another loop's connection (by ID, by address in the old form, with SKIPME), refuses
/// what matches nothing, and closes the caller's own connection after the reply.
#[test]
fn client_list_and_kill() {
    let srv = Server::start(&["--threads", "2"]);
    let mut a = Conn::new(&srv);
    let mut conns: Vec<Conn> = (0..4).map(|_| Conn::new(&srv)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        assert_eq!(
            c.str(&["CLIENT", "SETNAME", &format!("c{i}")]),
            Value::Simple("OK".into())
        );
    }
    assert!(err_starts(
        &a.str(&["CLIENT", "SETNAME", "has space"]),
        "ERR Client names"
    ));
    a.str(&["CLIENT", "SETNAME", "main"]);
    let _ = conns[3].try_call(&[b"HELLO", b"3", b"SETNAME", b"c3"]);
    let list = clients(&mut a);
    assert_eq!(list.len(), 5, "{list:?}");
    let by_name = |n: &str| list.iter().find(|e| e["name"] == n).unwrap().clone();
    assert_eq!(by_name("c3")["resp"], "3");
    assert_eq!(by_name("main")["resp"], "2");
    assert_eq!(by_name("c0")["resp"], "2");
    for e in &list {
        for k in ["id", "addr", "laddr", "age", "idle", "flags", "db", "user"] {
            assert!(e.contains_key(k), "{k} missing from {e:?}");
        }
    }
    let id = |n: &str| -> String { by_name(n)["id"].clone() };
    // CLIENT LIST ID picks connections.
    let only = text(a.str(&["CLIENT", "LIST", "ID", &id("c1"), &id("c2")]));
    assert_eq!(only.lines().count(), 2);
    // By ID: the other connection is closed by its own loop.
    assert_eq!(
        a.str(&["CLIENT", "KILL", "ID", &id("c0")]),
        Value::Integer(1)
    );
    assert_eq!(
        conns[0].try_call(&[b"PING"]),
        None,
        "a killed connection must be closed"
    );
    // Old form, by address.
    let addr = by_name("c1")["addr"].clone();
    assert_eq!(
        a.str(&["CLIENT", "KILL", &addr]),
        Value::Simple("OK".into())
    );
    assert_eq!(conns[1].try_call(&[b"PING"]), None);
    assert!(err_starts(
        &a.str(&["CLIENT", "KILL", "127.0.0.1:1"]),
        "ERR No such client"
    ));
    assert_eq!(
        a.str(&["CLIENT", "KILL", "ID", "999999"]),
        Value::Integer(0)
    );
    // Redis's answer for a user it does not have (accelkv has the default user only).
    assert!(err_starts(
        &a.str(&["CLIENT", "KILL", "USER", "nobody"]),
        "ERR No such user 'nobody'"
    ));
    assert!(err_starts(
        &a.str(&["CLIENT", "KILL"]),
        "ERR wrong number of arguments for 'client|kill'"
    ));
    assert!(err_starts(
        &a.str(&["CLIENT", "KILL", "ID", "0"]),
        "ERR client-id"
    ));
    assert!(err_starts(
        &a.str(&["CLIENT", "KILL", "FOO", "1"]),
        "ERR syntax error"
    ));
    // SKIPME yes (the default): everyone but the caller.
    assert_eq!(
        a.str(&["CLIENT", "KILL", "USER", "default"]),
        Value::Integer(2)
    );
    for c in &mut conns[2..] {
        assert_eq!(c.try_call(&[b"PING"]), None);
    }
    // A killed connection's loop closes it, then drops it from the registry: the client
    // can see the close first (this failed once under a full test run).
    let start = std::time::Instant::now();
    while clients(&mut a).len() != 1 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "killed clients still listed"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SKIPME no: the caller too, after its reply.
    assert_eq!(
        a.str(&["CLIENT", "KILL", "ID", &id("main"), "SKIPME", "no"]),
        Value::Integer(1)
    );
    assert_eq!(a.try_call(&[b"PING"]), None);
    // Its loop drops it from the registry when it closes it.
    let mut b = Conn::new(&srv);
    let start = std::time::Instant::now();
    while clients(&mut b).len() != 1 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "still listed"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The command table is the one source of truth for what may run past `maxmemory`: as in
/// Redis, RENAME, RENAMENX and GETEX have no `denyoom` flag (COMMAND INFO says so) and run
/// when the store is over the limit, while SET, APPEND and SETEX are refused. (Before the
/// table drove dispatch, a second list refused them while COMMAND INFO advertised them.)
#[test]
fn commands_without_denyoom_run_past_maxmemory() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    for k in ["a", "b", "x"] {
        assert_eq!(c.str(&["SET", k, "v"]), Value::Simple("OK".into()));
    }
    assert_eq!(
        c.str(&["CONFIG", "SET", "maxmemory", "1kb"]),
        Value::Simple("OK".into())
    );
    let oom = Value::Error("OOM command not allowed when used memory > 'maxmemory'.".into());
    assert_eq!(c.str(&["SET", "new", "v"]), oom);
    assert_eq!(c.str(&["APPEND", "a", "more"]), oom);
    assert_eq!(c.str(&["SETEX", "a", "10", "v"]), oom);
    assert_eq!(c.str(&["RENAME", "a", "a2"]), Value::Simple("OK".into()));
    assert_eq!(c.str(&["RENAMENX", "b", "b2"]), Value::Integer(1));
    assert_eq!(c.str(&["GETEX", "x", "EX", "100"]), bulk("v"));
    assert!(matches!(c.str(&["TTL", "x"]), Value::Integer(t) if t > 0 && t <= 100));
    assert_eq!(c.str(&["GET", "a2"]), bulk("v"));
    assert_eq!(c.str(&["GET", "b2"]), bulk("v"));
    // What COMMAND INFO says agrees with what ran.
    let mut flags = |name: &str| match c.str(&["COMMAND", "INFO", name]) {
        Value::Array(Some(v)) => match &v[0] {
            Value::Array(Some(info)) => match &info[2] {
                Value::Array(Some(f)) => f
                    .iter()
                    .map(|f| match f {
                        Value::Simple(s) => s.clone(),
                        other => panic!("{other:?}"),
                    })
                    .collect::<Vec<_>>(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    for name in ["rename", "renamenx", "getex"] {
        let f = flags(name);
        assert!(
            f.contains(&"write".into()) && !f.contains(&"denyoom".into()),
            "{name}: {f:?}"
        );
    }
    for name in ["set", "append", "setex"] {
        let f = flags(name);
        assert!(f.contains(&"denyoom".into()), "{name}: {f:?}");
    }
}

/// MEMORY and OBJECT are in the command table: COMMAND COUNT, LIST and INFO know them, and
/// inside MULTI they are queued and answered at EXEC (seeing the transaction's own writes),
/// not refused as unknown.
#[test]
fn memory_and_object_are_in_the_table_and_run_inside_multi() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    let listed = match c.str(&["COMMAND", "LIST"]) {
        Value::Array(Some(v)) => v,
        other => panic!("{other:?}"),
    };
    for name in ["memory", "object"] {
        assert!(listed.contains(&bulk(name)), "{name} not in COMMAND LIST");
        match c.str(&["COMMAND", "INFO", name]) {
            Value::Array(Some(v)) => assert!(matches!(&v[0], Value::Array(Some(_))), "{v:?}"),
            other => panic!("{other:?}"),
        }
    }
    // COMMAND LIST names subcommands too (`client|list`); COUNT counts commands.
    let top = listed
        .iter()
        .filter(|v| !matches!(v, Value::Bulk(Some(b)) if b.contains(&b'|')))
        .count();
    assert_eq!(c.str(&["COMMAND", "COUNT"]), Value::Integer(top as i64));
    assert_eq!(c.str(&["MULTI"]), Value::Simple("OK".into()));
    assert_eq!(
        c.str(&["SET", "n", "12345"]),
        Value::Simple("QUEUED".into())
    );
    assert_eq!(
        c.str(&["OBJECT", "ENCODING", "n"]),
        Value::Simple("QUEUED".into())
    );
    assert_eq!(
        c.str(&["MEMORY", "USAGE", "n"]),
        Value::Simple("QUEUED".into())
    );
    match c.str(&["EXEC"]) {
        Value::Array(Some(r)) => {
            assert_eq!(r[0], Value::Simple("OK".into()));
            assert_eq!(
                r[1],
                bulk("int"),
                "OBJECT ENCODING sees the write before it"
            );
            assert!(matches!(r[2], Value::Integer(n) if n > 0), "{:?}", r[2]);
        }
        other => panic!("EXEC: {other:?}"),
    }
}

/// One table, one rule: every command's arity is checked before its handler runs, the same
/// way for every command (the error names the command in lower case, as Redis's does).
#[test]
fn arity_errors_come_from_the_table() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    for cmd in [
        &["GET"][..],
        &["GET", "a", "b"],
        &["SETNX", "a"],
        &["MEMORY"],
        &["OBJECT"],
        &["RENAME", "a"],
        &["MSET", "a", "1", "b"],
        &["FETCHADD", "k", "1", "i64", "wrap", "extra"],
    ] {
        let want = format!(
            "ERR wrong number of arguments for '{}' command",
            cmd[0].to_lowercase()
        );
        assert!(err_starts(&c.str(cmd), &want), "{cmd:?}");
    }
}

/// CLIENT INFO answers this connection's CLIENT LIST line: the same fields in the same
/// order as Redis's (those accelkv keeps: not the buffer and memory ones), `addr` among
/// them (a popular Python job queue's worker reads it at start); CLIENT SETINFO, WATCH and
/// a subscription show in them, and TYPE pubsub lists the subscribed connections.
#[test]
fn client_info_and_list_give_redis_fields() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    c.str(&["CLIENT", "SETNAME", "me"]);
    c.str(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]);
    c.str(&["CLIENT", "SETINFO", "LIB-VER", "5.0.1"]);
    assert!(err_starts(
        &c.str(&["CLIENT", "SETINFO", "LIB-NAME", "a b"]),
        "ERR lib-name cannot contain spaces"
    ));
    c.str(&["WATCH", "a", "b"]);
    let info = text(c.str(&["CLIENT", "INFO"]));
    let fields = |line: &str| -> Vec<(String, String)> {
        line.trim_end()
            .split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("key=value");
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let ours = fields(&info);
    let get = |k: &str| ours.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
    assert!(info.ends_with('\n'), "{info}");
    assert!(
        get("addr").is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{info}"
    );
    assert_eq!(get("name"), Some("me"));
    // The command asking: its bytes in the query buffer and its arguments' bytes.
    assert_eq!(get("qbuf"), Some("26"));
    assert_eq!(get("argv-mem"), Some("10"));
    assert_eq!(get("multi"), Some("-1"));
    assert_eq!(get("flags"), Some("N"));
    assert_eq!(get("cmd"), Some("client|info"));
    assert_eq!(get("lib-name"), Some("redis-py"));
    assert_eq!(get("lib-ver"), Some("5.0.1"));
    let id = get("id").unwrap().to_string();
    let list = text(c.str(&["CLIENT", "LIST", "ID", &id]));
    let listed = fields(&list);
    let keys = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(
        keys(&listed),
        keys(&ours),
        "CLIENT LIST and CLIENT INFO differ"
    );
    // Redis 7.2's fields, in its order: every one.
    const REDIS_72: &str = "id addr laddr fd name age idle flags db sub psub ssub multi qbuf \
        qbuf-free argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp \
        lib-name lib-ver";
    let redis72: Vec<&str> = REDIS_72.split_whitespace().collect();
    assert_eq!(keys(&ours), redis72, "{ours:?}");
    // And the local redis-server's (7.0 has no watch and lib-*): the fields both have, in
    // the same order.
    if let Some(redis) = common::Redis::start() {
        let mut r = Conn::connect(([127, 0, 0, 1], redis.port).into());
        let theirs = keys(&fields(&text(r.str(&["CLIENT", "INFO"]))));
        let both: Vec<String> = keys(&ours)
            .into_iter()
            .filter(|k| theirs.contains(k))
            .collect();
        let order: Vec<String> = theirs.into_iter().filter(|k| both.contains(k)).collect();
        assert_eq!(both, order);
    }
    // A subscribed connection: flags P, sub=1, and the only one TYPE pubsub lists.
    let mut s = Conn::new(&srv);
    s.str(&["SUBSCRIBE", "ch"]);
    let pubsub = text(c.str(&["CLIENT", "LIST", "TYPE", "pubsub"]));
    assert_eq!(pubsub.lines().count(), 1, "{pubsub}");
    assert!(
        pubsub.contains(" flags=P ") && pubsub.contains(" sub=1 "),
        "{pubsub}"
    );
    let normal = text(c.str(&["CLIENT", "LIST", "TYPE", "normal"]));
    assert!(
        normal.contains(&format!("id={id} ")) && !normal.contains(" flags=P "),
        "{normal}"
    );
}

/// TOUCH counts the keys that exist (as EXISTS; accelkv keeps no access time), in every
/// database, collections included; ROLE answers as a primary without replicas. Compared
/// with a real redis-server.
#[test]
fn touch_and_role_answer_as_redis_does() {
    common::answers_as_redis_does(&[
        "SET a 1",
        "HSET h f v",
        "TOUCH a h nosuch a",
        "TOUCH nosuch",
        "SELECT 3",
        "TOUCH a",
        "SET a 2",
        "TOUCH a",
        "SELECT 0",
        "MULTI",
        "TOUCH a h",
        "EXEC",
        "TOUCH",
        "ROLE",
        "ROLE x",
    ]);
}

/// LOLWUT draws Schotter in Braille (as Redis 5's LOLWUT) and ends with the version line;
/// another version answers the line alone, as Redis does for versions without art.
#[test]
fn lolwut_draws_and_names_the_version() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    let Value::Bulk(Some(art)) = c.str(&["LOLWUT", "20", "2", "3"]) else {
        panic!("no art")
    };
    let art = String::from_utf8(art).unwrap();
    assert!(
        art.ends_with("Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.0\n"),
        "{art}"
    );
    assert!(
        art.lines().next().is_some_and(|l| l.chars().count() == 20),
        "{art}"
    );
    assert_eq!(
        c.str(&["LOLWUT", "VERSION", "6"]),
        Value::Bulk(Some(b"Redis ver. 7.0.0\n".to_vec()))
    );
    assert!(err_starts(
        &c.str(&["LOLWUT", "VERSION", "x"]),
        "ERR value is not an integer"
    ));
}

/// COMMAND LIST with and without FILTERBY, COMMAND HELP, and COMMAND INFO's `movablekeys`.
#[test]
fn command_list_filters_and_movable_keys() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    let list = |c: &mut Conn, args: &[&str]| -> Vec<String> {
        let mut a = vec!["COMMAND", "LIST"];
        a.extend_from_slice(args);
        common::strings(c.str(&a))
    };
    let all = list(&mut c, &[]);
    assert!(all.contains(&"set".to_string()) && all.contains(&"client|list".to_string()));
    assert_eq!(list(&mut c, &["FILTERBY", "PATTERN", "set"]), ["set"]);
    let config = list(&mut c, &["FILTERBY", "PATTERN", "config|*re*"]);
    assert!(
        config.contains(&"config|resetstat".to_string()),
        "{config:?}"
    );
    assert!(config.contains(&"config|rewrite".to_string()), "{config:?}");
    assert!(list(&mut c, &["FILTERBY", "PATTERN", "nosuch*"]).is_empty());
    let scripting = list(&mut c, &["FILTERBY", "ACLCAT", "scripting"]);
    assert!(
        scripting.contains(&"eval".to_string()) && scripting.contains(&"script|kill".to_string())
    );
    assert!(!scripting.contains(&"set".to_string()));
    assert!(list(&mut c, &["FILTERBY", "ACLCAT", "nosuch"]).is_empty());
    assert!(list(&mut c, &["FILTERBY", "MODULE", "any"]).is_empty());
    for bad in [
        &["bad"][..],
        &["FILTERBY", "bad"],
        &["FILTERBY", "bad", "x"],
    ] {
        let mut a = vec!["COMMAND", "LIST"];
        a.extend_from_slice(bad);
        assert!(err_starts(&c.str(&a), "ERR syntax error"), "{bad:?}");
    }
    let help = c.str(&["COMMAND", "HELP"]);
    assert!(
        matches!(&help, Value::Array(Some(l)) if matches!(&l[0], Value::Simple(h) if h.starts_with("COMMAND <subcommand>"))),
        "{help:?}"
    );
    let flags = |c: &mut Conn, name: &str| -> Vec<String> {
        let Value::Array(Some(entries)) = c.str(&["COMMAND", "INFO", name]) else {
            panic!("COMMAND INFO {name}")
        };
        let Value::Array(Some(info)) = &entries[0] else {
            panic!("{name}: {entries:?}")
        };
        match &info[2] {
            Value::Array(Some(f)) => f
                .iter()
                .map(|v| match v {
                    Value::Simple(s) => s.clone(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    for name in [
        "ZUNIONSTORE",
        "XREAD",
        "EVAL",
        "SORT",
        "SORT_RO",
        "MIGRATE",
        "GEORADIUS",
    ] {
        assert!(
            flags(&mut c, name).contains(&"movablekeys".to_string()),
            "{name}"
        );
    }
    for name in [
        "SET",
        "GET",
        "MSET",
        "LMOVE",
        "LPOP",
        "BLPOP",
        "PING",
        "RENAME",
        "GEORADIUS_RO",
    ] {
        assert!(
            !flags(&mut c, name).contains(&"movablekeys".to_string()),
            "{name}"
        );
    }
}
