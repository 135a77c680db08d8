//! Streams (XADD, XTRIM, XDEL, XLEN, XRANGE, XREVRANGE, XREAD): a script of commands and
//! random command sequences run against accelkv and a real `redis-server`, every reply
//! compared; XREAD BLOCK woken by an XADD from another connection, with `$` meaning the
//! last id when it first ran; a reader that must never see an XADD without its trim.

mod common;

use accelkv_proto::resp::Value;
use common::{commands_answer_as_redis_does, strings, Redis, RespConn, Server};
use proptest::prelude::*;
use std::time::{Duration, Instant};

#[test]
fn streams_answer_as_redis_does() {
    let script: Vec<Vec<&str>> = [
        "XADD s 1-1 a 1",
        "XADD s 1-* b 2",
        "XADD s 1 c 3",
        "XADD s 0-0 c 3",
        "XADD s 2-0 a 1 b",
        "XADD s 2-0 a 1 b 2",
        "XADD s 3-1 f v",
        "XLEN s",
        "XRANGE s - +",
        "XRANGE s 1 1",
        "XRANGE s (1-1 +",
        "XRANGE s - (2-0",
        "XRANGE s - + COUNT 1",
        "XRANGE s - + COUNT 0",
        "XRANGE s - + COUNT -3",
        "XRANGE s 3 1",
        "XRANGE s x +",
        "XRANGE s (0-0 (0-0",
        "XRANGE s - + LIMIT 1",
        "XREVRANGE s + - COUNT 2",
        "XREVRANGE s + -",
        "XREVRANGE s 2 1",
        "XDEL s 1-1 9-9",
        "XDEL s nope",
        "XLEN s",
        "XRANGE s - +",
        "XTRIM s MAXLEN 2",
        "XTRIM s MAXLEN = 2",
        "XTRIM s MINID 3",
        "XTRIM s MAXLEN -1",
        "XTRIM s MAXLEN 1 LIMIT 5",
        "XTRIM s MAXLEN 1 MINID 2",
        "XTRIM s FOO 1",
        "XTRIM missing MAXLEN 0",
        "XRANGE s - +",
        "XADD s MAXLEN 2 5-0 g w",
        "XADD s MINID 5 6-0 h x",
        "XRANGE s - +",
        "XADD s NOMKSTREAM 7-0 i y",
        "XADD nostream NOMKSTREAM * f v",
        "EXISTS nostream",
        "XADD s LIMIT 10 8-0 f v",
        "XADD s MAXLEN 1 MINID 1 8-0 f v",
        "XADD s 7-0",
        "TYPE s",
        "OBJECT ENCODING s",
        "XLEN missing",
        "XRANGE missing - +",
        "SET str v",
        "XADD str * f v",
        "XRANGE str - +",
        "XLEN str",
        "HSET h f v",
        "XRANGE h - +",
        "LPUSH s x",
        "GET s",
        "XADD t 1-0 f v",
        "XREAD COUNT 1 STREAMS s t 0 0",
        "XREAD STREAMS s t 5-0 0-0",
        "XREAD STREAMS s 999-0",
        "XREAD STREAMS s $",
        "XREAD STREAMS s >",
        "XREAD COUNT 1 s 0",
        "XREAD STREAMS str 0",
        "XREAD BLOCK -1 STREAMS s 0",
        "XREAD BLOCK x STREAMS s 0",
        "MULTI",
        "XREAD BLOCK 0 STREAMS s $",
        "XADD s 9-0 in tx",
        "EXEC",
        "XTRIM s MAXLEN 0",
        "XLEN s",
        "EXISTS s",
        "TYPE s",
        "XRANGE s - +",
        "XADD s 9-0 f v",
        "XADD s 10-0 f v",
        "RENAME s s2",
        "XRANGE s2 - +",
        "XADD s2 10-0 f v",
        "COPY s2 s3",
        "XADD s3 11-* f v",
        "XRANGE s3 - +",
        "DEL s2 t",
        "SCAN 0 TYPE stream COUNT 100",
        "DEL s3",
        "XADD big 18446744073709551615-18446744073709551615 f v",
        "XADD big * f v",
        "XADD big 18446744073709551615-* f v",
        "DEL big",
        "EVAL \"return redis.call('XADD', KEYS[1], '1-0', 'k', 'v')\" 1 ev",
        "EVAL \"return redis.call('XRANGE', KEYS[1], '-', '+')\" 1 ev",
        "EVAL \"return redis.call('XREAD', 'BLOCK', 0, 'STREAMS', KEYS[1], '$')\" 1 ev",
    ]
    .iter()
    .map(|l| split(l))
    .collect();
    commands_answer_as_redis_does(&script);
}

/// Words, a quoted one kept whole (for EVAL's script).
fn split(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').unwrap();
            out.push(&r[..end]);
            rest = &r[end + 1..];
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out
}

