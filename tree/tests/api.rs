//! The public API: typed errors on bad input, update/delete semantics, snapshots, bulk load,
//! stats, out-of-line values and the memory limit.

use accelkv_tree::{Config, Error, Store};

fn store() -> Store {
    Store::new(Config {
        chunk_size: 1 << 20,
        ..Config::default()
    })
    .unwrap()
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let s = store();
    assert_eq!(s.put(b"", b"v"), Err(Error::EmptyKey));
    assert_eq!(s.get(b""), Err(Error::EmptyKey));
    let long = vec![b'k'; 461];
    assert_eq!(
        s.put(&long, b"v"),
        Err(Error::KeyTooLong { len: 461, max: 460 })
    );
    assert_eq!(s.get(&long), Err(Error::KeyTooLong { len: 461, max: 460 }));
    let big = vec![0u8; (1 << 20) + 1];
    assert_eq!(
        s.put(b"k", &big),
        Err(Error::ValueTooLarge {
            len: big.len(),
            max: 1 << 20
        })
    );
    assert_eq!(s.update(b"k", b"v"), Err(Error::NotFound));
    assert!(!s.delete(b"k").unwrap().existed);
    assert!(s.is_empty());
    assert_eq!(s.read_version(), 0, "failed writes take no version");
    // Maximum sizes are accepted.
    let max_key = vec![b'k'; 460];
    s.put(&max_key, &vec![1u8; 1 << 20]).unwrap();
    assert_eq!(s.get(&max_key).unwrap().map(|v| v.len()), Some(1 << 20));
    assert!(Error::KeyTooLong { len: 461, max: 460 }
        .to_string()
        .contains("461"));
}

#[test]
fn put_update_delete_semantics() {
    let s = store();
    let w1 = s.put(b"a", b"1").unwrap();
    assert!(!w1.existed);
    let w2 = s.put(b"a", b"2").unwrap();
    assert!(w2.existed && w2.version > w1.version);
    let w3 = s.update(b"a", b"3").unwrap();
    assert!(w3.existed);
    assert_eq!(s.get(b"a").unwrap(), Some(b"3".to_vec()));
    assert!(s.delete(b"a").unwrap().existed);
    assert_eq!(s.get(b"a").unwrap(), None);
    assert_eq!(s.update(b"a", b"4"), Err(Error::NotFound));
    assert_eq!(s.len(), 0);
    assert!(s.read_version() > w3.version);
}

#[test]
fn snapshots_are_stable() {
    let s = store();
    for i in 0..2000u32 {
        s.put(format!("k{i:05}").as_bytes(), b"old").unwrap();
    }
    let snap = s.snapshot();
    for i in 0..2000u32 {
        if i % 2 == 0 {
            s.put(format!("k{i:05}").as_bytes(), b"new").unwrap();
        } else {
            s.delete(format!("k{i:05}").as_bytes()).unwrap();
        }
    }
    for i in 2000..4000u32 {
        s.put(format!("k{i:05}").as_bytes(), b"new").unwrap();
    }
    let all = snap.scan(b"", None, usize::MAX);
    assert_eq!(all.len(), 2000);
    assert!(all.iter().all(|(_, v)| v == b"old"));
    assert_eq!(snap.get(b"k00001").unwrap(), Some(b"old".to_vec()));
    assert_eq!(s.get(b"k00001").unwrap(), None);
    assert_eq!(s.scan(b"", None, usize::MAX).len(), 3000);
    let floor = snap.scan_floor(b"k00001x", b"k00003", 10);
    let keys: Vec<_> = floor.iter().map(|x| x.0.clone()).collect();
    assert_eq!(
        keys,
        vec![b"k00001".to_vec(), b"k00002".to_vec(), b"k00003".to_vec()]
    );
}

