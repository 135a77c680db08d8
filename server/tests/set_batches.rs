//! Pipelined SETs written as one batch (resp/commands/expire.rs `set_run`: one interleaved descent
//! for all their keys, then one station batch): what a client sees must be exactly what
//! SETs one at a time give. Two SETs of one key land in order (the later value wins, also
//! when the same key repeats within a batch and across batches), a GET after them in the
//! same pipeline sees the last, and an `+OK` is never sent before the write is visible to
//! every other connection. INFO's `set_batches` shows the batch path ran.

mod common;

use common::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn conn(srv: &Server) -> TcpStream {
    let s = TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn read_n(s: &mut TcpStream, n: usize) -> String {
    let mut got = vec![0u8; n];
    s.read_exact(&mut got).unwrap();
    String::from_utf8(got).unwrap()
}

fn bulk(v: &str) -> String {
    format!("${}\r\n{v}\r\n", v.len())
}

fn info_field(s: &mut TcpStream, field: &str) -> u64 {
    s.write_all(b"INFO\r\n").unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 65536];
    loop {
        let n = s.read(&mut b).unwrap();
        got.extend_from_slice(&b[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(head) = text.split("\r\n").next() {
            if let Ok(len) = head.trim_start_matches('$').parse::<usize>() {
                if got.len() >= head.len() + 2 + len + 2 {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&got)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO has no {field}"))
}

#[test]
fn batched_sets_keep_per_key_order_and_read_your_writes() {
    for threads in ["1", "2"] {
        let srv = Server::start(&["--threads", threads]);
        let mut s = conn(&srv);
        let before = info_field(&mut s, "set_batches");
        let mut cmds = String::new();
        let mut want = String::new();
        // Rounds of 40 SETs over 8 keys (each key five times per round, so a key repeats
        // within one batch), then a GET of every key in the same pipeline.
        for round in 0..50 {
            for i in 0..40 {
                let (k, v) = (i % 8, format!("r{round}-{i}"));
                cmds.push_str(&format!("SET key{k} {v}\r\n"));
                want.push_str("+OK\r\n");
            }
            for k in 0..8 {
                cmds.push_str(&format!("GET key{k}\r\n"));
                want.push_str(&bulk(&format!("r{round}-{}", 32 + k)));
            }
        }
        s.write_all(cmds.as_bytes()).unwrap();
        assert_eq!(read_n(&mut s, want.len()), want, "--threads {threads}");
        let after = info_field(&mut s, "set_batches");
        assert!(
            after > before,
            "no SET ran as a batch ({before} -> {after})"
        );
    }
}

/// Every `+OK` of a batch arrives only once its write is visible: another connection that
/// GETs a key right after the first connection read that key's `+OK` finds the value.
#[test]
fn a_batched_set_is_answered_only_once_visible() {
    let srv = Server::start(&["--threads", "2"]);
    let (mut w, mut r) = (conn(&srv), conn(&srv));
    for round in 0..200 {
        let mut cmds = String::new();
        for i in 0..16 {
            cmds.push_str(&format!("SET v{i} {round}\r\n"));
        }
        w.write_all(cmds.as_bytes()).unwrap();
        assert_eq!(read_n(&mut w, 16 * 5), "+OK\r\n".repeat(16));
        let mut gets = String::new();
        for i in 0..16 {
            gets.push_str(&format!("GET v{i}\r\n"));
        }
        r.write_all(gets.as_bytes()).unwrap();
        let want = bulk(&round.to_string()).repeat(16);
        assert_eq!(read_n(&mut r, want.len()), want, "round {round}");
    }
}

/// A batch written while an older write of another loop is not yet visible (that loop's
/// thread stalls between taking and completing its version) is answered only once that
/// write completes: its `+OK`s would otherwise promise writes no reader can see yet.
#[test]
fn a_batch_behind_an_older_unfinished_write_waits_for_it() {
    let srv = Server::start_with(&["--threads", "2"], |cmd| {
        cmd.env("ACCELKV_TEST_STALL_WRITES", "slow:1500");
    });
    let mut a = conn(&srv);
    a.write_all(b"SET slow 1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // B is taken by the other loop (A's is asleep inside the write).
    let mut b = conn(&srv);
    let mut cmds = String::new();
    for i in 0..16 {
        cmds.push_str(&format!("SET b{i} x{i}\r\n"));
    }
    b.write_all(cmds.as_bytes()).unwrap();
    b.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut one = [0u8; 1];
    assert!(
        b.read(&mut one).is_err(),
        "a batch was answered while an older write was not visible"
    );
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_n(&mut a, 5), "+OK\r\n");
    assert_eq!(read_n(&mut b, 16 * 5), "+OK\r\n".repeat(16));
    let mut c = conn(&srv);
    c.write_all(b"GET b15\r\nGET slow\r\nINFO\r\n").unwrap();
    assert_eq!(
        read_n(&mut c, bulk("x15").len() + bulk("1").len()),
        bulk("x15") + &bulk("1")
    );
    assert!(
        info_field(&mut b, "set_batches") > 0,
        "the SETs ran as a batch"
    );
}
