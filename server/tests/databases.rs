//! Redis's numbered databases over RESP: one script of SELECT, MOVE, COPY … DB, FLUSHDB,
//! DBSIZE and the keyspace commands across databases, with strings and collections, run on
//! accelkv and on a real `redis-server`, every reply compared; then a blocking pop and a
//! script in a database other than 0, and a restart keeping every database's keys. SWAPDB:
//! the same comparison with Redis, connections in the swapped databases (a blocked pop, a
//! watched transaction), and the swap surviving kill -9.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};

const SCRIPT: &[&str] = &[
    "FLUSHALL",
    "SET a zero",
    "SELECT 1",
    "GET a",
    "SET a one",
    "RPUSH l x y",
    "ZADD z 1 m",
    "HSET h f v",
    "DBSIZE",
    "KEYS a",
    "KEYS l*",
    "EXISTS a l z h",
    "TYPE l",
    "GET a",
    "SELECT 0",
    "GET a",
    "DBSIZE",
    "KEYS *",
    "EXISTS l",
    "SELECT 1",
    "MOVE a 0",
    "MOVE a 2",
    "GET a",
    "SELECT 2",
    "GET a",
    "RANDOMKEY",
    "SCAN 0",
    "SELECT 1",
    "MOVE l 2",
    "MOVE nothing 2",
    "MOVE l 1",
    "MOVE l 99",
    "COPY z z DB 3",
    "COPY z z DB 3",
    "COPY h h2 DB 3 REPLACE",
    "COPY h h3 DB notanumber",
    "COPY h h3 DB 99",
    "MOVE h notanumber",
    "SELECT 3",
    "ZRANGE z 0 -1 WITHSCORES",
    "HGETALL h2",
    "EXPIRE z 100",
    "TTL z",
    "RENAME z z9",
    "EXISTS z z9",
    "LMPOP 2 nothing l LEFT",
    "SELECT 2",
    "LMPOP 2 nothing l LEFT",
    "BLPOP nothing l 1",
    "DBSIZE",
    "FLUSHDB",
    "DBSIZE",
    "SELECT 0",
    "DBSIZE",
    "GET a",
    "SELECT 3",
    "DBSIZE",
    "SELECT 16",
    "SELECT -1",
    "SELECT abc",
];

const SWAP_SCRIPT: &[&str] = &[
    "FLUSHALL",
    "SET a zero",
    "RPUSH l x y",
    "SELECT 1",
    "SET a one",
    "HSET h f v",
    "SWAPDB 0 1",
    "GET a",
    "HGET h f",
    "LRANGE l 0 -1",
    "DBSIZE",
    "KEYS a",
    "KEYS l*",
    "SELECT 0",
    "GET a",
    "HGET h f",
    "EXISTS l",
    "DBSIZE",
    "SWAPDB 0 5",
    "DBSIZE",
    "SELECT 5",
    "GET a",
    "MOVE a 0",
    "SELECT 0",
    "GET a",
    "COPY a b DB 1",
    "SELECT 1",
    "GET b",
    "SWAPDB 1 1",
    "GET b",
    "SWAPDB 1 16",
    "SWAPDB -1 0",
    "SWAPDB x 0",
    "SWAPDB 0 y",
    "SWAPDB 0",
    "SWAPDB 2 3",
    "SELECT 3",
    "GET b",
    "FLUSHALL",
    "SET z after",
    "SELECT 2",
    "GET z",
    "SELECT 3",
    "GET z",
    "SELECT 0",
    "SET w 1",
    "WATCH w",
    "SWAPDB 4 5",
    "MULTI",
    "PING",
    "EXEC",
    "WATCH w",
    "SWAPDB 0 1",
    "MULTI",
    "PING",
    "EXEC",
    "GET w",
];

#[test]
fn swapdb_answers_as_redis_does() {
    common::answers_as_redis_does(SWAP_SCRIPT);
}

