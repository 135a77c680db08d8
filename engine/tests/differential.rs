//! Differential tests: every engine answer equals the reference reader's answer at the same
//! read version — random data, random GET / SCAN / SCAN_FLOOR (present, absent and boundary
//! keys, empty and inverted ranges, zero limits), with and without the hot-key cache, with
//! and without writers inserting, updating and deleting during the run.
//!
//! A snapshot taken before the requests are submitted keeps every version they can read
//! alive, so the reference reader can answer at each completion's read version afterwards.

mod common;

use accelkv_engine::{CpuEngine, EngineConfig, ReadEngine, Request, Sink, Staging};
use common::{fill, key, reference, request, small_store, submit, value, wait_all, KEYS};
use common::{EXPIRED, EXPIRES_LATER};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `threads: 0` runs every batch inline on the test's thread (`InlineReader`).
fn run(threads: usize, cache_buckets: usize, writers: bool, seed: u64) {
    run_staged(threads, cache_buckets, writers, seed, 0);
}

/// [`run`] with `staged` levels above the leaves walked interleaved (the levels above
/// them straight; `u8::MAX`: every level interleaved).
fn run_staged(threads: usize, cache_buckets: usize, writers: bool, seed: u64, staged: u8) {
    let store = small_store();
    let mut rng = SmallRng::seed_from_u64(seed);
    fill(&store, &mut rng);
    // Both parts of the walk exist: interior levels above the staged ones and below.
    assert!(
        store.raw().height() >= 2,
        "the tree is too short to test the rule"
    );
    let engine = CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads,
            window: 8,
            staging: Staging::Levels(staged),
            cache_buckets,
            sample_every: 1,
            manager_interval: Duration::from_millis(2),
            ..EngineConfig::default()
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = writers.then(|| {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(seed + 1000);
            let mut g = 2;
            while !stop.load(Ordering::Relaxed) {
                // Hot keys change often, so cached entries are updated under the readers.
                let i = if rng.gen_bool(0.5) {
                    rng.gen_range(0..50)
                } else {
                    rng.gen_range(0..KEYS)
                };
                g += 1;
                match rng.gen_range(0..20) {
                    0..=3 => {
                        store.delete(&key(i)).unwrap();
                    }
                    4..=5 => {
                        let _ = store.update(&key(i), &value(i, g));
                    }
                    // Expiring values, away from the hottest keys so the cache still fills
                    // (tests/hot_cache.rs checks that they are never cached).
                    6 => {
                        let j = (i + 50).min(KEYS - 1);
                        store.put_expiring(&key(j), &value(j, g), EXPIRED).unwrap();
                    }
                    7 => {
                        let j = (i + 50).min(KEYS - 1);
                        store
                            .put_expiring(&key(j), &value(j, g), EXPIRES_LATER)
                            .unwrap();
                    }
                    _ => {
                        store.put(&key(i), &value(i, g)).unwrap();
                    }
                }
                if cache_buckets > 0 {
                    // A writer flat out replaces every hot entry before a batch reads it
                    // (each entry serves only read versions at or after its write), so the
                    // cache could answer nothing at all (this failed 2 runs in 6); a short
                    // pause keeps entries alive long enough for a batch to use them.
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        })
    });
    let sink = Sink::new();
    let mut checked = 0;
    let mut from_cache = 0;
    for round in 0..40 {
        let snap = store.snapshot();
        let mut reqs = Vec::new();
        for t in 0..200u64 {
            let r = if round % 2 == 0 && t % 2 == 0 {
                // Repeated hot GETs so the cache fills.
                Request::get(&key(rng.gen_range(0..50)))
            } else {
                request(&mut rng)
            };
            reqs.push(r);
        }
        submit(&engine, &sink, &reqs, 0);
        let done = wait_all(&sink, reqs.len());
        for c in &done {
            let req = &reqs[c.tag as usize];
            let want = reference(&snap, c, req);
            assert_eq!(
                c.reply, want,
                "request {req:?} at version {} (cache {})",
                c.version, c.from_cache
            );
            checked += 1;
            from_cache += usize::from(c.from_cache);
        }
        if cache_buckets > 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = writer {
        w.join().unwrap();
    }
    assert_eq!(checked, 40 * 200);
    let s = engine.stats();
    if cache_buckets > 0 {
        assert!(from_cache > 0 || threads == 0, "the cache answered nothing");
        assert!(s.cache_hits > 0, "the cache answered nothing: {s:?}");
    }
    assert_eq!(s.completed, 8000);
}

#[test]
fn engine_matches_reference_static() {
    run(1, 0, false, 1);
}

#[test]
fn inline_matches_reference_static() {
    run(0, 0, false, 1);
}

#[test]
fn engine_matches_reference_with_cache() {
    run(1, 1024, false, 2);
}

#[test]
fn inline_matches_reference_with_cache() {
    run(0, 1024, false, 2);
}

#[test]
fn engine_matches_reference_under_writes() {
    run(1, 0, true, 3);
}

#[test]
fn inline_matches_reference_under_writes() {
    run(0, 0, true, 3);
}

#[test]
fn engine_matches_reference_with_cache_under_writes() {
    run(1, 1024, true, 4);
}

#[test]
fn inline_matches_reference_with_cache_under_writes() {
    run(0, 1024, true, 4);
}

// The rule that splits a walk into a straight part and an interleaved one, forced each
// way: the leaves alone interleaved (the default, above), the leaves and their parents,
// every level.
#[test]
fn inline_matches_reference_with_parents_staged() {
    run_staged(0, 0, false, 5, 1);
}

#[test]
fn inline_matches_reference_all_levels_staged_under_writes() {
    run_staged(0, 0, true, 6, u8::MAX);
}

#[test]
fn engine_matches_reference_with_parents_staged_under_writes() {
    run_staged(1, 0, true, 7, 1);
}

#[test]
fn engine_matches_reference_all_levels_staged() {
    run_staged(1, 0, false, 8, u8::MAX);
}

#[test]
fn invalid_keys_get_errors_and_routing_works() {
    let store = small_store();
    store.put(b"a1", b"x").unwrap();
    store.put(b"a2", b"y").unwrap();
    let routed = accelkv_engine::EngineStore::new(
        store.clone(),
        CpuEngine::start(
            store.clone(),
            EngineConfig {
                threads: 2,
                ..EngineConfig::default()
            },
        ),
    );
    assert_eq!(routed.get(b"a1").unwrap(), Some(b"x".to_vec()));
    assert_eq!(routed.get(b"").unwrap_err(), accelkv_tree::Error::EmptyKey);
    assert!(matches!(
        routed.get(&[b'k'; 500]),
        Err(accelkv_tree::Error::KeyTooLong { len: 500, .. })
    ));
    routed.put(b"a3", b"z").unwrap();
    assert_eq!(routed.scan(b"a", None, 10).len(), 3);
    assert_eq!(routed.scan_floor(b"a2x", b"a3", 10).len(), 2);
    routed.delete(b"a1").unwrap();
    assert_eq!(routed.get(b"a1").unwrap(), None);
    assert_eq!(routed.engine().name(), "cpu");
}
