//! Streams through DUMP and RESTORE: payloads a real Redis wrote (from Redis 7.2's own
//! tests), round trips of random streams with groups, and forged payloads refused.

use super::*;
use crate::collection::StreamId;
use proptest::prelude::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId { ms, seq }
}

fn kv(pairs: &[&str]) -> Vec<Vec<u8>> {
    pairs.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// DUMP of Redis 5 (type 15) after `XADD x 1-0 data a` up to `6-0 data f`, `XDEL x 3-0`,
/// `XGROUP CREATE x g1 0`, `XGROUP CREATE x g2 0`, `XREADGROUP GROUP g1 c11 COUNT 4
/// STREAMS x >` and `XTRIM x MAXLEN = 2`.
const REDIS5: &[u8] =
    b"\x0F\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xC3\x40\x4A\
      \x40\x57\x16\x57\x00\x00\x00\x23\x00\x02\x01\x04\x01\x01\x01\x84\x64\x61\x74\x61\x05\x00\
      \x01\x03\x01\x00\x20\x01\x03\x81\x61\x02\x04\x20\x0A\x00\x01\x40\x0A\x00\x62\x60\x0A\x00\
      \x02\x40\x0A\x00\x63\x60\x0A\x40\x22\x01\x81\x64\x20\x0A\x40\x39\x20\x0A\x00\x65\x60\x0A\
      \x00\x05\x40\x0A\x00\x66\x20\x0A\x00\xFF\x02\x06\x00\x02\x02\x67\x31\x05\x00\x04\x00\x00\
      \x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\
      \x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\
      \x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\
      \x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\
      \x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x01\x03\x63\x31\x31\x3E\xF7\x83\x43\x7A\x01\x00\
      \x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
      \x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\
      \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\
      \x02\x67\x32\x00\x00\x00\x00\x09\x00\x3D\x52\xEF\x68\x67\x52\x1D\xFA";

/// DUMP of Redis 7.0 (type 19) after `XGROUP CREATE x g $ MKSTREAM`, `XADD x 1-1 f v` and
/// `XREADGROUP GROUP g Alice STREAMS x >`.
const REDIS7: &[u8] =
    b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x1D\x1D\x00\
      \x00\x00\x0A\x00\x01\x01\x00\x01\x01\x01\x81\x66\x02\x00\x01\x02\x01\x00\x01\x00\x01\x81\
      \x76\x02\x04\x01\xFF\x01\x01\x01\x01\x01\x00\x00\x01\x01\x01\x67\x01\x01\x01\x01\x00\x00\
      \x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\xF5\x5A\x71\xC7\x84\x01\x00\x00\
      \x01\x01\x05\x41\x6C\x69\x63\x65\xF5\x5A\x71\xC7\x84\x01\x00\x00\x01\x00\x00\x00\x00\x00\
      \x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x0B\x00\xA7\xA9\x14\xA5\x27\xFF\x9B\x9B";

#[test]
fn a_redis5_stream_restores_with_its_groups() {
    let Ok(Value::Stream(s)) = restore(REDIS5) else {
        panic!("not a stream");
    };
    assert_eq!(
        s.entries,
        vec![
            (id(5, 0), kv(&["data", "e"])),
            (id(6, 0), kv(&["data", "f"]))
        ]
    );
    assert_eq!(
        (s.last_id, s.max_deleted, s.entries_added),
        (id(6, 0), id(0, 0), 2)
    );
    let [g1, g2] = &s.groups[..] else {
        panic!("two groups");
    };
    assert_eq!(
        (g1.name.as_slice(), g1.last_id, g1.entries_read),
        (&b"g1"[..], id(5, 0), None)
    );
    let ids: Vec<_> = g1.pending.iter().map(|p| p.id).collect();
    assert_eq!(ids, [id(1, 0), id(2, 0), id(4, 0), id(5, 0)]);
    assert!(g1.pending.iter().all(|p| p.owner == 0 && p.count == 1));
    assert_eq!(g1.consumers[0].name, b"c11");
    assert_eq!(g1.consumers[0].active, g1.consumers[0].seen as i64);
    assert_eq!(
        (g2.last_id, g2.pending.len(), g2.consumers.len()),
        (id(0, 0), 0, 0)
    );
}

#[test]
fn a_redis7_stream_restores_and_dumps_as_redis_7_2() {
    let Ok(Value::Stream(s)) = restore(REDIS7) else {
        panic!("not a stream");
    };
    assert_eq!(s.entries, vec![(id(1, 1), kv(&["f", "v"]))]);
    assert_eq!((s.last_id, s.entries_added), (id(1, 1), 1));
    let g = &s.groups[0];
    assert_eq!((g.name.as_slice(), g.entries_read), (&b"g"[..], Some(1)));
    assert_eq!(g.consumers[0].name, b"Alice");
    // Redis 7.0 kept no active time: the seen time stands for it, as Redis 7.2 loads it.
    assert_eq!(g.consumers[0].active, g.consumers[0].seen as i64);
    let d = dump(&Value::Stream(s.clone()));
    assert_eq!(d[0], 21);
    assert_eq!(&d[d.len() - 10..d.len() - 8], &11u16.to_le_bytes());
    assert_eq!(restore(&d), Ok(Value::Stream(s)));
}

/// A type-21 payload of an empty stream with group `g` whose one pending entry, 1-0, is
/// listed by the consumers `owners` name (each consumer lists it `claims` times).
fn one_pending(owners: &[&[u8]], claims: u8) -> Vec<u8> {
    let mut b = vec![21, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 0, 1];
    b.extend_from_slice(&id(1, 0).to_bytes());
    b.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0, 1]);
    b.push(owners.len() as u8);
    for o in owners {
        b.push(o.len() as u8);
        b.extend_from_slice(o);
        b.extend_from_slice(&[0; 16]);
        b.push(claims);
        for _ in 0..claims {
            b.extend_from_slice(&id(1, 0).to_bytes());
        }
    }
    b.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn inconsistent_streams_are_refused() {
    let Ok(Value::Stream(one)) = restore(&one_pending(&[b"a"], 1)) else {
        panic!("one owner restores");
    };
    let p = &one.groups[0].pending[0];
    assert_eq!((p.id, p.time, p.count, p.owner), (id(1, 0), 7, 1, 0));
    // Owned by two consumers, twice by one, by none; two consumers of one name.
    for bad in [
        one_pending(&[b"a", b"b"], 1),
        one_pending(&[b"a"], 2),
        one_pending(&[b"a"], 0),
        one_pending(&[b"a", b"a"], 0),
    ] {
        assert_eq!(restore(&bad), Err(RdbError::BadFormat));
    }
    let Ok(Value::Stream(s)) = restore(REDIS5) else {
        panic!("not a stream");
    };
    // A last id before the newest entry; fewer entries added than held.
    let mut early = s.clone();
    early.last_id = id(5, 9);
    let mut few = s;
    few.entries_added = 1;
    for v in [early, few] {
        assert_eq!(restore(&dump(&Value::Stream(v))), Err(RdbError::BadFormat));
    }
}

