//! Crash consistency with the fault-injecting device. Every check is the same strong one:
//! the recovered store equals the history replayed up to the version recovery reports (a
//! prefix of the writes by version: nothing after it, nothing missing before it), every
//! value whole, and nothing acknowledged is lost where the policy promises it.
//!
//! - `sync`: a scripted workload (puts, deletes, values large enough for extension pages,
//!   enough keys for splits and merges) is stopped at every write and every sync it makes;
//!   from each stop, several crash images (unsynced writes kept, lost or torn by sector)
//!   and the synced bytes alone are recovered.
//! - `interval` and `none`: the same workload, stopped at every write and sync, recovered
//!   from what a process crash leaves (every write, synced or not); `interval` also from
//!   power-loss images, since it syncs at the end of every commit.
//! - Writers on several threads, the device's image taken at random moments while they run.

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::{Deltas, Error, Options, Store, SyncPolicy};
mod common;

use common::{test_options, History};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;

/// Whole images only; the default delta pages; and delta pages held to a few, so that
/// chains of every length end both ways (a leaf past its limit, and the oldest delta pages
/// retired by imaging their leaves).
const DELTAS: [Deltas; 3] = [
    Deltas::OFF,
    Deltas {
        leaf_percent: 25,
        space_percent: 25,
        min_bytes: 1 << 20,
        budget_percent: u32::MAX,
    },
    Deltas {
        leaf_percent: 10,
        space_percent: 1,
        min_bytes: 2048,
        budget_percent: u32::MAX,
    },
];

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// A value that names its key and step, so a mix-up or a torn value cannot pass; one in
/// eight is longer than a leaf holds inline (up to `large` bytes).
fn value(rng: &mut SmallRng, key: &[u8], step: usize, large: usize) -> Vec<u8> {
    let len = if rng.gen_ratio(1, 8) {
        rng.gen_range(600..large)
    } else {
        rng.gen_range(8..120)
    };
    let tag = format!("{}@{step}:", String::from_utf8_lossy(key));
    tag.bytes()
        .chain((0..).map(|i: usize| (i * 31 + step) as u8))
        .take(len.max(tag.len()))
        .collect()
}

fn workload(seed: u64, n: usize, keys: usize) -> Vec<Op> {
    workload_of(seed, n, keys, 20_000)
}

/// [`workload`] with large values up to `large` bytes.
fn workload_of(seed: u64, n: usize, keys: usize, large: usize) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|step| {
            let k = format!("key{:05}", rng.gen_range(0..keys)).into_bytes();
            if rng.gen_ratio(1, 5) {
                Op::Delete(k)
            } else {
                let v = value(&mut rng, &k, step, large);
                Op::Put(k, v)
            }
        })
        .collect()
}

