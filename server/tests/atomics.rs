//! Atomics and vector operations end to end, against the real server: concurrent
//! fetch-and-add (final value and returned originals), compare-and-swap races (one winner
//! per round), vector operations through the protocol against plain loops, a property test
//! of random operation sequences against a sequential model, and RESP INCR through the same
//! path. Every test runs with data forwarding on and off.

mod common;

use accelkv_client::{Client, ClientError};
use accelkv_proto::frame::operand::*;
use accelkv_proto::{Request, Status};
use common::Server;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

fn servers() -> Vec<Server> {
    vec![
        Server::start(&[]),
        Server::start(&["--forwarding", "false"]),
    ]
}

#[test]
fn concurrent_fetch_add_returns_every_original_once() {
    for s in servers() {
        let (n, k) = (6usize, 400usize);
        let addr = s.bin;
        let handles: Vec<_> = (0..n)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr, None).expect("connect");
                    let mut got = Vec::with_capacity(k);
                    // Half the clients send one operation per frame, half frames of 16.
                    if t % 2 == 0 {
                        for _ in 0..k {
                            got.push(c.fetch_add_u64(b"counter", 1).expect("faa"));
                        }
                    } else {
                        for _ in 0..k / 16 {
                            let ops: Vec<Request<'_>> = (0..16)
                                .map(|i| Request::FetchAdd {
                                    id: i,
                                    key: b"counter",
                                    kind: U64,
                                    overflow: WRAP,
                                    delta: 1,
                                })
                                .collect();
                            for a in c.execute(&ops).expect("frame") {
                                let v = a.into_value().expect("faa").expect("bytes");
                                got.push(u64::from_le_bytes(v.try_into().expect("8 bytes")));
                            }
                        }
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("client"))
            .collect();
        all.sort_unstable();
        let total = (n * k) as u64;
        assert_eq!(
            all,
            (0..total).collect::<Vec<_>>(),
            "originals are exactly 0..N*K"
        );
        let mut c = Client::connect(addr, None).expect("connect");
        let v = c.get(b"counter").expect("get").expect("present");
        assert_eq!(u64::from_le_bytes(v.try_into().expect("8 bytes")), total);
    }
}

fn stat(c: &mut Client, name: &str) -> u64 {
    let text = c.stats().expect("stats");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn a_burst_on_one_key_costs_one_tree_write() {
    for (forwarding, s) in [true, false].into_iter().zip(servers()) {
        let mut c = Client::connect(s.bin, None).expect("connect");
        let before = stat(&mut c, "station_tree_writes");
        let ops: Vec<Request<'_>> = (0..64)
            .map(|i| Request::FetchAdd {
                id: i,
                key: b"hot",
                kind: U64,
                overflow: WRAP,
                delta: 1,
            })
            .collect();
        let answers = c.execute(&ops).expect("frame");
        let olds: Vec<u64> = answers
            .into_iter()
            .map(|a| {
                u64::from_le_bytes(
                    a.into_value()
                        .expect("ok")
                        .expect("bytes")
                        .try_into()
                        .expect("8"),
                )
            })
            .collect();
        assert_eq!(
            olds,
            (0..64).collect::<Vec<_>>(),
            "each operation has its own result, in order"
        );
        let writes = stat(&mut c, "station_tree_writes") - before;
        if forwarding {
            assert_eq!(
                writes, 1,
                "one frame of 64 on one key is one burst, one tree write"
            );
        } else {
            assert_eq!(writes, 64, "without forwarding every operation writes");
        }
    }
}

#[test]
fn compare_and_swap_has_one_winner_per_round() {
    for s in servers() {
        let (n, rounds) = (5usize, 60u64);
        let barrier = Arc::new(Barrier::new(n));
        let addr = s.bin;
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr, None).expect("connect");
                    let mut wins = Vec::new();
                    for r in 0..rounds {
                        barrier.wait();
                        let expected = r.to_string();
                        let exp = (r > 0).then_some(expected.as_bytes());
                        if c.cas(b"round", exp, (r + 1).to_string().as_bytes())
                            .expect("cas")
                        {
                            wins.push(r);
                        }
                        barrier.wait();
                    }
                    wins
                })
            })
            .collect();
        let mut wins: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("client"))
            .collect();
        wins.sort_unstable();
        assert_eq!(
            wins,
            (0..rounds).collect::<Vec<_>>(),
            "exactly one winner per round"
        );
    }
}

