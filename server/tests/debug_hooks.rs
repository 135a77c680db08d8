//! The testing hooks tools rely on: DEBUG POPULATE (writes only absent keys, any database),
//! DEBUG SET-ACTIVE-EXPIRE (the sweep stops and restarts; expired keys stay invisible
//! meanwhile), DEBUG SLEEP, DEBUG OBJECT, the OBJECT FREQ and IDLETIME refusals, and the
//! encoding parameters OBJECT ENCODING answers by (CONFIG SET hash-max-listpack-entries …).

mod common;

use accelkv_proto::resp::Value;
use common::{info_field, strings, RespConn, Server};
use std::time::{Duration, Instant};

#[test]
fn populate_writes_absent_keys_in_the_selected_database() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["SET", "key:5", "mine"]);
    assert_eq!(
        c.str(&["DEBUG", "POPULATE", "100"]),
        Value::Simple("OK".into())
    );
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(100));
    assert_eq!(
        c.str(&["GET", "key:5"]),
        Value::Bulk(Some(b"mine".to_vec()))
    );
    assert_eq!(
        c.str(&["GET", "key:99"]),
        Value::Bulk(Some(b"value:99".to_vec()))
    );
    c.str(&["DEBUG", "POPULATE", "3", "big", "1000"]);
    assert_eq!(c.str(&["STRLEN", "big:2"]), Value::Integer(1000));
    c.str(&["SELECT", "3"]);
    c.str(&["DEBUG", "POPULATE", "7"]);
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(7));
    let Value::Simple(obj) = c.str(&["DEBUG", "OBJECT", "key:1"]) else {
        panic!("DEBUG OBJECT")
    };
    assert!(
        obj.contains("encoding:embstr") && obj.contains("serializedlength:7"),
        "{obj}"
    );
    assert!(matches!(
        c.str(&["DEBUG", "OBJECT", "nothing"]),
        Value::Error(_)
    ));
    assert!(matches!(
        c.str(&["DEBUG", "POPULATE", "x"]),
        Value::Error(_)
    ));
}

#[test]
fn set_active_expire_stops_and_restarts_the_sweep() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for i in 0..20 {
        c.str(&["SET", &format!("t{i}"), "v", "PX", "30"]);
    }
    std::thread::sleep(Duration::from_millis(400));
    // Expired, so invisible, but not removed by the sweep.
    assert_eq!(c.str(&["GET", "t3"]), Value::Bulk(None));
    assert_eq!(info_field(&mut c, "stats", "expired_keys"), "0");
    c.str(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    let t0 = Instant::now();
    while info_field(&mut c, "stats", "expired_keys") == "0" {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the sweep never restarted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sleep_blocks_and_object_freq_and_idletime_say_why_not() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let t0 = Instant::now();
    assert_eq!(
        c.str(&["DEBUG", "SLEEP", "0.2"]),
        Value::Simple("OK".into())
    );
    assert!(t0.elapsed() >= Duration::from_millis(200));
    c.str(&["SET", "k", "v"]);
    let Value::Error(e) = c.str(&["OBJECT", "FREQ", "k"]) else {
        panic!("OBJECT FREQ answered")
    };
    assert!(
        e.starts_with("ERR An LFU maxmemory policy is not selected"),
        "{e}"
    );
    assert!(matches!(
        c.str(&["OBJECT", "IDLETIME", "k"]),
        Value::Error(_)
    ));
    // Nothing to reload: the data are what they were.
    assert_eq!(c.str(&["DEBUG", "RELOAD"]), Value::Simple("OK".into()));
    assert_eq!(c.str(&["GET", "k"]), Value::Bulk(Some(b"v".to_vec())));
}

/// DEBUG DIGEST and DIGEST-VALUE: all zeros for nothing, equal for equal data however it
/// is kept (a packed hash and its copy converted to subkeys), different once one changes.
#[test]
fn digests_follow_the_data_not_its_encoding() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let zeros = Value::Simple("0".repeat(40));
    assert_eq!(c.str(&["DEBUG", "DIGEST"]), zeros);
    c.str(&["HSET", "h", "a", "1", "b", "2"]);
    c.str(&["RPUSH", "l", "x", "y"]);
    let before = c.str(&["DEBUG", "DIGEST"]);
    assert_ne!(before, zeros);
    c.str(&["CONFIG", "SET", "hash-max-listpack-entries", "1"]);
    c.str(&["COPY", "h", "h2"]);
    assert_eq!(
        c.str(&["OBJECT", "ENCODING", "h2"]),
        Value::Bulk(Some(b"hashtable".to_vec()))
    );
    let Value::Array(Some(d)) = c.str(&["DEBUG", "DIGEST-VALUE", "h", "h2", "nope"]) else {
        panic!("DIGEST-VALUE")
    };
    assert_eq!(d[0], d[1]);
    assert_eq!(d[2], zeros);
    c.str(&["DEL", "h2"]);
    assert_eq!(c.str(&["DEBUG", "DIGEST"]), before);
    c.str(&["LPUSH", "l", "z"]);
    assert_ne!(c.str(&["DEBUG", "DIGEST"]), before);
    assert_eq!(
        c.str(&["DEBUG", "LISTPACK", "l"]),
        Value::Simple("Listpack structure printed on stdout".into())
    );
    assert!(matches!(
        c.str(&["DEBUG", "LISTPACK", "nope"]),
        Value::Error(_)
    ));
}

