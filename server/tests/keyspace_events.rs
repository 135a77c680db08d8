//! Keyspace notifications (`notify-keyspace-events`) against a real `redis-server`: a
//! script of writes over every type, run on both with every class on, and the events a
//! pattern subscriber receives compared one by one; classes masked; failed commands and
//! aborted transactions announcing nothing; events inside MULTI and scripts published in
//! order after the commit; the expiry sweep's `expired`; `new` and `keymiss`; the
//! database in the channel name; CONFIG GET's form of the classes.

mod common;

use accelkv_proto::resp::Value;
use common::{Redis, RespConn, Server};

/// Every string and integer of a reply, in order (nil as "").
fn strings(v: Value) -> Vec<String> {
    match v {
        Value::Array(Some(items)) => items.into_iter().flat_map(strings).collect(),
        Value::Bulk(Some(b)) => vec![String::from_utf8_lossy(&b).into_owned()],
        Value::Integer(n) => vec![n.to_string()],
        Value::Simple(s) => vec![s],
        _ => vec![String::new()],
    }
}

/// Subscribes `sub` to every channel and runs `script` on `cmd`; the messages the
/// subscriber got, as `channel message` lines, up to a marker published last.
fn events(cmd: &mut RespConn, sub: &mut RespConn, script: &[Vec<&str>]) -> Vec<String> {
    sub.send(&["PSUBSCRIBE", "*"]);
    assert_eq!(strings(sub.read()), ["psubscribe", "*", "1"]);
    for args in script {
        cmd.str(args);
    }
    cmd.str(&["PUBLISH", "end", "."]);
    let mut got = Vec::new();
    loop {
        let m = strings(sub.read());
        assert_eq!(m[0], "pmessage", "{m:?}");
        if m[2] == "end" {
            return got;
        }
        got.push(format!("{} {}", m[2], m[3]));
    }
}

