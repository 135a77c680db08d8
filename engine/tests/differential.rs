//! Differential tests: every engine answer equals the reference reader's answer at the same
//! read version — random data, random GET / SCAN / SCAN_FLOOR (present, absent and boundary
//! keys, empty and inverted ranges, zero limits), with and without the hot-key cache, with
//! and without writers inserting, updating and deleting during the run.
//!
//! A snapshot taken before the requests are submitted keeps every version they can read
//! alive, so the reference reader can answer at each completion's read version afterwards.

use accelkv_engine::{Completion, CpuEngine, EngineConfig, ReadEngine, Reply, Request, Sink};
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

fn run(cache_buckets: usize, writers: bool, seed: u64) {
    let store = small_store();
    let mut rng = SmallRng::seed_from_u64(seed);
    fill(&store, &mut rng);
    let engine = CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads: 1,
            window: 8,
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
                match rng.gen_range(0..10) {
                    0..=1 => {
                        store.delete(&key(i)).unwrap();
                    }
                    2 => {
                        let _ = store.update(&key(i), &value(i, g));
                    }
                    _ => {
                        store.put(&key(i), &value(i, g)).unwrap();
                    }
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
        engine.submit(
            &sink,
            reqs.iter()
                .cloned()
                .enumerate()
                .map(|(t, r)| (t as u64, r))
                .collect(),
        );
        let mut done = Vec::new();
        while done.len() < reqs.len() {
            sink.wait(&mut done, reqs.len(), Duration::from_secs(30));
        }
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
    if cache_buckets > 0 {
        assert!(from_cache > 0, "the cache answered nothing");
    }
    let s = engine.stats();
    assert_eq!(s.completed, 8000);
}

#[test]
fn engine_matches_reference_static() {
    run(0, false, 1);
}

#[test]
fn engine_matches_reference_with_cache() {
    run(1024, false, 2);
}

#[test]
fn engine_matches_reference_under_writes() {
    run(0, true, 3);
}

#[test]
fn engine_matches_reference_with_cache_under_writes() {
    run(1024, true, 4);
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
