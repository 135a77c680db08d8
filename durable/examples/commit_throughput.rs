//! Page-writer throughput: one writer puts N values of a given size (keys in order or
//! scrambled) into a durable store in a fresh directory under a sync policy, as fast as the
//! policy's backpressure lets it; prints writes per second, commits, syncs, device bytes per
//! write, writer stalls and the longest commit. What bounds the relaxed policies' write rate
//! once the page writer is the bottleneck.
//!
//! `cargo run --release -p accelkv-durable --example commit_throughput -- [N] [VALUE_BYTES] [POLICY] [seq|random] [deltas|whole] [DIR]`
//! (defaults: 300000 1024 none seq deltas, a directory under the temp dir; `whole`: delta
//! pages off, every commit images whole leaves)

use accelkv_durable::{Options, Store};
use std::os::unix::fs::MetadataExt;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let n: u64 = arg(0, "300000").parse().expect("N");
    let size: usize = arg(1, "1024").parse().expect("VALUE_BYTES");
    let policy = arg(2, "none").parse().expect("POLICY");
    let random = arg(3, "seq") == "random";
    let deltas = match arg(4, "deltas").as_str() {
        "whole" => accelkv_durable::Deltas::OFF,
        _ => accelkv_durable::Deltas::default(),
    };
    let dir = args
        .get(5)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("accelkv-commit-throughput"));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        sync: policy,
        deltas,
        ..Options::default()
    };
    let s = Store::open_with(&dir, opts).expect("open");
    let value = vec![b'x'; size];
    let t = Instant::now();
    for i in 0..n {
        let k = if random {
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % n
        } else {
            i
        };
        s.put(format!("k:{k:08}").as_bytes(), &value).expect("put");
    }
    let el = t.elapsed();
    // The scrambled order repeats some keys: live data is what the distinct keys hold.
    let distinct = if random {
        (0..n)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % n)
            .collect::<std::collections::HashSet<u64>>()
            .len() as u64
    } else {
        n
    };
    let st = s.stats();
    // Closed (written and synced) first, so that the file's blocks are allocated.
    drop(s);
    let file = std::fs::metadata(dir.join(accelkv_durable::PAGE_FILE));
    println!(
        "{policy} {n} x {size} B ({}, {}): {:.0} writes/s; {} commits ({:.1} keys each), {} syncs, {:.0} device bytes/write, {} stalls ({:.0} ms), max commit {:.1} ms; {} KiB file ({} KiB allocated), {} KiB live data",
        if random { "random" } else { "in order" },
        if deltas.on() { "delta pages" } else { "whole leaves" },
        n as f64 / el.as_secs_f64(),
        st.commits,
        st.keys_persisted as f64 / st.commits.max(1) as f64,
        st.syncs,
        st.bytes_written as f64 / n as f64,
        st.stalls,
        st.stall_us as f64 / 1e3,
        st.max_commit_us as f64 / 1e3,
        file.as_ref().map_or(0, |m| m.len()) >> 10,
        file.as_ref().map_or(0, |m| m.blocks() * 512) >> 10,
        (distinct * (size as u64 + 10)) >> 10
    );
    let _ = std::fs::remove_dir_all(&dir);
}
