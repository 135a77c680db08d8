//! Shared by the differential tests of every read engine (engine/tests/differential.rs,
//! gpu/tests/differential.rs): random data, random requests biased to boundaries, and the
//! reference reader's answer at a completion's read version.

use accelkv_engine::{Completion, ReadEngine, Reply, Request, Sink};
use accelkv_tree::{Config, Snapshot, Store};
use rand::{rngs::SmallRng, Rng};
use std::sync::Arc;
use std::time::Duration;

pub const KEYS: u64 = 20_000;

pub fn key(i: u64) -> Vec<u8> {
    // Variable lengths; ordered by i within each length class is not needed.
    let mut k = format!("k{:07}", i).into_bytes();
    k.extend(std::iter::repeat_n(b'x', (i % 5) as usize * 3));
    k
}

pub fn value(i: u64, g: u64) -> Vec<u8> {
    let len = match (i + g) % 17 {
        0 => 700, // out of line
        1..=3 => 40,
        _ => 16,
    };
    let mut v = format!("{i}:{g}:").into_bytes();
    v.resize(len, b'v');
    v
}

pub fn small_store() -> Arc<Store> {
    Arc::new(
        Store::new(Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            ..Config::default()
        })
        .unwrap(),
    )
}

/// A deadline long past: the item is invisible to every reader.
pub const EXPIRED: u64 = 1_000;
/// A deadline in the year 3000: visible, with a deadline.
pub const EXPIRES_LATER: u64 = 32_503_680_000_000;

pub fn fill(store: &Store, rng: &mut SmallRng) {
    for i in 0..KEYS {
        if rng.gen_bool(0.7) {
            store.put(&key(i), &value(i, 0)).unwrap();
        }
    }
    // Leave logs, tombstones, expired and expiring items and several node versions behind.
    for _ in 0..5000 {
        let i = rng.gen_range(0..KEYS);
        match rng.gen_range(0..10) {
            0..=2 => drop(store.delete(&key(i)).unwrap()),
            3 => drop(store.put_expiring(&key(i), &value(i, 1), EXPIRED).unwrap()),
            4 => drop(
                store
                    .put_expiring(&key(i), &value(i, 1), EXPIRES_LATER)
                    .unwrap(),
            ),
            // Client flags (memcached's), alone and with a deadline: every reader skips them.
            5 => drop(
                store
                    .put_item(&key(i), &value(i, 1), 0, 0x8000_0001)
                    .unwrap(),
            ),
            6 => drop(
                store
                    .put_item(&key(i), &value(i, 1), EXPIRES_LATER, 7)
                    .unwrap(),
            ),
            _ => drop(store.put(&key(i), &value(i, 1)).unwrap()),
        }
    }
}

/// A random request, biased to present keys, boundaries and odd ranges.
pub fn request(rng: &mut SmallRng) -> Request {
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

pub fn reference(snap: &Snapshot<'_>, c: &Completion, req: &Request) -> Reply {
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

/// Submits `reqs` to `engine`, each tagged with `base` plus its index.
pub fn submit(engine: &dyn ReadEngine, sink: &Arc<Sink>, reqs: &[Request], base: u64) {
    engine.submit(
        sink,
        reqs.iter()
            .cloned()
            .enumerate()
            .map(|(t, r)| (base + t as u64, r))
            .collect(),
    );
}

/// Waits until `n` completions have arrived in `sink`.
pub fn wait_all(sink: &Sink, n: usize) -> Vec<Completion> {
    let mut done = Vec::with_capacity(n);
    while done.len() < n {
        sink.wait(&mut done, n, Duration::from_secs(60));
    }
    done
}