#[test]
fn listpack_integers_and_strings_read_back() {
    let ints = [
        0i64,
        127,
        128,
        -1,
        -4096,
        4095,
        -4097,
        32_767,
        -32_768,
        40_000,
        -8_388_608,
        8_388_608,
        i32::MIN as i64,
        i64::MAX,
        i64::MIN,
    ];
    let strs = [
        vec![],
        vec![b'x'; 63],
        vec![b'y'; 64],
        vec![b'z'; 4095],
        vec![b'w'; 4096],
        vec![b'v'; 20_000],
        b"007".to_vec(),
        b"-0".to_vec(),
    ];
    let mut w = listpack::Writer::default();
    ints.iter().for_each(|&i| w.int(i));
    strs.iter().for_each(|s| w.str(s));
    let lp = w.finish();
    let mut want: Vec<Vec<u8>> = ints.iter().map(|i| i.to_string().into_bytes()).collect();
    want.extend(strs);
    assert_eq!(listpack::entries(&lp), Ok(want));
}

fn small() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..12),
        (-70_000i64..70_000).prop_map(|n| n.to_string().into_bytes()),
        Just(b"f".to_vec()),
    ]
}

/// A random stream: entries with shared or own fields, groups with pending entries spread
/// over their consumers.
fn streams() -> impl Strategy<Value = Stream> {
    let entries = prop::collection::btree_map(
        (0u64..1 << 50, 0u64..3),
        prop::collection::vec((small(), small()), 1..4),
        0..260,
    );
    let group = (
        small(),
        any::<i64>(),
        prop::collection::btree_map(
            (0u64..1 << 50, 0u64..3),
            (any::<u64>(), 0u64..9, 0usize..3),
            0..40,
        ),
        prop::collection::btree_set(small(), 1..4),
    );
    (entries, prop::collection::vec(group, 0..3), 0u64..5).prop_map(|(es, gs, extra)| {
        let entries: Vec<_> = es
            .into_iter()
            .map(|((ms, seq), kvs)| {
                (
                    id(ms, seq),
                    kvs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
                )
            })
            .collect();
        let mut names = std::collections::BTreeSet::new();
        let groups = gs
            .into_iter()
            .filter(|g| names.insert(g.0.clone()))
            .map(|(name, read, pel, cs)| {
                let consumers: Vec<_> = cs
                    .into_iter()
                    .map(|name| Consumer {
                        name,
                        seen: 5,
                        active: -1,
                    })
                    .collect();
                let pending = pel
                    .into_iter()
                    .map(|((ms, seq), (time, count, o))| Pending {
                        id: id(ms, seq),
                        time,
                        count,
                        owner: o % consumers.len(),
                    })
                    .collect();
                Group {
                    name,
                    last_id: id(3, 4),
                    entries_read: Some(read),
                    pending,
                    consumers,
                }
            })
            .collect();
        Stream {
            last_id: entries
                .last()
                .map_or(id(0, 0), |e: &(StreamId, Vec<Vec<u8>>)| e.0),
            max_deleted: id(1, 2),
            entries_added: entries.len() as u64 + extra,
            entries,
            groups,
        }
    })
}

proptest! {
    #[test]
    fn streams_restore_to_themselves(s in streams()) {
        let v = Value::Stream(s);
        prop_assert_eq!(restore(&dump(&v)), Ok(v));
    }
}
