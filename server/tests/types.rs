//! Redis's hashes and sets over RESP against the real server: one script of commands over
//! both types and the key-level commands that meet them (TYPE, WRONGTYPE, DEL, EXISTS,
//! EXPIRE, RENAME, COPY, SCAN TYPE, OBJECT ENCODING) run on accelkv and on a real
//! `redis-server`, every reply compared. Then what a single script cannot show: a
//! collection command is atomic to concurrent readers, MULTI/EXEC sees its own writes, a
//! deleted collection's fields are reclaimed in the background and never seen again, and
//! no client may write into the reserved part of the key space.

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};

/// The script both servers run. Sets hold single-digit numbers (Redis keeps those sorted,
/// as accelkv does; other members come back in hash order there), and hashes get their
/// fields in byte order (Redis keeps small hashes in insertion order).
const SCRIPT: &[&str] = &[
    // hashes
    "HSET h a 1 b 2",
    "HSET h b 3 c 4",
    "HGET h b",
    "HGET h zz",
    "HGET nothing a",
    "HMGET h a zz c",
    "HMGET nothing a",
    "HLEN h",
    "HLEN nothing",
    "HGETALL h",
    "HKEYS h",
    "HVALS h",
    "HEXISTS h a",
    "HEXISTS h zz",
    "HSTRLEN h c",
    "HSTRLEN h zz",
    "HSETNX h a 9",
    "HSETNX h d 5",
    "HMSET h e 6",
    "HGETALL h",
    "HDEL h a zz e",
    "HDEL h zz",
    "HGETALL h",
    "HINCRBY h n 5",
    "HINCRBY h n -7",
    "HINCRBY h b 1",
    "HINCRBY h c x",
    "HINCRBY h n 9223372036854775807",
    "HSET h s str",
    "HINCRBY h s 1",
    "HINCRBYFLOAT h t 10.5",
    "HINCRBYFLOAT h t 0.25",
    "HINCRBYFLOAT h t -5e3",
    "HINCRBYFLOAT h s 1",
    "HINCRBYFLOAT h t abc",
    "HGETALL h",
    "HSET h",
    "HSET h a",
    "HSET h a 1 b",
    "HMSET h a",
    "HGET h",
    "HRANDFIELD nothing",
    "HRANDFIELD nothing 3",
    "HRANDFIELD h 0",
    "HSCAN nothing 0",
    "HDEL h b c d t n s",
    "EXISTS h",
    "HGETALL h",
    // sets
    "SADD s 3 1 2",
    "SADD s 2 4",
    "SCARD s",
    "SCARD nothing",
    "SMEMBERS s",
    "SMEMBERS nothing",
    "SISMEMBER s 3",
    "SISMEMBER s 9",
    "SMISMEMBER s 1 9 4",
    "SREM s 1 9",
    "SMEMBERS s",
    "SADD t 3 4 5",
    "SINTER s t",
    "SUNION s t",
    "SDIFF s t",
    "SDIFF t s nothing",
    "SINTER s nothing",
    "SINTERSTORE d s t",
    "SMEMBERS d",
    "SUNIONSTORE d s t",
    "SMEMBERS d",
    "SDIFFSTORE d s t",
    "SMEMBERS d",
    "SINTERSTORE d s nothing",
    "EXISTS d",
    "SINTERCARD 2 s t",
    "SINTERCARD x s",
    "SINTERCARD 0 s",
    "SINTERCARD 2 s t LIMIT 1",
    "SINTERCARD 0 s",
    "SINTERCARD 3 s t",
    "SMOVE s t 2",
    "SMOVE s t 9",
    "SMEMBERS s",
    "SMEMBERS t",
    "SMOVE nothing t 1",
    "SRANDMEMBER nothing",
    "SRANDMEMBER nothing 5",
    "SADD one 7",
    "SRANDMEMBER one",
    "SRANDMEMBER one 3",
    "SRANDMEMBER one -2",
    "SPOP one",
    "EXISTS one",
    "SPOP nothing",
    "SPOP nothing 2",
    "SPOP s -1",
    "SSCAN nothing 0",
    "SADD",
    "SADD s",
    // types meeting each other and the key-level commands
    "SET str v",
    "HSET str a 1",
    "SADD str 1",
    "HGET s a",
    "SADD h2 1",
    "HSET hh f v",
    "SADD hh 1",
    "SMEMBERS hh",
    "SINTER s hh",
    "SMOVE s hh 3",
    "GET hh",
    "GET s",
    "MGET s str hh",
    "STRLEN hh",
    "APPEND hh x",
    "INCR hh",
    "GETRANGE hh 0 1",
    "SETRANGE hh 0 x",
    "GETSET hh x",
    "GETDEL hh",
    "SETBIT hh 1 1",
    "BITCOUNT hh",
    "TYPE hh",
    "TYPE s",
    "TYPE str",
    "TYPE nothing",
    "EXISTS hh s str nothing",
    "OBJECT ENCODING hh",
    "OBJECT ENCODING s",
    "SADD words x",
    "SREM words x",
    "EXPIRE hh 100",
    "TTL hh",
    "PERSIST hh",
    "TTL hh",
    "RENAME hh hh2",
    "EXISTS hh",
    "HGETALL hh2",
    "TYPE hh2",
    "RENAME s str",
    "TYPE str",
    "SMEMBERS str",
    "RENAMENX str hh2",
    "COPY hh2 hh3",
    "HGETALL hh3",
    "COPY hh2 hh3",
    "COPY str hh3 REPLACE",
    "TYPE hh3",
    "SMEMBERS hh3",
    "SET hh2 plain",
    "GET hh2",
    "TYPE hh2",
    "HSET hh2 a 1",
    "DEL hh3 str",
    "EXISTS hh3 str",
    "SMEMBERS hh3",
    "SET k v",
    "MSETNX k x hh2 y fresh z",
    "DEL k",
    "HSET hx f 1",
    "MSETNX hx y fresh2 z",
    "DEL h2",
    "SCAN 0 TYPE hash COUNT 1000",
    "SCAN 0 TYPE set COUNT 1000",
    "FLUSHALL",
    "HSET h a 1",
    "SADD s 1",
    "DBSIZE",
    "SCAN 0 COUNT 1000 TYPE set",
    "KEYS s*",
];

