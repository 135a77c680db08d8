//! Expiry deadlines in the store: invisible to every read once past (get, scan, scan_floor,
//! snapshots, the latest-value read), exact at the boundary, kept through log merges,
//! splits and out-of-line values, counted, and removed by `purge_expired` only when still
//! expired. A model test checks random writes with deadlines against a `BTreeMap`.

use accelkv_tree::{now_ms, BatchItem, Config, Store};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn small() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    }
}

const PAST: u64 = 1_000; // 1970: long expired
const FUTURE: u64 = 32_503_680_000_000; // year 3000

#[test]
fn expired_items_are_invisible_to_every_read() {
    let s = Store::new(small()).unwrap();
    s.put(b"a", b"1").unwrap();
    s.put_expiring(b"b", b"2", PAST).unwrap();
    s.put_expiring(b"c", b"3", FUTURE).unwrap();
    assert_eq!(s.get(b"b").unwrap(), None);
    assert_eq!(s.get_entry(b"b").unwrap(), None);
    assert_eq!(s.get_latest(b"b").unwrap(), None);
    assert_eq!(s.get_entry(b"c").unwrap(), Some((b"3".to_vec(), FUTURE)));
    assert_eq!(s.get_entry(b"a").unwrap(), Some((b"1".to_vec(), 0)));
    let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| v.into_iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(keys(s.scan(b"", None, 10)), [b"a".to_vec(), b"c".to_vec()]);
    // The floor of "bz" skips the expired "b".
    assert_eq!(
        keys(s.scan_floor(b"bz", b"z", 10)),
        [b"a".to_vec(), b"c".to_vec()]
    );
    let snap = s.snapshot();
    assert_eq!(snap.get(b"b").unwrap(), None);
    assert_eq!(snap.scan(b"", None, 10).len(), 2);
    snap.leaf(b"b", |l| assert_eq!(l.items.len(), 2)).unwrap();
    drop(snap);
    // Counted until the sweep removes it, as Redis's DBSIZE does.
    assert_eq!((s.len(), s.expiring_len()), (3, 2));
    assert!(s.purge_expired(b"b", now_ms()).unwrap());
    assert!(!s.purge_expired(b"c", now_ms()).unwrap());
    assert!(!s.purge_expired(b"a", now_ms()).unwrap());
    assert!(!s.purge_expired(b"zz", now_ms()).unwrap());
    assert_eq!((s.len(), s.expiring_len()), (2, 1));
}

