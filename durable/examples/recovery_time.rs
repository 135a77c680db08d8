//! Recovery time: loads N items (16-byte keys and values, in a scrambled order) into a
//! durable store in a fresh directory, closes it, and times reopening it — the full two-pass
//! recovery and tree rebuild. Run twice to see a warm page cache; `--cold` drops the page
//! cache first (needs root).
//!
//! `cargo run --release -p accelkv-durable --example recovery_time -- 10000000 [DIR] [--cold]`
//!
//! `--budget MiB` opens with a leaf cache of that size (`Config::evict`): recovery leaves
//! pages in the page file. `--sorted` inserts the keys in ascending order instead (each commit images the last few
//! leaves only: a 100M-item file is written in minutes, not hours). `--keep` leaves the directory for a later `--open-only` run (N is then the item count to
//! expect), which only reopens it: its peak memory (VmHWM) is the recovery's and the
//! recovered tree's alone.

use accelkv_durable::{Options, Store, SyncPolicy};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("accelkv-recovery-time"));
    let cold = args.iter().any(|a| a == "--cold");
    let keep = args.iter().any(|a| a == "--keep");
    let open_only = args.iter().any(|a| a == "--open-only");
    let sorted = args.iter().any(|a| a == "--sorted");
    if !open_only {
        let _ = std::fs::remove_dir_all(&dir);
    }
    // `--budget MiB`: a leaf cache of that size (pages stay in the file, read on a miss).
    let budget: Option<usize> = args
        .iter()
        .position(|a| a == "--budget")
        .and_then(|i| args.get(i + 1))
        .and_then(|m| m.parse().ok());
    let mut opts = Options {
        sync: SyncPolicy::Interval(std::time::Duration::from_millis(20)),
        ..Options::default()
    };
    if let Some(mib) = budget {
        opts.config.evict = true;
        opts.config.memory_limit = mib << 20;
    }
    let t = Instant::now();
    if !open_only {
        let s = Store::open_with(&dir, opts.clone()).expect("open");
        for i in 0..n {
            // A bijection of 0..2^64 scrambles the insertion order.
            let k = if sorted {
                i
            } else {
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            }
            .to_be_bytes();
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&k);
            key[8..].copy_from_slice(&i.to_be_bytes());
            s.put(&key, &key).expect("put");
        }
        s.flush().expect("flush");
        let st = s.stats();
        println!(
            "loaded {n} items in {:.1} s: {} leaf pages written, {} bytes written, {} live pages",
            t.elapsed().as_secs_f64(),
            st.leaf_pages_written,
            st.bytes_written,
            st.live_pages
        );
    }
    let size = std::fs::metadata(dir.join(accelkv_durable::PAGE_FILE))
        .map(|m| m.len())
        .unwrap_or(0);
    if cold {
        let ok = std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
        println!("page cache dropped: {ok}");
    }
    let t = Instant::now();
    let s = Store::open_with(&dir, opts).expect("recover");
    let took = t.elapsed();
    assert_eq!(s.tree().len() as u64, n, "recovered item count");
    println!(
        "page file {:.1} MiB; reopened in {:.2} s, peak memory {} MiB (tree after recovery: {} MiB): {}",
        size as f64 / (1 << 20) as f64,
        took.as_secs_f64(),
        peak_kib() / 1024,
        s.tree().memory_used() >> 20,
        s.recovery()
    );
    drop(s);
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The process's peak resident memory (VmHWM), KiB.
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
