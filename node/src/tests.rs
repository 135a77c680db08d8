//! Round-trip, boundary and model tests of the node format.

use crate::layout::*;
use crate::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn geo(node_size: usize) -> Geometry {
    Geometry {
        node_size,
        ..Geometry::default()
    }
}

fn meta(version: u64) -> NodeMeta {
    NodeMeta {
        version,
        old: NO_BUFFER,
        link: 0,
        left: 0,
        level: 0,
        lock: 0,
    }
}

fn leaf(g: &Geometry, items: &[(Vec<u8>, Vec<u8>)], version: u64) -> Vec<u8> {
    let with: Vec<_> = items
        .iter()
        .map(|(k, v)| (k.clone(), v.clone(), 0))
        .collect();
    leaf_flagged(g, &with, version, false)
}

/// The client flags the model tests give an item: a function of its key and deadline, so
/// the model need not keep them (0, no flags, for a third of the items).
fn flags_of(key: &[u8], deadline: u64) -> u32 {
    let h = key
        .iter()
        .fold(deadline as u32, |h, &b| h.wrapping_mul(31) ^ u32::from(b));
    if h % 3 == 0 {
        0
    } else {
        h | 1
    }
}

/// A leaf of (key, value, deadline) items, with [`flags_of`] flags when `flagged`.
fn leaf_flagged(
    g: &Geometry,
    items: &[(Vec<u8>, Vec<u8>, u64)],
    version: u64,
    flagged: bool,
) -> Vec<u8> {
    let refs: Vec<(&[u8], ValueRef)> = items
        .iter()
        .map(|(k, v, d)| {
            (
                k.as_slice(),
                ValueRef::inline(v.as_slice())
                    .with_deadline(*d)
                    .with_flags(if flagged { flags_of(k, *d) } else { 0 }),
            )
        })
        .collect();
    let mut buf = vec![0u8; g.node_size];
    build_leaf(&mut buf, g, &refs, &meta(version)).expect("fits");
    validate_node(&buf).expect("valid");
    buf
}

fn view(buf: &[u8]) -> NodeView<'_> {
    NodeView::from_node(buf)
}

/// Appends a log entry as the tree's writer does; false when it does not fit.
fn append(buf: &mut [u8], key: &[u8], value: Option<&[u8]>, version: u64) -> bool {
    append_item(buf, key, value, 0, 0, version)
}

/// [`append`] with a deadline and client flags for the value.
fn append_item(
    buf: &mut [u8],
    key: &[u8],
    value: Option<&[u8]>,
    deadline: u64,
    flags: u32,
    version: u64,
) -> bool {
    let v = value.map(|v| {
        ValueRef::inline(v)
            .with_deadline(deadline)
            .with_flags(flags)
    });
    append_owned(buf, key, v.as_ref(), version)
}

fn collect(v: &NodeView<'_>, rv: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    collect_at(v, rv, 0)
}

fn collect_at(v: &NodeView<'_>, rv: u64, now: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    v.leaf_iter(rv, now)
        .map(|(k, val)| match val.data {
            ValueData::Inline(b) => (k.to_vec(), b.to_vec()),
            ValueData::OutOfLine { .. } => panic!("unexpected out-of-line value"),
        })
        .collect()
}

fn kv(i: u32) -> (Vec<u8>, Vec<u8>) {
    (
        format!("key{i:08}").into_bytes(),
        format!("val{i:08}").into_bytes(),
    )
}

#[test]
fn empty_leaf() {
    let g = geo(8192);
    let buf = leaf(&g, &[], 7);
    let v = view(&buf);
    assert!(v.is_leaf());
    assert_eq!(v.version(), 7);
    assert_eq!(v.shortcut_count(), 0);
    assert_eq!(v.sorted_len(), 0);
    assert_eq!(v.log_len(), 0);
    assert_eq!(v.used(), g.sorted_start());
    assert!(v.leaf_iter(u64::MAX, 0).next().is_none());
    assert_eq!(v.leaf_get(b"a", 7, 0), None);
    assert_eq!(v.leaf_floor(b"a", 7, 0), None);
}

