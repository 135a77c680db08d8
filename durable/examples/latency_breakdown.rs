//! Retina's Figure 6.5 adapted (docs/EVALUATION.md, "Retina"): where the time of one read and
//! one write goes in a durable store whose leaves do not all fit its memory budget.
//!
//! * Read, cache hit: the leaf is resident; the time is the index walk and the leaf search.
//! * Read, cache miss: the leaf lives only in the page file; the GET reads its page back
//!   (one `pread` and a decode) before searching it.
//! * Write: applying it in memory (`Tree::put`; a leaf that lives only in the page file is
//!   read back first), then waiting for the commit that makes it durable (under `sync`:
//!   written and `fdatasync`ed).
//!
//! One thread, so a GET that loaded a leaf is told apart from one that did not by the leaf
//! cache's load counter. `cargo run --release -p accelkv-durable --example latency_breakdown
//! -- [items] [value bytes] [budget MiB] [DIR]` (default 200000 1024 32, the temporary
//! directory).

use accelkv_durable::{Options, Store, SyncPolicy};
use accelkv_tree::Config;
use hdrhistogram::Histogram;
use std::time::Instant;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(10, 10_000_000_000, 3).expect("histogram")
}

fn row(name: &str, h: &Histogram<u64>) {
    println!(
        "| {name} | {} | {:.1} µs | {:.1} µs | {:.1} µs |",
        h.len(),
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.mean() / 1000.0
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let items: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let vbytes: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let budget: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(32);
    let base = args
        .get(4)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("accelkv-latency-breakdown-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        config: Config {
            memory_limit: budget << 20,
            evict: true,
            ..Config::default()
        },
        sync: SyncPolicy::Sync,
        ..Options::default()
    };
    let store = Store::open_with(&dir, opts).expect("open");
    let value = vec![0x5Au8; vbytes];
    // Load in batches of applied writes, each made durable once (a load, not the measure).
    for start in (0..items).step_by(1000) {
        let mut last = 0;
        for i in start..(start + 1000).min(items) {
            last = store.tree().put(&key(i), &value).expect("put").version;
        }
        store.durability().wait(last).expect("durable");
    }
    store.flush().expect("flush");
    // Let the evictor bring the cache back under its budget.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (mut hit, mut miss) = (hist(), hist());
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = key(x % items);
        let loads = store.tree().mirror_stats().loads;
        let t = Instant::now();
        let v = store.get(&k).expect("get");
        let ns = t.elapsed().as_nanos() as u64;
        assert_eq!(v.map(|v| v.len()), Some(vbytes));
        if store.tree().mirror_stats().loads > loads {
            miss.saturating_record(ns);
        } else {
            hit.saturating_record(ns);
        }
    }
    let (mut apply_hit, mut apply_miss, mut commit, mut whole) = (hist(), hist(), hist(), hist());
    for n in 0..2_000u64 {
        let k = key((n * 7919) % items);
        let loads = store.tree().mirror_stats().loads;
        let t = Instant::now();
        let w = store.tree().put(&k, &value).expect("put");
        let applied = t.elapsed().as_nanos() as u64;
        let loaded = store.tree().mirror_stats().loads > loads;
        store.durability().wait(w.version).expect("durable");
        let total = t.elapsed().as_nanos() as u64;
        if loaded {
            apply_miss.saturating_record(applied);
        } else {
            apply_hit.saturating_record(applied);
        }
        commit.saturating_record(total - applied);
        whole.saturating_record(total);
    }
    let m = store.tree().mirror_stats();
    println!(
        "{items} items of {vbytes} bytes, leaf cache of {budget} MiB (hit ratio {:.2} over the run), `sync`, one thread\n",
        m.hit_ratio()
    );
    println!("| stage | operations | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    row("read, leaf in memory (index walk and leaf search)", &hit);
    row("read, leaf read back from the page file", &miss);
    row("write, applied in memory, leaf in memory", &apply_hit);
    row(
        "write, applied in memory, leaf read back first",
        &apply_miss,
    );
    row(
        "write, waiting for its commit (write and fdatasync)",
        &commit,
    );
    row("write, whole", &whole);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
