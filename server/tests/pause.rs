//! CLIENT PAUSE and UNPAUSE: under WRITE, reads run and writes (EXEC of a write, PUBLISH,
//! a script that may write) wait, counted as blocked clients, until UNPAUSE; read-only
//! scripts run; under ALL every command waits, and the pause ends by itself; refused
//! commands are answered at once; the sweep removes no expired key while paused; a paused
//! client that closes leaves nothing behind. (Redis's own `unit/pause` runs against it in
//! scripts/redis-suite.sh.)

mod common;

use accelkv_proto::resp::Value;
use common::{bulk, info_field, wait_blocked, RespConn, Server};
use std::time::{Duration, Instant};

fn ok() -> Value {
    Value::Simple("OK".into())
}

#[test]
fn writes_wait_reads_run_and_unpause_releases_them() {
    let srv = Server::start(&[]);
    let (mut admin, mut w1, mut w2, mut r) = (
        RespConn::new(&srv),
        RespConn::new(&srv),
        RespConn::new(&srv),
        RespConn::new(&srv),
    );
    admin.str(&["SET", "k", "before"]);
    // Queued before the pause (a write queued during one waits too, as in Redis).
    assert_eq!(w2.str(&["MULTI"]), ok());
    assert_eq!(w2.str(&["INCR", "n"]), Value::Simple("QUEUED".into()));
    assert_eq!(admin.str(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    w1.send(&["SET", "k", "paused"]);
    w2.send(&["EXEC"]);
    wait_blocked(&mut admin, 2);
    // Reads, read-only transactions and read-only scripts run meanwhile.
    assert_eq!(r.str(&["GET", "k"]), bulk("before"));
    r.str(&["MULTI"]);
    r.str(&["GET", "k"]);
    assert_eq!(r.str(&["EXEC"]), Value::Array(Some(vec![bulk("before")])));
    let script = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
    assert_eq!(r.str(&["EVAL", script, "1", "k"]), bulk("before"));
    assert_eq!(
        r.str(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"]),
        bulk("before")
    );
    // A refused command is answered at once.
    assert!(matches!(r.str(&["SET", "k"]), Value::Error(_)));
    assert_eq!(admin.str(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(w1.read(), ok());
    assert_eq!(w2.read(), Value::Array(Some(vec![Value::Integer(1)])));
    assert_eq!(r.str(&["GET", "k"]), bulk("paused"));
    wait_blocked(&mut admin, 0);
}

#[test]
fn publish_and_writing_scripts_wait_under_write() {
    let srv = Server::start(&[]);
    let (mut admin, mut p, mut e) = (
        RespConn::new(&srv),
        RespConn::new(&srv),
        RespConn::new(&srv),
    );
    admin.str(&["CLIENT", "PAUSE", "100000", "WRITE"]);
    p.send(&["PUBLISH", "ch", "m"]);
    e.send(&["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "s"]);
    wait_blocked(&mut admin, 2);
    admin.str(&["CLIENT", "UNPAUSE"]);
    assert_eq!(p.read(), Value::Integer(0));
    assert_eq!(e.read(), ok());
    // In a read-only script, PUBLISH is a write (Redis's may-replicate commands).
    let r = admin.str(&["EVAL_RO", "return redis.call('publish', 'ch', 'm')", "0"]);
    assert!(
        matches!(&r, Value::Error(t) if t.starts_with("ERR Write commands are not allowed from read-only scripts")),
        "{r:?}"
    );
}

#[test]
fn pause_all_holds_every_command_and_ends_by_itself() {
    let srv = Server::start(&[]);
    let (mut admin, mut c) = (RespConn::new(&srv), RespConn::new(&srv));
    let t0 = Instant::now();
    assert_eq!(admin.str(&["CLIENT", "PAUSE", "300", "ALL"]), ok());
    // A shorter WRITE pause keeps the longer, stricter one.
    assert_eq!(admin.str(&["CLIENT", "PAUSE", "10", "WRITE"]), ok());
    c.send(&["GET", "k"]);
    assert_eq!(c.read(), Value::Bulk(None));
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "the GET ran inside the pause"
    );
    let bad = admin.str(&["CLIENT", "PAUSE", "x"]);
    assert!(
        matches!(&bad, Value::Error(t) if t.contains("timeout is not an integer")),
        "{bad:?}"
    );
    let bad = admin.str(&["CLIENT", "PAUSE", "10", "READ"]);
    assert!(
        matches!(&bad, Value::Error(t) if t.contains("mode must be WRITE or ALL")),
        "{bad:?}"
    );
}

#[test]
fn the_sweep_waits_and_a_paused_client_may_leave() {
    let srv = Server::start(&[]);
    let (mut admin, mut c) = (RespConn::new(&srv), RespConn::new(&srv));
    admin.str(&["CLIENT", "PAUSE", "100000", "WRITE"]);
    // Written before the pause reached it? No: SET waits. Use a key expiring inside it.
    admin.str(&["CLIENT", "UNPAUSE"]);
    admin.str(&["SET", "gone", "v", "PX", "20"]);
    admin.str(&["CLIENT", "PAUSE", "100000", "WRITE"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        admin.str(&["GET", "gone"]),
        Value::Bulk(None),
        "expired keys stay invisible"
    );
    assert_eq!(info_field(&mut admin, "stats", "expired_keys"), "0");
    // A paused client that closes is not counted any longer.
    c.send(&["SET", "x", "1"]);
    wait_blocked(&mut admin, 1);
    drop(c);
    wait_blocked(&mut admin, 0);
    admin.str(&["CLIENT", "UNPAUSE"]);
    let t0 = Instant::now();
    while info_field(&mut admin, "stats", "expired_keys") != "1" {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the sweep never resumed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
