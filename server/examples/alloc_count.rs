//! Heap allocations per request on the serving path, counted by a counting global allocator
//! around the system's: a server in this process, a RESP client on this thread that
//! allocates nothing while measuring (requests prebuilt, replies read into one buffer), so
//! every allocation counted in a measurement is the server's (its loops and its background
//! threads: the hot-key cache's manager, the admin endpoint).
//!
//! `cargo run --release -p accelkv-server --example alloc_count`
//!
//! Rows: GET and SET of 16-byte keys and values, pipelines of 16, after a warm-up that
//! grows every buffer; with the hot-key cache on (the default: one GET in 8 is sampled,
//! a key copied for the cache's control plane) and off.

use accelkv_server::config::{Args, Settings};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is the
// only addition.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn start(cache_buckets: usize) -> SocketAddr {
    let resp = free_port();
    let args = Args {
        port: Some(free_port()),
        resp_port: Some(resp),
        admin_port: Some(free_port()),
        cache_buckets: Some(cache_buckets),
        threads: Some(1),
        ..Args::default()
    };
    let settings = Settings::resolve(args).expect("settings");
    std::thread::spawn(move || accelkv_server::serve(settings).expect("serve"));
    let addr: SocketAddr = ([127, 0, 0, 1], resp).into();
    let t = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    addr
}

/// Sends `rounds` pipelines of `cmds` and reads until each pipeline's `reply_len` bytes.
fn drive(s: &mut TcpStream, cmds: &[u8], reply_len: usize, rounds: usize, buf: &mut [u8]) {
    for _ in 0..rounds {
        s.write_all(cmds).expect("write");
        let mut got = 0;
        while got < reply_len {
            let n = s.read(&mut buf[got..]).expect("read");
            assert!(n > 0, "closed");
            got += n;
        }
    }
}

fn main() {
    const PIPELINE: usize = 16;
    const ROUNDS: usize = 20_000;
    println!("| request | hot-key cache | allocations per request |");
    println!("|---|---|---|");
    for cache in [1 << 16, 0] {
        let addr = start(cache);
        let mut s = TcpStream::connect(addr).expect("connect");
        let key = |i: usize| format!("key:{:012}", i % 10_000);
        let sets: Vec<Vec<u8>> = (0..64)
            .map(|r| {
                (0..PIPELINE)
                    .map(|j| format!("SET {} 0123456789abcdef\r\n", key(r * PIPELINE + j)))
                    .collect::<String>()
                    .into_bytes()
            })
            .collect();
        let gets: Vec<Vec<u8>> = (0..64)
            .map(|r| {
                (0..PIPELINE)
                    .map(|j| format!("GET {}\r\n", key(r * PIPELINE + j)))
                    .collect::<String>()
                    .into_bytes()
            })
            .collect();
        let mut buf = vec![0u8; 1 << 16];
        let set_reply = PIPELINE * b"+OK\r\n".len();
        let get_reply = PIPELINE * b"$16\r\n0123456789abcdef\r\n".len();
        // Warm up: every key written, every buffer grown.
        for round in 0..2000 {
            drive(&mut s, &sets[round % 64], set_reply, 1, &mut buf);
            drive(&mut s, &gets[round % 64], get_reply, 1, &mut buf);
        }
        for (name, cmds, reply) in [("SET", &sets, set_reply), ("GET", &gets, get_reply)] {
            let before = ALLOCS.load(Ordering::Relaxed);
            for round in 0..ROUNDS {
                drive(&mut s, &cmds[round % 64], reply, 1, &mut buf);
            }
            let n = ALLOCS.load(Ordering::Relaxed) - before;
            let per = n as f64 / (ROUNDS * PIPELINE) as f64;
            let on = if cache > 0 { "on" } else { "off" };
            println!("| {name} (pipelines of {PIPELINE}) | {on} | {per:.3} |");
        }
    }
}
