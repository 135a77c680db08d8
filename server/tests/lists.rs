//! Redis's lists over RESP: one script of list commands (and the key-level commands that
//! meet lists) run on accelkv and on a real `redis-server`, every reply compared; then what
//! a script cannot show: a push of many elements is atomic to concurrent readers, and the
//! blocking pops park a connection until another connection's push wakes it (in the order
//! they parked), time out, answer at once inside MULTI, and leave no trace when their
//! client goes away.

mod common;

use accelkv_proto::resp::Value;
use common::{bulk_array, strings, wait_blocked, RespConn, Server};
use std::time::{Duration, Instant};

const SCRIPT: &[&str] = &[
    "RPUSH l a b c d e",
    "LPUSH l z y",
    "LRANGE l 0 -1",
    "LRANGE l 1 3",
    "LRANGE l -3 -1",
    "LRANGE l 5 2",
    "LRANGE l -100 100",
    "LRANGE nothing 0 -1",
    "LLEN l",
    "LLEN nothing",
    "LINDEX l 0",
    "LINDEX l -1",
    "LINDEX l 7",
    "LINDEX nothing 0",
    "LPOP l",
    "RPOP l",
    "LPOP l 2",
    "RPOP l 2",
    "LPOP l 0",
    "LPOP nothing",
    "LPOP nothing 2",
    "LPOP l -1",
    "LRANGE l 0 -1",
    "RPUSH l a b a c a",
    "LREM l 2 a",
    "LRANGE l 0 -1",
    "LREM l -1 a",
    "LRANGE l 0 -1",
    "LREM l 0 zz",
    "RPUSH r 1 2 3 4 5 6 7 8",
    "LINSERT r BEFORE 2 x",
    "LINSERT r AFTER 7 y",
    "LINSERT r AFTER 99 z",
    "LINSERT nothing AFTER 1 z",
    "LINSERT r SIDEWAYS 1 z",
    "LRANGE r 0 -1",
    "LSET r 0 first",
    "LSET r -1 last",
    "LSET r 100 x",
    "LSET nothing 0 x",
    "LRANGE r 0 -1",
    "LTRIM r 1 -2",
    "LRANGE r 0 -1",
    "LTRIM r 5 2",
    "EXISTS r",
    "RPUSH p a b c a b c a",
    "LPOS p a",
    "LPOS p a RANK 2",
    "LPOS p a RANK -1",
    "LPOS p a COUNT 0",
    "LPOS p a COUNT 2 RANK -1",
    "LPOS p a MAXLEN 1 COUNT 0",
    "LPOS p zz",
    "LPOS p zz COUNT 1",
    "LPOS p a RANK 0",
    "LPOS p a COUNT -1",
    "LPOS p a FOO 1",
    "LPOS nothing a",
    "RPUSHX nothing a",
    "LPUSHX nothing a",
    "LPUSHX p z",
    "RPUSHX p q",
    "LRANGE p 0 -1",
    "DEL src dst",
    "RPUSH src 1 2 3",
    "LMOVE src dst LEFT RIGHT",
    "LMOVE src dst RIGHT LEFT",
    "LMOVE src src LEFT RIGHT",
    "LRANGE src 0 -1",
    "LRANGE dst 0 -1",
    "RPOPLPUSH src dst",
    "RPOPLPUSH src dst",
    "EXISTS src",
    "LMOVE nothing dst LEFT LEFT",
    "LMOVE dst src UP LEFT",
    "LMPOP 2 nothing dst LEFT",
    "LMPOP 2 nothing dst RIGHT COUNT 10",
    "LMPOP 1 nothing LEFT",
    "LMPOP 0 dst LEFT",
    "LMPOP 1 dst LEFT COUNT 0",
    "SET s v",
    "LPUSH s a",
    "LRANGE s 0 -1",
    "LMOVE p s LEFT LEFT",
    "LLEN s",
    "GET p",
    "TYPE p",
    "RENAME p q",
    "LRANGE q 0 -1",
    "COPY q q2",
    "RPUSH q2 extra",
    "LRANGE q2 0 -1",
    "LLEN q",
    "EXPIRE q 100",
    "TTL q",
    "DEL q q2",
    "BLPOP nothing 0.01",
    "RPUSH b 1 2",
    "BLPOP nothing b 1",
    "BRPOP b 1",
    "BLMOVE nothing dst LEFT LEFT 0.01",
    "BLMPOP 0.01 1 nothing LEFT",
    "BLPOP b -1",
    "BLPOP b abc",
    "SCAN 0 COUNT 1000 TYPE list",
];

#[test]
fn lists_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