#[derive(Clone, Debug)]
enum Cmd {
    /// Key, milliseconds to add to the last (`None`: `ms-*` of the last), fields, trim.
    Add(u8, Option<u8>, u8, Option<(bool, u8)>),
    Del(u8, u8),
    Trim(u8, bool, u8),
    Range(u8, u8, u8, Option<u8>, bool),
    Read(u8, u8, u8),
    Drop(u8),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let key = 0u8..2;
    prop_oneof![
        4 => (key.clone(), proptest::option::of(0u8..3), 1u8..3,
              proptest::option::of((any::<bool>(), 0u8..6)))
            .prop_map(|(k, ms, f, t)| Cmd::Add(k, ms, f, t)),
        1 => (key.clone(), 0u8..12).prop_map(|(k, i)| Cmd::Del(k, i)),
        1 => (key.clone(), any::<bool>(), 0u8..8).prop_map(|(k, m, n)| Cmd::Trim(k, m, n)),
        2 => (key.clone(), 0u8..12, 0u8..12, proptest::option::of(0u8..4), any::<bool>())
            .prop_map(|(k, a, b, c, r)| Cmd::Range(k, a, b, c, r)),
        1 => (0u8..3, 0u8..12, 0u8..12).prop_map(|(n, a, b)| Cmd::Read(n, a, b)),
        1 => key.prop_map(Cmd::Drop),
    ]
}

/// The command's arguments; `next_ms` tracks each key's last explicit milliseconds so the
/// ids given are mostly valid (an invalid one compares errors).
fn args(c: &Cmd, next_ms: &mut [u64; 2]) -> Vec<String> {
    let k = |k: &u8| format!("x{k}");
    let id = |i: &u8| format!("{}-{}", i / 3, i % 3);
    let s = |t: &str| t.to_string();
    match c {
        Cmd::Add(key, ms, fields, trim) => {
            let mut a = vec![s("XADD"), k(key)];
            if let Some((maxlen, n)) = trim {
                if *maxlen {
                    a.extend([s("MAXLEN"), n.to_string()]);
                } else {
                    a.extend([s("MINID"), id(n)]);
                }
            }
            let m = &mut next_ms[*key as usize];
            match ms {
                Some(d) => {
                    *m += u64::from(*d);
                    a.push(format!("{}-{}", *m, d));
                }
                None => a.push(format!("{}-*", *m)),
            }
            for f in 0..*fields {
                a.extend([format!("f{f}"), format!("v{m}")]);
            }
            a
        }
        Cmd::Del(key, i) => vec![s("XDEL"), k(key), id(i)],
        Cmd::Trim(key, maxlen, n) => {
            let how = if *maxlen { s("MAXLEN") } else { s("MINID") };
            let n = if *maxlen { n.to_string() } else { id(n) };
            vec![s("XTRIM"), k(key), how, n]
        }
        Cmd::Range(key, a, b, count, rev) => {
            let (lo, hi) = (id(a), id(b));
            let mut v = if *rev {
                vec![s("XREVRANGE"), k(key), hi, lo]
            } else {
                vec![s("XRANGE"), k(key), lo, hi]
            };
            if let Some(c) = count {
                v.extend([s("COUNT"), c.to_string()]);
            }
            v
        }
        Cmd::Read(count, a, b) => vec![
            s("XREAD"),
            s("COUNT"),
            count.to_string(),
            s("STREAMS"),
            s("x0"),
            s("x1"),
            id(a),
            id(b),
        ],
        Cmd::Drop(key) => {
            next_ms[*key as usize] = 0;
            vec![s("DEL"), k(key)]
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random stream commands on two keys, every reply and both streams' whole contents
    /// compared with Redis's after each command.
    #[test]
    fn random_stream_commands_answer_as_redis_does(cmds in proptest::collection::vec(cmd(), 1..40)) {
        let Some(redis) = Redis::start() else {
            accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
            return Ok(());
        };
        let srv = Server::start(&[]);
        let mut ours = RespConn::new(&srv);
        let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
        let mut next_ms = [1u64, 1u64];
        for c in &cmds {
            let a = args(c, &mut next_ms);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            prop_assert_eq!(ours.str(&a), theirs.str(&a), "{:?}", a);
            for key in ["x0", "x1"] {
                let all = ["XRANGE", key, "-", "+"];
                prop_assert_eq!(ours.str(&all), theirs.str(&all), "after {:?}", a);
                let len = ["XLEN", key];
                prop_assert_eq!(ours.str(&len), theirs.str(&len), "after {:?}", a);
            }
        }
    }
}

fn entry_id(v: &Value) -> String {
    // [[key, [[id, [f, v]]]]]
    let Value::Array(Some(streams)) = v else {
        panic!("{v:?}")
    };
    let Value::Array(Some(pair)) = &streams[0] else {
        panic!("{v:?}")
    };
    let Value::Array(Some(entries)) = &pair[1] else {
        panic!("{v:?}")
    };
    let Value::Array(Some(e)) = &entries[0] else {
        panic!("{v:?}")
    };
    strings(Value::Array(Some(vec![e[0].clone()])))[0].clone()
}

#[test]
fn xread_block_waits_for_an_xadd_after_the_last_id() {
    let srv = Server::start(&[]);
    let mut writer = RespConn::new(&srv);
    let mut reader = RespConn::new(&srv);
    writer.str(&["XADD", "s", "1-0", "old", "entry"]);
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "$", "$"]);
    std::thread::sleep(Duration::from_millis(200));
    // A write to another key, then one to the stream: the reader gets only the new entry.
    writer.str(&["SET", "unrelated", "v"]);
    writer.str(&["XADD", "s", "2-0", "new", "entry"]);
    let got = reader.read();
    assert_eq!(entry_id(&got), "2-0", "{got:?}");
    // A second stream of the same command wakes it too.
    reader.send(&["XREAD", "BLOCK", "5000", "STREAMS", "s", "other", "$", "$"]);
    std::thread::sleep(Duration::from_millis(100));
    writer.str(&["XADD", "other", "5-0", "f", "v"]);
    let got = reader.read();
    let Value::Array(Some(streams)) = &got else {
        panic!("{got:?}")
    };
    assert_eq!(streams.len(), 1);
    assert_eq!(
        strings(Value::Array(Some(vec![match &streams[0] {
            Value::Array(Some(p)) => p[0].clone(),
            v => panic!("{v:?}"),
        }])))[0],
        "other"
    );
    // A timeout answers a null array no earlier than it said.
    let t = Instant::now();
    assert_eq!(
        reader.str(&["XREAD", "BLOCK", "150", "STREAMS", "s", "$"]),
        Value::Array(None)
    );
    assert!(t.elapsed() >= Duration::from_millis(150));
    // The connection still serves.
    assert_eq!(reader.str(&["XLEN", "s"]), Value::Integer(2));
}