/// DEBUG PROTOCOL answers each type as Redis does (RESP2 forms), and the list internals'
/// knob checks its argument as Redis does.
#[test]
fn debug_protocol_and_knobs_answer_as_redis_does() {
    let mut script: Vec<String> = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "true", "false", "verbatim", "nope",
    ]
    .iter()
    .map(|t| format!("DEBUG PROTOCOL {t}"))
    .collect();
    script.extend(
        [
            "DEBUG QUICKLIST-PACKED-THRESHOLD 1b",
            "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
            "DEBUG QUICKLIST-PACKED-THRESHOLD 5gb",
        ]
        .map(String::from),
    );
    let script: Vec<&str> = script.iter().map(String::as_str).collect();
    common::answers_as_redis_does(&script);
}

/// What test runners send before each test: `CONFIG SET save ""` (accelkv has no
/// snapshots: accepted, anything else refused) and `FUNCTION FLUSH` (a fresh server has no
/// libraries: nothing to flush; a library without functions is refused).
#[test]
fn config_set_save_and_function_flush_say_what_accelkv_is() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        c.str(&["CONFIG", "SET", "save", ""]),
        Value::Simple("OK".into())
    );
    assert!(matches!(
        c.str(&["CONFIG", "SET", "save", "900 1"]),
        Value::Error(_)
    ));
    assert_eq!(
        c.str(&["CONFIG", "SET", "appendonly", "no"]),
        Value::Simple("OK".into())
    );
    assert!(matches!(
        c.str(&["CONFIG", "SET", "appendonly", "yes"]),
        Value::Error(_)
    ));
    assert_eq!(c.str(&["FUNCTION", "FLUSH"]), Value::Simple("OK".into()));
    assert_eq!(c.str(&["FUNCTION", "LIST"]), Value::Array(Some(vec![])));
    assert!(matches!(
        c.str(&["FUNCTION", "LOAD", "#!lua name=x\n"]),
        Value::Error(_)
    ));
}

/// INFO's CPU section (getrusage: grows as the server works) and its replication section
/// (a primary without replicas), alone or among others, each once.
#[test]
fn info_has_cpu_and_replication_sections() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let user = |c: &mut RespConn| {
        info_field(c, "cpu", "used_cpu_user")
            .parse::<f64>()
            .unwrap()
    };
    let before = user(&mut c);
    c.str(&["DEBUG", "POPULATE", "20000"]);
    assert!(user(&mut c) >= before);
    assert_eq!(info_field(&mut c, "replication", "role"), "master");
    assert_eq!(info_field(&mut c, "replication", "connected_slaves"), "0");
    let Value::Bulk(Some(all)) = c.str(&["INFO", "cpu", "all"]) else {
        panic!("INFO")
    };
    let all = String::from_utf8(all).unwrap();
    assert_eq!(all.matches("used_cpu_user_children").count(), 1, "{all}");
    assert!(all.contains("master_repl_offset") && all.contains("used_memory"));
}