#[test]
fn header_round_trip() {
    let g = geo(16384);
    let mut buf = vec![0u8; g.node_size];
    let m = NodeMeta {
        version: 0x0102_0304_0506_0708,
        old: 0x1122_3344,
        link: MAX_LID,
        left: 42,
        level: 0,
        lock: 5,
    };
    let used_bytes = build_leaf(&mut buf, &g, &[], &m).expect("fits");
    let word = u64::from_le_bytes(buf[0..8].try_into().expect("8"));
    assert_eq!(lock_of(word), 5);
    assert_eq!(used_of(word), used_bytes);
    assert_eq!(u64::from_le_bytes(buf[8..16].try_into().expect("8")), 42);
    let v = view(&buf);
    assert_eq!(v.version(), m.version);
    assert_eq!(v.old_version(), m.old);
    assert_eq!(v.link(), MAX_LID);
    assert_eq!(v.node_size(), 16384);
    assert_eq!(v.sorted_start(), g.sorted_start());
}

#[test]
fn leaf_round_trip_and_search() {
    let g = geo(8192);
    let items: Vec<_> = (0..150).map(|i| kv(i * 2)).collect();
    let buf = leaf(&g, &items, 1);
    let v = view(&buf);
    assert!(v.shortcut_count() > 5, "shortcuts: {}", v.shortcut_count());
    assert_eq!(collect(&v, 1), items);
    for i in 0..300u32 {
        let (k, val) = kv(i);
        let got = v.leaf_get(&k, 1, 0);
        if i % 2 == 0 {
            assert_eq!(got, Some(ValueRef::inline(&val[..])), "key {i}");
        } else {
            assert_eq!(got, None);
        }
        let floor = v.leaf_floor(&k, 1, 0).map(|f| f.to_vec());
        assert_eq!(floor, Some(kv(i - i % 2).0));
        let lb: Vec<_> = v
            .leaf_lower_bound(&k, 1, 0)
            .map(|(k, _)| k.to_vec())
            .collect();
        let want: Vec<_> = items
            .iter()
            .filter(|(ik, _)| *ik >= k)
            .map(|x| x.0.clone())
            .collect();
        assert_eq!(lb, want);
    }
    // Segments respect the minimum size and the shortcut block bound.
    let sc = v.shortcuts();
    for w in sc.windows(2) {
        assert!(w[1].0 - w[0].0 >= g.min_segment);
    }
    let sc_bytes: usize = sc.iter().map(|(_, k)| 4 + k.len()).sum();
    assert!(sc_bytes <= g.shortcut_size);
}

#[test]
fn maximum_size_key_and_value() {
    let g = geo(8192);
    let items: Vec<_> = (0..5u8)
        .map(|i| (vec![i; MAX_KEY], vec![i; g.max_inline_value]))
        .collect();
    let buf = leaf(&g, &items, 3);
    assert_eq!(collect(&view(&buf), 3), items);
    // Interior node with maximum separators.
    let entries: Vec<(Vec<u8>, u64)> = (1..6u8)
        .map(|i| (vec![i; MAX_KEY], u64::from(i) + 100))
        .collect();
    let refs: Vec<(&[u8], u64)> = entries.iter().map(|(k, c)| (k.as_slice(), *c)).collect();
    let mut ibuf = vec![0u8; g.node_size];
    let m = NodeMeta {
        link: 99,
        level: 1,
        ..meta(0)
    };
    build_interior(&mut ibuf, &g, &refs, &m).expect("fits");
    validate_node(&ibuf).expect("valid");
    let iv = view(&ibuf);
    assert_eq!(iv.child_for(&[0]), 99);
    assert_eq!(iv.child_for(&vec![3; MAX_KEY]), 103);
    assert_eq!(iv.child_for(&vec![3; MAX_KEY + 1]), 103);
    assert_eq!(iv.child_for(&[255]), 105);
}

