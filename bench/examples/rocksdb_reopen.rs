//! RocksDB's side of the recovery-time comparison (docs/BENCHMARKS.md, "Recovery time"):
//! the data set of `durable/examples/recovery_time.rs` (N items, 16-byte keys and values,
//! `--sorted` or scrambled order) written into a RocksDB directory with default options
//! and the write-ahead log, the memtable flushed, the database closed; then, in a new
//! process (`--open-only`), reopened and timed, with the process's peak memory (VmHWM) and
//! a check that the last key is there.
//!
//! ```text
//! ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release -p accelkv-bench \
//!     --features rocksdb --example rocksdb_reopen
//! ./target/release/examples/rocksdb_reopen 100000000 /work/rocks100m --sorted
//! ./target/release/examples/rocksdb_reopen 100000000 /work/rocks100m --open-only
//! ```

use rocksdb::{Options, WriteBatch, WriteOptions, DB};
use std::time::Instant;

fn key(i: u64, sorted: bool) -> [u8; 16] {
    let k = if sorted {
        i
    } else {
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    };
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&k.to_be_bytes());
    key[8..].copy_from_slice(&i.to_be_bytes());
    key
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::path::PathBuf::from(args.get(1).expect("usage: N DIR [--sorted] [--open-only]"));
    let sorted = args.iter().any(|a| a == "--sorted");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    if !args.iter().any(|a| a == "--open-only") {
        let _ = std::fs::remove_dir_all(&dir);
        let t = Instant::now();
        let db = DB::open(&opts, &dir).expect("open");
        let wo = WriteOptions::default();
        let mut i = 0;
        while i < n {
            let mut b = WriteBatch::default();
            for j in i..(i + 1000).min(n) {
                let k = key(j, sorted);
                b.put(k, k);
            }
            db.write_opt(b, &wo).expect("write");
            i += 1000;
        }
        db.flush().expect("flush");
        println!("loaded {n} items in {:.1} s", t.elapsed().as_secs_f64());
        return;
    }
    let t = Instant::now();
    let db = DB::open(&opts, &dir).expect("reopen");
    let took = t.elapsed();
    let last = key(n - 1, sorted);
    assert_eq!(db.get(last).expect("get").as_deref(), Some(&last[..]));
    let size: u64 = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    println!(
        "rocksdb: {:.1} MiB on disk; reopened in {:.2} s, peak memory {} MiB",
        size as f64 / (1 << 20) as f64,
        took.as_secs_f64(),
        peak_kib() / 1024
    );
}
