//! How a leaf cache miss should read its page (issue 18 asks to measure it): random reads of
//! whole pages at page-aligned offsets of one file, the way the loader threads read evicted
//! leaves, through
//! * `pool-N`: N threads, each one blocking `pread` at a time (what `accelkv_engine::Loader`
//!   does, two threads by default);
//! * `uring-QD`: one thread keeping QD reads in flight through io_uring (the `io-uring`
//!   crate), reaping completions as they come;
//!
//! each through the page cache and with `O_DIRECT`, the file cold (page cache dropped first;
//! needs root) or warm (read once before). Reports reads per second and mean latency.
//!
//! `cargo run --release -p accelkv-durable --example page_reads -- [MiB] [DIR] [--secs S]`
//! (default 1024 MiB in the temporary directory, 3 s per case; the results:
//! docs/BENCHMARKS.md, "Data larger than memory").

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The page size read (8 KiB: a default node's page class).
const PAGE: usize = 8192;

/// A page buffer aligned for `O_DIRECT`.
struct Buf(*mut u8);

impl Buf {
    fn new() -> Buf {
        // SAFETY: a non-zero size and a power-of-two alignment.
        Buf(unsafe { alloc_zeroed(Layout::from_size_align(PAGE, 4096).unwrap()) })
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: `PAGE` bytes allocated by `new`, owned by this value.
        unsafe { std::slice::from_raw_parts_mut(self.0, PAGE) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated by `new` with this layout.
        unsafe { dealloc(self.0, Layout::from_size_align(PAGE, 4096).unwrap()) }
    }
}

// SAFETY: a plain heap buffer, used by one thread at a time.
unsafe impl Send for Buf {}

/// xorshift: a page index below `pages`.
fn next(x: &mut u64, pages: u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x % pages
}

fn open(path: &std::path::Path, direct: bool) -> File {
    let mut o = OpenOptions::new();
    o.read(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path).expect("open the test file")
}

/// `threads` threads of blocking preads for `secs`: (reads, summed latency in ns).
fn pool(path: &std::path::Path, direct: bool, threads: usize, pages: u64, secs: f64) -> (u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, ns) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (f, stop, reads, ns) =
                (open(path, direct), stop.clone(), reads.clone(), ns.clone());
            std::thread::spawn(move || {
                let mut b = Buf::new();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    let at = next(&mut x, pages) * PAGE as u64;
                    let t0 = Instant::now();
                    f.read_exact_at(b.slice(), at).expect("pread");
                    ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    (reads.load(Ordering::Relaxed), ns.load(Ordering::Relaxed))
}

/// One thread keeping `qd` reads in flight through io_uring for `secs`.
fn uring(
    path: &std::path::Path,
    direct: bool,
    qd: usize,
    pages: u64,
    secs: f64,
) -> std::io::Result<(u64, u64)> {
    let f = open(path, direct);
    let mut ring = io_uring::IoUring::new(qd as u32)?;
    let mut bufs: Vec<Buf> = (0..qd).map(|_| Buf::new()).collect();
    let mut started = vec![Instant::now(); qd];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (mut reads, mut ns) = (0u64, 0u64);
    let submit = |ring: &mut io_uring::IoUring, b: &mut Buf, i: usize, x: &mut u64| {
        let at = next(x, pages) * PAGE as u64;
        let e = io_uring::opcode::Read::new(io_uring::types::Fd(f.as_raw_fd()), b.0, PAGE as u32)
            .offset(at)
            .build()
            .user_data(i as u64);
        // SAFETY: the buffer stays allocated and untouched until its completion is reaped
        // (every read is reaped before `bufs` is dropped), and the file outlives the ring.
        unsafe { ring.submission().push(&e).expect("room for every buffer") };
    };
    for (i, b) in bufs.iter_mut().enumerate() {
        submit(&mut ring, b, i, &mut x);
        started[i] = Instant::now();
    }
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut in_flight = qd;
    while in_flight > 0 {
        ring.submit_and_wait(1)?;
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (i, r) in done {
            let i = i as usize;
            if r < 0 {
                return Err(std::io::Error::from_raw_os_error(-r));
            }
            reads += 1;
            ns += started[i].elapsed().as_nanos() as u64;
            if Instant::now() < end {
                submit(&mut ring, &mut bufs[i], i, &mut x);
                started[i] = Instant::now();
            } else {
                in_flight -= 1;
            }
        }
    }
    Ok((reads, ns))
}

fn drop_caches() -> bool {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let dir = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let secs: f64 = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let path = dir.join(format!("accelkv-page-reads-{}", std::process::id()));
    {
        let f = File::create(&path).expect("create the test file");
        let mut chunk = vec![0u8; 1 << 20];
        let mut x = 1u64;
        for i in 0..mib {
            for w in chunk.chunks_mut(8) {
                w.copy_from_slice(&(i ^ next(&mut x, u64::MAX)).to_le_bytes());
            }
            f.write_all_at(&chunk, i << 20)
                .expect("write the test file");
        }
        f.sync_all().expect("sync the test file");
    }
    let pages = (mib << 20) / PAGE as u64;
    println!("| case | cache | reads/s | mean latency |");
    println!("|---|---|---:|---:|");
    type Case = (&'static str, bool, usize, bool);
    let cases: [Case; 8] = [
        ("pool", false, 2, false),
        ("pool", false, 8, false),
        ("uring", false, 8, false),
        ("uring", false, 32, false),
        ("pool", true, 2, true),
        ("pool", true, 8, true),
        ("uring", true, 8, true),
        ("uring", true, 32, true),
    ];
    for warm in [false, true] {
        for &(kind, direct, n, _) in &cases {
            if warm && direct {
                continue; // O_DIRECT never reads from the page cache
            }
            let cache = if warm {
                // Read the whole file once so every page is cached.
                let f = open(&path, false);
                let mut b = vec![0u8; 1 << 20];
                for i in 0..mib {
                    f.read_exact_at(&mut b, i << 20).expect("warm read");
                }
                "warm"
            } else if direct {
                "O_DIRECT"
            } else if drop_caches() {
                "cold"
            } else {
                "cold? (could not drop the page cache)"
            };
            let r = match kind {
                "pool" => Ok(pool(&path, direct, n, pages, secs)),
                _ => uring(&path, direct, n, pages, secs),
            };
            let name = format!("{kind}-{n}");
            match r {
                Ok((reads, ns)) => println!(
                    "| {name} | {cache} | {:.0} | {:.1} µs |",
                    reads as f64 / secs,
                    ns as f64 / reads.max(1) as f64 / 1000.0
                ),
                Err(e) => println!("| {name} | {cache} | refused: {e} | |"),
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}
