//! HyperLogLog over RESP against the real server: one script of PFADD, PFCOUNT, PFMERGE,
//! PFDEBUG, the sparse-to-dense promotion and corrupted values gets, reply for reply, what
//! a real `redis-server` answers, GET of every HLL included (so the bytes are Redis's);
//! PFADD keeps a key's TTL; concurrent PFADDs from several clients lose no element.

mod common;

use accelkv_proto::resp::Value;
use common::{commands_answer_as_redis_does, RespConn, Server};

/// `PFADD key` of `n` elements named `prefix0…`, in batches of 50.
fn adds(key: &str, prefix: &str, n: usize) -> Vec<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    names
        .chunks(50)
        .map(|c| {
            let mut cmd = vec!["PFADD".to_string(), key.to_string()];
            cmd.extend(c.iter().cloned());
            cmd
        })
        .collect()
}

#[test]
fn hyperloglogs_answer_and_encode_as_redis_does() {
    let mut script: Vec<Vec<String>> = Vec::new();
    let line = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
    for l in [
        "PFADD h",
        "GET h",
        "PFCOUNT h",
        "PFADD h a b c",
        "PFADD h a",
        "GET h",
    ] {
        script.push(line(l));
    }
    script.extend(adds("h", "e", 400));
    for l in [
        "GET h",
        "PFCOUNT h",
        "GET h",
        "PFDEBUG ENCODING h",
        "PFDEBUG DECODE h",
    ] {
        script.push(line(l));
    }
    // Past hll-sparse-max-bytes: dense.
    script.extend(adds("big", "x", 5000));
    for l in [
        "PFDEBUG ENCODING big",
        "GET big",
        "PFCOUNT big",
        "PFCOUNT h big missing",
        "PFMERGE m h big",
        "GET m",
        "PFMERGE m2 h missing",
        "GET m2",
        "PFMERGE m3",
        "GET m3",
        "PFDEBUG TODENSE h",
        "PFDEBUG TODENSE h",
        "GET h",
        "PFDEBUG DECODE h",
        "PFDEBUG GETREG m2",
        "PFDEBUG ENCODING m2",
        "PFDEBUG ENCODING nokey",
        "PFDEBUG NOPE m",
        "CONFIG SET hll-sparse-max-bytes 30",
        "PFADD small a b c d e f g h i j k",
        "PFDEBUG ENCODING small",
        "GET small",
        "CONFIG SET hll-sparse-max-bytes 3000",
        // Errors: not an HLL, a broken one.
        "SET s foobar",
        "PFADD s a",
        "PFCOUNT s",
        "PFMERGE s h",
        "PFMERGE h s",
        "RPUSH l a",
        "PFADD l a",
        "PFADD c a b c",
        "APPEND c hello",
        "PFCOUNT c",
        "PFADD c zzz",
        "SETRANGE c 4 x",
        "PFCOUNT c",
        "PFADD d a",
        "SETRANGE d 4 \u{0}",
        "PFCOUNT d",
        "PFCOUNT",
        "PFADD",
    ] {
        script.push(line(l));
    }
    let cmds: Vec<Vec<&str>> = script
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    commands_answer_as_redis_does(&cmds);
}

#[test]
fn pfadd_and_the_count_cache_keep_the_ttl() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["PFADD", "h", "a"]);
    c.str(&["EXPIRE", "h", "1000"]);
    assert_eq!(c.str(&["PFADD", "h", "b", "c"]), Value::Integer(1));
    assert_eq!(c.str(&["PFCOUNT", "h"]), Value::Integer(3));
    assert_eq!(c.str(&["PFDEBUG", "TODENSE", "h"]), Value::Integer(1));
    let Value::Integer(ttl) = c.str(&["TTL", "h"]) else {
        panic!("TTL is not an integer");
    };
    assert!((990..=1000).contains(&ttl), "ttl {ttl}");
    assert_eq!(c.str(&["PFSELFTEST"]), Value::Simple("OK".into()));
}

#[test]
fn concurrent_pfadds_lose_no_element() {
    let srv = Server::start(&[]);
    // Each of three clients adds its own 3,000 elements to one HLL; the result must be the
    // HLL of all of them, which one client then builds alone.
    std::thread::scope(|t| {
        for w in 0..3 {
            let srv = &srv;
            t.spawn(move || {
                let mut c = RespConn::new(srv);
                for i in 0..3000 {
                    let e = format!("w{w}-{i}");
                    c.str(&["PFADD", "shared", &e]);
                }
            });
        }
    });
    let mut c = RespConn::new(&srv);
    for w in 0..3 {
        for chunk in (0..3000).collect::<Vec<_>>().chunks(100) {
            let mut cmd = vec!["PFADD".to_string(), "alone".to_string()];
            cmd.extend(chunk.iter().map(|i| format!("w{w}-{i}")));
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            c.str(&args);
        }
    }
    let regs = |c: &mut RespConn, k: &str| c.str(&["PFDEBUG", "GETREG", k]);
    assert_eq!(regs(&mut c, "shared"), regs(&mut c, "alone"));
}
