//! Reclamation under stress: writers churn a small-node store (merges, splits, node merges
//! every few writes) while the engine runs GET, SCAN and SCAN_FLOOR batches. Built with
//! `--features poison`, reclaimed buffers are poisoned and an engine thread that touches one
//! panics, which stalls its completions and fails this test; every value it returns must
//! also decode to its own key.

use accelkv_engine::{CpuEngine, EngineConfig, ReadEngine, Reply, Request, Sink};
use accelkv_tree::{Config, Store};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 4000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn check(k: &[u8], v: &[u8]) {
    let n = std::str::from_utf8(&k[3..])
        .expect("utf8")
        .parse::<u64>()
        .expect("key");
    assert!(
        v.starts_with(format!("{n}:").as_bytes()),
        "value {v:?} of key {n}"
    );
}

#[test]
fn engine_never_reads_reclaimed_memory() {
    let store = Arc::new(
        Store::new(Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            ..Config::default()
        })
        .unwrap(),
    );
    let engine = CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads: 1,
            window: 16,
            cache_buckets: 512,
            sample_every: 2,
            ..EngineConfig::default()
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(w);
                let mut g = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let i = rng.gen_range(0..KEYS);
                    g += 1;
                    if rng.gen_bool(0.3) {
                        store.delete(&key(i)).unwrap();
                    } else {
                        let mut v = format!("{i}:{g}:").into_bytes();
                        v.resize(if g.is_multiple_of(13) { 600 } else { 24 }, b'.');
                        store.put(&key(i), &v).unwrap();
                    }
                }
            })
        })
        .collect();
    let sink = Sink::new();
    let mut rng = SmallRng::seed_from_u64(99);
    let start = Instant::now();
    let secs = std::env::var("ACCELKV_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let mut n = 0;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let batch: Vec<(u64, Request)> = (0..128)
            .map(|t| {
                let i = rng.gen_range(0..KEYS);
                let r = match t % 4 {
                    0 | 1 => Request::get(&key(i % 64)),
                    2 => Request::scan(&key(i), None, 20),
                    _ => Request::scan_floor(&key(i), &key(i + 10), 20),
                };
                (t, r)
            })
            .collect();
        let reqs = batch.clone();
        engine.submit(&sink, batch);
        let mut done = Vec::new();
        while done.len() < 128 {
            assert!(
                sink.wait(&mut done, 128, Duration::from_secs(10)) > 0,
                "engine stalled (panicked?)"
            );
        }
        for c in &done {
            match &c.reply {
                Reply::Value(Some(v)) => {
                    let Request::Get { key } = &reqs[c.tag as usize].1 else {
                        panic!("value for a scan");
                    };
                    check(key, v);
                }
                Reply::Value(None) => {}
                Reply::Items(items) => items.iter().for_each(|(k, v)| check(k, v)),
                Reply::Error(e) => panic!("{e}"),
            }
        }
        n += done.len();
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let s = store.stats();
    eprintln!(
        "{n} requests; {:?}; splits {} node merges {}",
        engine.stats(),
        s.splits,
        s.node_merges
    );
    assert!(s.log_merges > 100, "the tree did not change enough: {s:?}");
}