/// Two writers RPUSH 20 equal elements at a time while a reader takes LRANGE: every
/// LRANGE sees whole pushes (its length a multiple of 20, every run of 20 equal).
#[test]
fn a_push_of_many_elements_is_seen_whole_or_not_at_all() {
    let srv = Server::start(&[]);
    let addr = srv.resp;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for round in 0..100 {
                    let v = format!("{w}-{round}");
                    let mut args = vec!["RPUSH", "l"];
                    args.extend(std::iter::repeat_n(v.as_str(), 20));
                    c.str(&args);
                }
            })
        })
        .collect();
    let mut c = RespConn::connect(addr);
    while writers.iter().any(|w| !w.is_finished()) {
        let all = strings(c.str(&["LRANGE", "l", "0", "-1"]));
        assert_eq!(all.len() % 20, 0, "a torn RPUSH");
        for run in all.chunks(20) {
            assert!(run.iter().all(|e| *e == run[0]), "a torn RPUSH: {run:?}");
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(c.str(&["LLEN", "l"]), Value::Integer(4000));
}

/// Sends a command without reading its reply.
fn send(c: &mut RespConn, args: &[&str]) {
    c.send(args);
}

#[test]
fn a_blocked_pop_is_woken_by_a_push_from_another_connection() {
    let srv = Server::start(&[]);
    let mut waiter = RespConn::new(&srv);
    let mut pusher = RespConn::new(&srv);
    send(&mut waiter, &["BLPOP", "q1", "q2", "0"]);
    // Parked: INFO counts it, and other connections are served meanwhile.
    wait_blocked(&mut pusher, 1);
    assert_eq!(pusher.str(&["PING"]), Value::Simple("PONG".into()));
    assert_eq!(pusher.str(&["RPUSH", "q2", "x", "y"]), Value::Integer(2));
    assert_eq!(waiter.read(), bulk_array(&["q2", "x"]));
    assert_eq!(pusher.str(&["LRANGE", "q2", "0", "-1"]), bulk_array(&["y"]));
    // The connection goes on normally.
    assert_eq!(
        waiter.str(&["LPOP", "q2"]),
        Value::Bulk(Some(b"y".to_vec()))
    );
    // BLMOVE parks too, and moves what is pushed.
    send(&mut waiter, &["BLMOVE", "src", "dst", "RIGHT", "LEFT", "5"]);
    wait_blocked(&mut pusher, 1);
    pusher.str(&["LPUSH", "src", "m"]);
    assert_eq!(waiter.read(), Value::Bulk(Some(b"m".to_vec())));
    assert_eq!(
        pusher.str(&["LRANGE", "dst", "0", "-1"]),
        bulk_array(&["m"])
    );
    // A push inside MULTI wakes once EXEC commits.
    send(&mut waiter, &["BRPOP", "t", "5"]);
    wait_blocked(&mut pusher, 1);
    pusher.str(&["MULTI"]);
    pusher.str(&["RPUSH", "t", "1"]);
    pusher.str(&["EXEC"]);
    assert_eq!(waiter.read(), bulk_array(&["t", "1"]));
    wait_blocked(&mut pusher, 0);
}

#[test]
fn parked_connections_are_served_in_the_order_they_parked() {
    let srv = Server::start(&["--threads", "1"]);
    let mut pusher = RespConn::new(&srv);
    let mut waiters: Vec<RespConn> = (0..3).map(|_| RespConn::new(&srv)).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        send(w, &["BLPOP", "fifo", "10"]);
        wait_blocked(&mut pusher, i + 1);
    }
    pusher.str(&["RPUSH", "fifo", "a", "b", "c"]);
    for (w, e) in waiters.iter_mut().zip(["a", "b", "c"]) {
        assert_eq!(w.read(), bulk_array(&["fifo", e]));
    }
}

#[test]
fn blocked_pops_time_out_and_never_block_inside_multi() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let t0 = Instant::now();
    assert_eq!(c.str(&["BLPOP", "none", "0.2"]), Value::Array(None));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert_eq!(
        c.str(&["BLMOVE", "none", "d", "LEFT", "LEFT", "0.05"]),
        Value::Array(None)
    );
    c.str(&["MULTI"]);
    c.str(&["BLPOP", "none", "0"]);
    assert_eq!(
        c.str(&["EXEC"]),
        Value::Array(Some(vec![Value::Array(None)]))
    );
}

#[test]
fn a_client_gone_while_parked_leaves_nothing_behind() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    {
        let mut gone = RespConn::new(&srv);
        send(&mut gone, &["BLPOP", "k", "0"]);
        wait_blocked(&mut c, 1);
    }
    wait_blocked(&mut c, 0);
    // Nothing was taken for the departed client.
    c.str(&["RPUSH", "k", "v"]);
    assert_eq!(c.str(&["LLEN", "k"]), Value::Integer(1));
}