#[test]
fn scan_floor_semantics() {
    let s = store();
    for k in [b"b", b"d", b"f"] {
        s.put(k, k).unwrap();
    }
    let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| v.into_iter().map(|x| x.0).collect::<Vec<_>>();
    // Starts at the largest key <= kl ...
    assert_eq!(
        keys(s.scan_floor(b"c", b"e", 10)),
        vec![b"b".to_vec(), b"d".to_vec()]
    );
    // ... which may be kl itself ...
    assert_eq!(keys(s.scan_floor(b"d", b"d", 10)), vec![b"d".to_vec()]);
    // ... or the first key when none is <= kl; ku is inclusive.
    assert_eq!(keys(s.scan_floor(b"a", b"b", 10)), vec![b"b".to_vec()]);
    assert_eq!(keys(s.scan_floor(b"z", b"zz", 10)), vec![b"f".to_vec()]);
    assert_eq!(keys(s.scan_floor(b"c", b"f", 2)).len(), 2);
    // Deleted keys are skipped when looking for the floor.
    s.delete(b"b").unwrap();
    assert_eq!(keys(s.scan_floor(b"c", b"d", 10)), vec![b"d".to_vec()]);
}

#[test]
fn scan_floor_crosses_empty_leaves() {
    let s = Store::new(Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        merge_below_pct: 0,
        ..Config::default()
    })
    .unwrap();
    for i in 0..5000u32 {
        s.put(format!("{i:06}").as_bytes(), &[0u8; 40]).unwrap();
    }
    // Delete a long run so several leaves are empty (node merges off), then ask for the
    // floor of a key inside the run.
    for i in 100..4000u32 {
        s.delete(format!("{i:06}").as_bytes()).unwrap();
    }
    let r = s.scan_floor(b"003000", b"004001", 10);
    let keys: Vec<_> = r
        .iter()
        .map(|x| String::from_utf8(x.0.clone()).unwrap())
        .collect();
    assert_eq!(keys, vec!["000099", "004000", "004001"]);
}

#[test]
fn bulk_load_and_stats() {
    let n = 200_000u32;
    let items = (0..n).map(|i| (format!("user{i:010}"), format!("value{i:011}")));
    let s = Store::bulk_load(
        Config {
            chunk_size: 1 << 20,
            ..Config::default()
        },
        items,
    )
    .unwrap();
    assert_eq!(s.len(), n as usize);
    let st = s.stats();
    assert_eq!(st.items, u64::from(n));
    assert_eq!(st.raw_bytes, u64::from(n) * 30);
    assert!(st.depth >= 2);
    // 34 bytes an item in the sorted block, 3 in the tail (fingerprint and slot), leaves
    // filled to `bulk_fill_pct` of their capacity.
    assert!(st.bytes_per_item < 1.7 * 30.0, "{st:?}");
    // The O(1) summary agrees with the walk on what it keeps counted.
    let sum = s.summary();
    assert_eq!((sum.items, sum.depth), (st.items, st.depth));
    assert_eq!(sum.out_of_line_bytes, st.out_of_line_bytes);
    assert!(sum.node_bytes >= st.node_bytes, "{sum:?} {st:?}");
    assert_eq!(
        s.get(b"user0000012345").unwrap(),
        Some(b"value00000012345".to_vec())
    );
    let r = s.scan(b"user0000199998", None, 10);
    assert_eq!(r.len(), 2);
    // Writes after a bulk load work as on any store.
    s.put(b"user0000012345x", b"v").unwrap();
    s.delete(b"user0000000000").unwrap();
    assert_eq!(s.len(), n as usize);
    assert_eq!(s.scan(b"", None, 1)[0].0, b"user0000000001");
    for i in 100_000..101_000u32 {
        s.delete(format!("user{i:010}").as_bytes()).unwrap();
    }
    assert_eq!(s.summary().items, s.stats().items);
    assert_eq!(s.summary().depth, s.stats().depth);
}

#[test]
fn bulk_load_rejects_bad_input() {
    let cfg = Config {
        chunk_size: 1 << 20,
        ..Config::default()
    };
    let unsorted = vec![
        (b"b".to_vec(), b"1".to_vec()),
        (b"a".to_vec(), b"2".to_vec()),
    ];
    assert_eq!(
        Store::bulk_load(cfg.clone(), unsorted).err(),
        Some(Error::Unsorted { index: 1 })
    );
    let dup = vec![
        (b"a".to_vec(), vec![0u8; 600]),
        (b"a".to_vec(), b"2".to_vec()),
    ];
    assert_eq!(
        Store::bulk_load(cfg.clone(), dup).err(),
        Some(Error::Unsorted { index: 1 })
    );
    let empty_key = vec![(Vec::new(), b"1".to_vec())];
    assert_eq!(
        Store::bulk_load(cfg.clone(), empty_key).err(),
        Some(Error::EmptyKey)
    );
    let none: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let s = Store::bulk_load(cfg, none).unwrap();
    assert!(s.is_empty());
    s.put(b"x", b"y").unwrap();
    assert_eq!(s.get(b"x").unwrap(), Some(b"y".to_vec()));
}

