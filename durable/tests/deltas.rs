//! Delta pages (issue 42, item 1) against a `BTreeMap` model: random puts (inline and
//! extension values, with and without deadlines and flags), deletes and clears, committed
//! at random points; after every commit the page file is recovered as it stands and must
//! equal the model, so base pages plus chains of delta pages of every length are checked at
//! every step. The limits are small, so leaves pass their limit and the oldest delta pages
//! are retired often; the live store's own bounds are checked too.

mod common;

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::{Deltas, Options, Store, SyncPolicy};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    Put { key: u16, len: u16, flags: u32 },
    Delete(u16),
    Commit,
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0u16..300, prop_oneof![4 => 1u16..60, 1 => 700u16..5000], prop_oneof![3 => Just(0u32), 1 => 1u32..9])
            .prop_map(|(key, len, flags)| Op::Put { key, len, flags }),
        4 => (0u16..300).prop_map(Op::Delete),
        3 => Just(Op::Commit),
        1 => Just(Op::Clear),
    ]
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:04}").into_bytes()
}

/// A value naming its key and step, `len` bytes long.
fn value(k: u16, step: usize, len: u16) -> Vec<u8> {
    let tag = format!("{k}@{step}:");
    tag.bytes()
        .chain((0..).map(|i: usize| (i * 7 + step) as u8))
        .take((len as usize).max(tag.len()))
        .collect()
}

type Model = BTreeMap<Vec<u8>, (Vec<u8>, u32)>;

fn contents(s: &Store) -> Model {
    s.scan(b"", None, usize::MAX)
        .into_iter()
        .map(|(k, _)| {
            let item = s.tree().get_item_with(&k, 0, |v, _, f| (v.to_vec(), f));
            (k, item.unwrap().unwrap())
        })
        .collect()
}

fn check(dev: &FaultStorage, model: &Model, what: &str) {
    let img = Arc::new(FaultStorage::from_image(dev.durable_image()));
    let r = Store::open_storage(img, common::test_options(SyncPolicy::Sync)).unwrap();
    let got = contents(&r);
    if &got != model {
        let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(model.keys()).collect();
        let k = keys
            .into_iter()
            .find(|k| got.get(*k) != model.get(*k))
            .expect("the maps differ");
        let short = |v: Option<&(Vec<u8>, u32)>| {
            v.map(|(v, f)| {
                (
                    String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned(),
                    *f,
                )
            })
        };
        panic!(
            "{what}: {} items recovered, {} expected; first difference at {}: got {:?}, want {:?}; {}",
            got.len(),
            model.len(),
            String::from_utf8_lossy(k),
            short(got.get(k)),
            short(model.get(k)),
            r.recovery()
        );
    }
}

fn run(ops: &[Op], deltas: Deltas) {
    let dev = Arc::new(FaultStorage::new());
    let opts = Options {
        deltas,
        ..common::test_options(SyncPolicy::None)
    };
    let s = Store::open_storage(dev.clone(), opts).unwrap();
    let mut model = Model::new();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Put { key: k, len, flags } => {
                let v = value(*k, step, *len);
                s.tree().put_item(&key(*k), &v, 0, *flags).unwrap();
                model.insert(key(*k), (v, *flags));
            }
            Op::Delete(k) => {
                s.delete(&key(*k)).unwrap();
                model.remove(&key(*k));
            }
            Op::Clear => {
                s.clear().unwrap();
                model.clear();
            }
            Op::Commit => {
                s.flush().unwrap();
                check(&dev, &model, &format!("after step {step}"));
                let st = s.stats();
                // A commit retires down to the limit before it adds its own pages (at
                // most two of a 16 KiB slot here).
                let limit = deltas.byte_limit(st.live_leaf_bytes);
                assert!(
                    st.live_delta_bytes <= limit + (32 << 10),
                    "step {step}: {} bytes of live delta pages, limit {limit}",
                    st.live_delta_bytes
                );
            }
        }
    }
    s.flush().unwrap();
    check(&dev, &model, "at the end");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn base_and_delta_pages_recover_the_model_after_every_commit(
        ops in proptest::collection::vec(op(), 1..400)
    ) {
        run(&ops, Deltas { leaf_percent: 10, space_percent: 5, min_bytes: 1024, budget_percent: u32::MAX });
        run(&ops, Deltas::default());
    }
}

/// Reads of a key must not depend on whether its newest state is in a delta page: the
/// store reopened from delta pages takes further writes, commits and recovers again. Each
/// round reopens what a crash before the close leaves (a clean close folds the entries).
#[test]
fn a_store_recovered_from_delta_pages_keeps_using_them() {
    let mut dev = Arc::new(FaultStorage::new());
    let opts = common::test_options(SyncPolicy::Sync);
    let mut model = Model::new();
    for round in 0..4u16 {
        let s = Store::open_storage(dev.clone(), opts.clone()).unwrap();
        assert_eq!(contents(&s), model, "round {round}: {}", s.recovery());
        if round > 0 {
            assert!(s.recovery().delta_keys > 0, "{}", s.recovery());
        }
        for i in 0..200u16 {
            let k = (i * 37 + round * 11) % 500;
            let v = value(k, usize::from(round), if i % 25 == 0 { 3000 } else { 20 });
            s.put(&key(k), &v).unwrap();
            model.insert(key(k), (v, 0));
            if i % 9 == 0 {
                s.delete(&key(k / 2)).unwrap();
                model.remove(&key(k / 2));
            }
        }
        let st = s.stats();
        assert!(st.delta_pages_written > 0 && st.delta_keys > 0, "{st:?}");
        let image = dev.durable_image();
        drop(s);
        dev = Arc::new(FaultStorage::from_image(image));
    }
}

/// A delta page stays live while any of its entries is a key's newest state, even after
/// its other entries were superseded and its neighbours' slots reused.
#[test]
fn a_delta_page_lives_while_one_entry_does() {
    let dev = Arc::new(FaultStorage::new());
    let s = Store::open_storage(dev.clone(), common::test_options(SyncPolicy::Sync)).unwrap();
    // Whole leaves first, so that later single writes go to delta pages.
    let mut model = Model::new();
    for k in 0..400u16 {
        let v = value(k, 0, 20);
        s.put(&key(k), &v).unwrap();
        model.insert(key(k), (v, 0));
    }
    let t = s.tree();
    for round in 1..40usize {
        // Two keys far apart (two leaves) in one commit: one delta page with two entries.
        let batch = [(round as u16 * 7) % 400, (round as u16 * 7 + 200) % 400];
        let vals: Vec<Vec<u8>> = batch.iter().map(|&k| value(k, round, 20)).collect();
        let keys: Vec<Vec<u8>> = batch.iter().map(|&k| key(k)).collect();
        let items: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(&vals)
            .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
            .collect();
        let w = t.write_batch(&items).unwrap();
        s.durability().wait(w.version).unwrap();
        for (k, v) in keys.into_iter().zip(vals) {
            model.insert(k, (v, 0));
        }
        // Supersede the first; the page must keep providing the second.
        let v = value(batch[0], round + 1000, 20);
        s.put(&key(batch[0]), &v).unwrap();
        model.insert(key(batch[0]), (v, 0));
    }
    assert!(s.stats().delta_keys > 20, "{:?}", s.stats());
    check(&dev, &model, "after the rounds");
}