/// Another connection's database is swapped under it: its next command sees the swapped
/// keys, a pop blocked there wakes to the keys now there, a transaction that watched keys
/// fails, INFO keyspace names each database by the number clients select it by, and the
/// swap survives kill -9 with a data directory.
#[test]
fn swapdb_reaches_every_connection_and_survives_a_crash() {
    let dir = std::env::temp_dir().join(format!("accelkv-swapdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let args = ["--data-dir", d.as_str(), "--sync", "sync"];
    let mut srv = Server::start(&args);
    let (mut a, mut b, mut w) = (
        RespConn::new(&srv),
        RespConn::new(&srv),
        RespConn::new(&srv),
    );
    a.str(&["SET", "k", "in0"]);
    a.str(&["SELECT", "1"]);
    a.str(&["SET", "k", "in1"]);
    a.str(&["RPUSH", "jobs", "j1"]);
    b.str(&["SELECT", "1"]);
    assert_eq!(b.str(&["GET", "k"]), Value::Bulk(Some(b"in1".to_vec())));
    // A pop blocked in database 0 (empty there), and a transaction watching database 1.
    w.str(&["BLPOP", "jobs", "0.001"]);
    let mut waiter = RespConn::new(&srv);
    waiter.send(&["BLPOP", "jobs", "5"]);
    b.str(&["WATCH", "k"]);
    b.str(&["MULTI"]);
    b.str(&["SET", "k", "from-tx"]);
    let t0 = std::time::Instant::now();
    while !matches!(a.str(&["INFO", "clients"]), Value::Bulk(Some(v)) if String::from_utf8_lossy(&v).contains("blocked_clients:1"))
    {
        assert!(t0.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(a.str(&["SWAPDB", "0", "1"]), Value::Simple("OK".into()));
    assert_eq!(
        waiter.read(),
        Value::Array(Some(vec![
            Value::Bulk(Some(b"jobs".to_vec())),
            Value::Bulk(Some(b"j1".to_vec()))
        ]))
    );
    assert_eq!(b.str(&["EXEC"]), Value::Array(None), "watched keys changed");
    assert_eq!(b.str(&["GET", "k"]), Value::Bulk(Some(b"in0".to_vec())));
    a.str(&["SELECT", "0"]);
    assert_eq!(a.str(&["GET", "k"]), Value::Bulk(Some(b"in1".to_vec())));
    a.str(&["SELECT", "7"]);
    a.str(&["SET", "only7", "x"]);
    assert_eq!(a.str(&["SWAPDB", "7", "9"]), Value::Simple("OK".into()));
    let info = match a.str(&["INFO", "keyspace"]) {
        Value::Bulk(Some(v)) => String::from_utf8(v).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(
        info.contains("db9:keys=1,") && !info.contains("db7:"),
        "{info}"
    );
    srv.child.kill().unwrap();
    let _ = srv.child.wait();
    drop(srv);
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["GET", "k"]), Value::Bulk(Some(b"in1".to_vec())));
    c.str(&["SELECT", "1"]);
    assert_eq!(c.str(&["GET", "k"]), Value::Bulk(Some(b"in0".to_vec())));
    c.str(&["SELECT", "9"]);
    assert_eq!(c.str(&["GET", "only7"]), Value::Bulk(Some(b"x".to_vec())));
    // FLUSHALL empties every database and the table with it.
    c.str(&["FLUSHALL"]);
    c.str(&["SET", "k", "fresh9"]);
    c.str(&["SELECT", "7"]);
    assert_eq!(c.str(&["GET", "k"]), Value::Bulk(None));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn databases_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

#[test]
fn blocking_pops_and_scripts_stay_in_their_database() {
    let srv = Server::start(&[]);
    let mut waiter = RespConn::new(&srv);
    let mut other = RespConn::new(&srv);
    waiter.str(&["SELECT", "5"]);
    waiter.send(&["BLPOP", "jobs", "5"]);
    // A push to `jobs` in database 0 is not the waiter's.
    other.str(&["RPUSH", "jobs", "db0"]);
    other.str(&["SELECT", "5"]);
    let t0 = std::time::Instant::now();
    while !matches!(other.str(&["INFO", "clients"]), Value::Bulk(Some(b)) if String::from_utf8_lossy(&b).contains("blocked_clients:1"))
    {
        assert!(t0.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    other.str(&["RPUSH", "jobs", "db5"]);
    assert_eq!(
        waiter.read(),
        Value::Array(Some(vec![
            Value::Bulk(Some(b"jobs".to_vec())),
            Value::Bulk(Some(b"db5".to_vec()))
        ]))
    );
    // A script's keys are its database's.
    let r = waiter.str(&[
        "EVAL",
        "redis.call('set', KEYS[1], 'v5') return redis.call('get', KEYS[1])",
        "1",
        "k",
    ]);
    assert_eq!(r, Value::Bulk(Some(b"v5".to_vec())));
    other.str(&["SELECT", "0"]);
    assert_eq!(other.str(&["GET", "k"]), Value::Bulk(None));
    assert_eq!(other.str(&["LLEN", "jobs"]), Value::Integer(1));
}

#[test]
fn every_databases_keys_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("accelkv-dbs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let args = ["--data-dir", d.as_str(), "--sync", "sync"];
    {
        let srv = Server::start(&args);
        let mut c = RespConn::new(&srv);
        for db in 0..4 {
            c.str(&["SELECT", &db.to_string()]);
            c.str(&["SET", "k", &format!("v{db}")]);
            c.str(&["RPUSH", "l", &format!("e{db}")]);
        }
    }
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    for db in 0..4 {
        c.str(&["SELECT", &db.to_string()]);
        assert_eq!(
            c.str(&["GET", "k"]),
            Value::Bulk(Some(format!("v{db}").into_bytes()))
        );
        assert_eq!(
            c.str(&["LRANGE", "l", "0", "-1"]),
            Value::Array(Some(vec![Value::Bulk(Some(format!("e{db}").into_bytes()))]))
        );
        assert_eq!(c.str(&["DBSIZE"]), Value::Integer(2));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Clients incrementing a counter in database 1 on two event loops while another swaps
/// databases 1 and 2 over and over: every increment lands in one of the two, none is lost
/// or doubled, and no command sees a third database.
#[test]
fn swapdb_under_concurrent_writes_loses_nothing() {
    let srv = Server::start(&["--threads", "2"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let mut c = RespConn::new(&srv);
            let stop = stop.clone();
            std::thread::spawn(move || {
                c.str(&["SELECT", "1"]);
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    assert!(matches!(c.str(&["INCR", "n"]), Value::Integer(_)));
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut s = RespConn::new(&srv);
    let t0 = std::time::Instant::now();
    let mut swaps = 0;
    while t0.elapsed() < std::time::Duration::from_millis(1500) {
        assert_eq!(s.str(&["SWAPDB", "1", "2"]), Value::Simple("OK".into()));
        swaps += 1;
        if swaps % 4 == 0 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let mut total = 0u64;
    for db in ["1", "2"] {
        s.str(&["SELECT", db]);
        if let Value::Bulk(Some(v)) = s.str(&["GET", "n"]) {
            total += String::from_utf8(v).unwrap().parse::<u64>().unwrap();
        }
    }
    for db in ["0", "3"] {
        s.str(&["SELECT", db]);
        assert_eq!(s.str(&["DBSIZE"]), Value::Integer(0));
    }
    assert_eq!(total, sent, "{swaps} swaps");
    assert!(
        sent > 100 && swaps > 100,
        "{sent} increments, {swaps} swaps"
    );
}

/// Redis's own SWAPDB cases of unit/multi: a watched key absent or expired in both
/// databases is not touched by the swap (EXEC runs); one live in either is (EXEC fails).
#[test]
fn swapdb_touches_only_watched_keys_live_on_a_side() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let pause = || std::thread::sleep(std::time::Duration::from_millis(5));
    let exec_ping = |c: &mut RespConn| {
        c.str(&["MULTI"]);
        c.str(&["PING"]);
        c.str(&["EXEC"])
    };
    let ran = Value::Array(Some(vec![Value::Simple("PONG".into())]));
    c.str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    // (watched in, set where, expired?) → whether EXEC runs.
    type Case<'a> = (&'a str, &'a [(&'a str, bool)], bool);
    let cases: [Case<'_>; 5] = [
        ("0", &[("0", false)], false),
        ("0", &[("1", false)], false),
        ("1", &[("1", true)], true),
        ("1", &[("0", true)], true),
        ("1", &[("1", true), ("0", true)], true),
    ];
    for (watch_in, sets, runs) in cases {
        c.str(&["FLUSHALL"]);
        for (db, stale) in sets {
            c.str(&["SELECT", db]);
            if *stale {
                c.str(&["SET", "x", "v", "PX", "1"]);
            } else {
                c.str(&["SET", "x", "v"]);
            }
        }
        pause();
        c.str(&["SELECT", watch_in]);
        c.str(&["WATCH", "x"]);
        c.str(&["SWAPDB", "0", "1"]);
        let want = if runs {
            ran.clone()
        } else {
            Value::Array(None)
        };
        assert_eq!(
            exec_ping(&mut c),
            want,
            "watched in {watch_in}, set {sets:?}"
        );
    }
    c.str(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

/// INFO keyspace lists only the databases holding keys, as Redis does, and an expired key
/// of another database (not yet swept) is counted nowhere, not under db0 (Redis's suite
/// reads the first `keys=` it finds).
#[test]
fn info_keyspace_lists_databases_with_keys_and_no_expired_one_of_another() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let info = |c: &mut RespConn| -> String {
        let Value::Bulk(Some(b)) = c.str(&["INFO", "keyspace"]) else {
            panic!("INFO")
        };
        String::from_utf8(b).unwrap()
    };
    assert!(!info(&mut c).contains("db0:"), "{}", info(&mut c));
    c.str(&["SELECT", "9"]);
    c.str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.str(&["DEBUG", "POPULATE", "100"]);
    c.str(&["HSET", "h", "f", "v"]);
    c.str(&["PEXPIRE", "h", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let text = info(&mut c);
    assert!(!text.contains("db0:"), "{text}");
    assert!(text.contains("db9:keys=100,"), "{text}");
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(100));
    c.str(&["SELECT", "0"]);
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(0));
}