#[test]
fn expiry_is_exact_at_the_boundary() {
    let s = Store::new(small()).unwrap();
    let d = now_ms() + 150;
    s.put_expiring(b"k", b"v", d).unwrap();
    // Redis's rule: present at the deadline, gone one millisecond later.
    let at = |now| s.get_entry_with(b"k", now, |v, d| (v.to_vec(), d)).unwrap();
    assert_eq!(at(d - 1), Some((b"v".to_vec(), d)));
    assert_eq!(at(d), Some((b"v".to_vec(), d)));
    assert_eq!(at(d + 1), None);
    // And by the store's own clock.
    assert!(s.get(b"k").unwrap().is_some());
    while now_ms() <= d {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(s.get(b"k").unwrap(), None);
    assert!(s.scan(b"", None, 10).is_empty());
}

#[test]
fn writes_over_expired_items_count_as_absent() {
    let s = Store::new(small()).unwrap();
    s.put_expiring(b"k", b"old", PAST).unwrap();
    // A put over an expired value did not replace a live one; a delete deleted nothing
    // live; an update finds nothing.
    assert!(!s.put(b"k", b"new").unwrap().existed);
    assert_eq!(s.get(b"k").unwrap(), Some(b"new".to_vec()));
    assert_eq!(s.expiring_len(), 0);
    s.put_expiring(b"k", b"x", PAST).unwrap();
    assert!(s.update(b"k", b"y").is_err());
    assert!(!s.delete(b"k").unwrap().existed);
    assert_eq!((s.len(), s.expiring_len()), (0, 0));
    // A purge loses to a writer that gave the key a new life.
    s.put_expiring(b"j", b"1", PAST).unwrap();
    s.put_expiring(b"j", b"2", FUTURE).unwrap();
    assert!(!s.purge_expired(b"j", now_ms()).unwrap());
    assert_eq!(s.get(b"j").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn deadlines_survive_merges_splits_and_out_of_line_values() {
    let s = Store::new(small()).unwrap();
    let big = vec![7u8; 2000];
    for i in 0..4000u32 {
        let k = format!("key{i:06}");
        let v: &[u8] = if i % 10 == 0 { &big } else { k.as_bytes() };
        let d = match i % 3 {
            0 => 0,
            1 => PAST,
            _ => FUTURE + u64::from(i),
        };
        s.put_expiring(k.as_bytes(), v, d).unwrap();
    }
    assert!(s.stats().splits > 0);
    for i in 0..4000u32 {
        let k = format!("key{i:06}");
        let got = s.get_entry(k.as_bytes()).unwrap();
        match i % 3 {
            1 => assert_eq!(got, None, "{k}"),
            r => {
                let (v, d) = got.expect("present");
                assert_eq!(d, if r == 0 { 0 } else { FUTURE + u64::from(i) });
                assert_eq!(v.len(), if i % 10 == 0 { 2000 } else { k.len() });
            }
        }
    }
    let live = s.scan(b"", None, usize::MAX).len();
    assert_eq!(live, (0..4000).filter(|i| i % 3 != 1).count());
    assert_eq!(s.expiring_len(), (0..4000).filter(|i| i % 3 != 0).count());
}

#[test]
fn batches_carry_deadlines() {
    let s = Store::new(small()).unwrap();
    let items: Vec<BatchItem<'_>> = vec![
        (b"a", Some((b"1", FUTURE))),
        (b"b", Some((b"2", PAST))),
        (b"c", Some((b"3", 0))),
    ];
    let b = s.write_batch_expiring_unwaited(&items).unwrap();
    s.wait_visible(b.version);
    assert_eq!(s.get_entry(b"a").unwrap(), Some((b"1".to_vec(), FUTURE)));
    assert_eq!(s.get(b"b").unwrap(), None);
    assert_eq!(s.get_entry(b"c").unwrap(), Some((b"3".to_vec(), 0)));
}

#[test]
fn bulk_load_keeps_deadlines() {
    let items = (0..3000u32).map(|i| {
        let d = if i % 2 == 0 { PAST } else { FUTURE };
        (format!("k{i:05}").into_bytes(), b"v".to_vec(), d)
    });
    let s = Store::bulk_load_expiring(small(), items).unwrap();
    assert_eq!(s.len(), 3000);
    assert_eq!(s.expiring_len(), 3000);
    assert_eq!(s.scan(b"", None, usize::MAX).len(), 1500);
    assert_eq!(
        s.get_entry(b"k00001").unwrap(),
        Some((b"v".to_vec(), FUTURE))
    );
}

#[derive(Clone, Debug)]
enum Step {
    Put(u16, u8, u8),
    Delete(u16),
    Purge(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u16..300, 0u8..3, 0u8..4).prop_map(|(k, d, l)| Step::Put(k, d, l)),
        1 => (0u16..300).prop_map(Step::Delete),
        1 => (0u16..300).prop_map(Step::Purge),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random puts (no deadline, expired, far future; values inline and out of line),
    /// deletes and purges against a model: every read agrees, and the counters too.
    #[test]
    fn store_matches_model(steps in proptest::collection::vec(step(), 1..1500)) {
        let s = Store::new(small()).unwrap();
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, u64)> = BTreeMap::new();
        for st in steps {
            match st {
                Step::Put(k, d, l) => {
                    let key = format!("k{k:04}").into_bytes();
                    let val = vec![b'v'; [1usize, 30, 300, 1000][usize::from(l)]];
                    let dl = [0, PAST, FUTURE][usize::from(d)];
                    let live_before = model.get(&key).is_some_and(|x| x.1 != PAST);
                    prop_assert_eq!(s.put_expiring(&key, &val, dl).unwrap().existed, live_before);
                    model.insert(key, (val, dl));
                }
                Step::Delete(k) => {
                    let key = format!("k{k:04}").into_bytes();
                    let live_before = model.get(&key).is_some_and(|x| x.1 != PAST);
                    prop_assert_eq!(s.delete(&key).unwrap().existed, live_before);
                    model.remove(&key);
                }
                Step::Purge(k) => {
                    let key = format!("k{k:04}").into_bytes();
                    let expired = model.get(&key).is_some_and(|x| x.1 == PAST);
                    prop_assert_eq!(s.purge_expired(&key, now_ms()).unwrap(), expired);
                    if expired {
                        model.remove(&key);
                    }
                }
            }
        }
        let live: Vec<_> = model
            .iter()
            .filter(|(_, (_, d))| *d != PAST)
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect();
        prop_assert_eq!(s.scan(b"", None, usize::MAX), live);
        for (k, (v, d)) in &model {
            let want = (*d != PAST).then(|| (v.clone(), *d));
            prop_assert_eq!(s.get_entry(k).unwrap(), want);
        }
        prop_assert_eq!(s.len(), model.len());
        prop_assert_eq!(s.expiring_len(), model.values().filter(|x| x.1 != 0).count());
    }
}
