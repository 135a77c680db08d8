//! Expiry over RESP against the real server: every expiry command answers as a real
//! `redis-server` does (the same script run on both), an expired key disappears from every
//! read path at once (GET, MGET, EXISTS, SCAN, KEYS, RANGE, TYPE, the binary protocol) and
//! exactly at its deadline, the active sweep reclaims expired keys, and deadlines survive a
//! restart and a kill -9 with `--data-dir`.

mod common;

use accelkv_client::Client;
use accelkv_proto::resp::Value;
use common::{bulk, RespConn, Server};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The script both servers run; every reply is deterministic (deadlines far in the future
/// or long past, so no reply depends on when it runs).
const SCRIPT: &[&str] = &[
    "SET k v EX 100",
    "TTL k",
    "SET k v EX 0",
    "SET k v EX -1",
    "SET k v EX abc",
    "SET k v PX 100 EX 100",
    "SET k v KEEPTTL EX 10",
    "SET k v EX",
    "SET k v EXAT 32503680000",
    "EXPIRETIME k",
    "PEXPIRETIME k",
    "SET k v2 KEEPTTL",
    "EXPIRETIME k",
    "SET k v2 XX GET KEEPTTL",
    "EXPIRETIME k",
    "SET k v3",
    "TTL k",
    "TTL missing",
    "PTTL missing",
    "EXPIRETIME missing",
    "EXPIRE missing 10",
    "EXPIREAT k 32503680000 NX",
    "EXPIREAT k 32503680001 NX",
    "EXPIREAT k 32503680001 XX",
    "EXPIRETIME k",
    "EXPIREAT k 32503670000 GT",
    "EXPIREAT k 32503690000 GT",
    "EXPIREAT k 32503690001 LT",
    "EXPIREAT k 32503680000 LT",
    "EXPIREAT k 32503670000 XX LT",
    "EXPIRETIME k",
    "EXPIREAT k 1 NX XX",
    "EXPIREAT k 1 GT LT",
    "EXPIREAT k 1 NX GT",
    "EXPIREAT k 1 FOO",
    "EXPIRE k abc",
    "EXPIRE k",
    "PERSIST k",
    "PERSIST k",
    "TTL k",
    "PERSIST missing",
    "EXPIRE k 100 XX",
    "EXPIRE k 100 GT",
    "EXPIRE k 100 LT",
    "TTL k",
    "PEXPIREAT k 32503680000000",
    "EXPIRETIME k",
    "SETEX s 0 v",
    "SETEX s abc v",
    "SETEX s 100 v",
    "TTL s",
    "PSETEX p 100000 v",
    "TTL p",
    "PSETEX p -5 v",
    "GETEX s PERSIST",
    "TTL s",
    "GETEX s EXAT 32503680000",
    "EXPIRETIME s",
    "GETEX s",
    "EXPIRETIME s",
    "GETEX s FOO",
    "GETEX s EX 0",
    "GETEX s EX 10 PX 10",
    "GETEX missing",
    "GETEX missing EX 10",
    "SET n 1 EXAT 32503680000",
    "INCR n",
    "EXPIRETIME n",
    "INCRBYFLOAT n 1.5",
    "INCRBYFLOAT n +inf",
    "INCRBYFLOAT n -inf",
    "INCRBYFLOAT n nan",
    "EXPIRETIME n",
    "APPEND n x",
    "EXPIRETIME n",
    "SETRANGE n 0 9",
    "EXPIRETIME n",
    "GETSET n 7",
    "TTL n",
    "SET m 1 EXAT 32503680000",
    "MSET m 2",
    "TTL m",
    "EXPIRE k -1",
    "EXISTS k",
    "GET k",
    "TTL k",
    "SET e v PXAT 1",
    "GET e",
    "EXISTS e",
    "SET e v EXAT 32503680000",
    "EXPIREAT e 1",
    "GET e",
    "SET g v EXAT 32503680000",
    "GETEX g PXAT 1",
    "GET g",
    "SET nx v NX EXAT 32503680000",
    "SET nx w NX EX 10",
    "EXPIRETIME nx",
    "DEL s p n m nx",
];

#[test]
fn expiry_commands_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

/// Present strictly until the deadline, absent strictly after, on every read path; and
/// exact: a GET answered with the value was sent at or before the deadline, a GET answered
/// with nothing was answered after it (client and server read the same clock).
#[test]
fn expired_keys_vanish_from_every_read_at_the_deadline() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let mut bin = Client::connect(srv.bin, None).unwrap();
    for i in 0..50 {
        c.str(&["SET", &format!("keep:{i:02}"), "v"]);
    }
    let deadline = now_ms() + 400;
    let d = deadline.to_string();
    for i in 0..50 {
        assert_eq!(
            c.str(&["SET", &format!("gone:{i:02}"), "v", "PXAT", &d]),
            Value::Simple("OK".into())
        );
    }
    let (mut seen_present, mut seen_absent) = (0, 0);
    loop {
        let sent = now_ms();
        let v = c.str(&["GET", "gone:07"]);
        let got = now_ms();
        match v {
            Value::Bulk(Some(_)) => {
                assert!(sent <= deadline, "present at {sent}, deadline {deadline}");
                seen_present += 1;
            }
            Value::Bulk(None) => {
                assert!(got > deadline, "absent at {got}, deadline {deadline}");
                seen_absent += 1;
                if seen_absent > 20 {
                    break;
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(seen_present > 0);
    // Every other read path.
    let keys = ["gone:01", "gone:02", "keep:01"];
    assert_eq!(
        c.str(&["MGET", keys[0], keys[1], keys[2]]),
        Value::Array(Some(vec![Value::Bulk(None), Value::Bulk(None), bulk("v")]))
    );
    assert_eq!(int(&c.str(&["EXISTS", keys[0], keys[1], keys[2]])), 1);
    assert_eq!(c.str(&["TYPE", "gone:01"]), Value::Simple("none".into()));
    assert_eq!(int(&c.str(&["TTL", "gone:01"])), -2);
    assert_eq!(c.str(&["KEYS", "gone:*"]), Value::Array(Some(vec![])));
    match c.str(&["SCAN", "0", "MATCH", "gone:*", "COUNT", "1000"]) {
        Value::Array(Some(v)) => assert_eq!(v[1], Value::Array(Some(vec![]))),
        other => panic!("{other:?}"),
    }
    match c.str(&["RANGE", "a", "+"]) {
        Value::Array(Some(v)) => assert_eq!(v.len(), 100, "50 keys, 50 values"),
        other => panic!("{other:?}"),
    }
    assert_eq!(bin.get(b"gone:03").unwrap(), None);
    assert_eq!(bin.get(b"keep:03").unwrap(), Some(b"v".to_vec()));
    assert!(bin.scan(b"gone:", b"gone;", 100).unwrap().0.is_empty());
    // Writes treat the expired key as absent.
    assert_eq!(
        c.str(&["SET", "gone:04", "w", "NX"]),
        Value::Simple("OK".into())
    );
    assert_eq!(int(&c.str(&["INCR", "gone:05"])), 1);
    assert_eq!(int(&c.str(&["DEL", "gone:06"])), 0);
    assert_eq!(int(&c.str(&["TTL", "gone:05"])), -1);
}

/// The binary protocol's PUT_EXPIRING, EXPIRE and TTL, and how they meet RESP's view.
#[test]
fn binary_protocol_expiry() {
    let srv = Server::start(&[]);
    let mut bin = Client::connect(srv.bin, None).unwrap();
    let mut c = RespConn::new(&srv);
    let later = now_ms() + 3_600_000;
    bin.put_expiring(b"a", b"1", later).unwrap();
    assert_eq!(bin.deadline(b"a").unwrap(), Some(later));
    assert_eq!(int(&c.str(&["PEXPIRETIME", "a"])), later as i64);
    bin.put(b"b", b"2").unwrap();
    assert_eq!(bin.deadline(b"b").unwrap(), Some(0));
    assert_eq!(bin.deadline(b"none").unwrap(), None);
    assert!(bin.expire(b"b", later).unwrap());
    assert_eq!(int(&c.str(&["PEXPIRETIME", "b"])), later as i64);
    assert!(bin.expire(b"b", 0).unwrap());
    assert_eq!(int(&c.str(&["TTL", "b"])), -1);
    assert!(!bin.expire(b"none", later).unwrap());
    // A deadline already past removes the key; PUT clears a deadline.
    assert!(bin.expire(b"b", 5).unwrap());
    assert_eq!(bin.get(b"b").unwrap(), None);
    bin.put(b"a", b"3").unwrap();
    assert_eq!(bin.deadline(b"a").unwrap(), Some(0));
    bin.put_expiring(b"c", b"x", 7).unwrap();
    assert_eq!(bin.get(b"c").unwrap(), None);
    assert_eq!(c.str(&["GET", "c"]), Value::Bulk(None));
}

fn info_field(c: &mut RespConn, section: &str, field: &str) -> String {
    let text = match c.str(&["INFO", section]) {
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let at = text
        .find(field)
        .unwrap_or_else(|| panic!("{field} in {text}"))
        + field.len();
    text[at..]
        .split(['\r', ','])
        .next()
        .unwrap()
        .trim_start_matches(['=', ':'])
        .to_string()
}

#[test]
fn the_active_sweep_reclaims_expired_keys() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let n = 20_000;
    let deadline = now_ms() + 4_000;
    let at = deadline.to_string();
    for i in 0..n {
        c.str(&["SET", &format!("k{i:06}"), "value", "PXAT", &at]);
        if i % 4 == 0 {
            c.str(&["SET", &format!("stay{i:06}"), "v"]);
        }
    }
    if now_ms() < deadline {
        let expires: usize = info_field(&mut c, "keyspace", "expires").parse().unwrap();
        assert_eq!(expires, n);
    }
    // Gone at once to readers; reclaimed by the sweep within seconds (no reads needed).
    let start = Instant::now();
    loop {
        let keys: usize = info_field(&mut c, "keyspace", "keys=").parse().unwrap();
        if keys == n / 4 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{keys} keys left after 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(info_field(&mut c, "keyspace", "expires"), "0");
    assert_eq!(info_field(&mut c, "stats", "expired_keys:"), n.to_string());
    assert_eq!(int(&c.str(&["DBSIZE"])), (n / 4) as i64);
}

fn data_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-expiry-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn deadlines_survive_restart_and_kill_9() {
    let dir = data_dir("restart");
    let d = dir.to_str().unwrap();
    let later = now_ms() + 3_600_000;
    let soon = now_ms() + 1_500;
    {
        let mut srv = Server::start(&["--data-dir", d, "--sync", "sync"]);
        let mut c = RespConn::new(&srv);
        c.str(&["SET", "later", "1", "PXAT", &later.to_string()]);
        c.str(&["SET", "soon", "2", "PXAT", &soon.to_string()]);
        c.str(&["SET", "never", "3"]);
        let big = "x".repeat(5000); // an extension page
        c.str(&["SET", "big", &big, "PXAT", &later.to_string()]);
        srv.child.kill().unwrap();
        let _ = srv.child.wait();
    }
    {
        let srv = Server::start(&["--data-dir", d, "--sync", "sync"]);
        let mut c = RespConn::new(&srv);
        assert_eq!(int(&c.str(&["PEXPIRETIME", "later"])), later as i64);
        assert_eq!(int(&c.str(&["PEXPIRETIME", "big"])), later as i64);
        assert_eq!(int(&c.str(&["PEXPIRETIME", "never"])), -1);
        if now_ms() < soon {
            assert_eq!(int(&c.str(&["PEXPIRETIME", "soon"])), soon as i64);
        }
        // PERSIST and a new deadline are durable too.
        c.str(&["PERSIST", "later"]);
        c.str(&["PEXPIREAT", "never", &later.to_string()]);
        while now_ms() <= soon {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(c.str(&["GET", "soon"]), Value::Bulk(None));
    }
    let srv = Server::start(&["--data-dir", d]);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["GET", "soon"]), Value::Bulk(None));
    assert_eq!(int(&c.str(&["TTL", "later"])), -1);
    assert_eq!(int(&c.str(&["PEXPIRETIME", "never"])), later as i64);
    assert_eq!(c.str(&["GET", "big"]).clone(), bulk(&"x".repeat(5000)));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