#[test]
fn node_exactly_full() {
    // One item whose value is sized so the sorted block is exactly full, then one byte more.
    let g = Geometry {
        max_inline_value: 8000,
        ..geo(8192)
    };
    let cap = g.leaf_capacity();
    let key = b"k".to_vec();
    // The only item starts segment 0, so its key lives in the shortcut block: 2 + value in
    // the sorted block, and its slot in the tail.
    let slot = LEAF_SLOT_SIZE;
    let exact = vec![(key.clone(), vec![7u8; cap - 2 - slot])];
    let buf = leaf(&g, &exact, 1);
    assert_eq!(view(&buf).sorted_len(), cap - slot);
    let too_big = [(&key[..], ValueRef::inline(&[7u8; 8000][..cap - 1 - slot]))];
    let mut b2 = vec![0u8; g.node_size];
    let err = build_leaf(&mut b2, &g, &too_big, &meta(1)).unwrap_err();
    assert_eq!(
        err,
        Overflow {
            needed: cap + 1,
            capacity: cap
        }
    );
}

/// A leaf rebuilt from a page (the mirror cache) may use the room a merge keeps for the log
/// block: what a sorted block plus a full log block held fits in one sorted block.
#[test]
fn a_full_leaf_and_its_log_fit_in_one_rebuilt_sorted_block() {
    let g = geo(8192);
    let mut model = BTreeMap::new();
    // Sorted block near its capacity, then log appends until the log is past its
    // threshold, as a leaf looks just before its merge.
    let base: Vec<_> = (0..400u32).map(kv).collect();
    let mut n = 0;
    let mut bytes = 0;
    for (k, v) in &base {
        let size = leaf_item_size(k.len(), &ValueRef::inline(v));
        if bytes + size > g.leaf_capacity() {
            break;
        }
        bytes += size;
        n += 1;
    }
    let mut buf = leaf(&g, &base[..n], 1);
    for (k, v) in &base[..n] {
        model.insert(k.clone(), v.clone());
    }
    let mut version = 2;
    for i in 1000..1400u32 {
        let (k, v) = kv(i);
        if view(&buf).log_len() >= g.log_threshold || !append(&mut buf, &k, Some(&v), version) {
            break;
        }
        model.insert(k, v);
        version += 1;
    }
    let merged = collect(&view(&buf), u64::MAX);
    assert_eq!(merged.len(), model.len());
    let refs: Vec<(&[u8], ValueRef<'_>)> = merged
        .iter()
        .map(|(k, v)| (k.as_slice(), ValueRef::inline(v)))
        .collect();
    let mut b2 = vec![0u8; g.node_size];
    assert!(
        build_leaf(&mut b2, &g, &refs, &meta(version)).is_err(),
        "the test needs more items than a merge may put in a sorted block"
    );
    let used = build_leaf_full(&mut b2, &g, &refs, &meta(version)).unwrap();
    assert!(used <= g.node_size);
    // What the mirror's evictor checks before evicting such a leaf is exactly what the
    // rebuild used; the per-item upper bound (every key counted) says it would not fit.
    assert_eq!(leaf_sorted_bytes(&g, &refs), used - g.sorted_start());
    assert!(leaf_fits_full(&g, &refs));
    validate_node(&b2).unwrap();
    assert_eq!(collect(&view(&b2), u64::MAX), merged);
    for (k, v) in &model {
        assert_eq!(
            view(&b2).leaf_get(k, u64::MAX, 0).map(|x| x.data),
            Some(ValueData::Inline(v.as_slice()))
        );
    }
}

#[test]
fn order_hints_match_figure_7() {
    // Honeycomb figure 7: inserts 90, 60, 30, 45 get hints 0, 0, 0, 1; figure 8 sorts them.
    let g = geo(8192);
    let mut buf = leaf(&g, &[], 1);
    for (i, k) in [90u8, 60, 30, 45].iter().enumerate() {
        assert!(append(&mut buf, &[*k], Some(b"v"), 2 + i as u64));
    }
    let v = view(&buf);
    let hints: Vec<u8> = v.log_entries().map(|e| e.hint).collect();
    assert_eq!(hints, vec![0, 0, 0, 1]);
    let sorted: Vec<u8> = v
        .log_order()
        .as_slice()
        .iter()
        .map(|&o| v.log_entry(usize::from(o)).key[0])
        .collect();
    assert_eq!(sorted, vec![30, 45, 60, 90]);
    validate_node(&buf).expect("valid");
}

#[test]
fn log_block_at_threshold_and_versions() {
    let g = geo(8192);
    let base: Vec<_> = (0..100).map(|i| kv(i * 3)).collect();
    let mut buf = leaf(&g, &base, 10);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = base.iter().cloned().collect();
    let mut snapshots = vec![(10u64, model.clone())];
    let mut version = 10;
    let mut i = 0u32;
    while view(&buf).log_len() < g.log_threshold {
        version += 1;
        let (k, _) = kv(i * 7 % 300);
        if i % 5 == 4 {
            assert!(append(&mut buf, &k, None, version));
            model.remove(&k);
        } else {
            let val = format!("new{version}").into_bytes();
            assert!(append(&mut buf, &k, Some(&val), version));
            model.insert(k, val);
        }
        snapshots.push((version, model.clone()));
        i += 1;
    }
    validate_node(&buf).expect("valid");
    let v = view(&buf);
    assert!(v.log_len() >= g.log_threshold);
    for (rv, snap) in &snapshots {
        let want: Vec<_> = snap.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(collect(&v, *rv), want, "read version {rv}");
    }
}

#[test]
fn validate_rejects_garbage() {
    let g = geo(4096);
    let mut buf = leaf(&g, &(0..20).map(kv).collect::<Vec<_>>(), 1);
    buf[OFF_KIND] = 0xA5;
    assert!(validate_node(&buf).is_err());
    assert!(validate_node(&[0u8; 10]).is_err());
    assert!(validate_node(&vec![0xA5u8; 4096]).is_err());
}

#[derive(Clone, Debug)]
enum Op {
    /// Key, value length, deadline (0: none, else 100 + d).
    Put(u16, u16, u64),
    Del(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u16..64, 0u16..40, 0u64..8).prop_map(|(k, v, d)| Op::Put(k, v, d)),
        1 => (0u16..64).prop_map(Op::Del),
    ]
}

