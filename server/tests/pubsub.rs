//! Pub/sub against the real server: the RESP2 pub/sub context compared reply by reply with
//! a real `redis-server`, messages from several publishers arriving whole and in publish
//! order per channel, RESP3 pushes between replies, a subscriber that stops reading
//! disconnected at the queue limit instead of growing without bound, and subscriptions that
//! end with their connection; CLIENT REPLY OFF, SKIP and ON as Redis answers them.

mod common;

use accelkv_proto::resp::Value;
use common::{bulk, RespConn, Server};
use std::time::{Duration, Instant};

/// One connection through the pub/sub context and out of it (one name per command, so
/// every command has one reply).
const CONTEXT: &[&str] = &[
    "SUBSCRIBE a",
    "PSUBSCRIBE p*",
    "SSUBSCRIBE s",
    "SUBSCRIBE a",
    "PING",
    "PING hello",
    "GET k",
    "PUBSUB NUMPAT",
    "UNSUBSCRIBE a",
    "PUNSUBSCRIBE p*",
    "SUNSUBSCRIBE s",
    "PING",
    "UNSUBSCRIBE",
    "PUNSUBSCRIBE",
    "SUNSUBSCRIBE",
    "UNSUBSCRIBE never",
    "PUBSUB NUMSUB a",
    "PUBSUB NUMPAT",
    "PUBSUB CHANNELS",
    "PUBSUB SHARDCHANNELS",
    "PUBSUB SHARDNUMSUB s",
    "PUBLISH a m",
    "SPUBLISH s m",
    "PUBSUB NOPE",
    "GET k",
];

#[test]
fn the_pubsub_context_answers_as_redis_does() {
    common::answers_as_redis_does(CONTEXT);
}

/// Two publishers on two channels at once, one subscriber to both and to a pattern over
/// both: every message arrives once per subscription, whole, and each channel's in the
/// order it was published.
#[test]
fn messages_arrive_whole_and_in_publish_order_per_channel() {
    let srv = Server::start(&["--threads", "3"]);
    let mut sub = RespConn::new(&srv);
    sub.send(&["SUBSCRIBE", "c0", "c1"]);
    sub.read();
    sub.read();
    sub.str(&["PSUBSCRIBE", "c*"]);
    const N: usize = 500;
    let addr = srv.resp;
    let pubs: Vec<_> = (0..2)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for i in 0..N {
                    let r = c.str(&["PUBLISH", &format!("c{p}"), &format!("{p}-{i}")]);
                    assert_eq!(r, Value::Integer(2));
                }
            })
        })
        .collect();
    let mut next = [[0usize; 2]; 2]; // per channel: next message, next pmessage
    for _ in 0..4 * N {
        let Value::Array(Some(parts)) = sub.read() else {
            panic!("not a message")
        };
        let text = |v: &Value| match v {
            Value::Bulk(Some(b)) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("{other:?}"),
        };
        let (kind, payload) = (text(&parts[0]), text(parts.last().unwrap()));
        let (ch, i) = payload.split_once('-').unwrap();
        let (ch, i): (usize, usize) = (ch.parse().unwrap(), i.parse().unwrap());
        let k = usize::from(kind == "pmessage");
        assert_eq!(i, next[ch][k], "{kind} on c{ch} out of order");
        next[ch][k] += 1;
    }
    for p in pubs {
        p.join().unwrap();
    }
    assert_eq!(next, [[N, N], [N, N]]);
}

/// In RESP3 a subscribed connection runs any command, and messages arrive as pushes
/// between its replies (read as bytes: the test client parses RESP2 only).
#[test]
fn resp3_subscribers_run_commands_and_get_pushes() {
    use std::io::{Read, Write};
    let srv = Server::start(&[]);
    let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut until = |s: &mut std::net::TcpStream, tail: &[u8]| {
        let mut b = [0u8; 4096];
        while !got.ends_with(tail) {
            let n = s.read(&mut b).expect("read");
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&b[..n]);
        }
        std::mem::take(&mut got)
    };
    let mut cmds = Vec::new();
    for c in [
        &["HELLO", "3"][..],
        &["SUBSCRIBE", "news"],
        &["SET", "k", "v"],
        &["GET", "k"],
    ] {
        let a: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        accelkv_proto::resp::command(&mut cmds, &a);
    }
    s.write_all(&cmds).unwrap();
    let replies = until(&mut s, b"$1\r\nv\r\n");
    let want = b">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n+OK\r\n$1\r\nv\r\n";
    assert!(
        replies.ends_with(want),
        "{}",
        String::from_utf8_lossy(&replies)
    );
    let mut p = RespConn::new(&srv);
    assert_eq!(p.str(&["PUBLISH", "news", "hi"]), Value::Integer(1));
    let push = b">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n";
    assert_eq!(until(&mut s, push), push.to_vec());
    let mut get = Vec::new();
    accelkv_proto::resp::command(&mut get, &[b"GET", b"k"]);
    s.write_all(&get).unwrap();
    assert_eq!(until(&mut s, b"$1\r\nv\r\n"), b"$1\r\nv\r\n".to_vec());
}

