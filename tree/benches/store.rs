//! Single-thread micro-benchmarks of the store against `std::collections::BTreeMap` in the
//! same process: 16-byte keys and values, uniform random keys, GET, PUT (replace), INSERT
//! (new key), SCAN of 4 and of 100 items.
//!
//! `cargo bench -p accelkv-tree --bench store` (1M items); `ACCELKV_BENCH_ITEMS=10000000`
//! for 10M. Results and the machine go in docs/BENCHMARKS.md.

use accelkv_tree::{Config, Store};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Duration;

fn mix(mut x: u64) -> u64 {
    // splitmix64: spreads sequential indices uniformly over the key space.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn value(i: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v[8..].copy_from_slice(&(!i).to_le_bytes());
    v
}

fn items() -> u64 {
    std::env::var("ACCELKV_BENCH_ITEMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000)
}

fn bench(c: &mut Criterion) {
    let n = items();
    let mut sorted: Vec<([u8; 16], [u8; 16])> = (0..n).map(|i| (key(i), value(i))).collect();
    sorted.sort_unstable();
    let store =
        Store::bulk_load(Config::default(), sorted.iter().map(|(k, v)| (k, v))).expect("bulk load");
    let mut map: BTreeMap<[u8; 16], [u8; 16]> = sorted.iter().copied().collect();
    drop(sorted);
    let label = format!("{}M", n / 1_000_000);

    let mut g = c.benchmark_group("get");
    let mut rng = SmallRng::seed_from_u64(1);
    g.bench_function(BenchmarkId::new("accelkv", &label), |b| {
        b.iter(|| {
            let k = key(rng.gen_range(0..n));
            black_box(store.get_with(&k, |v| v.len()).expect("get"))
        })
    });
    g.bench_function(BenchmarkId::new("btreemap", &label), |b| {
        b.iter(|| {
            let k = key(rng.gen_range(0..n));
            black_box(map.get(&k).map(|v| v.len()))
        })
    });
    g.finish();

    for len in [4usize, 100] {
        let mut g = c.benchmark_group(format!("scan{len}"));
        g.bench_function(BenchmarkId::new("accelkv", &label), |b| {
            b.iter(|| {
                let k = key(rng.gen_range(0..n));
                let mut sum = 0usize;
                store
                    .scan_with(&k, None, len, |_, v| sum += v.len())
                    .expect("in memory");
                black_box(sum)
            })
        });
        g.bench_function(BenchmarkId::new("btreemap", &label), |b| {
            b.iter(|| {
                let k = key(rng.gen_range(0..n));
                let sum: usize = map.range(k..).take(len).map(|(_, v)| v.len()).sum();
                black_box(sum)
            })
        });
        g.finish();
    }

    let mut g = c.benchmark_group("put_replace");
    g.bench_function(BenchmarkId::new("accelkv", &label), |b| {
        b.iter(|| {
            let i = rng.gen_range(0..n);
            black_box(store.put(&key(i), &value(i + 1)).expect("put"))
        })
    });
    g.bench_function(BenchmarkId::new("btreemap", &label), |b| {
        b.iter(|| {
            let i = rng.gen_range(0..n);
            black_box(map.insert(key(i), value(i + 1)))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("put_insert");
    let mut next = n;
    g.bench_function(BenchmarkId::new("accelkv", &label), |b| {
        b.iter(|| {
            next += 1;
            black_box(store.put(&key(next), &value(next)).expect("put"))
        })
    });
    let mut next = n;
    g.bench_function(BenchmarkId::new("btreemap", &label), |b| {
        b.iter(|| {
            next += 1;
            black_box(map.insert(key(next), value(next)))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
