//! The mirror cache (issue 18): a store whose memory budget holds a few leaves, so nearly
//! every access reads a leaf back from the page file and evictions race with reads and
//! writes. Checked against a `BTreeMap` model, under concurrency, across a reopen, and with
//! a device that fails reads.

mod common;

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::{Options, Store, SyncPolicy};
use accelkv_tree::Config;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A fresh directory, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let d =
            std::env::temp_dir().join(format!("accelkv-mirror-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 4 KiB nodes and a budget of `leaves` node buffers.
fn budget_options(leaves: usize, sync: SyncPolicy) -> Options {
    Options {
        config: Config {
            node_size: 4096,
            chunk_size: 64 << 10,
            max_value: 64 << 10,
            memory_limit: leaves * 4096,
            evict: true,
            ..Config::default()
        },
        sync,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", i).into_bytes()
}

fn value(i: u32, gen: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{i}:{gen}:").into_bytes();
    v.resize(len.max(v.len()), b'x');
    v
}

/// Waits until the evictor brought the store under its budget (it runs every 10 ms).
fn settle(s: &Store) {
    let t0 = Instant::now();
    while s.tree().over_budget() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_data_set_many_times_the_budget_serves_every_operation() {
    let dir = TempDir::new("serve");
    let mut model = BTreeMap::new();
    {
        let s = Store::open_with(dir.path(), budget_options(24, SyncPolicy::None)).unwrap();
        for i in 0..6000u32 {
            let v = value(i, 0, 60 + (i as usize % 7) * 30);
            s.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        // A few values too large for a node: extension pages, out-of-line in memory.
        for i in (0..6000u32).step_by(500) {
            let v = value(i, 1, 3000);
            s.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        settle(&s);
        let st = s.tree().mirror_stats();
        assert!(st.evictions > 50, "{st:?}");
        assert!(
            st.resident_bytes <= st.budget_bytes * 2,
            "memory stays near the budget: {st:?}"
        );
        for i in (0..6000u32).step_by(7) {
            let got = s.get(&key(i)).unwrap_or_else(|e| {
                panic!("{e} {:?} {:?}", s.tree().mirror_stats(), s.tree().summary())
            });
            assert_eq!(got, model.get(&key(i)).cloned(), "{i}");
        }
        let all = s.tree().try_scan(b"", None, usize::MAX).unwrap();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(all, want);
        let st = s.tree().mirror_stats();
        assert!(st.loads > 50, "reads came from the page file: {st:?}");
        assert_eq!(s.tree().len(), model.len());
        for i in (0..6000u32).step_by(3) {
            s.delete(&key(i)).unwrap();
            model.remove(&key(i));
        }
        assert_eq!(s.tree().len(), model.len());
        let floor = s
            .tree()
            .try_scan_floor(&key(3001), &key(3100), 1000)
            .unwrap();
        let want: Vec<_> = model
            .range(key(3000)..=key(3100))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(floor, want);
    }
    let s = Store::open_with(dir.path(), budget_options(24, SyncPolicy::None)).unwrap();
    let all = s.tree().try_scan(b"", None, usize::MAX).unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want, "after a reopen");
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16, u16),
    Delete(u16),
    Get(u16),
    Scan(u16, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u16..1500, 20u16..700).prop_map(|(k, l)| Op::Put(k, l)),
        1 => (0u16..1500).prop_map(Op::Delete),
        3 => (0u16..1500).prop_map(Op::Get),
        1 => (0u16..1500, 1u8..60).prop_map(|(k, n)| Op::Scan(k, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn matches_a_model_with_a_budget_of_a_few_leaves(ops in proptest::collection::vec(op(), 1..1500)) {
        let dir = TempDir::new("model");
        let s = Store::open_with(dir.path(), budget_options(12, SyncPolicy::None)).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (n, op) in ops.iter().enumerate() {
            match *op {
                Op::Put(k, l) => {
                    let v = value(u32::from(k), n as u32, usize::from(l));
                    s.put(&key(u32::from(k)), &v).unwrap();
                    model.insert(key(u32::from(k)), v);
                }
                Op::Delete(k) => {
                    s.delete(&key(u32::from(k))).unwrap();
                    model.remove(&key(u32::from(k)));
                }
                Op::Get(k) => {
                    prop_assert_eq!(s.get(&key(u32::from(k))).unwrap(), model.get(&key(u32::from(k))).cloned());
                }
                Op::Scan(k, n) => {
                    let got = s.tree().try_scan(&key(u32::from(k)), None, usize::from(n)).unwrap();
                    let want: Vec<_> = model
                        .range(key(u32::from(k))..)
                        .take(usize::from(n))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    prop_assert_eq!(got, want);
                }
            }
        }
        let all = s.tree().try_scan(b"", None, usize::MAX).unwrap();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(all, want);
        prop_assert_eq!(s.tree().len(), model.len());
    }
}

/// Two writers and two readers for a bounded time over a budget of a few leaves: every
/// value read belongs to its key and is at least as new as the reader's own last write.
#[test]
fn readers_and_writers_race_with_evictions() {
    let dir = TempDir::new("race");
    let s = Arc::new(Store::open_with(dir.path(), budget_options(16, SyncPolicy::None)).unwrap());
    const KEYS: u32 = 3000;
    for i in 0..KEYS {
        s.put(&key(i), &value(i, 0, 80)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for w in 0..2u32 {
        let (s, stop) = (s.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut gen = 1;
            while !stop.load(Ordering::Relaxed) {
                // Writer w owns keys ≡ w (mod 2); it reads its own writes back.
                let i = (gen * 7919 + w) % KEYS;
                let i = i - i % 2 + w;
                if i >= KEYS {
                    gen += 1;
                    continue;
                }
                let v = value(i, gen, 80 + (gen as usize % 200));
                s.put(&key(i), &v).unwrap();
                assert_eq!(s.get(&key(i)).unwrap(), Some(v), "own write of {i}");
                gen += 1;
            }
        }));
    }
    for r in 0..2u32 {
        let (s, stop) = (s.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut n = r;
            while !stop.load(Ordering::Relaxed) {
                let i = n.wrapping_mul(104_729) % KEYS;
                let got = s.get(&key(i)).unwrap().expect("never deleted");
                assert!(got.starts_with(format!("{i}:").as_bytes()), "{i}: {got:?}");
                if n % 16 == 0 {
                    let items = s.tree().try_scan(&key(i), None, 50).unwrap();
                    for w in items.windows(2) {
                        assert!(w[0].0 < w[1].0);
                    }
                    for (k, v) in &items {
                        let id: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                        assert!(v.starts_with(format!("{id}:").as_bytes()));
                    }
                }
                n += 1;
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let st = s.tree().mirror_stats();
    assert!(st.evictions > 100 && st.loads > 100, "{st:?}");
    assert_eq!(s.tree().len(), KEYS as usize);
}

/// Two threads inserting keys in random order (every few inserts split a leaf, so write-backs
/// of untouched halves, loads and evictions race) and one reader, over a budget of a few
/// leaves: no write fails, and every key written is there afterwards.
///
/// This test once failed rarely under CPU contention: a reader whose load fell back to a
/// private copy (the arena full) read the leaf's newest image after the leaf had been loaded,
/// changed and imaged again by others, and saw a state newer than its version (a key missing,
/// or keys outside the leaf's fences). The tree's unit test
/// `a_private_load_overtaken_by_a_load_and_a_write_reads_its_own_version` makes that
/// interleaving certain. `ACCELKV_STRESS_SECS=30` runs this one longer.
#[test]
fn inserts_in_random_order_race_with_evictions() {
    let dir = TempDir::new("inserts");
    let s = Store::open_with(dir.path(), budget_options(16, SyncPolicy::None)).unwrap();
    random_inserts_race_with_evictions(Arc::new(s));
}

/// The same on a device whose reads take up to 300 µs (pseudo-random): loads take long, so
/// evictions, commits and other loads overtake them.
#[test]
fn inserts_in_random_order_race_with_slow_loads() {
    let dev = Arc::new(FaultStorage::new());
    dev.set_read_delay(Duration::from_micros(300));
    let s = Store::open_storage(dev, budget_options(16, SyncPolicy::None)).unwrap();
    random_inserts_race_with_evictions(Arc::new(s));
}

fn random_inserts_race_with_evictions(s: Arc<Store>) {
    let secs: u64 = std::env::var("ACCELKV_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new([
        std::sync::atomic::AtomicU32::new(0),
        std::sync::atomic::AtomicU32::new(0),
    ]);
    // Key i is inserted by thread i % 2, in a scrambled order.
    let scramble = |n: u32| n.wrapping_mul(2_654_435_761) % 1_000_000;
    let mut hs = Vec::new();
    for w in 0..2u32 {
        let (s, stop, done) = (s.clone(), stop.clone(), done.clone());
        hs.push(std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) && n < 400_000 {
                let i = scramble(2 * n + w);
                s.put(&key(i), &value(i, 0, 60 + (i as usize % 90)))
                    .unwrap_or_else(|e| {
                        panic!(
                            "insert {n} of writer {w} (key {i}): {e}; {:?}; {:?}",
                            s.tree().mirror_stats(),
                            s.durability().stats()
                        )
                    });
                n += 1;
                done[w as usize].store(n, Ordering::Relaxed);
            }
        }));
    }
    {
        let (s, stop, done) = (s.clone(), stop.clone(), done.clone());
        hs.push(std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let w = n % 2;
                let upto = done[w as usize].load(Ordering::Relaxed);
                if upto > 0 {
                    let i = scramble(2 * (n.wrapping_mul(7919) % upto) + w);
                    let got = s.get(&key(i)).unwrap().expect("inserted before");
                    assert!(got.starts_with(format!("{i}:").as_bytes()));
                }
                n += 1;
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let n: u32 = done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
    assert_eq!(s.tree().len(), n as usize);
    let st = s.tree().mirror_stats();
    assert!(st.evictions > 100 && st.loads > 100, "{st:?}");
}

/// A page that cannot be read back fails the request that needed it, with a clear error;
/// the store keeps serving everything that is resident, and the same read succeeds once
/// the device works again.
#[test]
fn a_failed_page_read_fails_only_that_request() {
    let dev = Arc::new(FaultStorage::new());
    let s = Store::open_storage(dev.clone(), budget_options(12, SyncPolicy::None)).unwrap();
    for i in 0..3000u32 {
        s.put(&key(i), &value(i, 0, 100)).unwrap();
    }
    settle(&s);
    s.flush().unwrap();
    settle(&s);
    // Find a key whose leaf is evicted: a read of it loads a page.
    dev.set_read_error(Some(libc::EIO));
    let mut failed = None;
    for i in (0..3000u32).step_by(37) {
        let before = s.tree().mirror_stats().load_errors;
        match s.get(&key(i)) {
            Err(accelkv_durable::Error::Tree(accelkv_tree::Error::PageRead(m))) => {
                assert!(m.contains("reading"), "{m}");
                assert!(s.tree().mirror_stats().load_errors > before);
                failed = Some(i);
                break;
            }
            Ok(v) => assert_eq!(v, Some(value(i, 0, 100))),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    let i = failed.expect("some leaf was evicted");
    dev.set_read_error(None);
    assert_eq!(s.get(&key(i)).unwrap(), Some(value(i, 0, 100)));
}

/// FLUSHALL over a store whose leaves are mostly in the page file: everything is gone at
/// once (readers of the old state would read the old pages, kept until they finish), what
/// is written after it is all there is, also after a reopen.
///
/// Several rounds, since the bug this guards against needs a commit to have imaged an
/// evicted leaf again (freeing the page its stub names, then reused) before the clear: a
/// snapshot's scan across the clear then read another leaf's page (4,002 of 4,000 items).
#[test]
fn clear_retires_evicted_leaves() {
    for round in 0..20 {
        clear_round(&format!("clear{round}"));
    }
}

fn clear_round(name: &str) {
    let dir = TempDir::new(name);
    {
        let s = Store::open_with(dir.path(), budget_options(16, SyncPolicy::None)).unwrap();
        for i in 0..4000u32 {
            s.put(&key(i), &value(i, 0, 120)).unwrap();
        }
        settle(&s);
        assert!(s.tree().mirror_stats().evicted_leaves > 20);
        let snap = s.tree().snapshot();
        s.clear().unwrap();
        assert_eq!(s.tree().len(), 0);
        assert_eq!(s.get(&key(5)).unwrap(), None);
        // The snapshot still reads the old state, evicted leaves included.
        assert_eq!(snap.get(&key(3999)).unwrap(), Some(value(3999, 0, 120)));
        assert_eq!(snap.try_scan(b"", None, usize::MAX).unwrap().len(), 4000);
        drop(snap);
        for i in 0..300u32 {
            s.put(&key(i * 13), &value(i, 1, 40)).unwrap();
        }
        s.flush().unwrap();
    }
    let s = Store::open_with(dir.path(), budget_options(16, SyncPolicy::None)).unwrap();
    let all = s.tree().try_scan(b"", None, usize::MAX).unwrap();
    assert_eq!(all.len(), 300);
    assert_eq!(s.get(&key(13)).unwrap(), Some(value(1, 1, 40)));
}

/// The CPU engine's inline walk with deferred misses (the serving loop's reads): every
/// request it answers matches the reference reader; every one it leaves unanswered names a
/// leaf that, read back (`read_back`, what the loader threads do), lets it be answered.
#[test]
fn deferred_misses_answer_like_the_reference_reader() {
    use accelkv_engine::{CpuEngine, EngineConfig, ReadRef, Reply};
    let dir = TempDir::new("defer");
    let s = Store::open_with(dir.path(), budget_options(24, SyncPolicy::None)).unwrap();
    for i in 0..6000u32 {
        s.put(&key(i), &value(i, 0, 60 + (i as usize % 7) * 30))
            .unwrap();
    }
    settle(&s);
    let tree = s.tree().clone();
    let engine = CpuEngine::start(
        tree.clone(),
        EngineConfig {
            threads: 0,
            ..EngineConfig::default()
        },
    );
    assert!(
        engine.loader().is_some(),
        "a budget starts the loader threads"
    );
    let mut reader = engine.reader();
    let reference = |r: &ReadRef<'_>| match *r {
        ReadRef::Get(k) => Reply::Value(tree.get(k).unwrap()),
        ReadRef::Scan { lo, hi, limit } => {
            let mut items = accelkv_engine::Items::default();
            for (k, v) in tree.try_scan(lo, hi, limit).unwrap() {
                items.push(&k, &v);
            }
            Reply::Items(items)
        }
        ReadRef::ScanFloor { kl, ku, limit } => {
            let mut items = accelkv_engine::Items::default();
            for (k, v) in tree.try_scan_floor(kl, ku, limit).unwrap() {
                items.push(&k, &v);
            }
            Reply::Items(items)
        }
    };
    let (mut missed_total, mut x) = (0usize, 12345u32);
    for round in 0..40u32 {
        let keys: Vec<(Vec<u8>, Vec<u8>)> = (0..48)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let i = (x >> 8) % 6600; // some absent
                (key(i), key(i + 40))
            })
            .collect();
        let reqs: Vec<ReadRef<'_>> = keys
            .iter()
            .enumerate()
            .map(|(j, (a, b))| match j % 4 {
                0 | 1 => ReadRef::Get(a),
                2 => ReadRef::Scan {
                    lo: a,
                    hi: Some(b),
                    limit: 25,
                },
                _ => ReadRef::ScanFloor {
                    kl: a,
                    ku: b,
                    limit: 25,
                },
            })
            .collect();
        let mut left: Vec<usize> = (0..reqs.len()).collect();
        for attempt in 0.. {
            // Deferred for a few attempts, then read on this thread (what a resumed run does).
            reader.set_defer(attempt < 4);
            let batch: Vec<ReadRef<'_>> = left.iter().map(|&j| reqs[j]).collect();
            let mut answered = vec![false; batch.len()];
            reader.run(&batch, |b, found| {
                let j = left[b];
                assert_eq!(
                    found.into_reply(),
                    reference(&reqs[j]),
                    "round {round}, request {j}"
                );
                answered[b] = true;
            });
            let missed: Vec<(usize, u64)> = reader.missed().to_vec();
            missed_total += missed.len();
            for &(b, lid) in &missed {
                assert!(!answered[b], "a missed request was answered too");
                // No room now is not an error here: the next run reads it itself.
                match tree.read_back(lid) {
                    Ok(()) | Err(accelkv_tree::Error::OutOfMemory { .. }) => {}
                    Err(e) => panic!("reading leaf {lid} back: {e}"),
                }
            }
            assert_eq!(
                answered.iter().filter(|a| !**a).count(),
                missed.len(),
                "every request is answered or missed"
            );
            left = left
                .iter()
                .zip(&answered)
                .filter(|(_, a)| !**a)
                .map(|(&j, _)| j)
                .collect();
            if left.is_empty() {
                break;
            }
            assert!(attempt < 4, "a blocking run answers everything");
        }
    }
    assert!(
        missed_total > 50,
        "requests reached evicted leaves: {missed_total}"
    );
}