/// Runs `ops` until one fails with a disk error; returns the history (every write the
/// store applied, with its version: the failed one too when it was applied) and the last
/// version acknowledged. Under the relaxed policies, where writes do not wait for commits,
/// it commits every 8 operations, so the run makes many commits to crash in.
fn run(store: &Store, ops: &[Op]) -> (History, u64) {
    let mut h = History::default();
    let mut acked = 0;
    let relaxed = store.durability().policy() != SyncPolicy::Sync;
    for (i, op) in ops.iter().enumerate() {
        if relaxed && i % 8 == 7 && store.flush().is_err() {
            return (h, acked);
        }
        let before = store.tree().read_version();
        let r = match op {
            Op::Put(k, v) => store.put(k, v).map(|w| Some(w.version)),
            // A delete of an absent key writes nothing (and takes no version).
            Op::Delete(k) => store.delete(k).map(|w| w.existed.then_some(w.version)),
        };
        let (k, v) = match op {
            Op::Put(k, v) => (k.clone(), Some(v.clone())),
            Op::Delete(k) => (k.clone(), None),
        };
        match r {
            Ok(Some(version)) => {
                h.record(version, k, v);
                acked = version;
            }
            Ok(None) => {}
            Err(Error::Disk(_)) => {
                // Applied (and released) before its wait failed, or refused untouched.
                let after = store.tree().read_version();
                if after > before {
                    h.record(after, k, v);
                }
                return (h, acked);
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    (h, acked)
}

/// The store's options: `policy`, `deltas`, and with `budget` a leaf cache of that many
/// 4 KiB leaves (recovery then leaves leaves in the page file, with their delta entries).
fn options(policy: SyncPolicy, deltas: Deltas, budget: Option<usize>) -> Options {
    let mut o = Options {
        deltas,
        ..test_options(policy)
    };
    if let Some(leaves) = budget {
        o.config.evict = true;
        o.config.memory_limit = leaves * o.config.node_size;
    }
    o
}

fn recover(image: Vec<u8>, opts: &Options) -> Store {
    let dev = Arc::new(FaultStorage::from_image(image));
    Store::open_storage(dev, opts.clone()).expect("recovery opens every crash image")
}

/// Crashes a run of `ops` under `policy` at every write and sync point; `images` gives the
/// crash images to recover from each stop (with a name for messages), and `must_keep`
/// whether acknowledged writes must survive.
fn crash_everywhere(
    policy: SyncPolicy,
    deltas: Deltas,
    ops: &[Op],
    images: impl Fn(&FaultStorage, u64) -> Vec<(String, Vec<u8>)>,
    must_keep: bool,
) -> u64 {
    crash_everywhere_in(policy, deltas, None, ops, images, must_keep)
}

/// [`crash_everywhere`], with a leaf cache of `budget` leaves when some.
fn crash_everywhere_in(
    policy: SyncPolicy,
    deltas: Deltas,
    budget: Option<usize>,
    ops: &[Op],
    images: impl Fn(&FaultStorage, u64) -> Vec<(String, Vec<u8>)>,
    must_keep: bool,
) -> u64 {
    let opts = options(policy, deltas, budget);
    // A clean run counts the failpoints.
    let dev = Arc::new(FaultStorage::new());
    let total = {
        let s = Store::open_storage(dev.clone(), opts.clone()).unwrap();
        let (h, acked) = run(&s, ops);
        let st = s.durability().stats();
        // What a crash just before the close leaves: delta entries a recovery with a
        // budget merges (a clean close folds them into whole images).
        let before = dev.durable_image();
        drop(s);
        let r = recover(dev.durable_image(), &opts);
        h.check(&r, acked, "clean run");
        if deltas.on() {
            let rep = r.recovery();
            assert_eq!(rep.delta_keys, 0, "a clean close folds the entries: {rep}");
        }
        if budget.is_some() {
            let r = recover(before, &opts);
            let rep = r.recovery();
            assert!(
                rep.evicted_leaves > 0,
                "leaves left in the page file: {rep}"
            );
            if deltas.on() {
                assert!(rep.delta_keys > 0, "keys in delta entries: {rep}");
            }
        }
        let what = format!("{deltas:?}: {st:?}; {}", r.recovery());
        assert!(st.leaf_pages_written > 3, "{what}");
        if deltas.on() {
            // Chains of delta pages, and leaves imaged whole again after them.
            assert!(st.delta_pages_written > 10, "{what}");
            assert!(st.leaf_pages_written > 6, "{what}");
        } else {
            assert_eq!(st.delta_pages_written, 0, "{what}");
        }
        dev.ops()
    };
    assert!(
        total > 100,
        "the workload makes only {total} writes and syncs"
    );
    let mut torn = 0;
    for n in 0..total {
        let dev = Arc::new(FaultStorage::new());
        dev.crash_at(n);
        let (h, acked) = match Store::open_storage(dev.clone(), opts.clone()) {
            Ok(s) => run(&s, ops),
            Err(Error::Disk(_)) => (History::default(), 0),
            Err(e) => panic!("open failed: {e}"),
        };
        for (what, img) in images(&dev, n) {
            let r = recover(img, &opts);
            torn += r.recovery().torn_pages;
            let what =
                format!("{policy}, {deltas:?}, budget {budget:?}: crash at point {n}, {what}");
            h.check(&r, if must_keep { acked } else { 0 }, &what);
            h.check_next_version(&r, &what);
        }
    }
    torn
}

/// Power-loss images: the synced bytes, and three mixes of kept, lost and torn writes.
fn power_loss(dev: &FaultStorage, n: u64) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = (0..3)
        .map(|seed| (format!("image {seed}"), dev.crash_image(n * 7 + seed)))
        .collect();
    v.push(("synced bytes only".into(), dev.durable_image()));
    v
}

fn process_crash(dev: &FaultStorage, _n: u64) -> Vec<(String, Vec<u8>)> {
    vec![("process crash".into(), dev.written_image())]
}

#[test]
fn sync_policy_crash_at_every_write_and_sync_point() {
    for deltas in DELTAS {
        let torn = crash_everywhere(
            SyncPolicy::Sync,
            deltas,
            &workload(7, 240, 120),
            power_loss,
            true,
        );
        assert!(
            torn > 0,
            "no crash image tore a page: the test is not testing tearing"
        );
    }
}

/// With a leaf cache of six 4 KiB leaves: leaves evicted as their image and delta entries
/// (values up to 4 KiB in the entries themselves), and recovery leaving leaves in the page
/// file with the entries that complete them, read back by the pager when checked.
#[test]
fn sync_policy_crash_with_a_memory_budget() {
    for deltas in DELTAS {
        crash_everywhere_in(
            SyncPolicy::Sync,
            deltas,
            Some(6),
            &workload_of(17, 300, 400, 4000),
            power_loss,
            true,
        );
    }
}

#[test]
fn none_policy_process_crash_with_a_memory_budget() {
    for deltas in DELTAS {
        crash_everywhere_in(
            SyncPolicy::None,
            deltas,
            Some(6),
            &workload_of(19, 300, 400, 4000),
            process_crash,
            false,
        );
    }
}

#[test]
fn interval_policy_crash_at_every_write_and_sync_point() {
    let policy = SyncPolicy::Interval(Duration::from_millis(1));
    let ops = workload(8, 240, 120);
    for deltas in DELTAS {
        crash_everywhere(policy, deltas, &ops, process_crash, false);
        crash_everywhere(policy, deltas, &ops, power_loss, false);
    }
}

#[test]
fn none_policy_process_crash_at_every_write_point() {
    for deltas in DELTAS {
        crash_everywhere(
            SyncPolicy::None,
            deltas,
            &workload(9, 240, 120),
            process_crash,
            false,
        );
    }
}

/// Writers on several threads under each policy; the image a process crash would leave is
/// taken at random moments while they run, and each must recover to a prefix.
#[test]
fn concurrent_writers_process_crash_images_are_prefixes() {
    let mut rng = SmallRng::seed_from_u64(11);
    for policy in [
        SyncPolicy::Sync,
        SyncPolicy::Interval(Duration::from_millis(2)),
        SyncPolicy::None,
    ] {
        let dev = Arc::new(FaultStorage::new());
        let store = Arc::new(Store::open_storage(dev.clone(), test_options(policy)).unwrap());
        // Images taken so far: the writers go on past their 1,500 steps until there are a
        // few, so a loaded machine cannot make them finish before any is taken.
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let (store, taken) = (store.clone(), taken.clone());
                std::thread::spawn(move || {
                    let mut h = History::default();
                    let mut rng = SmallRng::seed_from_u64(t);
                    let more = |step: u32| {
                        step < 1500
                            || (taken.load(std::sync::atomic::Ordering::Relaxed) < 4
                                && step < 200_000)
                    };
                    let mut step = 0u32;
                    while more(step + 1) {
                        step += 1;
                        let k = format!("t{t}k{:03}", rng.gen_range(0..200)).into_bytes();
                        if rng.gen_ratio(1, 6) {
                            let w = store.delete(&k).unwrap();
                            if w.existed {
                                h.record(w.version, k, None);
                            }
                            continue;
                        }
                        let n = if rng.gen_ratio(1, 10) { 120 } else { 1 };
                        let v = format!("{t}:{step:08}").repeat(n).into_bytes();
                        let w = store.put(&k, &v).unwrap();
                        h.record(w.version, k, Some(v));
                    }
                    h
                })
            })
            .collect();
        let mut images = Vec::new();
        while !threads.iter().all(|t| t.is_finished()) {
            std::thread::sleep(Duration::from_micros(rng.gen_range(100..3000)));
            // Everything durable before the image is taken must be in it.
            let durable = store.stats().durable_version;
            images.push((dev.written_image(), durable));
            taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let mut h = History::default();
        for t in threads {
            h.merge(t.join().unwrap());
        }
        drop(store);
        assert!(images.len() > 3, "the writers finished too soon");
        for (i, (img, durable)) in images.into_iter().enumerate() {
            let r = recover(img, &test_options(policy));
            h.check(&r, durable, &format!("{policy}: image {i}"));
            h.check_next_version(&r, &format!("{policy}: image {i}"));
        }
    }
}

/// A slow device under `interval`: writers are slowed so that the writes a crash can lose
/// stay within the policy's window, instead of piling up behind the slow syncs.
#[test]
fn a_slow_device_slows_writers_instead_of_widening_the_window() {
    let policy = SyncPolicy::Interval(Duration::from_millis(5));
    let dev = Arc::new(FaultStorage::new());
    let store = Store::open_storage(dev.clone(), test_options(policy)).unwrap();
    dev.set_sync_delay(Duration::from_millis(150));
    let mut acked: Vec<(u64, std::time::Instant)> = Vec::new();
    let t0 = std::time::Instant::now();
    let mut i = 0u32;
    while t0.elapsed() < Duration::from_millis(1200) {
        let w = store
            .put(format!("k{:04}", i % 3000).as_bytes(), &[i as u8; 40])
            .unwrap();
        acked.push((w.version, std::time::Instant::now()));
        i += 1;
    }
    let crash = std::time::Instant::now();
    let r = recover(dev.durable_image(), &test_options(policy));
    let lost: Vec<_> = acked
        .iter()
        .filter(|(v, _)| *v > r.recovery().version)
        .collect();
    let stats = store.stats();
    assert!(stats.stalls > 0, "no writer waited for the slow device");
    // Without backpressure the lost writes span at least one 150 ms sync; with it they span
    // at most the policy's window (10 ms) plus scheduling noise.
    if let (Some(first), Some(last)) = (lost.first(), lost.last()) {
        let span = last.1 - first.1;
        assert!(
            span < Duration::from_millis(100),
            "the writes a crash lost span {span:?} of acknowledgements ({} writes, {:?} before the crash)",
            lost.len(),
            crash - first.1
        );
    }
}

/// A clean close syncs what the relaxed policies' periodic commits wrote without syncing,
/// even when the final commit has nothing new to write (the writes were all taken by a
/// periodic commit just before): the clean run above failed once under load without it.
#[test]
fn a_clean_close_syncs_what_periodic_commits_left_unsynced() {
    for policy in [
        SyncPolicy::None,
        SyncPolicy::Interval(Duration::from_millis(1)),
    ] {
        let dev = Arc::new(FaultStorage::new());
        let s = Store::open_storage(dev.clone(), test_options(policy)).unwrap();
        for i in 0..50u32 {
            s.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
        }
        // Long enough for a periodic commit to write every key (every millisecond).
        std::thread::sleep(Duration::from_millis(100));
        drop(s);
        let r = recover(dev.durable_image(), &test_options(policy));
        for i in 0..50u32 {
            let k = format!("k{i:03}");
            assert_eq!(
                r.get(k.as_bytes()).unwrap(),
                Some(b"v".to_vec()),
                "{policy:?} {k}"
            );
        }
    }
}
