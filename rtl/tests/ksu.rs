//! Co-verification of the key search unit (sv/ksu.sv): on random leaves and interior nodes
//! built by the node crate's builder and extended by its log writer (the code the tree's
//! writers run), the simulated unit answers every search as the reference reader does
//! (`NodeView::leaf_get`, `NodeView::child_for`) at random read versions and clocks.
#![cfg(feature = "sim")]

use accelkv_node::layout::*;
use accelkv_node::*;
use accelkv_rtl::{Answer, Ksu};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn geo(node_size: usize) -> Geometry {
    Geometry {
        node_size,
        ..Geometry::default()
    }
}

fn meta(version: u64, link: u64, level: u8) -> NodeMeta {
    NodeMeta {
        version,
        old: NO_BUFFER,
        link,
        left: 0,
        level,
        lock: 0,
    }
}

fn used(buf: &[u8]) -> usize {
    used_of(u64::from_le_bytes(buf[0..8].try_into().unwrap()))
}

/// Keys over a small alphabet, so many share long prefixes (several 8-byte compare steps)
/// and searches hit, miss between and miss past the stored keys.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(b'a'..b'e', 1..12),
        1 => (proptest::collection::vec(b'a'..b'c', 1..4), 8usize..60)
            .prop_map(|(mut p, n)| { p.resize(n, b'a'); p }),
    ]
}

#[derive(Clone, Debug)]
struct Val {
    len: usize,
    deadline: u64,
    flags: u32,
    out_of_line: bool,
}

fn val() -> impl Strategy<Value = Val> {
    (
        0usize..40,
        prop_oneof![3 => Just(0u64), 1 => 1000u64..1010],
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        any::<bool>(),
    )
        .prop_map(|(len, deadline, flags, ool)| Val {
            len,
            deadline,
            flags,
            out_of_line: ool && len > 30,
        })
}

fn value_ref<'a>(bytes: &'a [u8], v: &Val) -> ValueRef<'a> {
    let r = if v.out_of_line {
        ValueRef::out_of_line(0x1000 + v.len as u64, v.len as u32)
    } else {
        ValueRef::inline(&bytes[..v.len])
    };
    r.with_deadline(v.deadline).with_flags(v.flags)
}

const BYTES: [u8; 64] = [b'v'; 64];

#[derive(Clone, Debug)]
enum LogOp {
    Put(Vec<u8>, Val),
    Delete(Vec<u8>),
}

fn log_op() -> impl Strategy<Value = LogOp> {
    prop_oneof![
        3 => (key(), val()).prop_map(|(k, v)| LogOp::Put(k, v)),
        1 => key().prop_map(LogOp::Delete),
    ]
}

/// Builds a leaf of `items` at version 10, then appends `log` at versions 11, 12, … as the
/// tree's fast path does, until one does not fit. Returns the node and its newest version.
fn leaf(node_size: usize, items: &BTreeMap<Vec<u8>, Val>, log: &[LogOp]) -> (Vec<u8>, u64) {
    let g = geo(node_size);
    let mut items: Vec<(&Vec<u8>, &Val)> = items.iter().collect();
    let mut buf = vec![0u8; node_size];
    loop {
        let refs: Vec<(&[u8], ValueRef)> = items
            .iter()
            .map(|(k, v)| (k.as_slice(), value_ref(&BYTES, v)))
            .collect();
        if build_leaf(&mut buf, &g, &refs, &meta(10, 0, 0)).is_ok() {
            break;
        }
        items.truncate(items.len() * 3 / 4);
    }
    let mut version = 10;
    for op in log {
        let (k, v) = match op {
            LogOp::Put(k, v) => (k, Some(value_ref(&BYTES, v))),
            LogOp::Delete(k) => (k, None),
        };
        if !append_owned(&mut buf, k, v.as_ref(), version + 1) {
            break;
        }
        version += 1;
    }
    validate_node(&buf).expect("a valid node");
    (buf, version)
}