#[test]
fn hashes_and_sets_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

fn int(v: Value) -> i64 {
    match v {
        Value::Integer(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Two writers HSET 20 fields at a time (every field of one command the same value) while
/// a reader takes HGETALL: every HGETALL sees each command whole (all 20 fields of one
/// round agree), and HLEN always equals the number of fields.
#[test]
fn a_multi_field_write_is_seen_whole_or_not_at_all() {
    let srv = Server::start(&[]);
    let addr = srv.resp;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for round in 0..150 {
                    let value = format!("{w}-{round}");
                    let mut args = vec!["HSET".to_string(), "h".to_string()];
                    for f in 0..20 {
                        args.push(format!("f{f:02}"));
                        args.push(value.clone());
                    }
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    c.str(&args);
                }
            })
        })
        .collect();
    let mut c = RespConn::connect(addr);
    let mut seen = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        let all = strings(c.str(&["HGETALL", "h"]));
        if all.is_empty() {
            continue;
        }
        assert_eq!(all.len(), 40, "{all:?}");
        let values: Vec<&String> = all.iter().skip(1).step_by(2).collect();
        assert!(
            values.iter().all(|v| *v == values[0]),
            "a torn HSET: {values:?}"
        );
        seen += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(seen > 0);
    assert_eq!(int(c.str(&["HLEN", "h"])), 20);
}

