//! MIGRATE between accelkv and a real `redis-server`, both ways: every type's value (but
//! streams, whose DUMP is Redis 7.2's and CI's Redis is 7.0: `dump.rs` covers them) and
//! time to live arrive, the source keys go (or stay, with COPY), REPLACE, BUSYKEY, NOKEY,
//! AUTH, an unreachable target, and Redis's errors for malformed commands; and a key written
//! here while its MIGRATE waits on a (slow, fake) target is left here, not removed with its
//! new value.

mod common;

use accelkv_proto::resp::Value;
use common::{beside_redis, bulk, err_starts, RespConn, Server};
use std::io::{Read, Write};

fn simple(s: &str) -> Value {
    Value::Simple(s.into())
}

#[test]
fn keys_move_both_ways() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    let redis_port = theirs.peer_port().to_string();
    let our_port = ours.peer_port().to_string();
    for c in [
        vec!["SET", "s", "hello"],
        vec!["PEXPIRE", "s", "100000"],
        vec!["RPUSH", "l", "a", "b", "c"],
        vec!["HSET", "h", "f", "v", "g", "w"],
        vec!["SADD", "st", "x", "y"],
        vec!["ZADD", "z", "1.5", "m", "2", "n"],
    ] {
        ours.str(&c);
    }
    let one = ["MIGRATE", "127.0.0.1", &redis_port, "s", "0", "5000"];
    assert_eq!(ours.str(&one), simple("OK"));
    let keys = [
        "MIGRATE",
        "127.0.0.1",
        &redis_port,
        "",
        "0",
        "5000",
        "KEYS",
        "l",
        "h",
        "st",
        "z",
        "nosuch",
    ];
    assert_eq!(ours.str(&keys), simple("OK"));
    assert_eq!(
        ours.str(&["EXISTS", "s", "l", "h", "st", "z"]),
        Value::Integer(0)
    );
    assert_eq!(theirs.str(&["GET", "s"]), bulk("hello"));
    let Value::Integer(ttl) = theirs.str(&["PTTL", "s"]) else {
        panic!()
    };
    assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
    assert_eq!(
        theirs.str(&["LRANGE", "l", "0", "-1"]),
        common::bulk_array(&["a", "b", "c"])
    );
    assert_eq!(theirs.str(&["HGET", "h", "g"]), bulk("w"));
    assert_eq!(theirs.str(&["SCARD", "st"]), Value::Integer(2));
    assert_eq!(theirs.str(&["ZSCORE", "z", "m"]), bulk("1.5"));
    // Back again, into database 2, copied.
    let back = [
        "MIGRATE",
        "127.0.0.1",
        &our_port,
        "",
        "2",
        "5000",
        "COPY",
        "KEYS",
        "s",
        "z",
    ];
    assert_eq!(theirs.str(&back), simple("OK"));
    assert_eq!(theirs.str(&["EXISTS", "s", "z"]), Value::Integer(2));
    assert_eq!(ours.str(&["SELECT", "2"]), simple("OK"));
    assert_eq!(ours.str(&["GET", "s"]), bulk("hello"));
    assert_eq!(ours.str(&["ZSCORE", "z", "n"]), bulk("2"));
    // From database 2 here: the key as the client names it, not as it is stored.
    let to_db5 = [
        "MIGRATE",
        "127.0.0.1",
        &redis_port,
        "s",
        "5",
        "5000",
        "REPLACE",
    ];
    assert_eq!(ours.str(&to_db5), simple("OK"));
    assert_eq!(theirs.str(&["SELECT", "5"]), simple("OK"));
    assert_eq!(theirs.str(&["GET", "s"]), bulk("hello"));
    // BUSYKEY without REPLACE; the key stays.
    assert_eq!(theirs.str(&["SELECT", "0"]), simple("OK"));
    ours.str(&["SET", "s", "again"]);
    let busy = ours.str(&["MIGRATE", "127.0.0.1", &redis_port, "s", "0", "5000"]);
    assert!(
        err_starts(&busy, "ERR Target instance replied with error: BUSYKEY"),
        "{busy:?}"
    );
    assert_eq!(ours.str(&["GET", "s"]), bulk("again"));
    assert_eq!(
        ours.str(&["MIGRATE", "127.0.0.1", &redis_port, "nosuch", "0", "5000"]),
        simple("NOKEY")
    );
    let auth = ours.str(&[
        "MIGRATE",
        "127.0.0.1",
        &redis_port,
        "s",
        "0",
        "5000",
        "AUTH",
        "pw",
    ]);
    assert!(
        err_starts(&auth, "ERR Target instance replied with error:"),
        "{auth:?}"
    );
    assert_eq!(ours.str(&["GET", "s"]), bulk("again"));
}