#[test]
fn xread_answers_a_map_over_resp3() {
    use std::io::{Read, Write};
    let srv = Server::start(&[]);
    let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut cmds = Vec::new();
    for c in [
        &["HELLO", "3"][..],
        &["XADD", "s", "1-0", "f", "v"],
        &["XREAD", "STREAMS", "s", "0"],
        &["XREAD", "STREAMS", "s", "$"],
        &["PING"],
    ] {
        let a: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        accelkv_proto::resp::command(&mut cmds, &a);
    }
    s.write_all(&cmds).unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let mut b = [0u8; 4096];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&b[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    let after_xadd = &text[text.find("$3\r\n1-0\r\n").unwrap() + 9..];
    assert!(
        after_xadd.starts_with(
            "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n_\r\n"
        ),
        "{after_xadd:?}"
    );
}

#[test]
fn a_reader_never_sees_an_xadd_without_its_trim() {
    let srv = Server::start(&[]);
    let addr = srv.resp;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = RespConn::connect(addr);
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let len = c.str(&["XLEN", "s"]);
                let Value::Integer(n) = len else {
                    panic!("{len:?}")
                };
                assert!(n <= 10, "XLEN {n}: an XADD seen without its MAXLEN trim");
                let all = c.str(&["XRANGE", "s", "-", "+"]);
                let Value::Array(Some(es)) = all else {
                    panic!("{all:?}")
                };
                assert!(es.len() <= 10, "XRANGE saw {} entries", es.len());
                reads += 1;
            }
            reads
        })
    };
    let mut w = RespConn::new(&srv);
    for i in 1..=2000 {
        let id = format!("{i}-0");
        let r = w.str(&["XADD", "s", "MAXLEN", "10", &id, "f", "v"]);
        assert_eq!(r, Value::Bulk(Some(id.into_bytes())));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(reads > 0);
    assert_eq!(w.str(&["XLEN", "s"]), Value::Integer(10));
}

#[test]
fn approximate_trimming_trims_exactly_up_to_its_limit() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    for i in 1..=30 {
        c.str(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    assert_eq!(
        c.str(&["XTRIM", "s", "MAXLEN", "~", "10", "LIMIT", "5"]),
        Value::Integer(5)
    );
    assert_eq!(
        c.str(&["XTRIM", "s", "MAXLEN", "~", "10"]),
        Value::Integer(15)
    );
    assert_eq!(c.str(&["XLEN", "s"]), Value::Integer(10));
    // The last id stays the greatest given, whatever was deleted.
    c.str(&["XDEL", "s", "30-0"]);
    let r = c.str(&["XADD", "s", "30-0", "f", "v"]);
    assert!(common::err_starts(
        &r,
        "ERR The ID specified in XADD is equal or smaller"
    ));
}
