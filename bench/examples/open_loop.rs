//! Latency at a fixed offered load over RESP, open loop: every connection sends its requests
//! on a fixed schedule whether or not earlier replies have come back, and each latency is
//! measured from the request's *scheduled* send time, so a server that stalls is charged for
//! every request that should have been sent meanwhile (no coordinated omission). The same
//! client drives Redis and accelkv, so the two are comparable at one offered load.
//!
//! `cargo run --release -p accelkv-bench --example open_loop -- --addr 127.0.0.1:6379 \
//!     --rate 50000 --conns 50 --secs 5 --cmd get`
//!
//! Prints one Markdown row: offered and achieved rate, p50, p99, p99.9 and max in µs.
//! Used by scripts/latency.sh (docs/BENCHMARKS.md, "Serving path").

use clap::Parser;
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Server address (RESP).
    #[arg(long)]
    addr: String,
    /// Requests per second offered, all connections together.
    #[arg(long)]
    rate: f64,
    /// Connections.
    #[arg(long, default_value_t = 50)]
    conns: usize,
    /// Seconds of measurement (after one second of warm-up at the same rate).
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// `get` or `set` (16-byte values), keys uniform over `--keys`.
    #[arg(long, default_value = "get")]
    cmd: String,
    /// Key space.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Label of the row.
    #[arg(long, default_value = "")]
    label: String,
}

struct Conn {
    sock: TcpStream,
    /// Scheduled send times of requests not yet answered, oldest first.
    sent: VecDeque<Instant>,
    next: Instant,
    input: Vec<u8>,
    output: Vec<u8>,
}

/// The length of the first complete RESP reply in `b` (simple, error, integer or bulk).
fn reply_len(b: &[u8]) -> Option<usize> {
    let line = b.windows(2).position(|w| w == b"\r\n")?;
    if b.first() != Some(&b'$') {
        return Some(line + 2);
    }
    let n: i64 = std::str::from_utf8(&b[1..line]).ok()?.parse().ok()?;
    let total = if n < 0 {
        line + 2
    } else {
        line + 2 + n as usize + 2
    };
    (b.len() >= total).then_some(total)
}

fn command(cmd: &str, key: u64, out: &mut Vec<u8>) {
    let k = format!("key:{key:012}");
    if cmd == "set" {
        let v = "vvvvvvvvvvvvvvvv";
        let _ = write!(
            out,
            "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
            k.len(),
            v.len()
        );
    } else {
        let _ = write!(out, "*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len());
    }
}

fn main() {
    let a = Args::parse();
    assert!(a.cmd == "get" || a.cmd == "set", "--cmd get or set");
    let interval = Duration::from_secs_f64(a.conns as f64 / a.rate);
    let start = Instant::now() + Duration::from_millis(50);
    let mut conns: Vec<Conn> = (0..a.conns)
        .map(|i| {
            let sock = TcpStream::connect(&a.addr).expect("connect");
            sock.set_nodelay(true).expect("nodelay");
            sock.set_nonblocking(true).expect("nonblocking");
            Conn {
                sock,
                sent: VecDeque::new(),
                // Staggered so the offered load is smooth, not in bursts of `conns`.
                next: start + interval.mul_f64(i as f64 / a.conns as f64),
                input: Vec::with_capacity(4096),
                output: Vec::with_capacity(4096),
            }
        })
        .collect();
    let warm_until = start + Duration::from_secs(1);
    let end = warm_until + Duration::from_secs_f64(a.secs);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let mut answered = 0u64;
    let mut buf = vec![0u8; 65536];
    let mut fds: Vec<libc::pollfd> = conns
        .iter()
        .map(|c| libc::pollfd {
            fd: c.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        let now = Instant::now();
        // After the last send, wait (up to 2 s) for every outstanding reply: a stall near
        // the end is charged like any other.
        let pending = conns.iter().any(|c| !c.sent.is_empty());
        if now >= end && (!pending || now >= end + Duration::from_secs(2)) {
            break;
        }
        // Send what is due.
        for c in &mut conns {
            while c.next <= now && c.next < end {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                command(&a.cmd, rng % a.keys, &mut c.output);
                c.sent.push_back(c.next);
                c.next += interval;
            }
            while !c.output.is_empty() {
                match c.sock.write(&c.output) {
                    Ok(n) => {
                        c.output.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("write: {e}"),
                }
            }
        }
        // Wait for replies until the next send is due.
        let due = conns.iter().map(|c| c.next).min().unwrap_or(end).min(end);
        let due = if now >= end {
            now + Duration::from_millis(10)
        } else {
            due
        };
        let wait = due.saturating_duration_since(Instant::now());
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd
        // structures for the duration of the call; the timespec lives on this stack frame.
        let ready = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if ready <= 0 {
            continue;
        }
        let now = Instant::now();
        for (c, fd) in conns.iter_mut().zip(&mut fds) {
            if fd.revents == 0 {
                continue;
            }
            fd.revents = 0;
            loop {
                match c.sock.read(&mut buf) {
                    Ok(0) => panic!("the server closed a connection"),
                    Ok(n) => c.input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            let mut at = 0;
            while let Some(n) = reply_len(&c.input[at..]) {
                assert!(c.input[at] != b'-', "error reply");
                at += n;
                let sched = c.sent.pop_front().expect("a reply for a request");
                if sched >= warm_until {
                    answered += 1;
                    let ns = now.duration_since(sched).as_nanos() as u64;
                    hist.saturating_record(ns.max(1));
                }
            }
            c.input.drain(..at);
        }
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        a.label,
        a.cmd.to_uppercase(),
        a.rate,
        answered as f64 / a.secs,
        us(0.5),
        us(0.99),
        us(0.999),
        hist.max() as f64 / 1000.0
    );
}
