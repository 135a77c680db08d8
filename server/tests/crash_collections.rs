//! Collections survive kill -9 as strings do: a client adds fields to a hash and members
//! to a set, one command at a time in order (each HSET and SADD one transaction: its
//! subkeys and metadata one atomic batch), while the server is killed at a random moment;
//! after each restart every acknowledged field is there (`--sync sync`), the fields form a
//! prefix of the ones sent (nothing after a gap), and the size in the metadata (HLEN,
//! SCARD) agrees with the subkeys (HGETALL, SMEMBERS).

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends `HSET h f<i> v<i>` and `SADD s m<i>` for i from `from` on, pipelined, until the
/// connection breaks (the kill): how many pairs were acknowledged.
fn load(addr: std::net::SocketAddr, from: u32) -> u32 {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return from;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut acked = from;
    let mut buf = Vec::new();
    for i in from.. {
        let mut cmd = Vec::new();
        let (f, v, m) = (format!("f{i:06}"), format!("v{i}"), format!("m{i:06}"));
        accelkv_proto::resp::command(&mut cmd, &[b"HSET", b"h", f.as_bytes(), v.as_bytes()]);
        accelkv_proto::resp::command(&mut cmd, &[b"SADD", b"s", m.as_bytes()]);
        if s.write_all(&cmd).is_err() {
            return acked;
        }
        // Two integer replies, `:1\r\n` each.
        while buf.len() < 8 {
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                _ => return acked,
            }
        }
        assert_eq!(&buf[..8], b":1\r\n:1\r\n", "pair {i}");
        buf.drain(..8);
        acked = i + 1;
    }
    acked
}

#[test]
fn collections_recover_whole_and_in_order_after_kill_9() {
    let dir =
        std::env::temp_dir().join(format!("accelkv-crash-collections-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let args = ["--data-dir", d.as_str(), "--sync", "sync"];
    let mut acked = 0u32;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for round in 0..6 {
        let mut srv = Server::start(&args);
        {
            let mut c = RespConn::new(&srv);
            let hash = strings(c.str(&["HGETALL", "h"]));
            let n = hash.len() / 2;
            assert!(
                n >= acked as usize,
                "round {round}: {n} fields, {acked} acknowledged"
            );
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
            assert!(set.len() >= acked as usize && set.len().abs_diff(n) <= 1);
            for (i, m) in set.iter().enumerate() {
                assert_eq!(
                    *m,
                    format!("m{i:06}"),
                    "round {round}: a gap before member {i}"
                );
            }
            // The pair the kill split (its HSET durable, its SADD not, or the other way):
            // complete it, so the load resumes at one index for both.
            let both = n.max(set.len());
            if set.len() < both {
                c.str(&["SADD", "s", &format!("m{:06}", both - 1)]);
            } else if n < both {
                c.str(&[
                    "HSET",
                    "h",
                    &format!("f{:06}", both - 1),
                    &format!("v{}", both - 1),
                ]);
            }
            acked = both as u32;
        }
        let addr = srv.resp;
        let loader = std::thread::spawn(move || load(addr, acked));
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