#[test]
fn out_of_line_values_round_trip_through_merges() {
    let s = Store::new(Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    })
    .unwrap();
    for round in 0..3u8 {
        for i in 0..300u32 {
            let v = vec![round.wrapping_add(i as u8); 470 + (i as usize * 37) % 5000];
            s.put(format!("big{i:04}").as_bytes(), &v).unwrap();
        }
    }
    for i in 0..300u32 {
        let v = s.get(format!("big{i:04}").as_bytes()).unwrap().unwrap();
        assert_eq!(v.len(), 470 + (i as usize * 37) % 5000);
        assert!(v.iter().all(|b| *b == 2u8.wrapping_add(i as u8)));
    }
    let st = s.stats();
    let live: u64 = (0..300u64).map(|i| 470 + (i * 37) % 5000).sum();
    // Replaced values are freed once no reader can reach them: at most one merge's worth
    // of old values may still wait for reclamation.
    assert!(
        st.out_of_line_bytes >= live && st.out_of_line_bytes < live * 2,
        "{st:?}"
    );
}

/// A value handed over as its own allocation is kept as it is: the item's value is that
/// memory (no copy), counted, replaced and freed like a copied one; a small one is stored
/// inline; over the limits it is refused with the copied path's errors.
#[test]
fn owned_values_are_kept_without_a_copy() {
    let s = Store::new(Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        memory_limit: 8 << 20,
        max_value: 4 << 20,
        ..Config::default()
    })
    .unwrap();
    let big: Box<[u8]> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let at = big.as_ptr();
    let w = s.put_item_owned_hinted(b"big", big, 0, 7, None).unwrap();
    assert!(!w.existed);
    let same = s
        .get_with(b"big", |b| (b.as_ptr(), b.len()))
        .unwrap()
        .unwrap();
    assert_eq!(
        same,
        (at, 200_000),
        "the stored value is the handed-over memory"
    );
    assert_eq!(s.stats().out_of_line_bytes, 200_000);
    let small: Box<[u8]> = b"small".as_slice().into();
    assert!(
        s.put_item_owned_hinted(b"big", small, 0, 0, None)
            .unwrap()
            .existed
    );
    assert_eq!(s.get(b"big").unwrap().as_deref(), Some(&b"small"[..]));
    for i in 0..20u8 {
        let v: Box<[u8]> = vec![i; 100_000].into();
        s.put_item_owned_hinted(&[b'k', i], v, 0, 0, None).unwrap();
    }
    for i in 0..20u8 {
        let v = s.get(&[b'k', i]).unwrap().unwrap();
        assert!(v.len() == 100_000 && v.iter().all(|b| *b == i));
    }
    let too_long: Box<[u8]> = vec![0; (4 << 20) + 1].into();
    assert!(matches!(
        s.put_item_owned_hinted(b"x", too_long, 0, 0, None),
        Err(Error::ValueTooLarge { .. })
    ));
    let over: Box<[u8]> = vec![0; 4 << 20].into();
    let _ = s.put_item_owned_hinted(b"y", vec![1; 3 << 20].into(), 0, 0, None);
    assert_eq!(
        s.put_item_owned_hinted(b"z", over, 0, 0, None),
        Err(Error::OutOfMemory { limit: 8 << 20 })
    );
    assert_eq!(s.get(b"z").unwrap(), None);
}

/// Values stored out of line count against the limit too.
#[test]
fn memory_limit_covers_out_of_line_values() {
    let s = Store::new(Config {
        node_size: 4096,
        chunk_size: 4096 * 4,
        memory_limit: 1 << 20,
        ..Config::default()
    })
    .unwrap();
    let big = vec![7u8; 3000];
    let mut stopped = None;
    for i in 0..10_000u32 {
        if let Err(e) = s.put(format!("{i:08}").as_bytes(), &big) {
            stopped = Some((i, e));
            break;
        }
    }
    let (n, e) = stopped.expect("30 MB of values under a 1 MiB limit");
    assert_eq!(e, Error::OutOfMemory { limit: 1 << 20 });
    assert!(
        (200..=350).contains(&n),
        "stopped after {n} values of 3,000 bytes"
    );
    assert_eq!(s.get(b"00000000").unwrap(), Some(big));
}

