//! Co-verification of the tree-walk engine (sv/walk.sv) on live trees: a real `Store` grows
//! through inserts, updates, deletes and expiring writes (splits, log entries, older
//! versions), read versions are kept along the way, and the simulated engine, reading the
//! store's page table and nodes through a memory with latency, answers every GET at every
//! kept version exactly as the reference reader does. Also: answers leave out of order, and
//! the `rtl` ReadEngine answers GET, SCAN and SCAN_FLOOR as the CPU engine does.
#![cfg(feature = "sim")]

use accelkv_engine::{CpuEngine, EngineConfig, ReadEngine, Reply, Request, Sink};
use accelkv_rtl::{Lookup, RtlEngine, StoreMemory, WalkConfig, WalkSim, Walked};
use accelkv_tree::{Config, Store};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;

fn key(rng: &mut SmallRng) -> Vec<u8> {
    let n = if rng.gen_bool(0.1) {
        rng.gen_range(20..90)
    } else {
        rng.gen_range(1..14)
    };
    (0..n).map(|_| b"abcdefgh"[rng.gen_range(0..8)]).collect()
}

fn value(rng: &mut SmallRng) -> Vec<u8> {
    let n = if rng.gen_bool(0.05) {
        rng.gen_range(200..700) // out of line
    } else {
        rng.gen_range(0..40)
    };
    (0..n).map(|_| rng.gen()).collect()
}

fn small_nodes() -> Config {
    Config {
        node_size: 4096,
        ..Config::default()
    }
}

/// Grows a store with `ops` random writes, keeping a read version every `every` writes.
fn grow(store: &Store, rng: &mut SmallRng, ops: usize, every: usize) -> (Vec<Vec<u8>>, Vec<u64>) {
    let mut keys = Vec::new();
    let mut versions = Vec::new();
    let now = accelkv_tree::now_ms();
    for i in 0..ops {
        let r: f64 = rng.gen();
        if r < 0.65 || keys.is_empty() {
            let k = key(rng);
            store.put(&k, &value(rng)).unwrap();
            keys.push(k);
        } else if r < 0.8 {
            let k = keys[rng.gen_range(0..keys.len())].clone();
            store.put(&k, &value(rng)).unwrap();
        } else if r < 0.9 {
            let k = keys[rng.gen_range(0..keys.len())].clone();
            store.delete(&k).unwrap();
        } else {
            // deadlines around the clocks the lookups use
            let k = key(rng);
            let deadline = now + rng.gen_range(0..2) * 1_000_000;
            store.put_expiring(&k, &value(rng), deadline).unwrap();
            keys.push(k);
        }
        if i % every == every - 1 {
            versions.push(store.read_version());
        }
    }
    versions.push(store.read_version());
    (keys, versions)
}

/// `probes` keys written (some since deleted or expired) and 40 random ones (mostly absent),
/// looked up at every kept version and three clocks.
fn check_against_reference(seed: u64, ops: usize, probes: usize, cfg: WalkConfig) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let store = Store::new(small_nodes()).unwrap();
    let raw = store.raw();
    // Held before the first kept version: every older version stays allocated.
    let slot = raw.reader_slot();
    slot.enter();
    let (written, versions) = grow(&store, &mut rng, ops, ops / 3);
    let mut keys: Vec<Vec<u8>> = (0..probes)
        .map(|_| written[rng.gen_range(0..written.len())].clone())
        .collect();
    for _ in 0..40 {
        keys.push(key(&mut rng));
    }
    let clocks = [
        0,
        accelkv_tree::now_ms(),
        accelkv_tree::now_ms() + 2_000_000,
    ];
    let mut sim = WalkSim::new(cfg);
    let mut deep = 0;
    for &rv in &versions {
        for &now in &clocks {
            let lookups = Lookup::each(&keys, rv, now);
            // SAFETY: `slot` holds an epoch published before every kept version; the store
            // does not evict.
            let mut mem = unsafe { StoreMemory::new(raw) };
            let mut seen = vec![false; keys.len()];
            sim.run(&mut mem, &lookups, |d| {
                let k = &keys[d.tag as usize];
                assert!(!std::mem::replace(&mut seen[d.tag as usize], true));
                deep = deep.max(d.visits);
                // SAFETY: as above.
                let want = unsafe { raw.reference_get(k, rv, now) }.unwrap();
                let got = match d.answer {
                    Walked::NotFound { .. } => None,
                    Walked::Found { leaf, value_off } => Some(unsafe {
                        let v = raw.view(leaf);
                        raw.value(v.value_at(value_off).0).to_vec()
                    }),
                    Walked::Bad => panic!("bad node for {k:?} at rv {rv}"),
                };
                assert_eq!(got, want, "key {k:?} rv {rv} now {now} seed {seed}");
            })
            .expect("the engine finishes");
            assert!(seen.iter().all(|s| *s));
        }
    }
    assert!(deep >= 3, "the tree should be several levels deep: {deep}");
    slot.clear();
}

