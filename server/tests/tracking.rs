//! Client-side caching (CLIENT TRACKING) against a real `redis-server`, byte for byte:
//! the same connections run the same commands on both servers, and every connection's
//! bytes (replies and invalidation pushes) must be equal. Default mode in RESP3, a REDIRECT
//! to a RESP2 subscriber of `__redis__:invalidate`, BCAST with prefixes and NOLOOP, OPTIN
//! and OPTOUT with CLIENT CACHING, FLUSHALL, a key read in a transaction and by a script,
//! expiry, the errors of bad options, GETREDIR and TRACKINGINFO. Then accelkv alone: many
//! connections tracking while writers run on every loop, every change told once.

mod common;

use common::{Redis, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A raw connection: commands out, whatever bytes arrived back.
struct Raw(TcpStream);

impl Raw {
    fn new(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        Raw(s)
    }

    fn send(&mut self, args: &[&str]) {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.0.write_all(&b).unwrap();
    }

    /// Everything that arrives until the connection is quiet for the read timeout; with
    /// `reply`, waiting (up to 5 s) for something to arrive first.
    fn read_until_quiet(&mut self, reply: bool) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let t0 = std::time::Instant::now();
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) if reply && out.is_empty() && t0.elapsed() < Duration::from_secs(5) => {}
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// What arrived before a PING's reply (and just after it: a push queued before the
    /// PING may be written by the server's loop right after its reply), the reply taken out.
    fn drain(&mut self) -> String {
        self.send(&["PING"]);
        let mut got = String::new();
        let t0 = std::time::Instant::now();
        let pong = |g: &str| {
            ["+PONG\r\n", "*2\r\n$4\r\npong\r\n$0\r\n\r\n"]
                .iter()
                .find(|p| g.contains(**p))
                .map(|p| p.to_string())
        };
        let mut buf = [0u8; 4096];
        while pong(&got).is_none() && t0.elapsed() < Duration::from_secs(5) {
            if let Ok(n) = self.0.read(&mut buf) {
                got.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
        got.push_str(&self.read_until_quiet(false));
        match pong(&got) {
            Some(p) => got.replacen(&p, "", 1),
            None => got,
        }
    }

    fn id(&mut self) -> String {
        self.send(&["CLIENT", "ID"]);
        let r = self.read_until_quiet(true);
        r.trim_start_matches(':').trim().to_string()
    }
}

/// One step: connection index, command (`$R` is replaced by connection 2's client id).
type Step = (usize, &'static [&'static str]);

const SCRIPT: &[Step] = &[
    (0, &["HELLO", "3"]),
    (1, &["HELLO", "3"]),
    (3, &["HELLO", "3"]),
    (2, &["SUBSCRIBE", "__redis__:invalidate"]),
    (0, &["CLIENT", "TRACKING", "ON"]),
    (0, &["CLIENT", "GETREDIR"]),
    (0, &["CLIENT", "TRACKINGINFO"]),
    (4, &["SET", "k1", "a"]),
    (0, &["GET", "k1"]),
    (0, &["MGET", "k2", "k3"]),
    (4, &["SET", "k1", "b"]),
    (4, &["SET", "k1", "c"]),
    (4, &["MSET", "k2", "x", "k3", "y"]),
    (0, &["HGET", "h", "f"]),
    (4, &["HSET", "h", "f", "v"]),
    (0, &["MULTI"]),
    (0, &["GET", "k1"]),
    (0, &["EXEC"]),
    (0, &["EVAL", "return redis.call('get', KEYS[1])", "1", "k2"]),
    (4, &["DEL", "k1", "k2"]),
    (0, &["GET", "own"]),
    (0, &["SET", "own", "1"]),
    (0, &["GET", "ttl"]),
    (4, &["SET", "ttl", "v", "PX", "50"]),
    (
        1,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "order:", "NOLOOP",
        ],
    ),
    (1, &["CLIENT", "TRACKINGINFO"]),
    (4, &["SET", "user:1", "x"]),
    (4, &["SET", "other", "x"]),
    (4, &["INCR", "order:7"]),
    (1, &["SET", "user:2", "mine"]),
    (3, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$R"]),
    (3, &["GET", "r1"]),
    (4, &["SET", "r1", "x"]),
    (3, &["CLIENT", "GETREDIR"]),
    (3, &["CLIENT", "TRACKING", "OFF"]),
    (3, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
    (3, &["GET", "in1"]),
    (3, &["CLIENT", "CACHING", "YES"]),
    (3, &["GET", "in2"]),
    (4, &["SET", "in1", "x"]),
    (4, &["SET", "in2", "x"]),
    (3, &["CLIENT", "CACHING", "NO"]),
    (3, &["CLIENT", "TRACKING", "OFF"]),
    (3, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
    (3, &["CLIENT", "CACHING", "NO"]),
    (3, &["GET", "out1"]),
    (3, &["GET", "out2"]),
    (4, &["SET", "out1", "x"]),
    (4, &["SET", "out2", "x"]),
    (0, &["GET", "f1"]),
    (4, &["FLUSHALL"]),
    (0, &["CLIENT", "TRACKING", "ON", "PREFIX", "a"]),
    (0, &["CLIENT", "TRACKING", "ON", "BCAST"]),
    (1, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "us"]),
    (3, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
    (4, &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
    (4, &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]),
    (
        4,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab",
        ],
    ),
    (4, &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"]),
    (4, &["CLIENT", "TRACKING", "MAYBE"]),
    (4, &["CLIENT", "CACHING", "YES"]),
    (4, &["CLIENT", "GETREDIR"]),
    (4, &["CLIENT", "TRACKINGINFO"]),
    (0, &["CLIENT", "TRACKING", "OFF"]),
    (0, &["CLIENT", "TRACKINGINFO"]),
];

/// Runs [`SCRIPT`] on five connections to `addr`: each step's bytes on every connection.
fn run(addr: SocketAddr) -> Vec<String> {
    let mut c: Vec<Raw> = (0..5).map(|_| Raw::new(addr)).collect();
    let redirect = c[2].id();
    let mut seen = Vec::new();
    for (i, (who, script_args)) in SCRIPT.iter().enumerate() {
        let args: Vec<&str> = script_args
            .iter()
            .map(|a| if *a == "$R" { redirect.as_str() } else { a })
            .collect();
        c[*who].send(&args);
        if args.contains(&"PX") {
            // Let the key expire before the next step.
            std::thread::sleep(Duration::from_millis(300));
        }
        let reply = c[*who].read_until_quiet(true);
        for (j, conn) in c.iter_mut().enumerate() {
            let mut got = if j == *who {
                reply.clone()
            } else {
                String::new()
            };
            got.push_str(&conn.drain());
            // The servers differ in who they are (HELLO) and in client ids.
            if args[0] == "HELLO" {
                got = got.len().min(1).to_string();
            }
            if args.contains(&"GETREDIR") || args.contains(&"TRACKINGINFO") {
                got = got.replace(&format!(":{redirect}\r\n"), ":<redirect>\r\n");
            }
            seen.push(format!("step {i} {script_args:?} conn {j}: {got:?}"));
        }
    }
    seen
}

#[test]
fn tracking_answers_as_redis_does() {
    let Some(redis) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let srv = Server::start(&["--threads", "2"]);
    let at = srv.resp;
    let ours = std::thread::spawn(move || run(at));
    let theirs = run(([127, 0, 0, 1], redis.port).into());
    let ours = ours.join().unwrap();
    let differ: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("accelkv {a}\n  redis {b}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// Eight tracking connections read keys while writers on both loops change them: each
/// change of a key a connection read since its last invalidation is told, none is lost,
/// and a key read again after its invalidation is told again.
#[test]
fn every_change_is_told_under_load() {
    let srv = Server::start(&["--threads", "2"]);
    let keys: Vec<String> = (0..50).map(|i| format!("key:{i}")).collect();
    let mut readers: Vec<Raw> = (0..8).map(|_| Raw::new(srv.resp)).collect();
    for r in &mut readers {
        r.send(&["HELLO", "3"]);
        r.send(&["CLIENT", "TRACKING", "ON"]);
        let _ = r.drain();
    }
    for round in 0..5 {
        for r in &mut readers {
            for k in &keys {
                r.send(&["GET", k]);
            }
            let _ = r.drain();
        }
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (addr, keys) = (srv.resp, keys.clone());
                std::thread::spawn(move || {
                    let mut c = Raw::new(addr);
                    for k in keys.iter().skip(w).step_by(2) {
                        c.send(&["SET", k, &format!("{round}")]);
                    }
                    let _ = c.drain();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        for r in &mut readers {
            let got = r.drain();
            for k in &keys {
                let told = got.matches(&format!("${}\r\n{k}\r\n", k.len())).count();
                assert_eq!(told, 1, "round {round}: {k} told {told} times in {got:?}");
            }
        }
    }
}

/// A REDIRECT target that closes: the tracking connection is told at the next change it
/// would have heard of, as Redis tells it.
#[test]
fn a_closed_redirect_target_is_announced_as_redis_does() {
    let Some(redis) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let srv = Server::start(&[]);
    let run = |addr: SocketAddr| -> Vec<String> {
        let (mut a, mut target, mut w) = (Raw::new(addr), Raw::new(addr), Raw::new(addr));
        let id = target.id();
        a.send(&["HELLO", "3"]);
        let _ = a.read_until_quiet(true);
        let mut seen = Vec::new();
        for args in [
            vec!["CLIENT", "TRACKING", "ON", "REDIRECT", id.as_str()],
            vec!["GET", "k"],
        ] {
            a.send(&args);
            seen.push(a.read_until_quiet(true));
        }
        drop(target);
        std::thread::sleep(Duration::from_millis(200));
        w.send(&["SET", "k", "v"]);
        let _ = w.read_until_quiet(true);
        seen.push(a.drain().replace(&format!(":{id}\r\n"), ":<id>\r\n"));
        a.send(&["CLIENT", "TRACKINGINFO"]);
        seen.push(
            a.read_until_quiet(true)
                .replace(&format!(":{id}\r\n"), ":<id>\r\n"),
        );
        seen
    };
    let ours = run(srv.resp);
    let theirs = run(([127, 0, 0, 1], redis.port).into());
    assert_eq!(ours, theirs);
    assert!(ours[2].contains("tracking-redir-broken"), "{ours:?}");
    assert!(ours[3].contains("broken_redirect"), "{ours:?}");
}