/// Inside MULTI a collection command sees the transaction's earlier writes, and the whole
/// transaction lands at once.
#[test]
fn a_transaction_sees_its_own_collection_writes() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["MULTI"]);
    c.str(&["HSET", "h", "a", "1"]);
    c.str(&["HSET", "h", "b", "2"]);
    c.str(&["HDEL", "h", "a"]);
    c.str(&["HGETALL", "h"]);
    c.str(&["SADD", "s", "x", "y"]);
    c.str(&["SREM", "s", "x"]);
    c.str(&["SMEMBERS", "s"]);
    c.str(&["HLEN", "h"]);
    let Value::Array(Some(r)) = c.str(&["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(r[0], Value::Integer(1));
    assert_eq!(r[1], Value::Integer(1));
    assert_eq!(r[2], Value::Integer(1));
    assert_eq!(strings(r[3].clone()), ["b", "2"]);
    assert_eq!(strings(r[6].clone()), ["y"]);
    assert_eq!(r[7], Value::Integer(1));
    assert_eq!(strings(c.str(&["HGETALL", "h"])), ["b", "2"]);
}

/// A deleted, overwritten or expired collection's fields are removed by the background
/// reclaim (INFO's `reclaimed_subkeys` counts them), and a new collection under the same
/// key never sees the old fields.
#[test]
fn dead_collections_are_reclaimed_and_never_seen_again() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    // Hashes kept as subkeys (no packed ones), so their fields are reclaimed too.
    c.str(&["CONFIG", "SET", "hash-max-listpack-entries", "0"]);
    let mut args = vec!["SADD".to_string(), "big".to_string()];
    args.extend((0..1000).map(|i| format!("m{i}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(int(c.str(&args)), 1000);
    c.str(&["HSET", "gone", "a", "1", "b", "2"]);
    c.str(&["HSET", "brief", "a", "1"]);
    c.str(&["PEXPIRE", "brief", "50"]);
    assert_eq!(int(c.str(&["DEL", "big"])), 1);
    c.str(&["SET", "gone", "now a string"]);
    assert_eq!(int(c.str(&["SCARD", "big"])), 0);
    assert_eq!(int(c.str(&["SADD", "big", "m1"])), 1);
    assert_eq!(strings(c.str(&["SMEMBERS", "big"])), ["m1"]);
    let reclaimed = |c: &mut RespConn| -> u64 {
        let Value::Bulk(Some(text)) = c.str(&["INFO", "stats"]) else {
            panic!("INFO")
        };
        let text = String::from_utf8(text).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("reclaimed_subkeys:"))
            .unwrap();
        line["reclaimed_subkeys:".len()..].parse().unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while reclaimed(&mut c) < 1003 {
        assert!(
            std::time::Instant::now() < deadline,
            "reclaimed {}",
            reclaimed(&mut c)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(reclaimed(&mut c), 1003);
    assert_eq!(strings(c.str(&["SMEMBERS", "big"])), ["m1"]);
    assert_eq!(int(c.str(&["DBSIZE"])), 2);
}

/// No protocol writes into the reserved part of the key space, and SCAN, KEYS and DBSIZE
/// never show the fields kept there.
#[test]
fn the_reserved_key_space_is_not_a_clients() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["HSET", "h", "f", "v"]);
    let bytes = [0xFFu8, 0xFF, b'x'];
    let r = c.call(&[b"SET".as_slice(), &bytes, b"1"]);
    assert!(
        matches!(&r, Value::Error(e) if e.contains("reserved")),
        "{r:?}"
    );
    let r = c.call(&[b"HSET".as_slice(), &bytes, b"f", b"1"]);
    assert!(
        matches!(&r, Value::Error(e) if e.contains("reserved")),
        "{r:?}"
    );
    assert_eq!(strings(c.str(&["KEYS", "*"])), ["h"]);
    assert_eq!(int(c.str(&["DBSIZE"])), 1);
    let Value::Array(Some(scan)) = c.str(&["SCAN", "0", "COUNT", "100"]) else {
        panic!("SCAN")
    };
    assert_eq!(strings(scan[1].clone()), ["h"]);
}

/// SPOP, SRANDMEMBER and HRANDFIELD pick without reading the whole collection, and still
/// spread their picks over it: 300 single picks from 1,000 members hit well over 100
/// different ones; counts give distinct members, negative counts exactly that many.
#[test]
fn random_picks_spread_over_the_collection() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let members: Vec<String> = (0..1000).map(|i| format!("user:{i:04}")).collect();
    let mut sadd = vec!["SADD", "s"];
    sadd.extend(members.iter().map(String::as_str));
    assert_eq!(int(c.str(&sadd)), 1000);
    let mut hset = vec!["HSET", "h"];
    for m in &members {
        hset.push(m);
        hset.push("v");
    }
    assert_eq!(int(c.str(&hset)), 1000);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..300 {
        match c.str(&["SRANDMEMBER", "s"]) {
            Value::Bulk(Some(m)) => seen.insert(m),
            other => panic!("{other:?}"),
        };
    }
    assert!(
        seen.len() > 100,
        "300 picks hit only {} members",
        seen.len()
    );
    let ten = strings(c.str(&["SRANDMEMBER", "s", "10"]));
    assert_eq!(
        ten.iter().collect::<std::collections::HashSet<_>>().len(),
        10
    );
    assert_eq!(strings(c.str(&["SRANDMEMBER", "s", "-30"])).len(), 30);
    assert_eq!(strings(c.str(&["HRANDFIELD", "h", "-7"])).len(), 7);
    assert_eq!(
        strings(c.str(&["HRANDFIELD", "h", "5", "WITHVALUES"])).len(),
        10
    );
    let popped = strings(c.str(&["SPOP", "s", "5"]));
    assert_eq!(
        popped
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        5
    );
    assert_eq!(int(c.str(&["SCARD", "s"])), 995);
    for m in &popped {
        assert_eq!(int(c.str(&["SISMEMBER", "s", m])), 0);
    }
    for _ in 0..995 {
        assert!(matches!(c.str(&["SPOP", "s"]), Value::Bulk(Some(_))));
    }
    assert_eq!(c.str(&["SPOP", "s"]), Value::Bulk(None));
    assert_eq!(int(c.str(&["EXISTS", "s"])), 0);
}

/// On a small collection the picks are uniform, as Redis's test suite checks them: 10,000
/// picks with repeats from 10 fields of very different bytes (`a`…`e`, `6`…`9`, and one
/// long field) pass a chi-square test at df = 9 below 40 (a chance of about 1 in 100,000
/// to fail by bad luck), for HRANDFIELD and SRANDMEMBER.
#[test]
fn picks_from_a_small_collection_are_uniform() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let long = "x".repeat(80);
    let fields = ["a", "b", "c", "d", "e", "6", "7", "8", "9", long.as_str()];
    let mut hset = vec!["HSET", "h"];
    let mut sadd = vec!["SADD", "s"];
    for f in &fields {
        hset.extend([*f, "v"]);
        sadd.push(f);
    }
    c.str(&hset);
    c.str(&sadd);
    for cmd in [
        ["HRANDFIELD", "h", "-10000"],
        ["SRANDMEMBER", "s", "-10000"],
    ] {
        let picks = strings(c.str(&cmd));
        assert_eq!(picks.len(), 10_000);
        let mut counts = std::collections::HashMap::new();
        for p in &picks {
            *counts.entry(p.as_str()).or_insert(0u32) += 1;
        }
        let expected = 1000.0;
        let chi: f64 = fields
            .iter()
            .map(|f| {
                let o = f64::from(counts.get(f).copied().unwrap_or(0));
                (o - expected) * (o - expected) / expected
            })
            .sum();
        assert!(chi < 40.0, "{cmd:?}: chi-square {chi} over {counts:?}");
    }
}
