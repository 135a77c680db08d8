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
    assert!(
        from_cache > seen.len() / 10,
        "the cache served too little to test: {from_cache}"
    );
}
