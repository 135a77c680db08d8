//! Property tests: every frame and RESP message round-trips; every prefix of a valid message
//! is "incomplete", never an error or a panic; random and corrupted bytes never panic; every
//! limit is enforced with its documented error.

use accelkv_proto::frame::*;
use accelkv_proto::resp;
use accelkv_proto::{Body, FrameError, Limits, Request, Response, Status, Value};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 1..40)
}

#[derive(Clone, Debug)]
enum Op {
    Get(Vec<u8>),
    Put(Vec<u8>, Vec<u8>),
    Update(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Scan(Vec<u8>, Vec<u8>, u32),
    Floor(Vec<u8>, Vec<u8>, u32),
    Ping(Vec<u8>),
    Auth(Vec<u8>),
    Stats,
    Pad(usize),
    FetchAdd(Vec<u8>, bool, u8, i64),
    Cas(Vec<u8>, Option<Vec<u8>>, Vec<u8>),
    Vector(Vec<u8>, u8, u8, u8, Vec<u8>, Vec<u8>),
    PutExpiring(Vec<u8>, Vec<u8>, u64),
    Expire(Vec<u8>, u64),
    Ttl(Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        key().prop_map(Op::Get),
        (key(), bytes(100)).prop_map(|(k, v)| Op::Put(k, v)),
        (key(), bytes(100)).prop_map(|(k, v)| Op::Update(k, v)),
        key().prop_map(Op::Delete),
        (bytes(20), bytes(20), any::<u32>()).prop_map(|(a, b, l)| Op::Scan(a, b, l)),
        (bytes(20), bytes(20), any::<u32>()).prop_map(|(a, b, l)| Op::Floor(a, b, l)),
        bytes(30).prop_map(Op::Ping),
        bytes(30).prop_map(Op::Auth),
        Just(Op::Stats),
        (0usize..100).prop_map(Op::Pad),
        (key(), any::<bool>(), 0u8..3, any::<i64>())
            .prop_map(|(k, s, o, d)| Op::FetchAdd(k, s, o, d)),
        (key(), proptest::option::of(bytes(20)), bytes(20)).prop_map(|(k, e, n)| Op::Cas(k, e, n)),
        (key(), 0u8..5, 0u8..8, 0u8..3, bytes(12), bytes(64))
            .prop_map(|(k, o, e, p, f, d)| Op::Vector(k, o, e, p, f, d)),
        (key(), bytes(100), any::<u64>()).prop_map(|(k, v, d)| Op::PutExpiring(k, v, d)),
        (key(), any::<u64>()).prop_map(|(k, d)| Op::Expire(k, d)),
        key().prop_map(Op::Ttl),
    ]
}

fn as_request(i: usize, op: &Op) -> Request<'_> {
    let id = i as u16;
    match op {
        Op::Get(k) => Request::Get { id, key: k },
        Op::Put(k, v) => Request::Put {
            id,
            key: k,
            value: v,
        },
        Op::Update(k, v) => Request::Update {
            id,
            key: k,
            value: v,
        },
        Op::Delete(k) => Request::Delete { id, key: k },
        Op::PutExpiring(k, v, d) => Request::PutExpiring {
            id,
            key: k,
            value: v,
            deadline: *d,
        },
        Op::Expire(k, d) => Request::Expire {
            id,
            key: k,
            deadline: *d,
        },
        Op::Ttl(k) => Request::Ttl { id, key: k },
        Op::Scan(a, b, l) => Request::Scan {
            id,
            lo: a,
            hi: b,
            limit: *l,
        },
        Op::Floor(a, b, l) => Request::ScanFloor {
            id,
            kl: a,
            ku: b,
            limit: *l,
        },
        Op::Ping(p) => Request::Ping { id, payload: p },
        Op::Auth(p) => Request::Auth { id, password: p },
        Op::Stats => Request::Stats { id },
        Op::Pad(len) => Request::Pad { id, len: *len },
        Op::FetchAdd(k, signed, o, d) => Request::FetchAdd {
            id,
            key: k,
            kind: if *signed { 5 } else { 3 },
            overflow: *o,
            delta: *d,
        },
        Op::Cas(k, e, n) => Request::Cas {
            id,
            key: k,
            expected: e.as_deref(),
            new: n,
        },
        Op::Vector(k, o, e, p, f, d) => Request::Vector {
            id,
            key: k,
            op: *o,
            elem: *e,
            overflow: *p,
            function: f,
            operand: d,
        },
    }
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ]{0,20}".prop_map(Value::Simple),
        "[a-zA-Z0-9 ]{0,20}".prop_map(Value::Error),
        any::<i64>().prop_map(Value::Integer),
        proptest::option::of(bytes(50)).prop_map(Value::Bulk),
    ];
    leaf.prop_recursive(3, 20, 5, |inner| {
        proptest::option::of(proptest::collection::vec(inner, 0..5)).prop_map(Value::Array)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn requests_round_trip(ops in proptest::collection::vec(op(), 0..20), id in any::<u32>(),
                           token in proptest::option::of(bytes(40))) {
        let reqs: Vec<Request> = ops.iter().enumerate().map(|(i, o)| as_request(i, o)).collect();
        let mut buf = Vec::new();
        encode_request(&mut buf, id, token.as_deref(), &reqs);
        let limits = Limits::default();
        let (h, got) = decode_request(&buf, &limits).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(h.frame_id, id);
        prop_assert_eq!(h.token, token.as_deref());
        prop_assert_eq!(h.frame_len, buf.len());
        // Scans with bounds longer than the key limit are not generated; everything decodes
        // to what was encoded.
        prop_assert_eq!(&got, &reqs);
        // Every strict prefix is incomplete (or, before the header is whole, incomplete too).
        for cut in [0, 1, 5, HEADER_LEN - 1, buf.len() / 2, buf.len() - 1] {
            if cut < buf.len() {
                prop_assert!(matches!(decode_request(&buf[..cut], &limits), Err(FrameError::Incomplete { .. })), "cut {}", cut);
            }
        }
    }

    #[test]
    fn responses_round_trip(n in 0usize..10, seed in bytes(60), id in any::<u32>()) {
        let ops: Vec<Response> = (0..n).map(|i| {
            let s = &seed[..seed.len().min(i * 3)];
            let (opcode, status, body) = match i % 5 {
                0 => (1, Status::Ok, Body::Bytes(s)),
                1 => (2, Status::Ok, Body::Version(i as u64 * 1000)),
                2 => (5, Status::Ok, Body::Items { truncated: i % 2 == 0, items: vec![(s, s), (b"k", b"")] }),
                3 => (3, Status::NotFound, Body::Message(b"no such key")),
                _ => (0x42, Status::Unsupported, Body::Message(b"")),
            };
            Response { id: i as u16, opcode, status, body }
        }).collect();
        let mut buf = Vec::new();
        encode_response(&mut buf, id, &ops);
        let (h, got) = decode_response(&buf, &Limits::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(h.frame_id, id);
        prop_assert_eq!(got, ops);
    }

    /// Random bytes, and valid frames with bytes flipped, never panic any decoder.
    #[test]
    fn decoders_never_panic(junk in bytes(300), ops in proptest::collection::vec(op(), 1..5),
                            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
        let limits = Limits::default();
        let _ = decode_request(&junk, &limits);
        let _ = decode_response(&junk, &limits);
        let _ = resp::parse_command(&junk, &limits);
        let _ = resp::parse_reply(&junk, &limits);
        let reqs: Vec<Request> = ops.iter().enumerate().map(|(i, o)| as_request(i, o)).collect();
        let mut buf = Vec::new();
        encode_request(&mut buf, 1, None, &reqs);
        for (at, b) in flips {
            let n = buf.len();
            buf[at % n] = b;
        }
        let _ = decode_request(&buf, &limits);
        let _ = decode_response(&buf, &limits);
    }

    #[test]
    fn commands_round_trip(args in proptest::collection::vec(bytes(40), 1..10)) {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let mut buf = Vec::new();
        resp::command(&mut buf, &refs);
        let limits = Limits::default();
        let (got, used) = resp::parse_command(&buf, &limits).map_err(|e| TestCaseError::fail(e.to_string()))?.expect("complete");
        prop_assert_eq!(used, buf.len());
        prop_assert_eq!(got, refs);
        for cut in 0..buf.len() {
            prop_assert_eq!(resp::parse_command(&buf[..cut], &limits), Ok(None), "cut {}", cut);
        }
    }

    #[test]
    fn replies_round_trip(v in value()) {
        let mut buf = Vec::new();
        resp::value(&mut buf, &v);
        let limits = Limits::default();
        let (got, used) = resp::parse_reply(&buf, &limits).map_err(|e| TestCaseError::fail(e.to_string()))?.expect("complete");
        prop_assert_eq!(used, buf.len());
        prop_assert_eq!(got, v);
        for cut in 0..buf.len() {
            prop_assert_eq!(resp::parse_reply(&buf[..cut], &limits), Ok(None), "cut {}", cut);
        }
    }
}

#[test]
fn frame_limits_are_enforced() {
    let limits = Limits {
        max_key: 8,
        max_value: 16,
        max_ops: 3,
        max_frame: 200,
        ..Limits::default()
    };
    let mut buf = Vec::new();
    encode_request(
        &mut buf,
        1,
        None,
        &[
            Request::Get {
                id: 1,
                key: b"123456789",
            },
            Request::Put {
                id: 2,
                key: b"k",
                value: &[0u8; 17],
            },
            Request::Get { id: 3, key: b"" },
        ],
    );
    let (_, ops) = decode_request(&buf, &limits).unwrap();
    assert_eq!(
        ops,
        vec![
            Request::Invalid {
                id: 1,
                opcode: 1,
                status: Status::TooLarge
            },
            Request::Invalid {
                id: 2,
                opcode: 2,
                status: Status::TooLarge
            },
            Request::Invalid {
                id: 3,
                opcode: 1,
                status: Status::Malformed
            },
        ]
    );
    // Too many operations, a frame over the size limit, a huge declared length.
    let mut four = Vec::new();
    let gets: Vec<Request> = (0..4).map(|i| Request::Get { id: i, key: b"k" }).collect();
    encode_request(&mut four, 1, None, &gets);
    assert!(matches!(
        decode_request(&four, &limits),
        Err(FrameError::TooLarge {
            what: "operation count",
            ..
        })
    ));
    let mut big = Vec::new();
    encode_request(
        &mut big,
        1,
        None,
        &[Request::Ping {
            id: 0,
            payload: &[0u8; 300],
        }],
    );
    assert!(matches!(
        decode_request(&big, &limits),
        Err(FrameError::TooLarge { what: "frame", .. })
    ));
    let mut lie = Vec::new();
    encode_request(&mut lie, 1, None, &[Request::Get { id: 0, key: b"k" }]);
    lie[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode_request(&lie, &Limits::default()),
        Err(FrameError::TooLarge { .. })
    ));
    // A declared op count the bytes cannot hold is refused before allocating.
    let mut hollow = Vec::new();
    encode_request(&mut hollow, 1, None, &[]);
    hollow[12..14].copy_from_slice(&1000u16.to_le_bytes());
    assert_eq!(
        decode_request(&hollow, &Limits::default()),
        Err(FrameError::Malformed(
            "operation count larger than the frame"
        ))
    );
    // Unknown opcodes are skipped and answered, not fatal.
    let mut unk = Vec::new();
    encode_request(
        &mut unk,
        1,
        None,
        &[
            Request::Get { id: 5, key: b"k" },
            Request::Get { id: 6, key: b"j" },
        ],
    );
    unk[HEADER_LEN] = 0x7F;
    let (_, ops) = decode_request(&unk, &Limits::default()).unwrap();
    assert_eq!(
        ops[0],
        Request::Unknown {
            id: 5,
            opcode: 0x7F
        }
    );
    assert_eq!(ops[1], Request::Get { id: 6, key: b"j" });
    assert_eq!(
        decode_request(b"GET k\r\n", &Limits::default()),
        Err(FrameError::BadMagic)
    );
}

#[test]
fn resp_limits_and_errors() {
    let limits = Limits {
        max_bulk: 10,
        max_array: 3,
        max_inline: 16,
        ..Limits::default()
    };
    assert!(matches!(
        resp::parse_command(b"*4\r\n", &limits),
        Err(resp::RespError::TooLarge { what: "array", .. })
    ));
    assert!(matches!(
        resp::parse_command(b"*1\r\n$11\r\n", &limits),
        Err(resp::RespError::TooLarge {
            what: "bulk string",
            ..
        })
    ));
    assert!(matches!(
        resp::parse_command(b"*1\r\n$999999999999\r\n", &Limits::default()),
        Err(resp::RespError::TooLarge { .. })
    ));
    assert!(
        resp::parse_command(&[b'A'; 40], &limits).is_err(),
        "an endless inline line"
    );
    assert!(resp::parse_command(b"*1\r\n$3\r\nabcX\n", &limits).is_err());
    assert!(resp::parse_command(b"*x\r\n", &limits).is_err());
    assert!(resp::parse_command(b"*1\r\n:3\r\n", &limits).is_err());
    // Inline commands, as redis-benchmark's PING_INLINE sends.
    assert_eq!(
        resp::parse_command(b"PING\r\n", &limits),
        Ok(Some((vec![&b"PING"[..]], 6)))
    );
    assert_eq!(
        resp::parse_command(b"SET  k  v\r\nrest", &Limits::default()),
        Ok(Some((vec![&b"SET"[..], b"k", b"v"], 11)))
    );
    let mut deep = Vec::new();
    for _ in 0..20 {
        deep.extend_from_slice(b"*1\r\n");
    }
    deep.extend_from_slice(b":1\r\n");
    assert!(matches!(
        resp::parse_reply(&deep, &Limits::default()),
        Err(resp::RespError::TooLarge {
            what: "nesting",
            ..
        })
    ));
    let mut out = Vec::new();
    resp::error(&mut out, "ERR bad\r\nthing");
    assert_eq!(out, b"-ERR bad  thing\r\n");
}

/// Regression (found by the resp_parse fuzz target): a reply line holding a bare CR
/// (`-\r\0\r\n`) was accepted, and re-encoding it changed its meaning. Lines may not
/// contain CR.
#[test]
fn reply_with_cr_inside_line_is_rejected() {
    assert!(resp::parse_reply(b"-\r\0\r\n", &Limits::default()).is_err());
    assert!(resp::parse_command(b"PI\rNG\r\n", &Limits::default()).is_err());
}

/// Every RESP3 reply type the server writes (and RESP2's), framed whole by `reply_len`.
#[test]
fn resp3_replies_are_framed_whole() {
    let l = Limits::default();
    let whole: &[&[u8]] = &[
        b"+OK\r\n",
        b"-ERR x\r\n",
        b":-5\r\n",
        b"_\r\n",
        b"#t\r\n",
        b",1.5\r\n",
        b"(12345678901234567890\r\n",
        b"$3\r\na\r\n\r\n",
        b"$-1\r\n",
        b"*-1\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"!3\r\nERR\r\n",
        b"*2\r\n$1\r\na\r\n:1\r\n",
        b"%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n_\r\n",
        b"~2\r\n#f\r\n,2\r\n",
        b">2\r\n+message\r\n$1\r\nx\r\n",
        b"|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n",
    ];
    for r in whole {
        let mut two = r.to_vec();
        two.extend_from_slice(b"+NEXT\r\n");
        assert_eq!(
            resp::reply_len(&two, &l),
            Ok(Some(r.len())),
            "{:?}",
            String::from_utf8_lossy(r)
        );
        for cut in 0..r.len() {
            assert_eq!(
                resp::reply_len(&r[..cut], &l),
                Ok(None),
                "{:?} cut at {cut}",
                String::from_utf8_lossy(r)
            );
        }
    }
    assert!(resp::reply_len(b"?x\r\n", &l).is_err());
    assert!(resp::reply_len(b"$3\r\nabcd\r\n", &l).is_err());
}

proptest! {
    /// RESP2 replies frame exactly as the decoder reads them.
    #[test]
    fn reply_len_agrees_with_parse_reply(v in value()) {
        let mut b = Vec::new();
        resp::value(&mut b, &v);
        let l = Limits::default();
        let parsed = resp::parse_reply(&b, &l).unwrap().map(|(_, n)| n);
        prop_assert_eq!(resp::reply_len(&b, &l).unwrap(), parsed);
    }

    /// Random bytes never panic.
    #[test]
    fn reply_len_never_panics(b in bytes(200)) {
        let _ = resp::reply_len(&b, &Limits::default());
    }
}
