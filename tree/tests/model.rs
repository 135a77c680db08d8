//! Property test: random operation sequences against a `BTreeMap` model, with key and value
//! sizes spread up to the limits and enough operations to force many log merges, splits,
//! node merges and root changes. `get` is checked after every step, scans and snapshots at
//! random points, and a full scan at the end.

use accelkv_tree::{Config, Error, Store};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Put(u32, usize),
    Update(u32, usize),
    Delete(u32),
    /// Delete a run of consecutive keys (empties leaves, forces node merges).
    DeleteRange(u32, u32),
    Scan(u32, u32, usize),
    ScanFloor(u32, u32),
    Snapshot,
}

/// Key `n` with a length spread from 1 to 460 bytes that still sorts by `n`.
fn key(n: u32, shape: u8) -> Vec<u8> {
    let mut k = format!("{n:06}").into_bytes();
    let extra = match shape % 4 {
        0 => 0,
        1 => (n as usize * 7) % 40,
        2 => (n as usize * 13) % 200,
        _ => 454,
    };
    k.extend(std::iter::repeat_n(b'k', extra));
    k
}

fn value(n: u32, len: usize) -> Vec<u8> {
    let mut v = format!("v{n}:").into_bytes();
    v.resize(len.max(v.len()), b'0' + (n % 10) as u8);
    v
}

fn op(keys: u32) -> impl Strategy<Value = Op> {
    let vlen = prop_oneof![8 => 0usize..40, 2 => 40usize..470, 1 => 470usize..3000];
    prop_oneof![
        40 => (0..keys, vlen.clone()).prop_map(|(k, l)| Op::Put(k, l)),
        8 => (0..keys, vlen).prop_map(|(k, l)| Op::Update(k, l)),
        15 => (0..keys).prop_map(Op::Delete),
        2 => (0..keys, 1u32..200).prop_map(|(k, n)| Op::DeleteRange(k, n)),
        4 => (0..keys, 0..keys, 0usize..50).prop_map(|(a, b, l)| Op::Scan(a, b, l)),
        3 => (0..keys, 0..keys).prop_map(|(a, b)| Op::ScanFloor(a, b)),
        1 => Just(Op::Snapshot),
    ]
}

