//! Network benchmark, one client thread, loopback: accelkv's binary protocol over TCP and UDP
//! with 1, 16 and 64 operations per frame, Redis (RESP) and memcached (text protocol) with
//! 16 pipelined requests, and a raw UDP ping-pong as the floor for a round trip.
//! `scripts/bench-servers.sh` starts the servers and runs this.
//!
//! `cargo run --release -p accelkv-client --example net_bench -- --accelkv 127.0.0.1:7707 \
//!     --redis 127.0.0.1:6399 --memcached 127.0.0.1:11299`

use accelkv_client::{Client, UdpClient};
use accelkv_proto::{resp, Limits, Request};
use clap::Parser;
use hdrhistogram::Histogram;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// accelkv binary protocol address (TCP and UDP).
    #[arg(long)]
    accelkv: Option<String>,
    /// Redis address.
    #[arg(long)]
    redis: Option<String>,
    /// memcached address.
    #[arg(long)]
    memcached: Option<String>,
    /// Keys (and operations per measurement).
    #[arg(long, default_value_t = 100_000)]
    ops: usize,
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:012}").into_bytes() // 16 bytes
}

const VALUE: &[u8] = b"0123456789abcdef";

struct Row {
    name: String,
    ops_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
}

/// Runs `batches` calls of `f`, each doing `per` operations; latency per call.
fn measure(name: String, batches: usize, per: usize, mut f: impl FnMut(usize)) -> Row {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let start = Instant::now();
    for b in 0..batches {
        let t = Instant::now();
        f(b);
        h.saturating_record(t.elapsed().as_nanos() as u64);
    }
    let secs = start.elapsed().as_secs_f64();
    Row {
        name,
        ops_per_sec: (batches * per) as f64 / secs,
        p50_us: h.value_at_quantile(0.5) as f64 / 1000.0,
        p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
    }
}

/// Requests pipelined 16 at a time on one connection: `cmd` appends request `i`, `replies`
/// counts the complete replies in what has been read.
fn pipelined(
    s: &mut TcpStream,
    name: &str,
    n: usize,
    cmd: &dyn Fn(usize, &mut Vec<u8>),
    replies: &dyn Fn(&[u8]) -> usize,
) -> Row {
    const PER: usize = 16;
    s.set_nodelay(true).expect("nodelay");
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 65536];
    measure(format!("{name}, {PER} pipelined"), n / PER, PER, |b| {
        let mut out = Vec::new();
        for i in 0..PER {
            cmd(b * PER + i, &mut out);
        }
        s.write_all(&out).expect("write");
        buf.clear();
        while replies(&buf) < PER {
            let r = s.read(&mut chunk).expect("read");
            buf.extend_from_slice(&chunk[..r]);
        }
    })
}

fn main() {
    let a = Args::parse();
    let n = a.ops;
    let mut rows = Vec::new();
    if let Some(addr) = &a.accelkv {
        let mut c = Client::connect(addr.as_str(), None).expect("connect accelkv");
        let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
        for per in [1usize, 16, 64] {
            let batches = n / per;
            rows.push(measure(
                format!("accelkv TCP PUT, {per}/frame"),
                batches,
                per,
                |b| {
                    let ops: Vec<Request> = (0..per)
                        .map(|i| Request::Put {
                            id: i as u16,
                            key: &keys[b * per + i],
                            value: VALUE,
                        })
                        .collect();
                    c.execute(&ops).expect("put");
                },
            ));
            rows.push(measure(
                format!("accelkv TCP GET, {per}/frame"),
                batches,
                per,
                |b| {
                    let ops: Vec<Request> = (0..per)
                        .map(|i| Request::Get {
                            id: i as u16,
                            key: &keys[b * per + i],
                        })
                        .collect();
                    c.execute(&ops).expect("get");
                },
            ));
        }
        let mut u = UdpClient::connect(addr.as_str(), None).expect("udp");
        u.pad_to = 2048;
        for per in [1usize, 16, 64] {
            let batches = n / per;
            rows.push(measure(
                format!("accelkv UDP GET, {per}/datagram"),
                batches,
                per,
                |b| {
                    let ops: Vec<Request> = (0..per)
                        .map(|i| Request::Get {
                            id: i as u16,
                            key: &keys[b * per + i],
                        })
                        .collect();
                    u.execute(&ops).expect("udp get");
                },
            ));
        }
    }
    if let Some(addr) = &a.redis {
        let mut s = TcpStream::connect(addr.as_str()).expect("connect redis");
        let replies = |buf: &[u8]| {
            let (mut at, mut got) = (0, 0);
            while let Ok(Some((_, used))) = resp::parse_reply(&buf[at..], &Limits::default()) {
                at += used;
                got += 1;
            }
            got
        };
        rows.push(pipelined(
            &mut s,
            "Redis SET",
            n,
            &|i, out| resp::command(out, &[b"SET", &key(i), VALUE]),
            &replies,
        ));
        rows.push(pipelined(
            &mut s,
            "Redis GET",
            n,
            &|i, out| resp::command(out, &[b"GET", &key(i)]),
            &replies,
        ));
    }
    if let Some(addr) = &a.memcached {
        let mut s = TcpStream::connect(addr.as_str()).expect("connect memcached");
        let count = |end: &'static [u8]| {
            move |buf: &[u8]| buf.windows(end.len()).filter(|w| *w == end).count()
        };
        let set = |i: usize, out: &mut Vec<u8>| {
            out.extend_from_slice(b"set ");
            out.extend_from_slice(&key(i));
            out.extend_from_slice(format!(" 0 0 {}\r\n", VALUE.len()).as_bytes());
            out.extend_from_slice(VALUE);
            out.extend_from_slice(b"\r\n");
        };
        let get = |i: usize, out: &mut Vec<u8>| {
            out.extend_from_slice(b"get ");
            out.extend_from_slice(&key(i));
            out.extend_from_slice(b"\r\n");
        };
        rows.push(pipelined(
            &mut s,
            "memcached SET",
            n,
            &set,
            &count(b"STORED\r\n"),
        ));
        rows.push(pipelined(
            &mut s,
            "memcached GET",
            n,
            &get,
            &count(b"END\r\n"),
        ));
    }
    // Raw UDP ping-pong on loopback: the floor for any UDP round trip on this machine.
    let echo = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let echo_addr = echo.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut b = [0u8; 2048];
        while let Ok((n, peer)) = echo.recv_from(&mut b) {
            let _ = echo.send_to(&b[..n], peer);
        }
    });
    let ping = UdpSocket::bind("127.0.0.1:0").expect("bind");
    ping.connect(echo_addr).expect("connect");
    let mut b = [0u8; 2048];
    rows.push(measure(
        "raw UDP ping-pong (64 bytes)".into(),
        n.min(50_000),
        1,
        |_| {
            ping.send(&[0u8; 64]).expect("send");
            ping.recv(&mut b).expect("recv");
        },
    ));
    println!("| client (one thread) | ops/s | p50 per call | p99 per call |");
    println!("|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0} | {:.1} µs | {:.1} µs |",
            r.name, r.ops_per_sec, r.p50_us, r.p99_us
        );
    }
}