fn check_leaf(
    ksu: &mut Ksu,
    node: &[u8],
    probes: &[Vec<u8>],
    newest: u64,
) -> Result<(), TestCaseError> {
    let view = NodeView::from_node(node);
    let published = &node[..used(node)];
    for k in probes {
        for rv in [10, (10 + newest) / 2, newest] {
            for now in [0, 999, 1004, 2000] {
                let want = view.leaf_get(k, rv, now);
                let got = ksu.search(published, k, rv, now).expect("the unit answers");
                match (want, got.answer) {
                    (None, Answer::NotFound) => {}
                    (Some(w), Answer::Value(off)) => {
                        prop_assert_eq!(
                            view.value_at(off).0,
                            w,
                            "key {:?} rv {} now {}",
                            k,
                            rv,
                            now
                        )
                    }
                    (w, g) => prop_assert!(
                        false,
                        "key {:?} rv {} now {}: want {:?}, got {:?}",
                        k,
                        rv,
                        now,
                        w,
                        g
                    ),
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn leaf_searches_match_the_reference_reader(
        node_size in prop_oneof![Just(4096usize), Just(8192)],
        items in proptest::collection::btree_map(key(), val(), 0..160),
        log in proptest::collection::vec(log_op(), 0..60),
        extra in proptest::collection::vec(key(), 1..20),
    ) {
        let (node, newest) = leaf(node_size, &items, &log);
        let mut probes: Vec<Vec<u8>> = items.keys().cloned().collect();
        probes.extend(log.iter().map(|o| match o { LogOp::Put(k, _) | LogOp::Delete(k) => k.clone() }));
        probes.extend(extra);
        // both builds: keys up to 512 bytes, and the 64-byte-key one synth/ksu.sh times
        // (every key here is under 64 bytes)
        for mut ksu in [Ksu::new(), Ksu::short_keys()] {
            check_leaf(&mut ksu, &node, &probes, newest)?;
        }
    }

    #[test]
    fn interior_routes_match_the_reference_reader(
        node_size in prop_oneof![Just(4096usize), Just(8192)],
        seps in proptest::collection::btree_set(key(), 0..200),
        extra in proptest::collection::vec(key(), 1..30),
    ) {
        let g = geo(node_size);
        let mut seps: Vec<Vec<u8>> = seps.into_iter().collect();
        let mut buf = vec![0u8; node_size];
        loop {
            let entries: Vec<(&[u8], u64)> =
                seps.iter().enumerate().map(|(i, k)| (k.as_slice(), 100 + i as u64)).collect();
            if build_interior(&mut buf, &g, &entries, &meta(7, 99, 1)).is_ok() {
                break;
            }
            seps.truncate(seps.len() * 3 / 4);
        }
        let view = NodeView::from_node(&buf);
        for mut ksu in [Ksu::new(), Ksu::short_keys()] {
            for k in seps.iter().chain(&extra) {
                let got = ksu.search(&buf[..used(&buf)], k, 7, 0).expect("the unit answers");
                prop_assert_eq!(got.answer, Answer::Child(view.child_for(k)), "key {:?}", k);
            }
        }
    }
}

/// A node newer than the read version answers its previous version's offset (the walk
/// follows it, as `Tree::resolve` does); a node without one is searched whatever its
/// version; a node at or below the read version is searched.
#[test]
fn a_node_newer_than_the_read_version_answers_its_older_version() {
    let g = geo(4096);
    let mut buf = vec![0u8; 4096];
    let mut m = meta(50, 99, 1);
    m.old = 0x0012_3456_789a;
    build_interior(&mut buf, &g, &[(b"m".as_slice(), 100)], &m).unwrap();
    let node = &buf[..used(&buf)];
    let mut ksu = Ksu::new();
    let at = |ksu: &mut Ksu, rv| ksu.search(node, b"q", rv, 0).unwrap().answer;
    assert_eq!(at(&mut ksu, 49), Answer::Older(0x0012_3456_789a));
    assert_eq!(at(&mut ksu, 50), Answer::Child(100));
    assert_eq!(at(&mut ksu, 51), Answer::Child(100));
    let mut none = vec![0u8; 4096];
    build_interior(&mut none, &g, &[(b"m".as_slice(), 100)], &meta(50, 99, 1)).unwrap();
    let node = &none[..used(&none)];
    assert_eq!(
        ksu.search(node, b"a", 1, 0).unwrap().answer,
        Answer::Child(99)
    );
}

/// The 64-byte-key build answers "bad" for a longer key instead of comparing bytes it did
/// not keep; the default build searches it.
#[test]
fn a_key_longer_than_the_unit_keeps_is_refused() {
    let long = |c: u8| vec![c; 100];
    let items: BTreeMap<Vec<u8>, Val> = [long(b'a'), long(b'b'), long(b'c')]
        .into_iter()
        .map(|k| {
            (
                k,
                Val {
                    len: 3,
                    deadline: 0,
                    flags: 0,
                    out_of_line: false,
                },
            )
        })
        .collect();
    let (node, _) = leaf(4096, &items, &[]);
    let published = &node[..used(&node)];
    let view = NodeView::from_node(&node);
    let full = Ksu::new().search(published, &long(b'b'), 10, 0).unwrap();
    match full.answer {
        Answer::Value(off) => assert_eq!(
            Some(view.value_at(off).0),
            view.leaf_get(&long(b'b'), 10, 0)
        ),
        a => panic!("{a:?}"),
    }
    let mut short = Ksu::short_keys();
    assert_eq!(
        short.search(published, &long(b'b'), 10, 0).unwrap().answer,
        Answer::BadNode
    );
    assert_eq!(
        short.search(published, &[b'b'; 64], 10, 0).unwrap().answer,
        Answer::NotFound
    );
}