#[test]
fn encoding_parameters_change_what_object_encoding_reports_as_in_redis() {
    common::answers_as_redis_does(&[
        "CONFIG GET hash-max-ziplist-entries",
        "CONFIG GET zset-max-listpack-value",
        "CONFIG SET hash-max-ziplist-entries 2",
        "CONFIG GET hash-max-listpack-entries",
        "HSET h a 1 b 2",
        "OBJECT ENCODING h",
        "HSET h3 a 1 b 2 c 3",
        "OBJECT ENCODING h3",
        "CONFIG SET hash-max-listpack-entries 512",
        "CONFIG SET hash-max-listpack-value 3",
        "HSET h2 f abcd",
        "OBJECT ENCODING h2",
        "HSET h4 f abc",
        "OBJECT ENCODING h4",
        "CONFIG SET hash-max-listpack-value 64",
        "CONFIG SET set-max-intset-entries 2",
        "SADD s 1 2 3",
        "SADD s2 1 2",
        "OBJECT ENCODING s2",
        "CONFIG SET set-max-intset-entries 512",
        "CONFIG SET zset-max-ziplist-entries 1",
        "ZADD z 1 a 2 b",
        "OBJECT ENCODING z",
        "CONFIG SET zset-max-ziplist-entries 128",
        "CONFIG SET zset-max-listpack-value 1",
        "ZADD z2 1 ab",
        "OBJECT ENCODING z2",
        "ZADD z3 1 a",
        "OBJECT ENCODING z3",
        "CONFIG SET zset-max-listpack-value 64",
        "CONFIG SET set-max-intset-entries -1",
        "CONFIG SET list-max-ziplist-size abc",
        "CONFIG SET stream-node-max-entries 10",
        "CONFIG GET stream-node-max-entries",
        "CONFIG SET list-compress-depth 1",
        "CONFIG GET list-compress-depth",
    ]);
}

#[test]
fn proto_max_bulk_len_reports_the_largest_value() {
    let srv = Server::start(&["--max-value", "2000000"]);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        strings(c.str(&["CONFIG", "GET", "proto-max-bulk-len"])),
        ["proto-max-bulk-len", "2000000"]
    );
    assert_eq!(
        c.str(&["CONFIG", "SET", "proto-max-bulk-len", "2000000"]),
        accelkv_proto::resp::Value::Simple("OK".into())
    );
    let r = c.str(&["CONFIG", "SET", "proto-max-bulk-len", "536870912"]);
    assert!(common::err_starts(&r, "ERR CONFIG SET failed"), "{r:?}");
}

#[test]
fn info_commandstats_counts_calls_failures_and_refusals() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let text = |c: &mut RespConn, args: &[&str]| match c.str(args) {
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    // A pipeline of SETs and GETs (the batched paths), a write through the dispatcher, an
    // error reply, a refusal for arity.
    for i in 0..10 {
        c.send(&["SET", &format!("k{i}"), "v"]);
    }
    for i in 0..10 {
        c.send(&["GET", &format!("k{i}")]);
    }
    for _ in 0..20 {
        c.read();
    }
    c.str(&["HSET", "h", "f", "v"]);
    assert!(common::err_starts(&c.str(&["INCR", "k0"]), "ERR"));
    assert!(common::err_starts(
        &c.str(&["HSET", "h"]),
        "ERR wrong number"
    ));
    let stats = text(&mut c, &["INFO", "commandstats"]);
    let line = |name: &str| -> String {
        stats
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
            .to_string()
    };
    assert!(stats.starts_with("# Commandstats\r\n"), "{stats}");
    assert!(
        line("set").starts_with("cmdstat_set:calls=10,usec="),
        "{stats}"
    );
    assert!(
        line("get").starts_with("cmdstat_get:calls=10,usec="),
        "{stats}"
    );
    assert!(
        line("hset").contains("calls=1,")
            && line("hset").ends_with("rejected_calls=1,failed_calls=0"),
        "{stats}"
    );
    assert!(
        line("incr").ends_with("rejected_calls=0,failed_calls=1"),
        "{stats}"
    );
    assert!(!stats.contains("used_memory"));
    // Redis's rule: in `all` and `everything`, not in the default sections.
    assert!(!text(&mut c, &["INFO"]).contains("rejected_calls"));
    assert!(!text(&mut c, &["INFO", "default"]).contains("rejected_calls"));
    let all = text(&mut c, &["INFO", "cpu", "all"]);
    assert!(all.contains("rejected_calls") && all.contains("used_memory"));
    assert_eq!(all.matches("used_cpu_user_children").count(), 1);
    assert_eq!(c.str(&["CONFIG", "RESETSTAT"]), Value::Simple("OK".into()));
    let after = text(&mut c, &["INFO", "commandstats"]);
    assert!(!after.contains("cmdstat_set"), "{after}");
}
