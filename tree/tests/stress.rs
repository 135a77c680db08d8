//! Concurrency stress for a bounded time: writers, point readers, scanners and snapshot
//! readers on one store with small nodes, so merges, splits and node merges run all the time.
//!
//! Writers embed (key, generation) in every value they write and publish the generation of
//! each acknowledged operation; readers check that every value decodes to its own key with
//! intact padding, and that a read sees every write acknowledged before it began and nothing
//! newer than what was started (leveldb's skiplist ConcurrentTest, adapted to MVCC).
//!
//! Built with `--features poison`, reclaimed buffers are poisoned and a reader that touches
//! one panics, so this also checks that no reader ever reads reclaimed memory.
//!
//! `ACCELKV_STRESS_SECS` sets the duration (default 3 seconds per test).

use accelkv_tree::{Config, Store};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 3000;
const WRITERS: u64 = 2;

fn secs() -> Duration {
    Duration::from_secs_f64(
        std::env::var("ACCELKV_STRESS_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3.0),
    )
}

fn key(k: u64) -> Vec<u8> {
    format!("key{k:06}").into_bytes()
}

/// Generation `g` of key `k` is a delete when `g % 5 == 0`.
fn is_delete(g: u64) -> bool {
    g.is_multiple_of(5)
}

/// The value of key `k` at generation `g`: header, then padding derived from both. Sizes
/// vary from a few bytes to out-of-line.
fn value(k: u64, g: u64) -> Vec<u8> {
    let len = match (k + g) % 23 {
        0 => 600,
        1..=4 => 120,
        _ => 10 + ((k * 7 + g) % 30) as usize,
    };
    let mut v = format!("{k}:{g}:").into_bytes();
    let seed = (k * 31 + g) as u8;
    v.extend((0..len).map(|i| seed.wrapping_add(i as u8)));
    v
}

/// Checks a value read for key `k` and returns its generation.
fn decode(k: u64, v: &[u8]) -> u64 {
    let mut fields = v.splitn(3, |b| *b == b':');
    let mut num = |what: &str| -> u64 {
        fields
            .next()
            .and_then(|f| std::str::from_utf8(f).ok())
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("value of key {k}: no {what} field in {v:?}"))
    };
    let vk = num("key");
    let g = num("generation");
    assert_eq!(vk, k, "value of key {k} names key {vk}");
    assert_eq!(
        v,
        value(k, g).as_slice(),
        "value of key {k} gen {g} is damaged"
    );
    g
}

struct Shared {
    store: Store,
    /// Last acknowledged generation per key (0: never written).
    acked: Vec<AtomicU64>,
    stop: AtomicBool,
}

fn writer(sh: &Shared, w: u64, seed: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut ops = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        // Writers own disjoint keys, so each key's generations come from one thread.
        let k = rng.gen_range(0..KEYS / WRITERS) * WRITERS + w;
        let g = sh.acked[k as usize].load(Ordering::Relaxed) + 1;
        if is_delete(g) {
            sh.store.delete(&key(k)).expect("delete");
        } else {
            sh.store.put(&key(k), &value(k, g)).expect("put");
        }
        sh.acked[k as usize].store(g, Ordering::Release);
        ops += 1;
    }
    ops
}

fn reader(sh: &Shared, seed: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut reads = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        let k = rng.gen_range(0..KEYS);
        let before = sh.acked[k as usize].load(Ordering::Acquire);
        let got = sh.store.get(&key(k)).expect("get");
        let after = sh.acked[k as usize].load(Ordering::Acquire);
        // The operation in flight (after + 1) may or may not be visible yet.
        match got {
            Some(v) => {
                let g = decode(k, &v);
                assert!(!is_delete(g));
                assert!(
                    g >= before && g <= after + 1,
                    "key {k}: read gen {g}, acked {before}..{after}"
                );
            }
            None => assert!(
                (before..=after + 1).any(|g| g == 0 || is_delete(g)),
                "key {k}: absent, but acked gens {before}..{after} are all puts"
            ),
        }
        reads += 1;
    }
    reads
}

fn scanner(sh: &Shared, seed: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut scans = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        let lo = rng.gen_range(0..KEYS);
        let len = rng.gen_range(1..200);
        let items = sh.store.scan(&key(lo), Some(&key(lo + len)), 1000);
        let mut prev: Option<u64> = None;
        for (k, v) in &items {
            let n: u64 = std::str::from_utf8(&k[3..])
                .expect("utf8")
                .parse()
                .expect("key");
            assert!(
                n >= lo && n < lo + len,
                "key {n} outside [{lo}, {})",
                lo + len
            );
            assert!(prev.is_none_or(|p| p < n), "scan not ascending");
            prev = Some(n);
            decode(n, v);
        }
        scans += 1;
    }
    scans
}

fn snapshot_reader(sh: &Shared, seed: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut checks = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        let snap = sh.store.snapshot();
        let lo = rng.gen_range(0..KEYS);
        let first = snap.scan(&key(lo), Some(&key(lo + 300)), usize::MAX);
        std::thread::yield_now();
        for (k, v) in first.iter().step_by(7) {
            assert_eq!(
                snap.get(k).expect("get").as_ref(),
                Some(v),
                "snapshot moved"
            );
        }
        let again = snap.scan(&key(lo), Some(&key(lo + 300)), usize::MAX);
        assert_eq!(first, again, "snapshot at version {} moved", snap.version());
        checks += 1;
    }
    checks
}

fn run(cfg: Config, expect_node_merges: bool) {
    let sh = Arc::new(Shared {
        store: Store::new(cfg).expect("store"),
        acked: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
    });
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let sh = sh.clone();
        handles.push((
            "writer",
            std::thread::spawn(move || writer(&sh, w, 100 + w)),
        ));
    }
    for r in 0..2 {
        let sh = sh.clone();
        handles.push(("reader", std::thread::spawn(move || reader(&sh, 200 + r))));
    }
    let sh2 = sh.clone();
    handles.push(("scanner", std::thread::spawn(move || scanner(&sh2, 300))));
    let sh3 = sh.clone();
    handles.push((
        "snapshot",
        std::thread::spawn(move || snapshot_reader(&sh3, 400)),
    ));
    let start = Instant::now();
    while start.elapsed() < secs() && !handles.iter().any(|h| h.1.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    sh.stop.store(true, Ordering::Relaxed);
    for (name, h) in handles {
        let n = h.join().unwrap_or_else(|_| panic!("{name} thread failed"));
        assert!(n > 0, "{name} made no progress");
        eprintln!("{name}: {n} operations");
    }
    // Final state: every key holds its last acknowledged generation.
    for k in 0..KEYS {
        let g = sh.acked[k as usize].load(Ordering::Acquire);
        let got = sh.store.get(&key(k)).expect("get");
        if g == 0 || is_delete(g) {
            assert_eq!(got, None, "key {k}");
        } else {
            assert_eq!(got, Some(value(k, g)), "key {k}");
        }
    }
    let s = sh.store.stats();
    eprintln!("{s:?}");
    assert!(s.splits > 0, "splits ran: {s:?}");
    assert!(
        !expect_node_merges || s.node_merges > 0,
        "node merges ran: {s:?}"
    );
}

#[test]
fn stress_small_nodes() {
    run(
        Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            ..Config::default()
        },
        true,
    );
}

#[test]
fn stress_default_nodes_small_log() {
    run(
        Config {
            log_threshold: 128,
            chunk_size: 1 << 20,
            ..Config::default()
        },
        false,
    );
}
