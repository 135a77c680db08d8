//! Delta entries under a memory budget (issue 57): an evicted leaf is its last whole image
//! plus the delta entries newer than it, so an update to a cold leaf writes an entry, not
//! the leaf, and a load merges the two. Checked against a `BTreeMap` after every commit
//! (with the leaves evicted in between), across reopens that leave leaves in the page file
//! with their entries, and by the counters: what was written per update.

mod common;

use accelkv_durable::{Options, Store, SyncPolicy, PAGE_FILE};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A fresh directory, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!(
            "accelkv-mirror-deltas-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 4 KiB nodes and a leaf cache of `leaves` of them, with delta entries however full the
/// cache is (by default it images whole leaves while evicting).
fn budget(leaves: usize) -> Options {
    let mut o = common::test_options(SyncPolicy::None);
    o.config.evict = true;
    o.config.memory_limit = leaves * o.config.node_size;
    o.deltas.budget_percent = u32::MAX;
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, gen: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{i}:{gen}:").into_bytes();
    v.resize(len.max(v.len()), b'v');
    v
}

/// Waits until the evictor brought the store under its budget (it runs every 10 ms).
fn settle(s: &Store) {
    let t0 = Instant::now();
    while s.tree().over_budget() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn check(s: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let all = s.tree().try_scan(b"", None, usize::MAX).unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(all == want, "{what}: a scan differs from the model");
    assert_eq!(s.tree().len(), model.len(), "{what}: the count");
}

#[test]
fn updates_to_cold_leaves_write_entries_not_leaves() {
    let dir = TempDir::new("cold");
    let crash = TempDir::new("cold-crash");
    let mut model = BTreeMap::new();
    {
        let s = Store::open_with(&dir.0, budget(24)).unwrap();
        for i in 0..20_000u32 {
            let v = value(i, 0, 16 + (i as usize % 7) * 300);
            s.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        s.flush().unwrap();
        settle(&s);
        let before = s.durability().stats();
        let loads = s.tree().mirror_stats().loads;
        // Rounds of one update in each of many leaves: most leaves are evicted, so each
        // update reads its leaf back (image and entries) and writes an entry.
        let mut updates = 0u64;
        for round in 1..=6u32 {
            for i in (round..20_000).step_by(113) {
                let v = if i % 3 == 0 {
                    value(i, round, 2_000) // longer than a leaf holds inline
                } else {
                    value(i, round, 24)
                };
                s.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
                updates += 1;
            }
            for i in (round * 7..20_000).step_by(1_999) {
                s.delete(&key(i)).unwrap();
                model.remove(&key(i));
            }
            s.flush().unwrap();
            settle(&s);
            check(&s, &model, &format!("round {round}"));
        }
        let after = s.durability().stats();
        let m = s.tree().mirror_stats();
        let what = format!("{updates} updates; before {before:?}; after {after:?}; {m:?}");
        assert!(
            m.loads > loads + updates / 2,
            "evicted leaves were read back: {what}"
        );
        assert!(
            after.delta_pages_written > before.delta_pages_written,
            "{what}"
        );
        let leaves = after.leaf_pages_written - before.leaf_pages_written;
        assert!(
            leaves < updates / 4,
            "whole leaves written: {leaves}; {what}"
        );
        assert!(
            after.write_backs - before.write_backs < updates / 10,
            "write-backs: {what}"
        );
        // Values up to 4 KiB travel in the entries; the leaves imaged whole move theirs
        // to extension pages (each once).
        let exts = after.ext_pages_written - before.ext_pages_written;
        assert!(
            exts < updates / 4,
            "extension pages written: {exts}; {what}"
        );
        // What a crash now leaves: a clean close would fold the entries into whole images.
        std::fs::create_dir_all(&crash.0).unwrap();
        std::fs::copy(dir.0.join(PAGE_FILE), crash.0.join(PAGE_FILE)).unwrap();
    }
    // Reopened with the budget: leaves stay in the page file with their entries.
    let dir = crash;
    let s = Store::open_with(&dir.0, budget(24)).unwrap();
    let rep = s.recovery().clone();
    assert!(
        rep.evicted_leaves > 0 && rep.delta_keys > 0,
        "leaves left in the page file with delta entries: {rep}"
    );
    check(&s, &model, "after a reopen");
    // And written again from there: the recovered entries complete the images.
    for i in (5..20_000u32).step_by(97) {
        let v = value(i, 99, 40);
        s.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    s.flush().unwrap();
    settle(&s);
    check(&s, &model, "after writes on the reopened store");
    drop(s);
    let s = Store::open_with(&dir.0, budget(24)).unwrap();
    check(&s, &model, "after a second reopen");
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16, u16),
    Delete(u16),
    Commit,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..3000, prop_oneof![4 => 4u16..60, 1 => 500u16..4500])
            .prop_map(|(k, l)| Op::Put(k, l)),
        2 => (0u16..3000).prop_map(Op::Delete),
        2 => Just(Op::Commit),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// After every commit (with the leaves evicted down to the budget in between) and every
    /// reopen, the store equals the model.
    #[test]
    fn image_and_entries_match_a_model_at_every_commit(
        ops in proptest::collection::vec(op(), 1..600)
    ) {
        let mut dir = TempDir::new("model");
        let mut s = Store::open_with(&dir.0, budget(8)).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut deltas = 0;
        // A base the budget cannot hold.
        for i in (0..3000u32).step_by(2) {
            let v = value(i, 0, 20);
            s.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        for (n, op) in ops.iter().enumerate() {
            match *op {
                Op::Put(k, l) => {
                    let v = value(u32::from(k), n as u32 + 1, usize::from(l));
                    s.put(&key(u32::from(k)), &v).unwrap();
                    model.insert(key(u32::from(k)), v);
                }
                Op::Delete(k) => {
                    s.delete(&key(u32::from(k))).unwrap();
                    model.remove(&key(u32::from(k)));
                }
                Op::Commit => {
                    s.flush().unwrap();
                    settle(&s);
                    check(&s, &model, &format!("commit after op {n}"));
                }
                Op::Reopen => {
                    deltas += s.durability().stats().delta_pages_written;
                    if n % 2 == 0 {
                        // What a crash after a commit leaves (entries and all): a clean
                        // close would fold the entries into whole images.
                        s.flush().unwrap();
                        let copy = TempDir::new("model-crash");
                        std::fs::create_dir_all(&copy.0).unwrap();
                        std::fs::copy(dir.0.join(PAGE_FILE), copy.0.join(PAGE_FILE)).unwrap();
                        drop(s);
                        dir = copy;
                    } else {
                        drop(s);
                    }
                    s = Store::open_with(&dir.0, budget(8)).unwrap();
                    check(&s, &model, &format!("reopen after op {n}"));
                }
            }
        }
        s.flush().unwrap();
        deltas += s.durability().stats().delta_pages_written;
        let commits = ops.iter().filter(|o| matches!(o, Op::Commit)).count();
        prop_assert!(deltas > 0 || commits < 3, "{} delta pages", deltas);
    }
}