#[test]
fn gets_on_a_live_tree_match_the_reference_reader_at_every_kept_version() {
    check_against_reference(1, 3000, 400, WalkConfig::default());
}

#[test]
fn small_and_large_engines_with_jittery_memory_agree_too() {
    for (seed, slots, ksus, latency, jitter) in [
        (2, 1, 1, 0, 0),
        (3, 4, 2, 200, 50),
        (4, 64, 32, 20, 300),
        (5, 16, 3, 5, 7),
    ] {
        let cfg = WalkConfig {
            slots,
            ksus,
            latency,
            jitter,
            root: 1,
        };
        check_against_reference(seed, 1500, 120, cfg);
    }
}

#[test]
fn answers_leave_out_of_order() {
    let store = Store::new(small_nodes()).unwrap();
    let mut rng = SmallRng::seed_from_u64(9);
    grow(&store, &mut rng, 2000, 2000);
    let raw = store.raw();
    let slot = raw.reader_slot();
    slot.enter();
    let rv = store.read_version();
    let keys: Vec<Vec<u8>> = (0..300).map(|_| key(&mut rng)).collect();
    let lookups = Lookup::each(&keys, rv, 0);
    let mut sim = WalkSim::new(WalkConfig {
        latency: 50,
        jitter: 400,
        ..WalkConfig::default()
    });
    // SAFETY: `slot` holds an epoch published before `rv`.
    let mut mem = unsafe { StoreMemory::new(raw) };
    let mut order = Vec::new();
    let stats = sim.run(&mut mem, &lookups, |d| order.push(d.tag)).unwrap();
    let inversions = order.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(
        inversions > 10,
        "{inversions} answers overtook an earlier request"
    );
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..300).collect::<Vec<u32>>());
    // the cache served visits (upper levels stay in the units), and memory served the rest
    assert!(stats.cache_hits > 0 && stats.node_reads > 0, "{stats:?}");
    slot.clear();
}

fn wait_all(engine: &dyn ReadEngine, reqs: &[Request]) -> Vec<Reply> {
    let sink = Sink::new();
    engine.submit(
        &sink,
        reqs.iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| (i as u64, r))
            .collect(),
    );
    let mut done = Vec::new();
    while done.len() < reqs.len() {
        let before = done.len();
        sink.wait(&mut done, reqs.len(), Duration::from_secs(60));
        assert!(done.len() > before, "the engine stopped answering");
    }
    done.sort_by_key(|c| c.tag);
    done.into_iter().map(|c| c.reply).collect()
}

#[test]
fn the_rtl_read_engine_answers_as_the_cpu_engine() {
    let store = Arc::new(Store::new(small_nodes()).unwrap());
    let mut rng = SmallRng::seed_from_u64(11);
    let (keys, _) = grow(&store, &mut rng, 2500, 2500);
    let rtl = RtlEngine::start(store.clone(), WalkConfig::default()).unwrap();
    let cpu = CpuEngine::start(store.clone(), EngineConfig::default());
    for round in 0..3 {
        let mut reqs = Vec::new();
        for _ in 0..150 {
            let k = if rng.gen_bool(0.7) {
                keys[rng.gen_range(0..keys.len())].clone()
            } else {
                key(&mut rng)
            };
            reqs.push(match rng.gen_range(0..10) {
                0..=5 => Request::get(&k),
                6..=7 => {
                    let hi = key(&mut rng);
                    Request::scan(
                        &k,
                        rng.gen_bool(0.5).then_some(&hi[..]),
                        rng.gen_range(0..40),
                    )
                }
                8 => Request::scan_floor(&k, &key(&mut rng), rng.gen_range(1..20)),
                _ => Request::get(b""), // invalid: the store's error
            });
        }
        reqs.push(Request::get(&vec![b'a'; 2000])); // longer than the engine takes
        assert_eq!(
            wait_all(&rtl, &reqs),
            wait_all(&cpu, &reqs),
            "round {round}"
        );
        // writes between batches: the next batch reads newer nodes (and the engine's
        // cache was flushed)
        for _ in 0..200 {
            store.put(&key(&mut rng), &value(&mut rng)).unwrap();
        }
    }
    assert!(rtl.stats().completed >= 453);
}