fn small_nodes() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_floor(m: &Model, kl: &[u8], ku: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let start = m.range(..=kl.to_vec()).next_back().map(|x| x.0.clone());
    let it: Box<dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>> = match start {
        Some(s) => Box::new(m.range(s..)),
        None => Box::new(m.iter()),
    };
    it.take_while(|(k, _)| k.as_slice() <= ku)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run(cfg: Config, shape: u8, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = Store::new(cfg).unwrap();
    let mut model = Model::new();
    let mut snaps = Vec::new();
    for op in ops {
        match op {
            Op::Put(n, l) => {
                let (k, v) = (key(n, shape), value(n, l));
                let w = store.put(&k, &v).unwrap();
                prop_assert_eq!(w.existed, model.insert(k.clone(), v.clone()).is_some());
                prop_assert_eq!(store.get(&k).unwrap(), Some(v));
            }
            Op::Update(n, l) => {
                let (k, v) = (key(n, shape), value(n, l + 1));
                match store.update(&k, &v) {
                    Ok(_) => {
                        prop_assert!(model.contains_key(&k));
                        model.insert(k.clone(), v);
                    }
                    Err(Error::NotFound) => prop_assert!(!model.contains_key(&k)),
                    Err(e) => return Err(TestCaseError::fail(e.to_string())),
                }
                prop_assert_eq!(store.get(&k).unwrap(), model.get(&k).cloned());
            }
            Op::Delete(n) => {
                let k = key(n, shape);
                let w = store.delete(&k).unwrap();
                prop_assert_eq!(w.existed, model.remove(&k).is_some());
                prop_assert_eq!(store.get(&k).unwrap(), None);
            }
            Op::DeleteRange(n, count) => {
                for i in n..n + count {
                    let k = key(i, shape);
                    let w = store.delete(&k).unwrap();
                    prop_assert_eq!(w.existed, model.remove(&k).is_some());
                }
            }
            Op::Scan(a, b, limit) => {
                let (lo, hi) = (key(a, shape), key(b, shape));
                let got = store.scan(&lo, Some(&hi), limit);
                let want: Vec<_> = if lo <= hi {
                    model
                        .range(lo.clone()..hi.clone())
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                prop_assert_eq!(got, want);
                // Backwards: the same range from its end.
                let rev = store.try_scan_rev(&lo, &hi, limit).unwrap();
                let want: Vec<_> = if lo <= hi {
                    model
                        .range(lo.clone()..hi.clone())
                        .rev()
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                prop_assert_eq!(rev, want);
            }
            Op::ScanFloor(a, b) => {
                let (kl, ku) = (key(a, shape), key(b, shape));
                prop_assert_eq!(
                    store.scan_floor(&kl, &ku, 1000),
                    model_floor(&model, &kl, &ku)
                );
            }
            Op::Snapshot => snaps.push((store.snapshot(), model.clone())),
        }
        // Every key the last op could have touched, plus a neighbour.
        if let Some((k, v)) = model.iter().next() {
            prop_assert_eq!(store.get(k).unwrap(), Some(v.clone()));
        }
    }
    // Snapshots still see exactly their state after everything that followed.
    for (snap, m) in &snaps {
        let all = snap.scan(b"", None, usize::MAX);
        let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(all, want);
        let mut back = snap.try_scan_rev(b"", &[0xff; 300], usize::MAX).unwrap();
        back.reverse();
        prop_assert_eq!(back, snap.scan(b"", None, usize::MAX));
        if let Some((k, _)) = m.iter().nth(m.len() / 2) {
            prop_assert_eq!(snap.get(k).unwrap(), m.get(k).cloned());
            prop_assert_eq!(
                snap.scan_floor(k, k, 10).first().map(|x| x.0.clone()),
                Some(k.clone())
            );
        }
    }
    let all = store.scan(b"", None, usize::MAX);
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    prop_assert_eq!(all, want);
    prop_assert_eq!(store.len(), model.len());
    let stats = store.stats();
    prop_assert_eq!(stats.items as usize, model.len());
    STRUCTURE.with(|c| {
        let mut c = c.borrow_mut();
        c.0 += stats.splits + stats.root_splits;
        c.1 += stats.node_merges;
        c.2 += stats.root_shrinks;
    });
    Ok(())
}

thread_local! {
    /// (splits, node merges, root shrinks) seen by the property tests of this thread.
    static STRUCTURE: std::cell::RefCell<(u64, u64, u64)> = const { std::cell::RefCell::new((0, 0, 0)) };
}

/// The property test exercises every structural modification, not just log appends.
#[test]
fn property_runs_exercise_structure() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(8));
    runner
        .run(
            &(0u8..4, proptest::collection::vec(op(3000), 2000..2500)),
            |(shape, ops)| run(small_nodes(), shape, ops),
        )
        .unwrap();
    let (splits, merges, shrinks) = STRUCTURE.with(|c| *c.borrow());
    eprintln!("splits {splits}, node merges {merges}, root shrinks {shrinks}");
    assert!(splits > 0 && merges > 0, "splits {splits} merges {merges}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn matches_btreemap_small_nodes(shape in 0u8..4, ops in proptest::collection::vec(op(3000), 1..2500)) {
        run(small_nodes(), shape, ops)?;
    }

    #[test]
    fn matches_btreemap_default_nodes(shape in 0u8..4, ops in proptest::collection::vec(op(600), 1..1500)) {
        run(Config { chunk_size: 1 << 20, ..Config::default() }, shape, ops)?;
    }

    #[test]
    fn matches_btreemap_no_log_block(ops in proptest::collection::vec(op(500), 1..600)) {
        run(Config { log_threshold: 0, ..small_nodes() }, 1, ops)?;
    }
}

/// Sequential inserts and deletes of many keys: the tree grows several levels and shrinks
/// back to a single leaf.
#[test]
fn grow_and_shrink() {
    let store = Store::new(small_nodes()).unwrap();
    let n = 40_000u32;
    for i in 0..n {
        store.put(&key(i, 1), &value(i, 20)).unwrap();
    }
    let s = store.stats();
    assert!(s.depth >= 3, "depth {}", s.depth);
    assert_eq!(s.items, u64::from(n));
    for i in (0..n).rev() {
        assert!(store.delete(&key(i, 1)).unwrap().existed);
    }
    let s = store.stats();
    assert_eq!(s.items, 0);
    assert_eq!(s.depth, 1, "{s:?}");
    assert!(s.splits > 100 && s.node_merges > 100, "{s:?}");
    assert!(s.root_splits >= 2 && s.root_shrinks >= 2, "{s:?}");
    assert!(store.scan(b"", None, 10).is_empty());
}
