//! Big values: with the defaults a RESP command carries values up to Redis's 512 MiB, so
//! Redis's "Very big payload in GET/SET" passes; `--max-value` sets the limit (the input
//! limit follows it); a value over the limit gets Redis's `invalid bulk length` with the
//! limit named, and the connection closes.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};
use std::io::{Read, Write};

#[test]
fn a_big_payload_round_trips_when_the_limit_allows_it() {
    let srv = Server::start(&["--max-value", &(16 << 20).to_string()]);
    let mut c = RespConn::new(&srv);
    let big: Vec<u8> = (0..10_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(c.call(&[b"SET", b"big", &big]), Value::Simple("OK".into()));
    assert_eq!(c.call(&[b"GET", b"big"]), Value::Bulk(Some(big.clone())));
    assert_eq!(c.call(&[b"STRLEN", b"big"]), Value::Integer(10_000_000));
    // Two of them in one command (MSET) fit too.
    assert_eq!(
        c.call(&[b"MSET", b"a", &big, b"b", &big]),
        Value::Simple("OK".into())
    );
}

/// Redis's "Very big payload in GET/SET" with the server's defaults (4 MB, where the old
/// 1 MiB default reset the connection).
#[test]
fn the_defaults_take_redis_sized_values() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let big = pattern(4 << 20, 3);
    assert_eq!(c.call(&[b"SET", b"big", &big]), Value::Simple("OK".into()));
    assert_eq!(c.call(&[b"GET", b"big"]), Value::Bulk(Some(big)));
    assert_eq!(
        c.call(&[b"CONFIG", b"GET", b"proto-max-bulk-len"]),
        Value::Array(Some(vec![
            Value::Bulk(Some(b"proto-max-bulk-len".to_vec())),
            Value::Bulk(Some(b"536870912".to_vec()))
        ]))
    );
}

#[test]
fn a_value_over_the_limit_is_refused_with_the_limit_named() {
    for (args, len) in [
        (&[][..], 600_000_000u64),
        (&["--max-value", "1MiB"][..], 4_000_000),
    ] {
        let srv = Server::start(args);
        let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        s.write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${len}\r\n").as_bytes())
            .unwrap();
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        let want = format!("-ERR Protocol error: invalid bulk length ({len} bytes exceed");
        assert!(got.starts_with(&want), "{got}");
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(7).wrapping_add(seed) % 251) as u8)
        .collect()
}

/// A big value is read from the socket into memory of its own and becomes the item's
/// value as it is: the server's peak memory grows by about the value once, where reading
/// it into the input buffer (grown by doubling) and copying it into the store took about
/// three times it.
#[test]
fn a_streamed_value_is_held_once_not_twice() {
    const LEN: usize = 192 << 20;
    let srv = Server::start(&["--max-value", &(256 << 20).to_string()]);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        c.call(&[b"SET", b"warm", b"up"]),
        Value::Simple("OK".into())
    );
    let before = srv.peak_rss_kib();
    let big = pattern(LEN, 1);
    assert_eq!(c.call(&[b"SET", b"big", &big]), Value::Simple("OK".into()));
    let grew = srv.peak_rss_kib() - before;
    let value_kib = (LEN >> 10) as u64;
    assert!(
        grew < value_kib * 5 / 4,
        "peak memory grew by {grew} KiB for a value of {value_kib} KiB"
    );
    assert_eq!(c.call(&[b"STRLEN", b"big"]), Value::Integer(LEN as i64));
    for at in [0usize, 1 << 20, LEN - 100] {
        let (from, to) = (at.to_string(), (at + 99).to_string());
        assert_eq!(
            c.call(&[b"GETRANGE", b"big", from.as_bytes(), to.as_bytes()]),
            Value::Bulk(Some(big[at..at + 100].to_vec()))
        );
    }
    drop(big);
    // Replaced by another streamed value, then read back whole.
    let other = pattern(LEN / 2, 9);
    assert_eq!(
        c.call(&[b"SET", b"big", &other]),
        Value::Simple("OK".into())
    );
    assert_eq!(c.call(&[b"GET", b"big"]), Value::Bulk(Some(other)));
}

/// A GET of a big value copies it once, into the connection's output (as Redis 7 does),
/// and the output gives that memory back once it is written.
#[test]
fn a_big_get_is_copied_once() {
    const LEN: usize = 96 << 20;
    let srv = Server::start(&["--max-value", &(128 << 20).to_string()]);
    let mut c = RespConn::new(&srv);
    let big = pattern(LEN, 5);
    assert_eq!(c.call(&[b"SET", b"big", &big]), Value::Simple("OK".into()));
    let before = srv.peak_rss_kib();
    for _ in 0..2 {
        assert_eq!(c.call(&[b"GET", b"big"]), Value::Bulk(Some(big.clone())));
    }
    let grew = srv.peak_rss_kib() - before;
    let value_kib = (LEN >> 10) as u64;
    assert!(
        grew < value_kib * 5 / 4,
        "two GETs raised peak memory by {grew} KiB for a value of {value_kib} KiB"
    );
}

