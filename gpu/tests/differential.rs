//! Differential tests of the GPU engine: every answer equals the reference reader's at the
//! same read version — random GET / SCAN / SCAN_FLOOR over variable-length keys, inline and
//! out-of-line values, logs, tombstones and old node versions, with a writer inserting,
//! updating and deleting during the run so nodes split and merge and the device page table
//! and interior cache follow the remap stream.
//!
//! The kernels run in the host emulation here (the same lookup.cu compiled as C++); the
//! `gpu_*` tests run them on a CUDA device and are ignored unless asked for
//! (`cargo test -p accelkv-gpu -- --include-ignored` on a machine with an NVIDIA GPU).

use accelkv_engine::{Completion, ReadEngine, Reply, Request, Sink};
use accelkv_gpu::{GpuConfig, GpuEngine};
use accelkv_tree::{Config, Snapshot, Store};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const KEYS: u64 = 20_000;

fn key(i: u64) -> Vec<u8> {
    // Variable lengths; ordered by i within each length class is not needed.
    let mut k = format!("k{:07}", i).into_bytes();
    k.extend(std::iter::repeat_n(b'x', (i % 5) as usize * 3));
    k
}

fn value(i: u64, g: u64) -> Vec<u8> {
    let len = match (i + g) % 17 {
        0 => 700, // out of line
        1..=3 => 40,
        _ => 16,
    };
    let mut v = format!("{i}:{g}:").into_bytes();
    v.resize(len, b'v');
    v
}

fn small_store() -> Arc<Store> {
    Arc::new(
        Store::new(Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            ..Config::default()
        })
        .unwrap(),
    )
}

fn fill(store: &Store, rng: &mut SmallRng) {
    for i in 0..KEYS {
        if rng.gen_bool(0.7) {
            store.put(&key(i), &value(i, 0)).unwrap();
        }
    }
    // Leave logs, tombstones and several node versions behind.
    for _ in 0..5000 {
        let i = rng.gen_range(0..KEYS);
        if rng.gen_bool(0.3) {
            store.delete(&key(i)).unwrap();
        } else {
            store.put(&key(i), &value(i, 1)).unwrap();
        }
    }
}

/// A random request, biased to present keys, boundaries and odd ranges.
fn request(rng: &mut SmallRng) -> Request {
    let probe = |rng: &mut SmallRng| -> Vec<u8> {
        match rng.gen_range(0..10) {
            0 => b"a".to_vec(), // below every key
            1 => b"z".to_vec(), // above every key
            2 => {
                let mut k = key(rng.gen_range(0..KEYS));
                k.push(b'!'); // just after a key
                k
            }
            3 => {
                let mut k = key(rng.gen_range(0..KEYS));
                k.pop(); // just before (or a prefix)
                k
            }
            _ => key(rng.gen_range(0..KEYS)),
        }
    };
    match rng.gen_range(0..10) {
        0..=4 => Request::Get { key: probe(rng) },
        5..=7 => {
            let lo = probe(rng);
            let hi = match rng.gen_range(0..4) {
                0 => None,
                1 => Some(lo.clone()), // empty range
                _ => Some(probe(rng)), // possibly inverted
            };
            Request::Scan {
                lo,
                hi,
                limit: [0, 1, 3, 4, 17, 100][rng.gen_range(0..6)],
            }
        }
        _ => {
            let kl = probe(rng);
            let ku = if rng.gen_bool(0.8) {
                probe(rng)
            } else {
                kl.clone()
            };
            Request::ScanFloor {
                kl,
                ku,
                limit: [0, 1, 4, 50][rng.gen_range(0..4)],
            }
        }
    }
}

fn reference(snap: &Snapshot<'_>, c: &Completion, req: &Request) -> Reply {
    let view = snap
        .at(c.version)
        .unwrap_or_else(|| panic!("completion version {} not readable", c.version));
    match req {
        Request::Get { key } => match view.get(key) {
            Ok(v) => Reply::Value(v),
            Err(e) => Reply::Error(e),
        },
        Request::Scan { lo, hi, limit } => {
            Reply::Items(view.scan(lo, hi.as_deref(), *limit).into_iter().collect())
        }
        Request::ScanFloor { kl, ku, limit } => {
            Reply::Items(view.scan_floor(kl, ku, *limit).into_iter().collect())
        }
    }
}