#[test]
fn memory_limit_is_a_clear_error() {
    let s = Store::new(Config {
        node_size: 4096,
        chunk_size: 4096 * 4,
        memory_limit: 4096 * 16,
        ..Config::default()
    })
    .unwrap();
    let mut err = None;
    for i in 0..100_000u32 {
        if let Err(e) = s.put(format!("{i:08}").as_bytes(), &[0u8; 100]) {
            err = Some((i, e));
            break;
        }
    }
    let (stopped_at, e) = err.expect("the limit is reached");
    assert_eq!(e, Error::OutOfMemory { limit: 4096 * 16 });
    // Nothing acknowledged was lost and the store stays readable.
    for i in 0..stopped_at {
        assert!(
            s.get(format!("{i:08}").as_bytes()).unwrap().is_some(),
            "key {i}"
        );
    }
    assert_eq!(s.get(format!("{stopped_at:08}").as_bytes()).unwrap(), None);
    assert_eq!(s.len(), stopped_at as usize);
    // Deleting makes room again (emptied leaves merge away).
    for i in 0..stopped_at {
        s.delete(format!("{i:08}").as_bytes()).unwrap();
    }
    let st = s.stats();
    s.put(b"after", b"ok")
        .unwrap_or_else(|e| panic!("{e}: {st:?}"));
}

#[test]
fn invalid_config_is_rejected() {
    for cfg in [
        Config {
            node_size: 1000,
            ..Config::default()
        },
        Config {
            max_key: 500,
            ..Config::default()
        },
        Config {
            chunk_size: 5000,
            ..Config::default()
        },
        Config {
            bulk_fill_pct: 5,
            ..Config::default()
        },
    ] {
        assert!(matches!(Store::new(cfg), Err(Error::InvalidConfig(_))));
    }
}

/// A snapshot's leaves, walked by their fences, partition the key space: every item is in
/// exactly one leaf, inside its fences, and the images hold the snapshot's items even while
/// later writes split and merge those leaves.
#[test]
fn leaf_images_partition_the_key_space() {
    let s = Store::new(Config {
        node_size: 4096,
        ..Config::default()
    })
    .unwrap();
    for i in 0..5000u32 {
        s.put(format!("k{:06}", i * 7 % 5000).as_bytes(), &[i as u8; 40])
            .unwrap();
    }
    let snap = s.snapshot();
    let expected = snap.scan(b"", None, usize::MAX);
    // Writes after the snapshot change the newest leaves, not the snapshot's.
    for i in 0..2500u32 {
        s.delete(format!("k{:06}", i * 2).as_bytes()).unwrap();
        s.put(format!("x{i}").as_bytes(), b"later").unwrap();
    }
    let mut got: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut lids = std::collections::HashSet::new();
    let mut probe: Vec<u8> = Vec::new();
    let mut leaves = 0;
    loop {
        let (next, this) = snap
            .leaf(&probe, |leaf| {
                assert!(lids.insert(leaf.lid), "leaf {} seen twice", leaf.lid);
                assert_eq!(
                    leaf.low.map(|l| l.to_vec()),
                    (!probe.is_empty()).then(|| probe.clone())
                );
                for (k, v, ..) in &leaf.items {
                    assert!(leaf.low.is_none_or(|l| l <= *k));
                    assert!(leaf.high.is_none_or(|h| *k < h));
                    got.push((k.to_vec(), v.to_vec()));
                }
                (leaf.high.map(|h| h.to_vec()), leaf.lid)
            })
            .unwrap();
        leaves += 1;
        // A key inside the leaf (not a fence) finds the same leaf.
        let mut inside = probe.clone();
        inside.push(0);
        let (lid, high) = snap
            .leaf(&inside, |l| (l.lid, l.high.map(<[u8]>::to_vec)))
            .unwrap();
        assert_eq!(lid, this, "{inside:?} routed to another leaf");
        assert_eq!(high, next, "{inside:?} got other fences");
        match next {
            Some(h) => probe = h,
            None => break,
        }
    }
    assert!(
        leaves > 10,
        "the test wants a tree with many leaves ({leaves})"
    );
    assert_eq!(got, expected);
}
