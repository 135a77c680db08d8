//! Moving in from a running Redis and out again (issue 58, docs/REPLICATION.md): accelkv
//! follows a real `redis-server` with REPLICAOF under a running write load, holds exactly
//! the primary's data once caught up (every type, deadlines, other databases, functions,
//! transactions), acknowledges offsets the primary's WAIT counts, refuses clients' writes
//! while it follows, and keeps everything after REPLICAOF NO ONE; `--import-rdb` loads a
//! file redis-server saved; SAVE and BGSAVE write a file redis-server loads.

mod common;

use accelkv_proto::resp::Value;
use common::{canonical, Redis, RespConn, Server};
use std::time::{Duration, Instant};

fn keys(c: &mut RespConn) -> Vec<Vec<u8>> {
    let Value::Array(Some(ks)) = c.str(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    let mut ks: Vec<Vec<u8>> = ks
        .into_iter()
        .map(|k| match k {
            Value::Bulk(Some(b)) => b,
            other => panic!("{other:?}"),
        })
        .collect();
    ks.sort();
    ks
}

/// Every key of databases 0 and 3 compares equal on both servers.
fn same_data(ours: &mut RespConn, theirs: &mut RespConn, what: &str) {
    for db in ["0", "3"] {
        ours.str(&["SELECT", db]);
        theirs.str(&["SELECT", db]);
        let (a, b) = (keys(ours), keys(theirs));
        assert_eq!(a.len(), b.len(), "{what}: db {db} key count");
        assert!(a == b, "{what}: db {db} keys differ");
        for k in &b {
            assert_eq!(
                canonical(ours, k),
                canonical(theirs, k),
                "{what}: db {db} key {}",
                String::from_utf8_lossy(k)
            );
        }
    }
    ours.str(&["SELECT", "0"]);
    theirs.str(&["SELECT", "0"]);
}

fn run(c: &mut RespConn, args: &[String]) -> Value {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.call(&a)
}

fn s(a: &[&str]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

/// Every type Redis 7 writes that accelkv serves, small and large encodings, deadlines,
/// database 3 and a library of functions; a stream with `stream` (accelkv writes a stream
/// in Redis 7.2's encoding, which the Redis 7.0 CI installs cannot load).
fn fill(c: &mut RespConn, stream: bool) {
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut ok = |args: Vec<String>| {
        let r = run(c, &args);
        assert!(!matches!(r, Value::Error(_)), "{args:?}: {r:?}");
    };
    ok(s(&["SET", "str", "hello"]));
    ok(s(&["SET", "int", "-12345"]));
    ok(vec!["SET".into(), "long".into(), "abc".repeat(400)]);
    ok(s(&["SET", "ttl", "soon", "EX", "1000"]));
    ok(s(&["RPUSH", "list", "a", "b", "7"]));
    ok([s(&["RPUSH", "biglist"]), many.clone()].concat());
    ok(s(&["SADD", "intset", "1", "-2", "70000"]));
    ok([s(&["SADD", "bigset"]), many.clone()].concat());
    ok(s(&["ZADD", "zset", "1.5", "a", "-2", "b", "inf", "c"]));
    let zs: Vec<String> = many
        .iter()
        .enumerate()
        .flat_map(|(i, m)| [format!("{i}.25"), m.clone()])
        .collect();
    ok([s(&["ZADD", "bigzset"]), zs].concat());
    ok(s(&["HSET", "hash", "f", "v", "g", "7"]));
    let hs: Vec<String> = many.iter().flat_map(|m| [m.clone(), m.repeat(3)]).collect();
    ok([s(&["HSET", "bighash"]), hs].concat());
    ok(s(&["PEXPIRE", "hash", "5000000"]));
    if stream {
        ok(s(&["XADD", "stream", "1-1", "a", "1"]));
        ok(s(&["XADD", "stream", "2-1", "b", "2"]));
    }
    ok(s(&["SELECT", "3"]));
    ok(s(&["SET", "in3", "three"]));
    ok(s(&["SELECT", "0"]));
    let lib = "#!lua name=mylib\nredis.register_function('f', function() return 1 end)";
    ok(s(&["FUNCTION", "LOAD", lib]));
}

/// Writes of every kind to the primary while the replica syncs: plain, collections,
/// deletes, deadlines, a transaction; `round` makes each round's values its own.
fn load_round(c: &mut RespConn, round: usize) {
    let k = |p: &str| format!("{p}{}", round % 50);
    let r = round.to_string();
    for args in [
        vec!["SET".into(), k("w"), r.clone()],
        vec!["HSET".into(), "hw".into(), k("f"), r.clone()],
        vec!["RPUSH".into(), "lw".into(), r.clone()],
        vec!["ZINCRBY".into(), "zw".into(), "1".into(), k("m")],
        vec!["SADD".into(), "sw".into(), k("m")],
        vec!["INCR".into(), "counter".into()],
        vec!["DEL".into(), k("w")],
        vec![
            "SET".into(),
            k("e"),
            r.clone(),
            "PX".into(),
            "900000".into(),
        ],
    ] {
        let v = run(c, &args);
        assert!(!matches!(v, Value::Error(_)), "{args:?}: {v:?}");
    }
    c.str(&["MULTI"]);
    c.str(&["LPUSH", "txlist", &r]);
    c.str(&["HINCRBY", "txhash", "n", "1"]);
    assert!(matches!(c.str(&["EXEC"]), Value::Array(Some(_))));
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn role(c: &mut RespConn) -> Vec<String> {
    let Value::Array(Some(items)) = c.str(&["ROLE"]) else {
        panic!("ROLE")
    };
    items
        .into_iter()
        .map(|v| match v {
            Value::Bulk(Some(b)) => String::from_utf8_lossy(&b).to_string(),
            Value::Integer(i) => i.to_string(),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn replicaof_a_running_redis_under_load_then_promote() {
    let Some(redis) = Redis::start_with(&["--repl-diskless-sync-delay", "0"]) else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
    fill(&mut theirs, true);
    // Collections in pieces when restored, one larger than accelkv's atomic write (65,536).
    let huge: Vec<String> = (0..25_000).map(|i| format!("f{i}")).collect();
    let pairs: Vec<String> = (0..70_000)
        .flat_map(|i| [format!("f{i}"), i.to_string()])
        .collect();
    run(&mut theirs, &[s(&["HSET", "hugehash"]), pairs].concat());
    let scored: Vec<String> = (0..25_000)
        .flat_map(|i| [i.to_string(), format!("m{i}")])
        .collect();
    run(&mut theirs, &[s(&["ZADD", "hugezset"]), scored].concat());
    run(&mut theirs, &[s(&["RPUSH", "hugelist"]), huge].concat());
    let srv = Server::start(&[]);
    let mut ours = RespConn::new(&srv);
    ours.str(&["SET", "before", "dropped by the full synchronization"]);
    // A write load on the primary from another connection, through the sync and after.
    let port = redis.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = RespConn::connect(([127, 0, 0, 1], port).into());
            let mut round = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                load_round(&mut c, round);
                round += 1;
            }
            round
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let port_s = redis.port.to_string();
    assert_eq!(
        ours.str(&["REPLICAOF", "127.0.0.1", &port_s]),
        Value::Simple("OK".into())
    );
    wait_for("the link up", || {
        role(&mut ours).get(3).map(String::as_str) == Some("connected")
    });
    let synced = t0.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 10, "{rounds} rounds of writes");
    // Caught up: the primary's WAIT counts this replica's acknowledgement.
    wait_for("WAIT 1", || {
        theirs.str(&["WAIT", "1", "1000"]) == Value::Integer(1)
    });
    let Value::Bulk(Some(info)) = theirs.str(&["INFO", "replication"]) else {
        panic!("INFO")
    };
    let info = String::from_utf8_lossy(&info).to_string();
    let primary_offset: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    wait_for("the offset", || {
        role(&mut ours).get(4).and_then(|o| o.parse::<u64>().ok()) == Some(primary_offset)
    });
    assert!(info.contains("slave0:ip=127.0.0.1"), "{info}");
    same_data(&mut ours, &mut theirs, "caught up");
    assert_eq!(ours.str(&["FCALL", "f", "0"]), Value::Integer(1));
    assert_eq!(ours.str(&["EXISTS", "before"]), Value::Integer(0));
    // A broken link continues from the offset applied (the primary's backlog holds the
    // rest): no second full synchronization.
    theirs.str(&["CLIENT", "KILL", "TYPE", "replica"]);
    theirs.str(&["SET", "after-break", "1"]);
    theirs.str(&["HSET", "hash", "later", "2"]);
    wait_for("the partial resynchronization", || {
        let Value::Bulk(Some(i)) = ours.str(&["INFO", "replication"]) else {
            return false;
        };
        String::from_utf8_lossy(&i).contains("accelkv_sync_partial:1")
    });
    wait_for("WAIT 1 again", || {
        theirs.str(&["WAIT", "1", "1000"]) == Value::Integer(1)
    });
    wait_for("the key after the break", || {
        ours.str(&["GET", "after-break"]) == common::bulk("1")
    });
    same_data(&mut ours, &mut theirs, "after a partial resynchronization");
    let want = Value::Array(Some(vec![
        common::bulk("replicaof"),
        common::bulk(&format!("127.0.0.1 {}", redis.port)),
    ]));
    assert_eq!(ours.str(&["CONFIG", "GET", "replicaof"]), want);
    // Clients' writes are refused while it follows.
    let Value::Error(e) = ours.str(&["SET", "x", "y"]) else {
        panic!("a write on a replica")
    };
    assert!(e.starts_with("READONLY"), "{e}");
    let Value::Bulk(Some(mine)) = ours.str(&["INFO", "replication"]) else {
        panic!("INFO")
    };
    let mine = String::from_utf8_lossy(&mine).to_string();
    for want in [
        "role:slave",
        "master_link_status:up",
        "accelkv_sync_full:1",
        "accelkv_sync_partial:1",
    ] {
        assert!(mine.contains(want), "{want}: {mine}");
    }
    // Promoted: the data stays, writes are taken, the primary's later writes do not arrive.
    assert_eq!(
        ours.str(&["REPLICAOF", "NO", "ONE"]),
        Value::Simple("OK".into())
    );
    assert_eq!(role(&mut ours)[0], "master");
    theirs.str(&["SET", "after", "promotion"]);
    assert_eq!(ours.str(&["SET", "x", "y"]), Value::Simple("OK".into()));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ours.str(&["EXISTS", "after"]), Value::Integer(0));
    ours.str(&["DEL", "x"]);
    theirs.str(&["DEL", "after"]);
    same_data(&mut ours, &mut theirs, "after promotion");
    eprintln!("synchronized in {synced:?}; {rounds} rounds of writes under load");
}

/// A scratch folder of this test's own.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-replication-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn save_and_bgsave_write_files_redis_loads_and_import_rdb_reads_them() {
    let Some(probe) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    drop(probe);
    let dir = scratch("save");
    let dir_s = dir.to_str().unwrap().to_string();
    let srv = Server::start(&["--data-dir", &dir_s]);
    let mut ours = RespConn::new(&srv);
    fill(&mut ours, false);
    assert_eq!(ours.str(&["SAVE"]), Value::Simple("OK".into()));
    // Where it went, as a tool asks Redis.
    let Value::Array(Some(got)) = ours.str(&["CONFIG", "GET", "dir"]) else {
        panic!("CONFIG GET dir")
    };
    let at = std::path::PathBuf::from(
        String::from_utf8_lossy(match &got[1] {
            Value::Bulk(Some(b)) => b,
            other => panic!("{other:?}"),
        })
        .to_string(),
    );
    assert!(at.join("dump.rdb").exists(), "{at:?}");
    let Some(redis) = Redis::start_with(&["--dir", &dir_s, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
    same_data(&mut ours, &mut theirs, "SAVE");
    assert_eq!(theirs.str(&["FCALL", "f", "0"]), Value::Integer(1));
    drop(redis);
    // BGSAVE: the file appears (renamed into place whole).
    std::fs::remove_file(dir.join("dump.rdb")).unwrap();
    ours.str(&["SET", "later", "1"]);
    assert_eq!(
        ours.str(&["BGSAVE"]),
        Value::Simple("Background saving started".into())
    );
    wait_for("BGSAVE's file", || dir.join("dump.rdb").exists());
    let Some(redis) = Redis::start_with(&["--dir", &dir_s, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
    same_data(&mut ours, &mut theirs, "BGSAVE");
    // A file redis-server saved, loaded at start.
    theirs.str(&["SET", "from-redis", "yes"]);
    assert_eq!(theirs.str(&["SAVE"]), Value::Simple("OK".into()));
    let file = dir.join("dump.rdb");
    let file_s = file.to_str().unwrap();
    let imported = Server::start(&["--import-rdb", file_s]);
    let mut c = RespConn::new(&imported);
    same_data(&mut c, &mut theirs, "--import-rdb");
    assert_eq!(c.str(&["FCALL", "f", "0"]), Value::Integer(1));
    // A file that is not an RDB file stops the start with the reason.
    let junk = dir.join("junk.rdb");
    std::fs::write(&junk, b"not an rdb file").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--port", "0", "--resp-port", "0", "--admin-port", "0"])
        .args(["--memcached-port", "0", "--import-rdb"])
        .arg(&junk)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--import-rdb") && err.contains("not an RDB file"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_primary_with_a_password_needs_masterauth() {
    let Some(redis) = Redis::start_with(&["--repl-diskless-sync-delay", "0"]) else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
    theirs.str(&["CONFIG", "SET", "requirepass", "s3cret"]);
    theirs.str(&["SET", "k", "v"]);
    let port = redis.port.to_string();
    // Without the password: the reason, in INFO.
    let srv = Server::start(&[]);
    let mut ours = RespConn::new(&srv);
    ours.str(&["REPLICAOF", "127.0.0.1", &port]);
    wait_for("the refusal", || {
        let Value::Bulk(Some(i)) = ours.str(&["INFO", "replication"]) else {
            return false;
        };
        String::from_utf8_lossy(&i).contains("--masterauth")
    });
    assert_eq!(ours.str(&["GET", "k"]), Value::Bulk(None));
    // With it (and the default user named): the data arrives.
    let srv = Server::start(&["--masterauth", "s3cret", "--masteruser", "default"]);
    let mut ours = RespConn::new(&srv);
    ours.str(&["REPLICAOF", "127.0.0.1", &port]);
    wait_for("the key", || ours.str(&["GET", "k"]) == common::bulk("v"));
}
