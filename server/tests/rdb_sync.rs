//! `redis-cli --rdb` against accelkv, and the file it writes loaded by a real
//! `redis-server`: every type (small and big collections, integer and long strings), the
//! deadlines, keys of another database and the functions' libraries arrive; `--functions-rdb`
//! carries the libraries alone; SYNC without `REPLCONF rdb-only 1`, PSYNC and unknown
//! REPLCONF options are refused with a reason.

mod common;

use accelkv_proto::resp::Value;
use common::{canonical, err_starts, Redis, RespConn, Server};
use std::process::Command;

fn fill(c: &mut RespConn) -> Vec<String> {
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut run = |args: Vec<String>| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        assert!(!matches!(c.call(&a), Value::Error(_)), "{args:?}");
    };
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    run(v(&["SET", "str", "hello"]));
    run(v(&["SET", "int", "-12345"]));
    run(vec!["SET".into(), "long".into(), "abc".repeat(400)]);
    run(v(&["SET", "ttl", "soon", "EX", "1000"]));
    run(v(&["RPUSH", "list", "a", "b", "7"]));
    run([v(&["RPUSH", "biglist"]), many.clone()].concat());
    run(v(&["SADD", "intset", "1", "-2", "70000"]));
    run(v(&["SADD", "set", "x", "y"]));
    run([v(&["SADD", "bigset"]), many.clone()].concat());
    run(v(&["ZADD", "zset", "1.5", "a", "-2", "b", "inf", "c"]));
    let zs: Vec<String> = many
        .iter()
        .enumerate()
        .flat_map(|(i, m)| [format!("{i}.25"), m.clone()])
        .collect();
    run([v(&["ZADD", "bigzset"]), zs].concat());
    run(v(&["HSET", "hash", "f", "v", "g", "7"]));
    let hs: Vec<String> = many.iter().flat_map(|m| [m.clone(), m.repeat(3)]).collect();
    run([v(&["HSET", "bighash"]), hs].concat());
    run(v(&["PEXPIRE", "hash", "5000000"]));
    [
        "str", "int", "long", "ttl", "list", "biglist", "intset", "set", "bigset", "zset",
        "bigzset", "hash", "bighash",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A fresh folder of this test's own.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-rdb-sync-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `redis-cli --rdb` (or `--functions-rdb`) from accelkv into `path`: whether it succeeded.
fn fetch(srv: &Server, flag: &str, path: &std::path::Path) -> bool {
    let out = Command::new("redis-cli")
        .args(["-p", &srv.resp.port().to_string(), flag])
        .arg(path)
        .output()
        .expect("redis-cli");
    assert!(
        out.status.success(),
        "redis-cli {flag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[test]
fn redis_loads_what_redis_cli_rdb_fetches() {
    let Some(_probe) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let srv = Server::start(&[]);
    let mut ours = RespConn::new(&srv);
    let keys = fill(&mut ours);
    ours.str(&["SELECT", "3"]);
    ours.str(&["SET", "in3", "three"]);
    ours.str(&["SELECT", "0"]);
    let lib = "#!lua name=mylib\nredis.register_function('f', function() return 1 end)";
    assert!(!matches!(
        ours.str(&["FUNCTION", "LOAD", lib]),
        Value::Error(_)
    ));

    let dir = scratch("all");
    let path = dir.join("dump.rdb");
    fetch(&srv, "--rdb", &path);
    let dir_arg = dir.to_str().unwrap();
    let Some(redis) = Redis::start_with(&["--dir", dir_arg, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
    for k in &keys {
        assert_eq!(
            canonical(&mut theirs, k.as_bytes()),
            canonical(&mut ours, k.as_bytes()),
            "{k}"
        );
    }
    assert_eq!(theirs.str(&["DBSIZE"]), Value::Integer(keys.len() as i64));
    for (k, most) in [("ttl", 1_000_000), ("hash", 5_000_000)] {
        let Value::Integer(ms) = theirs.str(&["PTTL", k]) else {
            panic!("PTTL {k}")
        };
        assert!(ms > 0 && ms <= most, "{k}: {ms}");
    }
    assert_eq!(theirs.str(&["PTTL", "str"]), Value::Integer(-1));
    theirs.str(&["SELECT", "3"]);
    assert_eq!(theirs.str(&["GET", "in3"]), common::bulk("three"));
    assert_eq!(theirs.str(&["FCALL", "f", "0"]), Value::Integer(1));
}

#[test]
fn functions_rdb_carries_the_libraries_alone() {
    let Some(_probe) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let srv = Server::start(&[]);
    let mut ours = RespConn::new(&srv);
    ours.str(&["SET", "k", "v"]);
    let lib = "#!lua name=only\nredis.register_function('g', function() return 2 end)";
    assert!(!matches!(
        ours.str(&["FUNCTION", "LOAD", lib]),
        Value::Error(_)
    ));
    let dir = scratch("functions");
    fetch(&srv, "--functions-rdb", &dir.join("dump.rdb"));
    let dir_arg = dir.to_str().unwrap();
    let Some(redis) = Redis::start_with(&["--dir", dir_arg, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
    assert_eq!(theirs.str(&["DBSIZE"]), Value::Integer(0));
    assert_eq!(theirs.str(&["FCALL", "g", "0"]), Value::Integer(2));
}

#[test]
fn sync_without_rdb_only_and_psync_are_refused() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let r = c.str(&["SYNC"]);
    assert!(err_starts(&r, "ERR accelkv does not replicate"), "{r:?}");
    let r = c.str(&["PSYNC", "?", "-1"]);
    assert!(err_starts(&r, "ERR accelkv does not replicate"), "{r:?}");
    let r = c.str(&["REPLCONF", "nosuch", "1"]);
    assert!(err_starts(&r, "ERR Unrecognized REPLCONF option"), "{r:?}");
    assert_eq!(
        c.str(&["REPLCONF", "capa", "eof"]),
        Value::Simple("OK".into())
    );
    // Turned on, then off again: SYNC is refused once more.
    assert_eq!(
        c.str(&["REPLCONF", "rdb-only", "1"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        c.str(&["REPLCONF", "rdb-only", "0"]),
        Value::Simple("OK".into())
    );
    assert!(err_starts(
        &c.str(&["SYNC"]),
        "ERR accelkv does not replicate"
    ));
    c.str(&["MULTI"]);
    let r = c.str(&["SYNC"]);
    assert!(
        matches!(r, Value::Error(_)),
        "SYNC is not queued in MULTI: {r:?}"
    );
}