fn le32(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn vector_operations_round_trip_through_the_protocol() {
    let s = Server::start(&[]);
    let mut c = Client::connect(s.bin, None).expect("connect");
    let v: Vec<u32> = (0..256).map(|i| i * 7 % 101).collect();
    c.put(b"vec", &le32(&v)).expect("put");
    // reduce and filter leave the value alone and match plain loops.
    let sum = c
        .vector(b"vec", REDUCE, U32, WRAP, "add", &le32(&[0]))
        .expect("reduce");
    assert_eq!(sum, le32(&[v.iter().sum()]));
    let big = c
        .vector(b"vec", FILTER, U32, WRAP, "gt", &le32(&[50]))
        .expect("filter");
    assert_eq!(
        big,
        le32(&v.iter().copied().filter(|&x| x > 50).collect::<Vec<_>>())
    );
    // updates return the original vector and change the value.
    let orig = c
        .vector(
            b"vec",
            UPDATE_SCALAR2VECTOR,
            U32,
            WRAP,
            "add",
            &le32(&[1000]),
        )
        .expect("s2v");
    assert_eq!(orig, le32(&v));
    let plus: Vec<u32> = v.iter().map(|x| x + 1000).collect();
    assert_eq!(c.get(b"vec").expect("get").expect("value"), le32(&plus));
    let d: Vec<u32> = (0..256).collect();
    c.vector(b"vec", UPDATE_VECTOR2VECTOR, U32, WRAP, "sub", &le32(&d))
        .expect("v2v");
    let minus: Vec<u32> = plus.iter().zip(&d).map(|(a, b)| a - b).collect();
    assert_eq!(c.get(b"vec").expect("get").expect("value"), le32(&minus));
    // Clear statuses.
    let status = |r: Result<Vec<u8>, ClientError>| match r {
        Err(ClientError::Status(s, _)) => s,
        other => panic!("expected a status, got {other:?}"),
    };
    c.put(b"odd", &[1, 2, 3]).expect("put");
    assert_eq!(
        status(c.vector(b"odd", REDUCE, U32, WRAP, "add", &le32(&[0]))),
        Status::BadLength
    );
    assert_eq!(
        status(c.vector(b"vec", REDUCE, U32, WRAP, "median", &le32(&[0]))),
        Status::UnknownFunction
    );
    assert_eq!(
        status(c.vector(b"vec", REDUCE, F32, WRAP, "xor", &0f32.to_le_bytes())),
        Status::TypeMismatch
    );
    c.put(b"byte", &[250]).expect("put");
    assert_eq!(
        status(c.vector(b"byte", UPDATE_SCALAR2SCALAR, U8, CHECKED, "add", &[10])),
        Status::Overflow
    );
    assert_eq!(
        c.get(b"byte").expect("get"),
        Some(vec![250]),
        "a failed update changes nothing"
    );
    assert_eq!(
        status(c.vector(b"absent", REDUCE, U32, WRAP, "add", &le32(&[0]))),
        Status::NotFound
    );
    match c.fetch_add(b"odd", 1, U64, WRAP) {
        Err(ClientError::Status(Status::BadLength, _)) => {}
        other => panic!("fetch-add on a 3-byte value: {other:?}"),
    }
    c.put(b"max", &i64::MAX.to_le_bytes()).expect("put");
    assert!(matches!(
        c.fetch_add_i64(b"max", 1),
        Err(ClientError::Status(Status::Overflow, _))
    ));
    let sat = c.fetch_add(b"max", 1, I64, SATURATE).expect("saturate");
    assert_eq!(i64::from_le_bytes(sat), i64::MAX);
}

#[test]
fn resp_incr_goes_through_the_station() {
    let s = Server::start(&[]);
    let (n, k) = (4, 250);
    let addr = s.resp;
    let handles: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut t = std::net::TcpStream::connect(addr).expect("resp");
                let mut buf = [0u8; 64];
                for _ in 0..k {
                    t.write_all(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n")
                        .expect("write");
                    let got = t.read(&mut buf).expect("read");
                    assert_eq!(buf[0], b':', "{:?}", &buf[..got]);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client");
    }
    let mut c = Client::connect(s.bin, None).expect("connect");
    assert_eq!(
        c.get(b"n").expect("get"),
        Some((n * k).to_string().into_bytes())
    );
}

/// A sequential model of the write operations.
#[derive(Clone, Debug)]
enum Op {
    Put(u8, Vec<u8>),
    Delete(u8),
    FetchAdd(u8, i64),
    Cas(u8, Option<Vec<u8>>, Vec<u8>),
    AddVector(u8, u32),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..3;
    let val = prop_oneof![
        proptest::collection::vec(any::<u8>(), 8..=8),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    prop_oneof![
        (key.clone(), val.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        key.clone().prop_map(Op::Delete),
        (key.clone(), -5i64..5).prop_map(|(k, d)| Op::FetchAdd(k, d)),
        (key.clone(), proptest::option::of(val.clone()), val)
            .prop_map(|(k, e, n)| Op::Cas(k, e, n)),
        (key, any::<u32>()).prop_map(|(k, d)| Op::AddVector(k, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn operations_match_a_sequential_model(ops in proptest::collection::vec(op(), 1..40), case in any::<u64>()) {
        thread_local!(static SERVER: Server = Server::start(&[]));
        SERVER.with(|s| {
            let mut c = Client::connect(s.bin, None).expect("connect");
            let key = |k: u8| format!("model-{case}-{k}").into_bytes();
            let mut model: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        c.put(&key(k), &v).expect("put");
                        model.insert(k, v);
                    }
                    Op::Delete(k) => {
                        assert_eq!(c.delete(&key(k)).expect("delete"), model.remove(&k).is_some());
                    }
                    Op::FetchAdd(k, d) => {
                        let r = c.fetch_add(&key(k), d, U64, WRAP);
                        match model.get(&k).map(Vec::len) {
                            Some(n) if n != 8 => assert!(matches!(r, Err(ClientError::Status(Status::BadLength, _)))),
                            _ => {
                                let old = model.get(&k).map_or(0, |v| u64::from_le_bytes(v[..].try_into().expect("8")));
                                assert_eq!(u64::from_le_bytes(r.expect("faa")), old);
                                model.insert(k, old.wrapping_add(d as u64).to_le_bytes().to_vec());
                            }
                        }
                    }
                    Op::Cas(k, e, n) => {
                        let swapped = c.cas(&key(k), e.as_deref(), &n).expect("cas");
                        let want = model.get(&k) == e.as_ref();
                        assert_eq!(swapped, want);
                        if want {
                            model.insert(k, n);
                        }
                    }
                    Op::AddVector(k, d) => {
                        let r = c.vector(&key(k), UPDATE_SCALAR2VECTOR, U32, WRAP, "add", &d.to_le_bytes());
                        match model.get(&k) {
                            None => assert!(matches!(r, Err(ClientError::Status(Status::NotFound, _)))),
                            Some(v) if v.len() % 4 != 0 => assert!(matches!(r, Err(ClientError::Status(Status::BadLength, _)))),
                            Some(v) => {
                                assert_eq!(&r.expect("vector"), v);
                                let new: Vec<u8> = v.chunks(4).flat_map(|c| u32::from_le_bytes(c.try_into().expect("4")).wrapping_add(d).to_le_bytes()).collect();
                                model.insert(k, new);
                            }
                        }
                    }
                }
                for k in 0..3u8 {
                    assert_eq!(c.get(&key(k)).expect("get"), model.get(&k).cloned());
                }
            }
        });
    }
}