fn run(engine: impl Fn(Arc<Store>) -> GpuEngine, writers: bool, seed: u64, rounds: usize) {
    let store = small_store();
    let mut rng = SmallRng::seed_from_u64(seed);
    fill(&store, &mut rng);
    let engine = engine(store.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = writers.then(|| {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(seed + 1000);
            let mut g = 2;
            while !stop.load(Ordering::Relaxed) {
                let i = rng.gen_range(0..KEYS);
                g += 1;
                match rng.gen_range(0..10) {
                    // Runs of deletes empty leaves (merges); runs of puts split them.
                    0..=3 => {
                        for j in i..(i + 20).min(KEYS) {
                            store.delete(&key(j)).unwrap();
                        }
                    }
                    4 => {
                        let _ = store.update(&key(i), &value(i, g));
                    }
                    _ => {
                        for j in i..(i + 12).min(KEYS) {
                            store.put(&key(j), &value(j, g)).unwrap();
                        }
                    }
                }
            }
        })
    });
    let sink = Sink::new();
    let mut checked = 0;
    let before = engine.gpu_stats();
    for _ in 0..rounds {
        let snap = store.snapshot();
        let reqs: Vec<Request> = (0..200).map(|_| request(&mut rng)).collect();
        // Two submissions per round: a worker may take both into one launch.
        let (a, b) = reqs.split_at(100);
        for (base, part) in [(0u64, a), (100, b)] {
            engine.submit(
                &sink,
                part.iter()
                    .cloned()
                    .enumerate()
                    .map(|(t, r)| (base + t as u64, r))
                    .collect(),
            );
        }
        let mut done = Vec::new();
        while done.len() < reqs.len() {
            sink.wait(&mut done, reqs.len(), Duration::from_secs(60));
        }
        for c in &done {
            let req = &reqs[c.tag as usize];
            assert_eq!(
                c.reply,
                reference(&snap, c, req),
                "request {req:?} at version {}",
                c.version
            );
            checked += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = writer {
        w.join().unwrap();
    }
    assert_eq!(checked, rounds * 200);
    let s = engine.gpu_stats();
    assert_eq!(
        s.fallbacks, 0,
        "requests the device could not answer: {s:?}"
    );
    assert_eq!(s.last_error, None);
    assert!(s.launches >= rounds as u64, "{s:?}");
    assert!(s.host_bytes_read > 0);
    if writers {
        assert!(
            s.remaps_applied > before.remaps_applied,
            "the writer remapped nothing during the run: {s:?}"
        );
    }
    assert_eq!(engine.stats().completed, (rounds * 200) as u64);
}

fn emulated(cfg: GpuConfig) -> impl Fn(Arc<Store>) -> GpuEngine {
    move |store| GpuEngine::start_emulated(store, cfg.clone())
}

#[test]
fn emulated_kernels_match_reference_static() {
    run(emulated(GpuConfig::default()), false, 1, 20);
}

#[test]
fn emulated_kernels_match_reference_under_writes() {
    run(
        emulated(GpuConfig {
            streams: 2,
            ..GpuConfig::default()
        }),
        true,
        2,
        40,
    );
}

/// A cache of two slots: most interior nodes are read from host memory, and replaced slots
/// are reused only after the launches that could read them.
#[test]
fn emulated_kernels_with_a_tiny_interior_cache() {
    run(
        emulated(GpuConfig {
            streams: 3,
            cache_bytes: 2 * 4096,
            max_batch: 37,
        }),
        true,
        3,
        30,
    );
}

fn cuda(cfg: GpuConfig) -> impl Fn(Arc<Store>) -> GpuEngine {
    move |store| GpuEngine::start(store, cfg.clone()).expect("a CUDA device")
}

#[test]
#[ignore = "needs an NVIDIA GPU with a CUDA driver and NVRTC"]
fn gpu_kernels_match_reference_static() {
    run(cuda(GpuConfig::default()), false, 11, 40);
}

#[test]
#[ignore = "needs an NVIDIA GPU with a CUDA driver and NVRTC"]
fn gpu_kernels_match_reference_under_writes() {
    run(cuda(GpuConfig::default()), true, 12, 80);
}

#[test]
#[ignore = "needs an NVIDIA GPU with a CUDA driver and NVRTC"]
fn gpu_kernels_with_a_tiny_interior_cache() {
    run(
        cuda(GpuConfig {
            streams: 3,
            cache_bytes: 2 * 4096,
            max_batch: 37,
        }),
        true,
        13,
        40,
    );
}
