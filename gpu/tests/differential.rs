//! Differential tests of the GPU engine: every answer equals the reference reader's at the
//! same read version — random GET / SCAN / SCAN_FLOOR over variable-length keys, inline and
//! out-of-line values, logs, tombstones and old node versions, with a writer inserting,
//! updating and deleting during the run so nodes split and merge and the device page table
//! and interior cache follow the remap stream.
//!
//! The kernels run in the host emulation here (the same lookup.cu compiled as C++); the
//! `gpu_*` tests run them on a CUDA device and are ignored unless asked for
//! (`cargo test -p accelkv-gpu -- --include-ignored` on a machine with an NVIDIA GPU).

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use accelkv_engine::{ReadEngine, Request, Sink};
use accelkv_gpu::{GpuConfig, GpuEngine};
use accelkv_tree::Store;
use common::{fill, key, reference, request, small_store, submit, value, wait_all, KEYS};
use common::{EXPIRED, EXPIRES_LATER};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
                        // Some runs expire at once, some later, most never.
                        let d = [EXPIRED, EXPIRES_LATER, 0, 0, 0][rng.gen_range(0..5)];
                        for j in i..(i + 12).min(KEYS) {
                            store.put_expiring(&key(j), &value(j, g), d).unwrap();
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
        submit(&engine, &sink, a, 0);
        submit(&engine, &sink, b, 100);
        let done = wait_all(&sink, reqs.len());
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
    move |store| GpuEngine::start_emulated(store, cfg.clone()).expect("the host emulation")
}

/// Whether the host emulation was built (it needs a C++ compiler); a skip otherwise.
fn emulation_built() -> bool {
    if !accelkv_gpu::HOST_EMULATION {
        accelkv_testkit::skip(
            "the GPU kernels' host emulation was not built: no C++ compiler (install g++)",
        );
    }
    accelkv_gpu::HOST_EMULATION
}

#[test]
fn emulated_kernels_match_reference_static() {
    if !emulation_built() {
        return;
    }
    run(emulated(GpuConfig::default()), false, 1, 20);
}

#[test]
fn emulated_kernels_match_reference_under_writes() {
    if !emulation_built() {
        return;
    }
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
    if !emulation_built() {
        return;
    }
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
