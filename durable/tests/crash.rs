//! Crash consistency with the fault-injecting device: a scripted workload (puts, updates,
//! deletes, values large enough for extension pages, enough keys for splits and merges) is
//! stopped at every write and every sync it makes; from each stop, several crash images
//! (unsynced writes kept, lost or torn by sector) are recovered, and the recovered store
//! must hold every acknowledged write, each key either at its last acknowledged state or at
//! the one write in flight, and every value whole.

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::{Error, Options, Store, SyncPolicy};
mod common;

use common::test_options;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn opts() -> Options {
    test_options(SyncPolicy::Sync)
}

/// A value that names its key and step, so a mix-up or a torn value cannot pass.
fn value(rng: &mut SmallRng, key: &[u8], step: usize) -> Vec<u8> {
    let len = if rng.gen_ratio(1, 8) {
        rng.gen_range(600..20_000)
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
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|step| {
            let k = format!("key{:05}", rng.gen_range(0..keys)).into_bytes();
            if rng.gen_ratio(1, 5) {
                Op::Delete(k)
            } else {
                let v = value(&mut rng, &k, step);
                Op::Put(k, v)
            }
        })
        .collect()
}

/// Runs `ops` until one fails; returns the acknowledged state and the op in flight.
fn run(store: &Store, ops: &[Op]) -> (BTreeMap<Vec<u8>, Vec<u8>>, Option<Op>) {
    let mut acked = BTreeMap::new();
    for op in ops {
        let r = match op {
            Op::Put(k, v) => store.put(k, v).map(|_| ()),
            Op::Delete(k) => match store.delete(k) {
                Err(Error::Tree(accelkv_tree::Error::NotFound)) => Ok(()),
                r => r.map(|_| ()),
            },
        };
        match r {
            Ok(()) => match op {
                Op::Put(k, v) => {
                    acked.insert(k.clone(), v.clone());
                }
                Op::Delete(k) => {
                    acked.remove(k);
                }
            },
            Err(Error::Disk(_)) => return (acked, Some(op.clone())),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    (acked, None)
}

fn check(
    recovered: &Store,
    acked: &BTreeMap<Vec<u8>, Vec<u8>>,
    in_flight: &Option<Op>,
    what: &str,
) {
    let all = recovered.scan(b"", None, usize::MAX);
    let got: BTreeMap<Vec<u8>, Vec<u8>> = all.into_iter().collect();
    let mut keys: Vec<&Vec<u8>> = got.keys().chain(acked.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let (g, a) = (got.get(k), acked.get(k));
        if g == a {
            continue;
        }
        let ok = match in_flight {
            Some(Op::Put(fk, fv)) => fk == k && g == Some(fv),
            Some(Op::Delete(fk)) => fk == k && g.is_none(),
            None => false,
        };
        assert!(
            ok,
            "{what}: key {} recovered as {:?}, acknowledged {:?}",
            String::from_utf8_lossy(k),
            g.map(|v| v.len()),
            a.map(|v| v.len())
        );
    }
}

fn recover(image: Vec<u8>) -> Store {
    let dev = Arc::new(FaultStorage::from_image(image));
    Store::open_storage(dev, opts()).expect("recovery opens every crash image")
}

#[test]
fn crash_at_every_write_and_sync_point() {
    let ops = workload(7, 160, 120);
    // A clean run counts the failpoints.
    let dev = Arc::new(FaultStorage::new());
    let total = {
        let s = Store::open_storage(dev.clone(), opts()).unwrap();
        let (acked, fail) = run(&s, &ops);
        assert!(fail.is_none());
        drop(s);
        let r = recover(dev.durable_image());
        check(&r, &acked, &None, "clean run");
        assert!(r.recovery().leaf_pages > 3, "{}", r.recovery());
        dev.ops()
    };
    assert!(
        total > 300,
        "the workload makes only {total} writes and syncs"
    );
    let mut torn_seen = 0;
    for n in 0..total {
        let dev = Arc::new(FaultStorage::new());
        dev.crash_at(n);
        let (acked, in_flight) = match Store::open_storage(dev.clone(), opts()) {
            Ok(s) => run(&s, &ops),
            Err(Error::Disk(_)) => (BTreeMap::new(), None),
            Err(e) => panic!("open failed: {e}"),
        };
        for seed in 0..3 {
            let r = recover(dev.crash_image(n * 7 + seed));
            torn_seen += r.recovery().torn_pages;
            check(
                &r,
                &acked,
                &in_flight,
                &format!("crash at point {n} image {seed}"),
            );
        }
        let r = recover(dev.durable_image());
        check(
            &r,
            &acked,
            &in_flight,
            &format!("crash at point {n}, synced bytes only"),
        );
    }
    assert!(
        torn_seen > 0,
        "no crash image tore a page: the test is not testing tearing"
    );
}

/// Writers on several threads, stopped at random points: each key is written by one
/// thread with increasing steps, and recovery must hold at least each key's acknowledged
/// step (its in-flight step at most).
#[test]
fn concurrent_writers_crash_at_random_points() {
    let mut rng = SmallRng::seed_from_u64(11);
    for round in 0..12 {
        let dev = Arc::new(FaultStorage::new());
        dev.crash_at(rng.gen_range(5..600));
        let store = Arc::new(Store::open_storage(dev.clone(), opts()).unwrap());
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut acked: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
                    for step in 1..400u32 {
                        let k = format!("t{t}k{:03}", step % 50).into_bytes();
                        let v = format!("{step:08}").repeat(if step % 13 == 0 { 100 } else { 1 });
                        match store.put(&k, v.as_bytes()) {
                            Ok(_) => {
                                acked.insert(k, step);
                            }
                            Err(Error::Disk(_)) => return (acked, Some(step)),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    (acked, None)
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        drop(store);
        for seed in 0..3 {
            let r = recover(dev.crash_image(round * 10 + seed));
            for (acked, _) in &results {
                for (k, step) in acked {
                    let v = r.get(k).unwrap().unwrap_or_else(|| {
                        panic!(
                            "round {round}: acknowledged key {} lost",
                            String::from_utf8_lossy(k)
                        )
                    });
                    let got: u32 = std::str::from_utf8(&v[..8]).unwrap().parse().unwrap();
                    assert!(
                        got >= *step,
                        "round {round}: key went back from {step} to {got}"
                    );
                    assert_eq!(v, format!("{got:08}").repeat(v.len() / 8).into_bytes());
                }
            }
        }
    }
}
