//! UDP load for Algo-Logic's evaluation (docs/EVALUATION.md): `--threads` threads, each with
//! its own socket, each keeping `--window` datagrams of `--batch` GETs in flight against
//! accelkv's binary protocol, or with `--echo` against a UDP echo thread in this process
//! (the floor of a round trip through the kernel's sockets). Reports GETs (or echoes) per
//! second, the round trip of a datagram at p50/p99/p99.9, and, with `--server-pid`, the
//! server's CPU time per GET from /proc/PID/stat: the energy proxy on a machine without
//! RAPL counters (the seeds compare energy per operation).
//!
//! One `send` and one `recv` per datagram (no `sendmmsg`): the window keeps enough requests
//! in flight to find the server's peak, and several sockets spread them over the server's
//! event loops.
//!
//! `cargo run --release -p accelkv-client --example udp_load -- --server 127.0.0.1:7707 \
//!     --load 100000 --threads 2 --window 8 --batch 16 --secs 3`

use accelkv_client::Client;
use accelkv_proto::frame::{decode_response, encode_request};
use accelkv_proto::{Limits, Request, Status};
use clap::Parser;
use hdrhistogram::Histogram;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(Parser, Clone)]
struct Args {
    /// accelkv's binary-protocol address (UDP; TCP for --load).
    #[arg(long, default_value = "127.0.0.1:7707")]
    server: String,
    /// Keys to PUT over TCP first (key:000000000000 ..), and to GET from.
    #[arg(long, default_value_t = 100_000)]
    load: usize,
    /// Skip the PUTs (the keys are there from an earlier run).
    #[arg(long)]
    no_load: bool,
    /// Client threads, one socket each.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Datagrams in flight per socket.
    #[arg(long, default_value_t = 1)]
    window: usize,
    /// GETs per datagram.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Echo datagrams of the same size from a thread in this process instead of asking the
    /// server.
    #[arg(long)]
    echo: bool,
    /// The server's process id: report its CPU time per GET.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Write the round trip's distribution here: `microseconds fraction` per line, the
    /// fraction of datagrams answered within that time (Algo-Logic's Figure 9).
    #[arg(long)]
    cdf: Option<std::path::PathBuf>,
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:012}").into_bytes() // 16 bytes
}

/// Datagram `frame` of `batch` GETs, padded so the server may answer it in full (it never
/// sends an unauthenticated client more bytes than it received).
fn datagram(frame: u32, batch: usize, keys: usize, seed: &mut u64) -> Vec<u8> {
    let ks: Vec<Vec<u8>> = (0..batch)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            key((*seed % keys as u64) as usize)
        })
        .collect();
    let mut ops: Vec<Request<'_>> = ks
        .iter()
        .enumerate()
        .map(|(i, k)| Request::Get {
            id: i as u16,
            key: k,
        })
        .collect();
    ops.push(Request::Pad {
        id: batch as u16,
        len: 256 + 48 * batch,
    });
    let mut out = Vec::new();
    encode_request(&mut out, frame, None, &ops);
    out
}

/// CPU time (user + system) of process `pid` so far.
fn cpu_of(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// What one thread measured.
struct Tally {
    gets: u64,
    hist: Histogram<u64>,
    errors: u64,
}

/// One thread: `window` datagrams in flight on its own socket until `deadline`.
fn run(a: &Args, to: SocketAddr, t: usize, deadline: Instant) -> Tally {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.connect(to).expect("connect");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut hist = Histogram::<u64>::new_with_bounds(100, 10_000_000_000, 3).expect("histogram");
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
    let limits = Limits::default();
    // Frame ids of this thread: t in the top byte, a counter below; send time per slot.
    let mut next = 0u32;
    let mut sent: Vec<(u32, Instant)> = Vec::with_capacity(a.window);
    let frame = |n: u32| ((t as u32) << 24) | (n & 0xff_ffff);
    let (mut gets, mut errors) = (0u64, 0u64);
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline {
        while sent.len() < a.window {
            let id = frame(next);
            next = next.wrapping_add(1);
            let d = datagram(id, a.batch, a.load.max(1), &mut seed);
            sock.send(&d).expect("send");
            sent.push((id, Instant::now()));
        }
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(_) => {
                // Lost datagrams: forget them and send others.
                errors += sent.len() as u64;
                sent.clear();
                continue;
            }
        };
        let id = if a.echo {
            u32::from_le_bytes(buf[8..12].try_into().unwrap_or([0; 4]))
        } else {
            match decode_response(&buf[..n], &limits) {
                Ok((h, ops)) => {
                    let ok = ops.iter().filter(|o| o.status == Status::Ok).count();
                    errors += (ops.len().saturating_sub(1) - ok.min(a.batch)) as u64;
                    h.frame_id
                }
                Err(_) => {
                    errors += 1;
                    continue;
                }
            }
        };
        if let Some(i) = sent.iter().position(|s| s.0 == id) {
            let (_, at) = sent.swap_remove(i);
            hist.saturating_record(at.elapsed().as_nanos() as u64);
            gets += a.batch as u64;
        }
    }
    Tally { gets, hist, errors }
}

/// An echo thread on `sock`: every datagram goes back to its sender.
fn echo(sock: UdpSocket) {
    let mut buf = vec![0u8; 65536];
    while let Ok((n, from)) = sock.recv_from(&mut buf) {
        let _ = sock.send_to(&buf[..n], from);
    }
}

fn main() {
    let a = Args::parse();
    let to: SocketAddr = if a.echo {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind echo");
        let addr = s.local_addr().expect("echo address");
        std::thread::spawn(move || echo(s));
        addr
    } else {
        let addr: SocketAddr = a.server.parse().expect("--server HOST:PORT");
        if !a.no_load {
            let mut c = Client::connect(addr, None).expect("connect over TCP to load");
            for i in 0..a.load {
                c.put(&key(i), b"0123456789abcdef").expect("put");
            }
        }
        addr
    };
    let cpu0 = a.server_pid.map(cpu_of);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.secs);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..a.threads)
            .map(|t| {
                let a = a.clone();
                s.spawn(move || run(&a, to, t, deadline))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut hist = Histogram::<u64>::new_with_bounds(100, 10_000_000_000, 3).expect("histogram");
    let (mut gets, mut errors) = (0, 0);
    for t in &tallies {
        hist.add(&t.hist).expect("histogram");
        gets += t.gets;
        errors += t.errors;
    }
    if let Some(path) = &a.cdf {
        let lines: String = (1..=1000)
            .map(|q| q as f64 / 1000.0)
            .map(|q| format!("{:.2} {q:.3}\n", hist.value_at_quantile(q) as f64 / 1000.0))
            .collect();
        std::fs::write(path, lines).expect("write --cdf");
    }
    let cpu = match (a.server_pid, cpu0) {
        (Some(pid), Some(c0)) => format!(
            "{:.0} ns",
            (cpu_of(pid) - c0).as_nanos() as f64 / gets.max(1) as f64
        ),
        _ => "–".into(),
    };
    println!(
        "| {} | {} | {} | {} | {:.0} | {:.1} µs | {:.1} µs | {:.1} µs | {} | {} |",
        if a.echo {
            "UDP echo"
        } else {
            "accelkv UDP GET"
        },
        a.threads,
        a.window,
        a.batch,
        gets as f64 / secs,
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0,
        hist.value_at_quantile(0.999) as f64 / 1000.0,
        cpu,
        errors
    );
}