fn pkey(k: u16) -> Vec<u8> {
    // Keys of varied length that still sort by number.
    let mut key = format!("{k:03}").into_bytes();
    key.extend(std::iter::repeat_n(b'x', usize::from(k % 7) * 9));
    key
}

#[test]
fn deadlines_round_trip_inline_and_out_of_line() {
    let g = geo(4096);
    let items = [
        (
            &b"a"[..],
            ValueRef::inline(b"one").with_deadline(1_700_000_000_123),
        ),
        (
            &b"b"[..],
            ValueRef::out_of_line(0xdead_beef, 70_000).with_deadline(42),
        ),
        (&b"c"[..], ValueRef::out_of_line(0xfeed, 9)),
        (&b"d"[..], ValueRef::inline(b"")),
        (
            &b"e"[..],
            ValueRef::inline(b"flagged").with_flags(0xdead_beef),
        ),
        (
            &b"f"[..],
            ValueRef::out_of_line(0xf00d, 77)
                .with_deadline(1_700_000_000_000)
                .with_flags(1),
        ),
        (&b"g"[..], ValueRef::inline(b"").with_flags(u32::MAX)),
    ];
    let mut buf = vec![0u8; g.node_size];
    build_leaf(&mut buf, &g, &items, &meta(3)).expect("fits");
    validate_node(&buf).expect("valid");
    let v = view(&buf);
    let got: Vec<_> = v.leaf_iter(3, 0).collect();
    assert_eq!(got.len(), items.len());
    for ((k, want), (gk, gv)) in items.iter().zip(&got) {
        assert_eq!(k, gk);
        assert_eq!(want, gv);
    }
    // At 43 ms "b" is gone, at exactly its deadline it is not.
    assert!(v.leaf_get(b"b", 3, 42).is_some());
    assert!(v.leaf_get(b"b", 3, 43).is_none());
    assert_eq!(v.leaf_iter(3, 43).count(), items.len() - 1);
    // An expiring value with a zero deadline is corrupt.
    let mut bad = buf.clone();
    let body = v.sorted_items().next_item().expect("item").body;
    bad[body + 2..body + 10].fill(0);
    assert!(validate_node(&bad).is_err());
    // So is a flagged value whose flags are zero.
    let mut bad = buf.clone();
    let e = v.leaf_get(b"e", 3, 0).expect("e");
    assert_eq!(e.flags, 0xdead_beef);
    let mut it = v.sorted_items();
    let body = loop {
        let i = it.next_item().expect("item e");
        if i.key == b"e" {
            break i.body;
        }
    };
    bad[body + 2..body + 6].fill(0);
    assert!(validate_node(&bad).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Random base contents plus random log appends, some with deadlines: every read
    /// version, at every clock reading, sees exactly the model's state at that version
    /// without the items expired by then, through full iteration, get, floor and lower
    /// bound. An expired newest entry hides the key (it does not uncover an older one).
    #[test]
    fn leaf_matches_model(base in proptest::collection::btree_set(0u16..64, 0..40),
                          ops in proptest::collection::vec(op(), 0..60),
                          size in prop_oneof![Just(4096usize), Just(8192)]) {
        let g = geo(size);
        let deadline = |d: u64| if d == 0 { 0 } else { 100 + d };
        let items: Vec<_> = base
            .iter()
            .map(|k| (pkey(*k), vec![b'b'; usize::from(*k % 13)], deadline(u64::from(*k % 4))))
            .collect();
        let mut buf = leaf_flagged(&g, &items, 5, true);
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, u64)> =
            items.iter().map(|(k, v, d)| (k.clone(), (v.clone(), *d))).collect();
        let mut snaps = vec![(5u64, model.clone())];
        let mut version = 5;
        for op in ops {
            version += 1;
            let ok = match op {
                Op::Put(k, v, d) => {
                    let val = vec![b'v'; usize::from(v)];
                    let (dl, key) = (deadline(d), pkey(k));
                    let ok = append_item(&mut buf, &key, Some(&val), dl, flags_of(&key, dl), version);
                    if ok { model.insert(pkey(k), (val, deadline(d))); }
                    ok
                }
                Op::Del(k) => {
                    let ok = append(&mut buf, &pkey(k), None, version);
                    if ok { model.remove(&pkey(k)); }
                    ok
                }
            };
            if !ok { break; }
            snaps.push((version, model.clone()));
        }
        validate_node(&buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let v = view(&buf);
        // A merge's raw items are the newest items, expired ones included, with their
        // fingerprints; a leaf built from them is the leaf built from the decoded items.
        let mut raw: Vec<RawItem> = Vec::new();
        v.merge_items(&mut raw);
        let decoded: Vec<_> = v.leaf_iter(u64::MAX, 0).collect();
        prop_assert_eq!(raw.len(), decoded.len());
        for (r, (k, val)) in raw.iter().zip(&decoded) {
            prop_assert_eq!(r.key, *k);
            prop_assert_eq!(r.value_ref(), *val);
            prop_assert_eq!(r.fp, fingerprint(k));
            prop_assert_eq!(r.size(), leaf_item_size(k.len(), val));
        }
        let (mut a, mut b) = (vec![0u8; g.node_size], vec![0u8; g.node_size]);
        let from_raw = build_leaf_raw(&mut a, &g, &raw, &meta(version));
        let from_decoded = build_leaf(&mut b, &g, &decoded, &meta(version));
        prop_assert_eq!(from_raw.is_ok(), from_decoded.is_ok());
        if from_raw.is_ok() {
            prop_assert!(a == b, "the same leaf from raw and from decoded items");
        }
        for (rv, snap) in &snaps {
            for now in [0u64, 101, 103, 105, 107, 1000] {
                let live: BTreeMap<&Vec<u8>, &Vec<u8>> = snap
                    .iter()
                    .filter(|(_, (_, d))| *d == 0 || now <= *d)
                    .map(|(k, (v, _))| (k, v))
                    .collect();
                let want: Vec<_> = live.iter().map(|(k, v)| ((*k).clone(), (*v).clone())).collect();
                prop_assert_eq!(&collect_at(&v, *rv, now), &want);
                for probe in 0u16..66 {
                    let k = pkey(probe);
                    let got = v.leaf_get(&k, *rv, now);
                    prop_assert_eq!(got.map(|x| x.value_len()), live.get(&k).map(|x| x.len()));
                    // What an interleaved GET prefetches: a key the leaf answers always
                    // has a candidate, inside the node.
                    let cand = v.get_candidate(fingerprint(&k));
                    if got.is_some() {
                        prop_assert!(cand.is_some_and(|(_, at)| at < g.node_size));
                    }
                    // Going on from the candidate gives the whole lookup's answer.
                    let from = cand.and_then(|(c, _)| v.leaf_get_from(&k, fingerprint(&k), *rv, now, c));
                    prop_assert_eq!(from, got);
                    if let Some(x) = got {
                        prop_assert_eq!(x.deadline, snap[&k].1);
                        prop_assert_eq!(x.flags, flags_of(&k, snap[&k].1));
                    }
                    let floor = v.leaf_floor(&k, *rv, now).map(|f| f.to_vec());
                    prop_assert_eq!(floor, live.range::<&Vec<u8>, _>(..=&k).next_back().map(|x| (*x.0).clone()));
                    let lb: Vec<_> = v.leaf_lower_bound(&k, *rv, now).map(|(k, _)| k.to_vec()).collect();
                    let want_lb: Vec<_> = live.range::<&Vec<u8>, _>(&k..).map(|x| (*x.0).clone()).collect();
                    prop_assert_eq!(lb, want_lb);
                }
            }
        }
    }

    /// Flipping bytes of a valid node never makes validation panic, and a node that still
    /// validates can be iterated without panicking.
    #[test]
    fn validate_never_panics(flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8)) {
        let g = geo(4096);
        let mut buf = leaf(&g, &(0..30).map(kv).collect::<Vec<_>>(), 1);
        append(&mut buf, b"key00000003x", Some(b"zz"), 2);
        append(&mut buf, b"key00000005", None, 3);
        for (at, byte) in flips {
            buf[at] = byte;
        }
        if validate_node(&buf).is_ok() {
            let v = view(&buf);
            let _ = v.leaf_iter(u64::MAX, 0).count();
            let _ = v.leaf_floor(b"key00000010", u64::MAX, 105);
        }
    }
}

