//! Collections survive kill -9 as strings do: a client adds fields to a hash and members
//! to a set (and, in the second test, elements to a list and members to a sorted set; in
//! the third, entries to two streams, one capped by XADD's MAXLEN), one command at a time
//! in order (each HSET, SADD, LPUSH, ZADD and XADD one transaction: its
//! subkeys and metadata one atomic batch), while the server is killed at a random moment;
//! after each restart every acknowledged field is there (`--sync sync`), the fields form a
//! prefix of the ones sent (nothing after a gap), and the size in the metadata (HLEN,
//! SCARD, LLEN, ZCARD, XLEN) agrees with the subkeys (HGETALL, SMEMBERS, LRANGE, ZRANGE,
//! XRANGE); a capped stream holds exactly its newest entries.

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Two kinds of collection written in step: the two commands for index `i`, and after a
/// restart how many of each came back (checking they are whole and in order).
struct Pair {
    cmds: fn(u32) -> [Vec<String>; 2],
    recovered: fn(&mut RespConn, u32) -> [usize; 2],
}

/// Sends the pair's two commands for i from `from` on, pipelined two at a time, until the
/// connection breaks (the kill): how many pairs were acknowledged. A reply is an integer
/// or (XADD's id) a bulk string.
fn load(addr: std::net::SocketAddr, from: u32, pair: &Pair) -> u32 {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return from;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut acked = from;
    let mut buf = Vec::new();
    for i in from.. {
        let mut cmd = Vec::new();
        for c in (pair.cmds)(i) {
            let a: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            accelkv_proto::resp::command(&mut cmd, &a);
        }
        if s.write_all(&cmd).is_err() {
            return acked;
        }
        // Two integer replies.
        let mut replies = 0;
        while replies < 2 {
            match accelkv_proto::resp::parse_reply(&buf, &Default::default()) {
                Ok(Some((v, used))) => {
                    assert!(
                        matches!(v, Value::Integer(_) | Value::Bulk(Some(_))),
                        "pair {i}: {v:?}"
                    );
                    buf.drain(..used);
                    replies += 1;
                    continue;
                }
                Ok(None) => {}
                Err(e) => panic!("{e:?}"),
            }
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                _ => return acked,
            }
        }
        acked = i + 1;
    }
    acked
}

/// Kills the server at random moments under the pair's load, six times; after each
/// restart both collections hold at least what was acknowledged, whole and in order.
fn survive_kill_9(name: &str, pair: &'static Pair) {
    let dir = std::env::temp_dir().join(format!("accelkv-crash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let args = ["--data-dir", d.as_str(), "--sync", "sync"];
    let mut acked = 0u32;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for round in 0..6 {
        let mut srv = Server::start(&args);
        {
            let mut c = RespConn::new(&srv);
            let [a, b] = (pair.recovered)(&mut c, round);
            assert!(
                a.min(b) >= acked as usize && a.abs_diff(b) <= 1,
                "round {round}: {a} and {b} recovered, {acked} acknowledged"
            );
            // The pair the kill split (one command durable, the other not): complete it,
            // so the load resumes at one index for both.
            let both = a.max(b);
            if both > 0 {
                let [ca, cb] = (pair.cmds)(both as u32 - 1);
                for (n, cmd) in [(a, ca), (b, cb)] {
                    if n < both {
                        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                        c.str(&args);
                    }
                }
            }
            acked = both as u32;
        }
        let addr = srv.resp;
        let loader = std::thread::spawn(move || load(addr, acked, pair));
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(100 + rng % 400));
        let killed = Instant::now();
        srv.child.kill().unwrap();
        srv.child.wait().unwrap();
        acked = loader.join().unwrap();
        assert!(killed.elapsed() < Duration::from_secs(10));
    }
    assert!(acked > 0, "the load never ran");
    let _ = std::fs::remove_dir_all(&dir);
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

static HASH_SET: Pair = Pair {
    cmds: |i| {
        let (f, v, m) = (format!("f{i:06}"), format!("v{i}"), format!("m{i:06}"));
        [words(&["HSET", "h", &f, &v]), words(&["SADD", "s", &m])]
    },
    recovered: |c, round| {
        let hash = strings(c.str(&["HGETALL", "h"]));
        let n = hash.len() / 2;
        assert_eq!(c.str(&["HLEN", "h"]), Value::Integer(n as i64));
        for (i, pair) in hash.chunks(2).enumerate() {
            assert_eq!(
                pair[0],
                format!("f{i:06}"),
                "round {round}: a gap before field {i}"
            );
            assert_eq!(pair[1], format!("v{i}"));
        }
        let set = strings(c.str(&["SMEMBERS", "s"]));
        assert_eq!(c.str(&["SCARD", "s"]), Value::Integer(set.len() as i64));
        for (i, m) in set.iter().enumerate() {
            assert_eq!(
                *m,
                format!("m{i:06}"),
                "round {round}: a gap before member {i}"
            );
        }
        [n, set.len()]
    },
};

static LIST_ZSET: Pair = Pair {
    cmds: |i| {
        let (e, sc, m) = (format!("e{i}"), i.to_string(), format!("m{i}"));
        [words(&["LPUSH", "l", &e]), words(&["ZADD", "z", &sc, &m])]
    },
    recovered: |c, round| {
        let list = strings(c.str(&["LRANGE", "l", "0", "-1"]));
        assert_eq!(c.str(&["LLEN", "l"]), Value::Integer(list.len() as i64));
        // LPUSH: the newest element first.
        for (j, e) in list.iter().rev().enumerate() {
            assert_eq!(
                *e,
                format!("e{j}"),
                "round {round}: a gap before element {j}"
            );
        }
        let z = strings(c.str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]));
        let n = z.len() / 2;
        assert_eq!(c.str(&["ZCARD", "z"]), Value::Integer(n as i64));
        for (i, pair) in z.chunks(2).enumerate() {
            assert_eq!(
                pair[0],
                format!("m{i}"),
                "round {round}: a gap before member {i}"
            );
            assert_eq!(pair[1], i.to_string());
        }
        [list.len(), n]
    },
};