#[test]
fn malformed_commands_get_redis_errors() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let unreachable = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    both.ours.str(&["SET", "k", "v"]);
    both.theirs.str(&["SET", "k", "v"]);
    let cases: Vec<Vec<&str>> = vec![
        vec!["MIGRATE", "127.0.0.1", "1", "k", "0", "100", "BOGUS"],
        vec!["MIGRATE", "127.0.0.1", "1", "k", "0", "100", "KEYS", "a"],
        vec!["MIGRATE", "127.0.0.1", "1", "k", "notanumber", "100"],
        vec!["MIGRATE", "127.0.0.1", "1", "k", "0", "x"],
        vec!["MIGRATE", "127.0.0.1", "1", "k", "0"],
        vec!["MIGRATE", "127.0.0.1", &unreachable, "k", "0", "200"],
        vec!["MIGRATE", "127.0.0.1", &unreachable, "nosuch", "0", "200"],
    ];
    let mut differ = Vec::new();
    for c in &cases {
        let (a, b) = (both.ours.str(c), both.theirs.str(c));
        if a != b {
            differ.push(format!("{c:?}: accelkv {a:?}, redis {b:?}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// A target that answers AUTH/SELECT/RESTORE only once `go` is set.
fn slow_target(go: std::sync::mpsc::Receiver<()>) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut got = vec![0u8; 1 << 16];
        let n = c.read(&mut got).unwrap();
        go.recv().unwrap();
        c.write_all(b"+OK\r\n+OK\r\n").unwrap();
        got.truncate(n);
        got
    });
    (port, t)
}

#[test]
fn a_key_written_while_it_migrates_is_copied_not_moved() {
    let srv = Server::start(&["--threads", "2"]);
    let mut c = RespConn::new(&srv);
    c.str(&["SET", "k", "old"]);
    let (tx, rx) = std::sync::mpsc::channel();
    let (port, target) = slow_target(rx);
    let addr = srv.resp;
    let port_s = port.to_string();
    let mover = std::thread::spawn(move || {
        let mut m = RespConn::connect(addr);
        m.str(&["MIGRATE", "127.0.0.1", &port_s, "k", "0", "10000"])
    });
    // The MIGRATE has read the key and waits on the target: write the key meanwhile.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut w = RespConn::new(&srv);
    assert_eq!(w.str(&["SET", "k", "new"]), simple("OK"));
    tx.send(()).unwrap();
    let reply = mover.join().unwrap();
    assert!(
        err_starts(&reply, "ERR a key was written here while it was migrated"),
        "{reply:?}"
    );
    assert_eq!(c.str(&["GET", "k"]), bulk("new"));
    let sent = String::from_utf8_lossy(&target.join().unwrap()).into_owned();
    assert!(
        sent.contains("RESTORE") && sent.contains("SELECT"),
        "{sent}"
    );
    // Unwritten, it is moved.
    let (tx, rx) = std::sync::mpsc::channel();
    let (port, target) = slow_target(rx);
    tx.send(()).unwrap();
    assert_eq!(
        c.str(&["MIGRATE", "127.0.0.1", &port.to_string(), "k", "0", "10000"]),
        simple("OK")
    );
    assert_eq!(c.str(&["EXISTS", "k"]), Value::Integer(0));
    target.join().unwrap();
}

/// MIGRATE keeps its connection to a target for the next MIGRATE to it, as Redis does
/// (`migrate_cached_sockets`): three MIGRATEs open one connection on the target; one the
/// target closed is replaced, not used.
#[test]
fn the_connection_to_a_target_is_kept_and_replaced_when_closed() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    let port = theirs.peer_port().to_string();
    let connections = |c: &mut RespConn| -> i64 {
        common::info_field(c, "stats", "total_connections_received")
            .parse()
            .unwrap()
    };
    let before = connections(theirs);
    for k in ["a", "b", "c"] {
        ours.str(&["SET", k, "v"]);
        let m = ["MIGRATE", "127.0.0.1", &port, k, "0", "5000"];
        assert_eq!(ours.str(&m), simple("OK"), "{k}");
    }
    assert_eq!(
        connections(theirs),
        before + 1,
        "one connection for the three"
    );
    assert_eq!(
        common::info_field(ours, "stats", "migrate_cached_sockets"),
        "1"
    );
    // The target closes it (every client but the one asking): the next MIGRATE connects
    // again and succeeds.
    let killed = theirs.str(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    assert_eq!(killed, Value::Integer(1));
    std::thread::sleep(std::time::Duration::from_millis(50));
    ours.str(&["SET", "d", "v"]);
    let m = ["MIGRATE", "127.0.0.1", &port, "d", "0", "5000"];
    assert_eq!(ours.str(&m), simple("OK"));
    assert_eq!(theirs.str(&["GET", "d"]), bulk("v"));
    assert_eq!(connections(theirs), before + 2);
}