/// Keys whose fingerprints are all `fp` (found by trying numbered keys), in order.
fn colliding_keys(fp: u8, n: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0u32..)
        .map(|i| format!("c{i:07}").into_bytes())
        .filter(|k| fingerprint(k) == fp)
        .take(n)
        .collect();
    keys.sort();
    keys
}

/// Every key of a leaf has the same fingerprint: a lookup compares every key and still
/// finds exactly the right one, in the sorted block and in the log, and absent keys with the
/// same fingerprint are absent.
#[test]
fn lookups_are_right_when_every_fingerprint_collides() {
    let g = geo(8192);
    let keys = colliding_keys(fingerprint(b"c0000000"), 160);
    let (present, absent) = (&keys[..120], &keys[120..]);
    let items: Vec<_> = present
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(i, k)| (k.clone(), format!("s{i}").into_bytes()))
        .collect();
    let mut buf = leaf(&g, &items, 1);
    let mut version = 1;
    // Odd keys go to the log; every fourth even key is overwritten there, every eighth
    // deleted, until the log is full.
    for (i, k) in present.iter().enumerate() {
        let v = format!("l{i}").into_bytes();
        let value = match i % 8 {
            0 => None,
            2 | 6 => continue,
            _ => Some(v.as_slice()),
        };
        if !append(&mut buf, k, value, version + 1) {
            break;
        }
        version += 1;
    }
    validate_node(&buf).expect("valid");
    let v = view(&buf);
    let model: BTreeMap<Vec<u8>, Vec<u8>> = v
        .leaf_iter(version, 0)
        .map(|(k, x)| (k.to_vec(), x.data_bytes().to_vec()))
        .collect();
    assert!(
        model.len() > 40 && v.log_count() > 10,
        "{} items",
        model.len()
    );
    for k in present.iter().chain(absent) {
        let got = v.leaf_get(k, version, 0).map(|x| x.data_bytes().to_vec());
        assert_eq!(
            got.as_ref(),
            model.get(k),
            "key {}",
            String::from_utf8_lossy(k)
        );
    }
}