/// Big arguments anywhere in any command, with options after them, in transactions, sent
/// in small pieces and followed by more commands in the same write, answer as the same
/// commands with small arguments do.
#[test]
fn streamed_arguments_work_in_every_command() {
    let srv = Server::start(&["--max-value", &(4 << 20).to_string()]);
    let mut c = RespConn::new(&srv);
    let (a, b) = (pattern(300_000, 2), pattern(100_000, 3));
    let ok = Value::Simple("OK".into());
    assert_eq!(c.call(&[b"SET", b"k", &a, b"EX", b"100"]), ok);
    assert!(matches!(c.call(&[b"TTL", b"k"]), Value::Integer(t) if t > 90));
    assert_eq!(
        c.call(&[b"SET", b"k", &b, b"GET"]),
        Value::Bulk(Some(a.clone()))
    );
    assert_eq!(c.call(&[b"SET", b"k", &a, b"NX"]), Value::Bulk(None));
    assert_eq!(c.call(&[b"GET", b"k"]), Value::Bulk(Some(b.clone())));
    assert_eq!(
        c.call(&[b"MSET", b"m1", &a, b"m2", b"small", b"m3", &b]),
        ok
    );
    assert_eq!(
        c.call(&[b"MGET", b"m1", b"m2", b"m3"]),
        Value::Array(Some(vec![
            Value::Bulk(Some(a.clone())),
            Value::Bulk(Some(b"small".to_vec())),
            Value::Bulk(Some(b.clone())),
        ]))
    );
    assert_eq!(c.call(&[b"HSET", b"h", b"f", &a]), Value::Integer(1));
    assert_eq!(c.call(&[b"HGET", b"h", b"f"]), Value::Bulk(Some(a.clone())));
    assert_eq!(c.call(&[b"RPUSH", b"l", &b, b"x"]), Value::Integer(2));
    assert_eq!(c.call(&[b"LPOP", b"l"]), Value::Bulk(Some(b.clone())));
    assert_eq!(c.call(&[b"APPEND", b"m2", &b]), Value::Integer(100_005));
    assert_eq!(c.call(&[b"MULTI"]), ok);
    assert_eq!(c.call(&[b"SET", b"t", &a]), Value::Simple("QUEUED".into()));
    assert_eq!(c.call(&[b"EXEC"]), Value::Array(Some(vec![ok.clone()])));
    assert_eq!(c.call(&[b"GET", b"t"]), Value::Bulk(Some(a.clone())));

    // A pipeline: a streamed SET between small commands, all in one write, then the same
    // bytes in small pieces with pauses (the big value arrives over many reads).
    let mut wire = Vec::new();
    accelkv_proto::resp::command(&mut wire, &[b"PING"]);
    accelkv_proto::resp::command(&mut wire, &[b"SET", b"p", &a, b"PX", b"100000"]);
    accelkv_proto::resp::command(&mut wire, &[b"STRLEN", b"p"]);
    accelkv_proto::resp::command(&mut wire, &[b"GET", b"m2"]);
    let expect = [
        Value::Simple("PONG".into()),
        ok.clone(),
        Value::Integer(300_000),
        Value::Bulk(Some([&b"small"[..], &b].concat())),
    ];
    for piece in [wire.len(), 7_001, 65_536] {
        let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
        for (i, part) in wire.chunks(piece).enumerate() {
            s.write_all(part).unwrap();
            if i % 8 == 7 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        let mut r = RespConn::from_stream(s);
        for e in &expect {
            assert_eq!(&r.read(), e, "pieces of {piece}");
        }
    }
}

/// Malformed input after a streamed argument, and a command whose arguments together pass
/// the command limit, get a protocol error and close the connection.
#[test]
fn bad_input_in_a_streamed_command_is_refused() {
    let srv = Server::start(&["--max-value", "1MiB"]);
    let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$70000\r\n";
    let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(head).unwrap();
    s.write_all(&vec![b'v'; 70_000]).unwrap();
    s.write_all(b"XX").unwrap();
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    assert_eq!(
        got,
        "-ERR Protocol error: bulk string not followed by CRLF\r\n"
    );

    // Five values of 1 MiB: past the 4 MiB command limit that 1 MiB values give.
    let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let v = vec![b'v'; 1 << 20];
    let mut wire = b"*11\r\n$4\r\nMSET\r\n".to_vec();
    for i in 0..5 {
        wire.extend_from_slice(format!("$1\r\n{i}\r\n$1048576\r\n").as_bytes());
        wire.extend_from_slice(&v);
        wire.extend_from_slice(b"\r\n");
    }
    let _ = s.write_all(&wire);
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    assert!(got.starts_with("-ERR Protocol error:"), "{got}");
    let mut c = RespConn::new(&srv);
    assert_eq!(c.call(&[b"EXISTS", b"0", b"k"]), Value::Integer(0));
}

/// With a data directory, streamed values (kept as they arrived) are written out like any
/// other: after kill -9 every acknowledged one is back.
#[test]
fn streamed_values_survive_kill_9() {
    let dir = std::env::temp_dir().join(format!("accelkv-big-values-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let args = ["--data-dir", &d, "--max-value", "33554432"];
    let mut srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    let values: Vec<Vec<u8>> = [70_000, 3 << 20, 20 << 20, 100_000]
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(n, i as u32))
        .collect();
    for (i, v) in values.iter().enumerate() {
        let key = format!("v{i}");
        assert_eq!(
            c.call(&[b"SET", key.as_bytes(), v]),
            Value::Simple("OK".into())
        );
    }
    // One replaced: the first value's space is reclaimed, the second one is what comes back.
    assert_eq!(
        c.call(&[b"SET", b"v0", &values[3]]),
        Value::Simple("OK".into())
    );
    srv.child.kill().unwrap();
    let _ = srv.child.wait();
    drop(srv);
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        c.call(&[b"GET", b"v0"]),
        Value::Bulk(Some(values[3].clone()))
    );
    for (i, v) in values.iter().enumerate().skip(1) {
        let key = format!("v{i}");
        assert_eq!(
            c.call(&[b"GET", key.as_bytes()]),
            Value::Bulk(Some(v.clone()))
        );
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
