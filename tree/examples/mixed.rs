//! Runs the store in process: loads keys, then runs a mixed GET/PUT/SCAN workload on several
//! threads for a while and prints the throughput.
//!
//! `cargo run --release -p accelkv-tree --example mixed -- --help`

mod common;

use accelkv_tree::{Config, Store};
use clap::Parser;
use common::{key, value};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "Load keys into an in-memory accelkv store and run a mixed workload")]
struct Args {
    /// Items loaded before the run.
    #[arg(long, default_value_t = 1_000_000)]
    items: u64,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Percentage of GETs; the rest is split between PUT and SCAN.
    #[arg(long, default_value_t = 90)]
    read_pct: u32,
    /// Percentage of SCANs (of `scan_len` items).
    #[arg(long, default_value_t = 0)]
    scan_pct: u32,
    /// Items per SCAN.
    #[arg(long, default_value_t = 4)]
    scan_len: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 16)]
    value_size: usize,
    /// Load with random PUTs instead of a sorted bulk load.
    #[arg(long)]
    load_with_puts: bool,
}

fn main() {
    let a = Args::parse();
    let start = Instant::now();
    let store = if a.load_with_puts {
        let s = Store::new(Config::default()).expect("store");
        for i in 0..a.items {
            s.put(&key(i), &value(i, a.value_size)).expect("put");
        }
        s
    } else {
        let mut sorted: Vec<_> = (0..a.items)
            .map(|i| (key(i), value(i, a.value_size)))
            .collect();
        sorted.sort_unstable();
        Store::bulk_load(Config::default(), sorted).expect("bulk load")
    };
    let load = start.elapsed();
    println!(
        "loaded {} items in {:.2}s ({:.0} items/s)",
        a.items,
        load.as_secs_f64(),
        a.items as f64 / load.as_secs_f64()
    );
    let store = Arc::new(store);
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<[AtomicU64; 4]> = Arc::new(Default::default()); // get, hit, put, scan
    let workers: Vec<_> = (0..a.threads)
        .map(|t| {
            let (store, stop, counts) = (store.clone(), stop.clone(), counts.clone());
            let (items, read, scan, scan_len, vs) =
                (a.items, a.read_pct, a.scan_pct, a.scan_len, a.value_size);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t as u64);
                let mut c = [0u64; 4];
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        let i = rng.gen_range(0..items);
                        let roll = rng.gen_range(0..100);
                        if roll < read {
                            c[0] += 1;
                            if store.get_with(&key(i), |v| v.len()).expect("get").is_some() {
                                c[1] += 1;
                            }
                        } else if roll < read + scan {
                            c[3] += 1;
                            store
                                .scan_with(&key(i), None, scan_len, |_, _| {})
                                .expect("in memory");
                        } else {
                            c[2] += 1;
                            store.put(&key(i), &value(i + 1, vs)).expect("put");
                        }
                    }
                }
                for (total, n) in counts.iter().zip(c) {
                    total.fetch_add(n, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let run = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    let secs = run.elapsed().as_secs_f64();
    let [gets, hits, puts, scans] = [0, 1, 2, 3].map(|i| counts[i].load(Ordering::Relaxed));
    let total = gets + puts + scans;
    println!(
        "{} threads, {:.1}s: {:.0} ops/s ({:.0} get/s, {:.0} put/s, {:.0} scan/s), {} of {} gets hit",
        a.threads,
        secs,
        total as f64 / secs,
        gets as f64 / secs,
        puts as f64 / secs,
        scans as f64 / secs,
        hits,
        gets
    );
    let s = store.stats();
    println!(
        "store: {} items, depth {}, {} leaves, {} interior nodes, {:.1} bytes/item",
        s.items, s.depth, s.leaves, s.interiors, s.bytes_per_item
    );
}