/// The log slots bound the log: appends of tiny delete markers stop when every slot is
/// taken, before the log threshold, and the node still validates.
#[test]
fn log_slots_bound_the_log() {
    let g = geo(8192);
    let mut buf = leaf(&g, &[], 1);
    let mut n = 0u64;
    while append(&mut buf, &[b'a' + (n % 26) as u8], None, 2 + n) {
        n += 1;
    }
    let v = view(&buf);
    assert_eq!(n as usize, g.log_slots());
    assert_eq!(
        (v.log_count(), v.log_capacity()),
        (g.log_slots(), g.log_slots())
    );
    assert!(v.log_len() < g.log_threshold);
    validate_node(&buf).expect("valid");
}

/// A wrong byte anywhere in the tail is found by the validator: a fingerprint, an item
/// slot, a log slot's offset, fingerprint or zero byte, the trailer's count or tag.
#[test]
fn validate_checks_the_tail() {
    let g = geo(4096);
    let mut buf = leaf(&g, &(0..20).map(kv).collect::<Vec<_>>(), 1);
    assert!(append(&mut buf, b"key00000003x", Some(b"zz"), 2));
    assert!(append(&mut buf, b"key00000005", None, 3));
    validate_node(&buf).expect("valid");
    let v = view(&buf);
    let start = v.tail_start();
    let (fps, _) = v.lookup_span();
    let (slots, _) = v.item_slots_span();
    let size = buf.len();
    let cases = [
        ("first log slot's offset", start),
        ("first log slot's fingerprint", start + 2),
        ("first log slot's zero byte", start + 3),
        ("an item fingerprint", fps + 4 * v.log_count() + 7),
        ("an item slot", slots + 2 * 5),
        ("the trailer's item count", size - 4),
        ("the trailer's tag", size - 1),
    ];
    for (what, at) in cases {
        let mut bad = buf.clone();
        bad[at] ^= 0x11;
        assert!(validate_node(&bad).is_err(), "{what} at {at} not checked");
    }
}

