//! A cluster client for the tests: sends a RESP command to the node it believes leads,
//! follows `-MOVED`, waits out `-TRYAGAIN`, and reports an outcome it cannot know (the
//! connection broke after a write was sent, or the group did not commit in time) as
//! unknown rather than guessing. Reads are retried freely (they change nothing).

use accelkv_proto::resp::Value;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One RESP connection (`try_call`: the reply, `None` if the connection broke).
pub use crate::common::RespConn as Conn;

/// How a command ended.
#[derive(Debug)]
pub enum Outcome {
    /// Its reply.
    Done(Value),
    /// It may or may not have taken effect.
    Unknown,
}

pub struct Client {
    seeds: Vec<SocketAddr>,
    target: SocketAddr,
    conn: Option<Conn>,
    next_seed: usize,
    /// Redirects followed (for the test's report).
    pub redirects: u64,
    /// Why the last call's outcome was unknown.
    pub why_unknown: String,
}

impl Client {
    pub fn new(seeds: Vec<SocketAddr>) -> Client {
        Client {
            target: seeds[0],
            seeds,
            conn: None,
            next_seed: 0,
            redirects: 0,
            why_unknown: String::new(),
        }
    }

    fn connect(&mut self) -> bool {
        if self.conn.is_some() {
            return true;
        }
        match TcpStream::connect_timeout(&self.target, Duration::from_millis(300)) {
            Ok(s) => {
                let _ = s.set_read_timeout(Some(Duration::from_secs(8)));
                let _ = s.set_nodelay(true);
                self.conn = Some(Conn::from_stream(s));
                true
            }
            Err(_) => {
                self.rotate();
                false
            }
        }
    }

    /// Sends the next command to seed `i` (a client that connected to any node).
    pub fn aim(&mut self, i: usize) {
        self.next_seed = i % self.seeds.len();
        self.target = self.seeds[self.next_seed];
        self.conn = None;
    }

    fn rotate(&mut self) {
        self.conn = None;
        self.next_seed = (self.next_seed + 1) % self.seeds.len();
        self.target = self.seeds[self.next_seed];
    }

    /// Runs `args` (a write if `write`), retrying what is safe to retry until `patience`
    /// runs out (then the outcome is unknown for a write, and the last error for a read).
    pub fn call(&mut self, args: &[&[u8]], write: bool, patience: Duration) -> Outcome {
        let t = Instant::now();
        loop {
            if t.elapsed() > patience {
                return Outcome::Unknown;
            }
            if !self.connect() {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let reply = self.conn.as_mut().unwrap().try_call(args);
            match reply {
                None => {
                    // Sent, and the connection broke: a write may have been committed.
                    self.rotate();
                    if write {
                        self.why_unknown = "the connection broke".into();
                        return Outcome::Unknown;
                    }
                }
                Some(Value::Error(e)) if e.starts_with("MOVED ") => {
                    self.redirects += 1;
                    let to = e.split_whitespace().nth(2).and_then(|a| a.parse().ok());
                    match to {
                        Some(a) => {
                            self.target = a;
                            self.conn = None;
                        }
                        None => return Outcome::Done(Value::Error(e)),
                    }
                }
                Some(Value::Error(e)) if e.starts_with("TRYAGAIN") => {
                    std::thread::sleep(Duration::from_millis(30));
                    self.rotate();
                }
                Some(Value::Error(e)) if e.starts_with("CLUSTERDOWN") => {
                    self.rotate();
                    if write {
                        self.why_unknown = e;
                        return Outcome::Unknown;
                    }
                }
                Some(v) => return Outcome::Done(v),
            }
        }
    }
}

/// `cluster_commands_led_here` of `CLUSTER INFO`, summed over the nodes at `seeds`: the
/// keyed commands their ranges counted towards their load.
pub fn commands_led(seeds: &[SocketAddr]) -> u64 {
    use std::io::{Read, Write};
    seeds
        .iter()
        .map(|a| {
            let mut s = std::net::TcpStream::connect(a).unwrap();
            s.write_all(b"*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n")
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let field = "cluster_commands_led_here:";
            loop {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "CLUSTER INFO: the connection closed");
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(v) = text.split(field).nth(1).and_then(|t| t.split_once("\r\n")) {
                    return v.0.parse::<u64>().unwrap();
                }
            }
        })
        .sum()
}