/// The capped stream's length.
const CAP: usize = 50;

/// A stream's entries as (id, value): checked to be `f v<i>` under id `<i+1>-0`.
fn stream(c: &mut RespConn, key: &str, round: u32) -> Vec<u32> {
    let Value::Array(Some(entries)) = c.str(&["XRANGE", key, "-", "+"]) else {
        panic!("XRANGE {key}")
    };
    assert_eq!(c.str(&["XLEN", key]), Value::Integer(entries.len() as i64));
    let mut ms = Vec::new();
    for e in entries {
        let Value::Array(Some(mut e)) = e else {
            panic!("{e:?}")
        };
        let fields = strings(e.pop().unwrap());
        let id = strings(Value::Array(Some(e))).remove(0);
        let i: u32 = id.strip_suffix("-0").unwrap().parse().unwrap();
        assert_eq!(
            fields,
            [String::from("f"), format!("v{}", i - 1)],
            "round {round}"
        );
        ms.push(i);
    }
    ms
}

static STREAMS: Pair = Pair {
    cmds: |i| {
        let (id, v, cap) = (format!("{}-0", i + 1), format!("v{i}"), CAP.to_string());
        [
            words(&["XADD", "x", &id, "f", &v]),
            words(&["XADD", "y", "MAXLEN", &cap, &id, "f", &v]),
        ]
    },
    recovered: |c, round| {
        let x = stream(c, "x", round);
        for (j, i) in x.iter().enumerate() {
            assert_eq!(*i as usize, j + 1, "round {round}: a gap before entry {j}");
        }
        let y = stream(c, "y", round);
        let n = y.last().copied().unwrap_or(0) as usize;
        // The capped stream: its newest entries, no more than the cap, none missing.
        assert_eq!(y.len(), n.min(CAP), "round {round}: {y:?}");
        for w in y.windows(2) {
            assert_eq!(w[0] + 1, w[1], "round {round}: {y:?}");
        }
        [x.len(), n]
    },
};

#[test]
fn hashes_and_sets_recover_whole_and_in_order_after_kill_9() {
    survive_kill_9("hash-set", &HASH_SET);
}

#[test]
fn lists_and_sorted_sets_recover_whole_and_in_order_after_kill_9() {
    survive_kill_9("list-zset", &LIST_ZSET);
}

#[test]
fn streams_recover_whole_and_in_order_after_kill_9() {
    survive_kill_9("streams", &STREAMS);
}