/// Keys from a small alphabet over a shared stem, so separators share long prefixes, tie on
/// their heads (equal for 8 bytes after the prefix) and are prefixes of one another.
fn stem_key() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(0usize), Just(3), Just(11)],
        proptest::collection::vec(
            prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(255u8)],
            0..20,
        ),
    )
        .prop_map(|(stem, tail)| {
            let mut k = b"user:0000000000000"[..stem].to_vec();
            k.extend(tail);
            if k.is_empty() {
                k.push(b'a');
            }
            k
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// An interior node's search by its heads finds what the search through the item slots
    /// does (and the model: the first separator >= or > the key), for keys inside, below,
    /// above and beside the separators' common prefix; the node it builds validates.
    #[test]
    fn interior_heads_search_matches_the_slots(
        seps in proptest::collection::btree_set(stem_key(), 1..120),
        probes in proptest::collection::vec(stem_key(), 1..60),
        size in prop_oneof![Just(4096usize), Just(8192)],
    ) {
        let g = geo(size);
        let seps: Vec<Vec<u8>> = seps.into_iter().collect();
        let entries: Vec<(&[u8], u64)> =
            seps.iter().enumerate().map(|(i, k)| (k.as_slice(), i as u64 + 10)).collect();
        let mut buf = vec![0u8; size];
        let m = NodeMeta { link: 9, level: 1, ..meta(1) };
        if build_interior(&mut buf, &g, &entries, &m).is_err() {
            return Ok(());
        }
        validate_node(&buf).expect("valid");
        let v = view(&buf);
        prop_assert!(v.heads_prefix().is_some());
        let mut all = probes;
        all.extend(seps.iter().cloned());
        all.extend(seps.iter().map(|k| { let mut k = k.clone(); k.push(0); k }));
        all.extend(seps.iter().map(|k| k[..k.len() - 1].to_vec()));
        for k in all {
            for after in [false, true] {
                let want = seps.partition_point(|s| if after { *s <= k } else { *s < k });
                prop_assert_eq!(v.search(&k, after), want, "key {:?} after {}", k, after);
                prop_assert_eq!(v.search_slots(&k, after), want);
            }
            // The child from the heads block is the sorted block's.
            // Separator i's child is i + 10; the leftmost is 9.
            let want = seps.partition_point(|s| *s <= k) as u64 + 9;
            prop_assert_eq!(v.descend(&k), want, "key {:?}", k);
            // Routing from the raw bytes agrees, or declines (a tie on the heads).
            let raw = route_heads(&buf[ATOMIC_END..], &k);
            prop_assert!(raw.is_none_or(|c| c == want), "key {:?}: {:?}", k, raw);
            let ties = seps.iter().any(|s| {
                let p = usize::from(u16::from_le_bytes([buf[heads_at(size, seps.len()).0], buf[heads_at(size, seps.len()).0 + 1]]));
                s.len() >= p && k.len() >= p && s[..p] == k[..p] && head_of(&s[p..]) == head_of(&k[p..])
            });
            prop_assert!(raw.is_some() || ties, "declined without a tie: {:?}", k);
            prop_assert_eq!(v.route(&k, false).0, want);
        }
    }
}

/// A heads block that disagrees with its separators is corrupt.
#[test]
fn damaged_heads_fail_validation() {
    let g = geo(4096);
    let seps: Vec<Vec<u8>> = (0..50u32)
        .map(|i| format!("key{i:05}").into_bytes())
        .collect();
    let entries: Vec<(&[u8], u64)> = seps
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_slice(), i as u64 + 10))
        .collect();
    let mut buf = vec![0u8; 4096];
    let m = NodeMeta {
        link: 9,
        level: 1,
        ..meta(1)
    };
    build_interior(&mut buf, &g, &entries, &m).expect("fits");
    validate_node(&buf).expect("valid");
    assert_eq!(view(&buf).heads_prefix(), Some(&b"key000"[..]));
    let (hdr, at, children) = heads_at(4096, 50);
    for (pos, what) in [
        (at + 8 * 7 + 3, "head"),
        (hdr, "prefix length"),
        (hdr + 5, "reserved"),
        (children + 8 * 50 + 1, "last child"),
        (children, "leftmost child"),
    ] {
        let mut bad = buf.clone();
        bad[pos] ^= 0x10;
        assert!(
            validate_node(&bad).is_err(),
            "{what} damage passed validation"
        );
    }
}