/// A subscriber that stops reading is disconnected once its queue passes the limit, and
/// its subscription goes with it: the server does not hold an unbounded backlog.
#[test]
fn a_subscriber_that_stops_reading_is_disconnected() {
    let srv = Server::start(&[]);
    let mut sub = RespConn::new(&srv);
    sub.str(&["SUBSCRIBE", "flood"]);
    let mut p = RespConn::new(&srv);
    let big = "x".repeat(1 << 20);
    let t0 = Instant::now();
    // 64 MiB of output, 32 MiB of queue, and what the sockets hold: 160 MiB is past all.
    for _ in 0..160 {
        p.str(&["PUBLISH", "flood", &big]);
    }
    loop {
        let n = p.str(&["PUBSUB", "NUMSUB", "flood"]);
        if n == Value::Array(Some(vec![bulk("flood"), Value::Integer(0)])) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "still subscribed: {n:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(p.str(&["PUBLISH", "flood", "late"]), Value::Integer(0));
}

/// A connection's subscriptions end with it.
#[test]
fn subscriptions_end_with_their_connection() {
    let srv = Server::start(&[]);
    let mut p = RespConn::new(&srv);
    {
        let mut sub = RespConn::new(&srv);
        sub.str(&["SUBSCRIBE", "gone"]);
        sub.str(&["PSUBSCRIBE", "g*"]);
        assert_eq!(p.str(&["PUBLISH", "gone", "x"]), Value::Integer(2));
    }
    let t0 = Instant::now();
    while p.str(&["PUBLISH", "gone", "x"]) != Value::Integer(0) {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(p.str(&["PUBSUB", "NUMPAT"]), Value::Integer(0));
    // RESET ends them too.
    let mut sub = RespConn::new(&srv);
    sub.str(&["SUBSCRIBE", "r"]);
    assert_eq!(sub.str(&["RESET"]), Value::Simple("RESET".into()));
    assert_eq!(sub.str(&["GET", "nothing"]), Value::Bulk(None));
    assert_eq!(p.str(&["PUBLISH", "r", "x"]), Value::Integer(0));
}

/// CLIENT REPLY OFF, SKIP and ON, pipelined, with errors and a subscription between: the
/// replies that arrive are Redis's, one for one (pub/sub's confirmations and messages are
/// sent whatever CLIENT REPLY says).
#[test]
fn client_reply_holds_back_what_redis_holds_back() {
    let Some(mut both) = common::beside_redis() else {
        return;
    };
    let script: &[&[&str]] = &[
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["NOSUCHCOMMAND"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "a"],
        &["INCR", "a"],
        &["CLIENT", "REPLY", "BAD"],
        &["CLIENT", "REPLY", "OFF"],
        &["SUBSCRIBE", "ch"],
        &["PUBLISH", "ch", "x"],
        &["UNSUBSCRIBE", "ch"],
        &["CLIENT", "REPLY", "ON"],
        &["PING"],
    ];
    let mut runs = Vec::new();
    for c in [&mut both.ours, &mut both.theirs] {
        for args in script {
            c.send(args);
        }
        // The marker: everything before it has been answered once its reply is read.
        c.send(&["ECHO", "end"]);
        let mut got = Vec::new();
        loop {
            let v = c.read();
            if v == bulk("end") {
                break;
            }
            got.push(v);
        }
        runs.push(got);
    }
    assert_eq!(runs[0], runs[1], "accelkv, then redis");
    assert!(runs[0].len() >= 6, "{:?}", runs[0]);
}
