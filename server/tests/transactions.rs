//! Transactions and atomic multi-key commands against the real server: MULTI/EXEC/DISCARD
//! with Redis's queueing and EXECABORT rules, WATCH conflicts, MSET/MSETNX/RENAME/RENAMENX,
//! and atomicity seen from other connections (on other event loops): a reader never sees
//! part of an EXEC or an MSET, and a transfer inside EXEC never loses a concurrent INCR.

mod common;

use accelkv_proto::resp::Value;
use common::{bulk, err_starts, RespConn as Conn, Server};

fn ok() -> Value {
    Value::Simple("OK".into())
}

fn queued() -> Value {
    Value::Simple("QUEUED".into())
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Bulk(Some(b)) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("not a number: {other:?}"),
    }
}

#[test]
fn multi_exec_queues_runs_and_aborts_as_redis() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    assert_eq!(c.str(&["MULTI"]), ok());
    assert_eq!(c.str(&["SET", "a", "1"]), queued());
    assert_eq!(c.str(&["INCR", "a"]), queued());
    assert_eq!(c.str(&["GET", "a"]), queued());
    assert_eq!(c.str(&["MGET", "a", "nope"]), queued());
    assert_eq!(c.str(&["EXISTS", "a", "nope"]), queued());
    assert_eq!(
        c.str(&["EXEC"]),
        Value::Array(Some(vec![
            ok(),
            Value::Integer(2),
            bulk("2"),
            Value::Array(Some(vec![bulk("2"), Value::Bulk(None)])),
            Value::Integer(1),
        ]))
    );
    assert_eq!(c.str(&["GET", "a"]), bulk("2"));

    // A refused command aborts the whole transaction; nothing runs.
    assert_eq!(c.str(&["MULTI"]), ok());
    assert_eq!(c.str(&["SET", "a", "99"]), queued());
    assert!(err_starts(
        &c.str(&["NOSUCH", "x"]),
        "ERR unknown command 'NOSUCH'"
    ));
    assert!(err_starts(
        &c.str(&["GET"]),
        "ERR wrong number of arguments for 'get' command"
    ));
    assert!(err_starts(
        &c.str(&["SCAN", "0"]),
        "ERR Command not allowed inside a transaction"
    ));
    assert!(err_starts(
        &c.str(&["MULTI"]),
        "ERR MULTI calls can not be nested"
    ));
    assert!(err_starts(
        &c.str(&["WATCH", "a"]),
        "ERR WATCH inside MULTI is not allowed"
    ));
    assert!(err_starts(
        &c.str(&["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    ));
    assert_eq!(c.str(&["GET", "a"]), bulk("2"));

    // A command that fails when run does not stop the others (Redis's semantics).
    assert_eq!(c.str(&["MULTI"]), ok());
    c.str(&["SET", "s", "abc"]);
    c.str(&["INCR", "s"]);
    c.str(&["SET", "t", "1"]);
    let r = c.str(&["EXEC"]);
    let Value::Array(Some(items)) = r else {
        panic!("EXEC: {r:?}")
    };
    assert_eq!(items[0], ok());
    assert!(err_starts(&items[1], "ERR value is not an integer"));
    assert_eq!(items[2], ok());
    assert_eq!(c.str(&["GET", "t"]), bulk("1"));

    // DISCARD drops the queue; EXEC and DISCARD need a MULTI.
    assert_eq!(c.str(&["MULTI"]), ok());
    c.str(&["SET", "t", "2"]);
    assert_eq!(c.str(&["DISCARD"]), ok());
    assert_eq!(c.str(&["GET", "t"]), bulk("1"));
    assert!(err_starts(&c.str(&["EXEC"]), "ERR EXEC without MULTI"));
    assert!(err_starts(
        &c.str(&["DISCARD"]),
        "ERR DISCARD without MULTI"
    ));
    // An empty transaction answers an empty array.
    c.str(&["MULTI"]);
    assert_eq!(c.str(&["EXEC"]), Value::Array(Some(vec![])));
}

#[test]
fn watch_aborts_exec_when_a_watched_key_changed() {
    let srv = Server::start(&[]);
    let (mut a, mut b) = (Conn::new(&srv), Conn::new(&srv));
    a.str(&["SET", "k", "0"]);
    // Changed by another connection: EXEC answers a null array and runs nothing.
    assert_eq!(a.str(&["WATCH", "k", "other"]), ok());
    b.str(&["SET", "k", "b"]);
    a.str(&["MULTI"]);
    a.str(&["SET", "k", "a"]);
    a.str(&["SET", "side", "effect"]);
    assert_eq!(a.str(&["EXEC"]), Value::Array(None));
    assert_eq!(a.str(&["GET", "k"]), bulk("b"));
    assert_eq!(a.str(&["GET", "side"]), Value::Bulk(None));
    // EXEC forgets the watches: the next transaction runs.
    a.str(&["MULTI"]);
    a.str(&["SET", "k", "a"]);
    assert_eq!(a.str(&["EXEC"]), Value::Array(Some(vec![ok()])));
    // Unchanged watched keys (one absent throughout): it runs.
    a.str(&["WATCH", "k", "absent"]);
    a.str(&["MULTI"]);
    a.str(&["INCR", "n"]);
    assert_eq!(
        a.str(&["EXEC"]),
        Value::Array(Some(vec![Value::Integer(1)]))
    );
    // A key created meanwhile counts as a change, and so does the client's own write.
    a.str(&["WATCH", "absent2"]);
    b.str(&["SET", "absent2", "x"]);
    a.str(&["MULTI"]);
    a.str(&["INCR", "n"]);
    assert_eq!(a.str(&["EXEC"]), Value::Array(None));
    a.str(&["WATCH", "k"]);
    a.str(&["SET", "k", "mine"]);
    a.str(&["MULTI"]);
    a.str(&["INCR", "n"]);
    assert_eq!(a.str(&["EXEC"]), Value::Array(None));
    // UNWATCH forgets them.
    a.str(&["WATCH", "k"]);
    b.str(&["SET", "k", "b2"]);
    assert_eq!(a.str(&["UNWATCH"]), ok());
    a.str(&["MULTI"]);
    a.str(&["INCR", "n"]);
    assert_eq!(
        a.str(&["EXEC"]),
        Value::Array(Some(vec![Value::Integer(2)]))
    );
}

#[test]
fn multi_key_commands_are_atomic_and_answer_as_redis() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    assert_eq!(c.str(&["MSET", "a", "1", "b", "2"]), ok());
    assert!(err_starts(
        &c.str(&["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    ));
    assert_eq!(c.str(&["MSETNX", "b", "x", "c", "3"]), Value::Integer(0));
    assert_eq!(c.str(&["GET", "c"]), Value::Bulk(None));
    assert_eq!(c.str(&["MSETNX", "c", "3", "d", "4"]), Value::Integer(1));
    assert_eq!(
        c.str(&["MGET", "c", "d"]),
        Value::Array(Some(vec![bulk("3"), bulk("4")]))
    );
    assert_eq!(c.str(&["RENAME", "a", "z"]), ok());
    assert_eq!(
        c.str(&["MGET", "a", "z"]),
        Value::Array(Some(vec![Value::Bulk(None), bulk("1")]))
    );
    assert!(err_starts(&c.str(&["RENAME", "a", "y"]), "ERR no such key"));
    assert_eq!(c.str(&["RENAME", "z", "b"]), ok(), "RENAME overwrites");
    assert_eq!(c.str(&["GET", "b"]), bulk("1"));
    assert_eq!(c.str(&["RENAMENX", "b", "c"]), Value::Integer(0));
    assert_eq!(c.str(&["RENAMENX", "b", "e"]), Value::Integer(1));
    assert_eq!(c.str(&["RENAMENX", "e", "e"]), Value::Integer(0));
    assert_eq!(c.str(&["RENAME", "e", "e"]), ok());
    assert_eq!(c.str(&["GET", "e"]), bulk("1"));
    assert!(err_starts(
        &c.str(&["RENAMENX", "nope", "f"]),
        "ERR no such key"
    ));
    // Inside a transaction they join it.
    c.str(&["MULTI"]);
    c.str(&["MSET", "p", "1", "q", "2"]);
    c.str(&["RENAME", "p", "r"]);
    c.str(&["MGET", "p", "q", "r"]);
    assert_eq!(
        c.str(&["EXEC"]),
        Value::Array(Some(vec![
            ok(),
            ok(),
            Value::Array(Some(vec![Value::Bulk(None), bulk("2"), bulk("1")]))
        ]))
    );
    // COMMAND INFO and DOCS describe them.
    let r = c.str(&["COMMAND", "INFO", "mset", "nosuch"]);
    let Value::Array(Some(items)) = r else {
        panic!("COMMAND INFO: {r:?}")
    };
    assert_eq!(items.len(), 2);
    let Value::Array(Some(mset)) = &items[0] else {
        panic!("{items:?}")
    };
    assert_eq!(mset[0], bulk("mset"));
    assert_eq!(mset[1], Value::Integer(-3));
    assert_eq!(
        (&mset[3], &mset[4], &mset[5]),
        (&Value::Integer(1), &Value::Integer(-1), &Value::Integer(2))
    );
    assert_eq!(items[1], Value::Bulk(None));
    let r = c.str(&["COMMAND", "DOCS", "rename"]);
    assert!(
        matches!(&r, Value::Array(Some(v)) if v.len() == 2 && v[0] == bulk("rename")),
        "{r:?}"
    );
}

/// A writer on one connection sets 40 keys to one round number per MSET, or per EXEC; a
/// reader on another (the server runs two event loops) reads them all with one MGET and
/// one RANGE: every read sees one round.
#[test]
fn readers_never_see_part_of_a_transaction() {
    let srv = Server::start(&["--threads", "2"]);
    let keys: Vec<String> = (0..40).map(|i| format!("t:{i:03}")).collect();
    let mut w = Conn::new(&srv);
    let mut init = vec!["MSET".to_string()];
    for k in &keys {
        init.push(k.clone());
        init.push("0".into());
    }
    let args: Vec<&str> = init.iter().map(String::as_str).collect();
    w.str(&args);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, keys) = (stop.clone(), keys.clone());
        let mut r = Conn::new(&srv);
        std::thread::spawn(move || {
            let mut reads = 0;
            let mut mget = vec!["MGET"];
            mget.extend(keys.iter().map(String::as_str));
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let Value::Array(Some(vals)) = r.str(&mget) else {
                    panic!("MGET")
                };
                let first = int_of(&vals[0]);
                assert!(
                    vals.iter().all(|v| int_of(v) == first),
                    "torn MGET {vals:?}"
                );
                let Value::Array(Some(flat)) = r.str(&["RANGE", "t:", "t;"]) else {
                    panic!("RANGE")
                };
                let vals: Vec<i64> = flat.chunks(2).map(|kv| int_of(&kv[1])).collect();
                assert_eq!(vals.len(), 40);
                assert!(vals.iter().all(|v| *v == vals[0]), "torn RANGE {vals:?}");
                reads += 1;
            }
            reads
        })
    };
    for round in 1..=1000 {
        let v = round.to_string();
        if round % 2 == 0 {
            let mut args = vec!["MSET"];
            for k in &keys {
                args.push(k);
                args.push(&v);
            }
            assert_eq!(w.str(&args), ok());
        } else {
            w.str(&["MULTI"]);
            for k in &keys {
                assert_eq!(w.str(&["SET", k, &v]), queued());
            }
            let Value::Array(Some(r)) = w.str(&["EXEC"]) else {
                panic!("EXEC")
            };
            assert_eq!(r.len(), 40);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
}

/// Transfers inside EXEC (DECR one counter, INCR another) against INCRBY 1000 of the same
/// counters from another connection: the total is exact (no update lost to the
/// transaction) and a reader's MGET never sees a transfer in part.
#[test]
fn transfers_inside_exec_lose_no_concurrent_increment() {
    let srv = Server::start(&["--threads", "2"]);
    let mut setup = Conn::new(&srv);
    setup.str(&["MSET", "c0", "0", "c1", "0", "c2", "0"]);
    let incr = {
        let mut c = Conn::new(&srv);
        std::thread::spawn(move || {
            for i in 0..600 {
                let k = ["c0", "c1", "c2"][i % 3];
                assert!(matches!(c.str(&["INCRBY", k, "1000"]), Value::Integer(_)));
            }
        })
    };
    let mover = {
        let mut c = Conn::new(&srv);
        std::thread::spawn(move || {
            for i in 0..600 {
                let (from, to) = (["c0", "c1", "c2"][i % 3], ["c0", "c1", "c2"][(i + 1) % 3]);
                c.str(&["MULTI"]);
                c.str(&["DECR", from]);
                c.str(&["INCR", to]);
                assert!(matches!(c.str(&["EXEC"]), Value::Array(Some(v)) if v.len() == 2));
            }
        })
    };
    let mut r = Conn::new(&srv);
    while !(incr.is_finished() && mover.is_finished()) {
        let Value::Array(Some(v)) = r.str(&["MGET", "c0", "c1", "c2"]) else {
            panic!("MGET")
        };
        let sum: i64 = v.iter().map(int_of).sum();
        assert_eq!(sum % 1000, 0, "a transfer seen in part: {v:?}");
    }
    incr.join().unwrap();
    mover.join().unwrap();
    let Value::Array(Some(v)) = r.str(&["MGET", "c0", "c1", "c2"]) else {
        panic!("MGET")
    };
    assert_eq!(v.iter().map(int_of).sum::<i64>(), 600 * 1000);
}

/// MSET and EXEC of 200 keys (about 20 KB, several leaves and pages) under `--data-dir`,
/// the server killed with SIGKILL at random moments: after each restart every key holds the
/// same round (a transaction is durable whole or not at all), and under `--sync sync` that
/// round is at least the last one acknowledged.
#[test]
fn transactions_survive_kill_9_whole() {
    let dir = std::env::temp_dir().join(format!("accelkv-tx-kill9-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let keys: Vec<String> = (0..200).map(|i| format!("tx:{i:04}")).collect();
    let value = |round: u64| format!("{round:010}").repeat(10);
    let mut last_acked = 0u64;
    let mut next = 1u64;
    for kill in 0..8u64 {
        let sync = if kill % 2 == 0 { "sync" } else { "none" };
        let srv = Server::start(&["--data-dir", &d, "--sync", sync, "--node-size", "4096"]);
        let mut c = Conn::new(&srv);
        let mut mget = vec!["MGET"];
        mget.extend(keys.iter().map(String::as_str));
        let Value::Array(Some(vals)) = c.str(&mget) else {
            panic!("MGET")
        };
        let first = vals[0].clone();
        assert!(
            vals.iter().all(|v| *v == first),
            "restart {kill}: a transaction recovered in part"
        );
        let recovered = match first {
            Value::Bulk(None) => 0,
            Value::Bulk(Some(v)) => std::str::from_utf8(&v[..10]).unwrap().parse().unwrap(),
            other => panic!("{other:?}"),
        };
        assert!(
            recovered >= last_acked,
            "restart {kill}: round {last_acked} was acknowledged, {recovered} recovered"
        );
        next = next.max(recovered + 1);
        let acked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(recovered));
        let writer = {
            let (keys, acked, mut c) = (keys.clone(), acked.clone(), Conn::new(&srv));
            let start = next;
            std::thread::spawn(move || {
                for round in start.. {
                    let v = value(round);
                    let ok = if round % 2 == 0 {
                        let mut args: Vec<&[u8]> = vec![b"MSET"];
                        for k in &keys {
                            args.push(k.as_bytes());
                            args.push(v.as_bytes());
                        }
                        c.try_call(&args) == Some(Value::Simple("OK".into()))
                    } else {
                        if c.try_call(&[b"MULTI"]).is_none() {
                            return;
                        }
                        for k in &keys {
                            if c.try_call(&[b"SET", k.as_bytes(), v.as_bytes()]).is_none() {
                                return;
                            }
                        }
                        matches!(c.try_call(&[b"EXEC"]), Some(Value::Array(Some(_))))
                    };
                    if !ok {
                        return;
                    }
                    acked.store(round, std::sync::atomic::Ordering::SeqCst);
                }
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(150 + 97 * kill % 300));
        let mut srv = srv;
        srv.child.kill().unwrap();
        srv.child.wait().unwrap();
        writer.join().unwrap();
        let a = acked.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            a > recovered,
            "restart {kill}: nothing was acknowledged before the kill"
        );
        last_acked = if sync == "sync" { a } else { 0 };
        next = a + 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What counts as touching a watched key, as in Redis 7.0 (its unit/multi tests): a key
/// that expires after WATCH aborts EXEC even though nothing wrote it; one already expired
/// at WATCH does not; FLUSHALL aborts only for keys it removed; a command refused for
/// maxmemory while queueing makes EXEC answer EXECABORT and run nothing.
#[test]
fn watch_counts_expiry_and_flushall_as_redis_does() {
    let srv = Server::start(&[]);
    let mut c = Conn::new(&srv);
    let exec_ping = |c: &mut Conn| {
        assert_eq!(c.str(&["MULTI"]), ok());
        assert_eq!(c.str(&["PING"]), queued());
        c.str(&["EXEC"])
    };
    // Live at WATCH, expired at EXEC: aborted.
    c.str(&["SET", "k", "1", "PX", "100"]);
    c.str(&["WATCH", "k"]);
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(exec_ping(&mut c), Value::Array(None));
    // Already expired at WATCH: runs.
    c.str(&["SET", "k", "1", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.str(&["WATCH", "k"]);
    assert_eq!(
        exec_ping(&mut c),
        Value::Array(Some(vec![Value::Simple("PONG".into())]))
    );
    // FLUSHALL of a key that was not there: runs; of one that was: aborted.
    c.str(&["DEL", "x"]);
    c.str(&["WATCH", "x"]);
    c.str(&["FLUSHALL"]);
    assert_eq!(
        exec_ping(&mut c),
        Value::Array(Some(vec![Value::Simple("PONG".into())]))
    );
    c.str(&["SET", "x", "1"]);
    c.str(&["WATCH", "x"]);
    c.str(&["FLUSHALL"]);
    assert_eq!(exec_ping(&mut c), Value::Array(None));
    // A key absent at WATCH, absent at EXEC, written after a FLUSHALL: aborted. (Written
    // before the FLUSHALL that removed it again is not seen: docs/PROTOCOL.md.)
    c.str(&["WATCH", "y"]);
    c.str(&["FLUSHALL"]);
    c.str(&["SET", "y", "1"]);
    c.str(&["DEL", "y"]);
    assert_eq!(exec_ping(&mut c), Value::Array(None));
    // Refused for maxmemory while queueing: EXECABORT, nothing runs.
    let mut other = Conn::new(&srv);
    assert_eq!(c.str(&["MULTI"]), ok());
    assert_eq!(c.str(&["SET", "a", "1"]), queued());
    assert_eq!(other.str(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert!(err_starts(&c.str(&["LPUSH", "l", "v"]), "OOM"));
    assert_eq!(other.str(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(c.str(&["SET", "b", "2"]), queued());
    assert!(err_starts(&c.str(&["EXEC"]), "EXECABORT"));
    assert_eq!(c.str(&["EXISTS", "a", "b"]), Value::Integer(0));
}

/// Redis's "EXEC with at least one use-memory command should fail": past `maxmemory`,
/// EXEC of a transaction holding a `denyoom` command is refused whole (EXECABORT naming
/// the OOM) and the connection leaves MULTI; one of reads and deletes only runs.
#[test]
fn exec_past_maxmemory_refuses_a_transaction_that_uses_memory() {
    let srv = Server::start(&[]);
    let (mut c, mut admin) = (Conn::new(&srv), Conn::new(&srv));
    c.str(&["SET", "y", "1"]);
    assert_eq!(c.str(&["MULTI"]), ok());
    assert_eq!(c.str(&["SET", "x", "1"]), queued());
    assert_eq!(c.str(&["GET", "x"]), queued());
    assert_eq!(admin.str(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    let r = c.str(&["EXEC"]);
    assert!(
        err_starts(&r, "EXECABORT Transaction discarded because of: OOM"),
        "{r:?}"
    );
    assert_eq!(
        c.str(&["GET", "x"]),
        Value::Bulk(None),
        "out of MULTI, nothing ran"
    );
    assert_eq!(c.str(&["MULTI"]), ok());
    assert_eq!(c.str(&["GET", "y"]), queued());
    assert_eq!(c.str(&["DEL", "y"]), queued());
    assert_eq!(
        c.str(&["EXEC"]),
        Value::Array(Some(vec![bulk("1"), Value::Integer(1)]))
    );
    assert_eq!(admin.str(&["CONFIG", "SET", "maxmemory", "0"]), ok());
}
