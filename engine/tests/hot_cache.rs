//! The hot cache never serves a stale value: a writer updates hot keys in a tight loop while
//! readers GET them through the engine (most answered by the cache), and every answer is
//! checked against the versions the writer was acknowledged with: the value of generation g
//! read at version rv needs version(g) <= rv < version(g + 1).

use accelkv_engine::{CpuEngine, EngineConfig, ReadEngine, Reply, Request, Sink};
use accelkv_tree::{Config, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HOT: u64 = 16;

fn key(k: u64) -> Vec<u8> {
    format!("hot{k:04}").into_bytes()
}

fn value(k: u64, g: u64) -> Vec<u8> {
    // Every fourth generation is too long to inline, so values by reference are exercised.
    let mut v = format!("{k}:{g}:").into_bytes();
    v.resize(if g.rem_euclid(4) == 3 { 100 } else { 20 }, b'.');
    v
}

fn decode(v: &[u8]) -> (u64, u64) {
    let s = String::from_utf8_lossy(v);
    let mut p = s.split(':');
    let k = p.next().and_then(|x| x.parse().ok()).expect("key");
    let g = p.next().and_then(|x| x.parse().ok()).expect("generation");
    (k, g)
}

#[test]
fn cache_never_serves_stale_values() {
    run_hot_reads(false);
}

/// The same while another thread turns the cache off and on every few hundred
/// microseconds (hot.rs invariant 5): writers skip the cache while it is off, so a reader
/// that used an entry left from before, or a cache turned on without being emptied, would
/// read a stale generation.
#[test]
fn turning_the_cache_off_and_on_never_serves_stale_values() {
    run_hot_reads(true);
}

fn run_hot_reads(toggle: bool) {
    let store = Arc::new(
        Store::new(Config {
            chunk_size: 1 << 20,
            ..Config::default()
        })
        .unwrap(),
    );
    // versions[k][g] = write version of generation g of key k.
    let versions: Arc<Vec<Mutex<Vec<u64>>>> =
        Arc::new((0..HOT).map(|_| Mutex::new(Vec::new())).collect());
    for k in 0..HOT {
        let w = store.put(&key(k), &value(k, 0)).unwrap();
        versions[k as usize].lock().unwrap().push(w.version);
    }
    for k in 0..5000 {
        store.put(format!("cold{k:05}").as_bytes(), b"c").unwrap();
    }
    let engine = Arc::new(CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads: 1,
            window: 8,
            cache_buckets: 4096,
            sample_every: 1,
            manager_interval: Duration::from_millis(1),
            ..EngineConfig::default()
        },
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let toggler = toggle.then(|| {
        let (cache, stop) = (engine.cache().expect("a cache").clone(), stop.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if flips.is_multiple_of(2) {
                    cache.deactivate();
                } else {
                    cache.activate();
                }
                flips += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
            flips
        })
    });
    let writer = {
        let (store, versions, stop) = (store.clone(), versions.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut g = 1;
            while !stop.load(Ordering::Relaxed) {
                for k in 0..HOT {
                    let w = store.put(&key(k), &value(k, g)).unwrap();
                    versions[k as usize].lock().unwrap().push(w.version);
                }
                g += 1;
            }
        })
    };
    let sink = Sink::new();
    let mut seen = Vec::new(); // (key, generation, read version)
    let mut from_cache = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let batch: Vec<(u64, Request)> =
            (0..64).map(|t| (t, Request::get(&key(t % HOT)))).collect();
        engine.submit(&sink, batch);
        let mut done = Vec::new();
        while done.len() < 64 {
            assert!(
                sink.wait(&mut done, 64, Duration::from_secs(10)) > 0,
                "engine stalled"
            );
        }
        for c in done {
            let Reply::Value(Some(v)) = c.reply else {
                panic!("hot key missing: {c:?}");
            };
            let (k, g) = decode(&v);
            assert_eq!(k, c.tag % HOT, "value of another key");
            assert_eq!(v, value(k, g), "damaged value");
            seen.push((k, g, c.version));
            from_cache += usize::from(c.from_cache);
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    if let Some(t) = toggler {
        let flips = t.join().unwrap();
        assert!(flips > 100, "the cache was turned off and on {flips} times");
    }
    for (k, g, rv) in &seen {
        let vs = versions[*k as usize].lock().unwrap();
        let (k, g, rv) = (*k, *g as usize, *rv);
        assert!(
            vs[g] <= rv,
            "key {k}: generation {g} (version {}) read at {rv}",
            vs[g]
        );
        if let Some(next) = vs.get(g + 1) {
            assert!(
                *next > rv,
                "key {k}: stale generation {g} at {rv}, generation {} has version {next}",
                g + 1
            );
        }
    }
    eprintln!(
        "{} reads checked, {from_cache} from the cache, {:?}",
        seen.len(),
        engine.stats()
    );
    let least = if toggle {
        seen.len() / 50
    } else {
        seen.len() / 10
    };
    assert!(
        from_cache > least,
        "the cache served too little to test: {from_cache}"
    );
}

/// A value with a deadline is never served from the cache: a cached key that gets one is
/// dropped from the cache at that write, a key read hot while it has one is never
/// installed, and once the deadline passes every GET finds it absent.
#[test]
fn expiring_values_are_never_cached() {
    let store = Arc::new(Store::new(Config::default()).unwrap());
    for k in 0..HOT {
        store.put(&key(k), &value(k, 0)).unwrap();
    }
    let engine = CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads: 1,
            cache_buckets: 4096,
            sample_every: 1,
            manager_interval: Duration::from_millis(1),
            ..EngineConfig::default()
        },
    );
    let sink = Sink::new();
    // GETs of every hot key; how many of key k's answers came from the cache.
    let read = |k: u64| -> (Vec<Option<Vec<u8>>>, usize) {
        let batch: Vec<(u64, Request)> = (0..32).map(|t| (t, Request::get(&key(k)))).collect();
        engine.submit(&sink, batch);
        let mut done = Vec::new();
        while done.len() < 32 {
            assert!(sink.wait(&mut done, 32, Duration::from_secs(10)) > 0);
        }
        let cached = done.iter().filter(|c| c.from_cache).count();
        let values = done
            .into_iter()
            .map(|c| match c.reply {
                Reply::Value(v) => v,
                other => panic!("{other:?}"),
            })
            .collect();
        (values, cached)
    };
    // Key 0 becomes cached.
    let start = Instant::now();
    while read(0).1 == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "key 0 never cached"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // It gets a deadline: from then on never from the cache, however hot.
    let deadline = accelkv_tree::now_ms() + 300;
    store.put_expiring(&key(0), b"expiring", deadline).unwrap();
    store.put_expiring(&key(1), b"expiring", deadline).unwrap();
    while accelkv_tree::now_ms() + 50 < deadline {
        for k in [0, 1] {
            let (values, cached) = read(k);
            assert_eq!(cached, 0, "key {k} with a deadline served from the cache");
            assert!(values
                .iter()
                .all(|v| v.as_deref() == Some(&b"expiring"[..])));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    while accelkv_tree::now_ms() <= deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for k in [0, 1] {
        let (values, cached) = read(k);
        assert_eq!(cached, 0);
        assert!(
            values.iter().all(Option::is_none),
            "key {k} after its deadline"
        );
    }
    // A plain put makes the key cacheable again.
    store.put(&key(0), b"plain").unwrap();
    let start = Instant::now();
    while read(0).1 == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "key 0 never cached again"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}