fn split(lines: &[&'static str]) -> Vec<Vec<&'static str>> {
    lines.iter().map(|l| l.split(' ').collect()).collect()
}

/// Writes over every type, with the commands whose events depend on what they did: a SET
/// NX that does nothing, pops that empty their key, stores whose result is empty.
const SCRIPT: &[&str] = &[
    "SET s 1",
    "SET s 2 NX",
    "SET s 3 XX EX 100",
    "SETNX s 4",
    "SETNX s2 4",
    "SETEX s3 100 x",
    "GETSET s v",
    "MSET m1 1 m2 2",
    "APPEND s more",
    "SETRANGE s 1 ab",
    "SETRANGE s 1 ",
    "INCR n",
    "INCRBY n 5",
    "DECR n",
    "INCRBYFLOAT f 1.5",
    "INCR s",
    "SETBIT b 3 1",
    "BITOP AND b2 b nothing",
    "BITOP OR b3 b",
    "BITFIELD bf SET u8 0 200 GET u8 0",
    "GETDEL s2",
    "GETDEL s2",
    "GETEX s3 PERSIST",
    "GETEX s3 EX 100",
    "EXPIRE m1 100",
    "EXPIRE nokey 100",
    "PERSIST m1",
    "PERSIST m1",
    "EXPIRE m2 -1",
    "RENAME m1 r1",
    "RENAMENX r1 n",
    "COPY r1 c1",
    "DEL r1 c1 nokey",
    "LPUSH l a b c",
    "RPUSH l d",
    "LPUSHX nol a",
    "LINSERT l BEFORE a x",
    "LSET l 0 y",
    "LREM l 1 x",
    "LREM l 1 nothing",
    "LTRIM l 0 2",
    "LPOP l",
    "RPOP l 5",
    "RPUSH l2 a b",
    "LMOVE l2 l3 LEFT RIGHT",
    "RPOPLPUSH l2 l3",
    "SADD st a b c",
    "SADD st a",
    "SREM st a nothing",
    "SMOVE st st2 b",
    "SPOP st",
    "SADD u1 a b",
    "SADD u2 b c",
    "SINTERSTORE si u1 u2",
    "SUNIONSTORE su u1 u2",
    "SDIFFSTORE sd u1 u1",
    "SDIFFSTORE si u1 u1",
    "HSET h a 1 b 2",
    "HSETNX h a 5",
    "HSETNX h c 5",
    "HINCRBY h a 2",
    "HINCRBYFLOAT h b 0.5",
    "HDEL h a b c",
    "ZADD z 1 a 2 b 3 c",
    "ZADD z 1 a",
    "ZADD z XX CH 5 a",
    "ZINCRBY z 1 b",
    "ZREM z nothing",
    "ZREM z a",
    "ZREMRANGEBYSCORE z 100 200",
    "ZREMRANGEBYRANK z 0 0",
    "ZADD z2 1 x 2 y",
    "ZUNIONSTORE zu 2 z z2",
    "ZINTERSTORE zi 2 z z2",
    "ZRANGESTORE zr z2 0 0",
    "ZPOPMIN z2",
    "ZPOPMAX z2 5",
    "ZREMRANGEBYLEX zu - +",
    "XADD x 1-0 f v",
    "XADD x MAXLEN 1 2-0 f v",
    "XTRIM x MAXLEN 0",
    "XADD x 3-0 f v",
    "XDEL x 3-0 9-9",
    "XGROUP CREATE x g $",
    "XGROUP CREATECONSUMER x g alice",
    "XGROUP CREATECONSUMER x g alice",
    "XADD x 4-0 f v",
    "XREADGROUP GROUP g bob STREAMS x >",
    "XCLAIM x g carol 0 4-0",
    "XGROUP DELCONSUMER x g nobody",
    "XGROUP DELCONSUMER x g alice",
    "XGROUP SETID x g 0",
    "XSETID x 10-0",
    "XGROUP DESTROY x g",
    "PFADD hl a b",
    "PFADD hl a",
    "PFMERGE hl2 hl",
    "GEOADD geo 13.36 38.11 p 15.08 37.50 q",
    "GEOSEARCHSTORE gs geo FROMMEMBER p BYRADIUS 500 km ASC",
    "SORT l3 ALPHA STORE sorted",
    "SORT nokey STORE sorted",
    "FLUSHDB",
];

#[test]
fn events_are_redis_events() {
    let Some(redis) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let srv = Server::start(&[]);
    let theirs = ([127, 0, 0, 1], redis.port).into();
    let mut runs = Vec::new();
    for (mut cmd, mut sub) in [
        (RespConn::new(&srv), RespConn::new(&srv)),
        (RespConn::connect(theirs), RespConn::connect(theirs)),
    ] {
        cmd.str(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        runs.push(events(&mut cmd, &mut sub, &split(SCRIPT)));
    }
    let (ours, redis) = (&runs[0], &runs[1]);
    let n = ours.len().max(redis.len());
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let (a, b) = (ours.get(i), redis.get(i));
            let mark = if a == b { " " } else { "!" };
            format!("{mark} {a:?} | {b:?}")
        })
        .collect();
    assert!(
        ours == redis,
        "events differ (accelkv | redis):\n{}",
        rows.join("\n")
    );
}

#[test]
fn masked_classes_and_both_channels() {
    let srv = Server::start(&["--notify-keyspace-events", "Kl"]);
    let (mut cmd, mut sub) = (RespConn::new(&srv), RespConn::new(&srv));
    let got = events(
        &mut cmd,
        &mut sub,
        &split(&["SET a 1", "LPUSH l x", "SADD s m", "SELECT 5", "RPUSH l y"]),
    );
    assert_eq!(got, ["__keyspace@0__:l lpush", "__keyspace@5__:l rpush"]);
    let conf = cmd.str(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(strings(conf), ["notify-keyspace-events", "lK"]);
    cmd.str(&["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    let got = events(&mut cmd, &mut sub, &split(&["SET a 2", "LPUSH l z"]));
    assert_eq!(got, ["__keyevent@5__:set a"]);
    let bad = cmd.str(&["CONFIG", "SET", "notify-keyspace-events", "Kq"]);
    assert!(
        matches!(&bad, Value::Error(e) if e.contains("Invalid event class")),
        "{bad:?}"
    );
    let conf = cmd.str(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(strings(conf), ["notify-keyspace-events", "$E"]);
}

#[test]
fn failed_commands_announce_nothing_and_transactions_announce_after_commit() {
    let srv = Server::start(&["--notify-keyspace-events", "KEA"]);
    let (mut cmd, mut sub) = (RespConn::new(&srv), RespConn::new(&srv));
    let script = split(&[
        "SET str x",
        "LPUSH str a",
        "HINCRBY h f notanumber",
        "INCR str",
        "MULTI",
        "LPUSH l a",
        "EXPIRE l 100",
        "EXEC",
        "MULTI",
        "SET t 1",
        "DISCARD",
        "EVAL redis.call('sadd',KEYS[1],'m');redis.call('del',KEYS[1]) 1 s",
    ]);
    let got = events(&mut cmd, &mut sub, &script);
    let want = [
        "__keyspace@0__:str set",
        "__keyevent@0__:set str",
        "__keyspace@0__:l lpush",
        "__keyevent@0__:lpush l",
        "__keyspace@0__:l expire",
        "__keyevent@0__:expire l",
        "__keyspace@0__:s sadd",
        "__keyevent@0__:sadd s",
        "__keyspace@0__:s del",
        "__keyevent@0__:del s",
    ];
    assert_eq!(got, want);
}

#[test]
fn expired_new_and_keymiss() {
    let srv = Server::start(&["--notify-keyspace-events", "Exnm"]);
    let (mut cmd, mut sub) = (RespConn::new(&srv), RespConn::new(&srv));
    sub.send(&["PSUBSCRIBE", "*"]);
    sub.read();
    cmd.str(&["PSETEX", "gone", "50", "v"]);
    // The sweep removes it within a few of its 100 ms ticks.
    let m = strings(sub.read());
    assert_eq!(m[2..], ["__keyevent@0__:new", "gone"]);
    let m = strings(sub.read());
    assert_eq!(m[2..], ["__keyevent@0__:expired", "gone"]);
    drop(sub);
    let mut sub = RespConn::new(&srv);
    let script = split(&[
        "SET a 1",
        "SET a 2",
        "GET a",
        "GET missing",
        "MGET a missing2",
        "HSET h f v",
        "HSET h g v",
    ]);
    let got = events(&mut cmd, &mut sub, &script);
    let want = [
        "__keyevent@0__:new a",
        "__keyevent@0__:keymiss missing",
        "__keyevent@0__:keymiss missing2",
        "__keyevent@0__:new h",
    ];
    assert_eq!(got, want);
}

#[test]
fn a_bad_flag_stops_the_start() {
    let out = common::start_refused(&["--notify-keyspace-events", "Kz?"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Invalid event class"), "{err}");
}
