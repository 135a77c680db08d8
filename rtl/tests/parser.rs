//! Co-verification of the frame parser (sv/frame_parser.sv) against `accelkv_proto`'s
//! `decode_request`: every input of the fuzz corpus (fuzz/seeds/frame_decode, committed, and
//! fuzz/corpus/frame_decode when a local fuzz run made one) and random
//! frames (well formed ones from `encode_request`, then cut, grown, bit-flipped and with
//! random header fields), under the default and tight limits, must get the same outcome;
//! when the frame decodes, the same operations (opcode, id, verdict and, for a decoded
//! request, where its key lies in the buffer).
#![cfg(feature = "sim")]

use accelkv_proto::frame::{decode_request, encode_request, FrameError};
use accelkv_proto::{Limits, Request};
use accelkv_rtl::{FrameParser, Outcome, ParserLimits, Verdict};
use proptest::prelude::*;

const MALFORMED: [&str; 7] = [
    "unknown header flags",
    "frame length shorter than its header",
    "response frame where a request was expected",
    "operation count larger than the frame",
    "truncated operation header",
    "operation runs past the end of the frame",
    "bytes after the last operation",
];

fn parser_limits(l: &Limits) -> ParserLimits {
    ParserLimits {
        max_frame: l.max_frame as u32,
        max_ops: l.max_ops as u16,
        max_key: l.max_key as u32,
        max_value: l.max_value as u32,
        max_token: l.max_token as u32,
    }
}

fn tight() -> Limits {
    Limits {
        max_key: 16,
        max_value: 64,
        max_ops: 8,
        max_frame: 512,
        max_token: 8,
        ..Limits::default()
    }
}

fn expected(e: &FrameError) -> Outcome {
    match e {
        FrameError::Incomplete { needed } => Outcome::Incomplete(needed.expect("a size")),
        FrameError::BadMagic => Outcome::BadMagic,
        FrameError::BadVersion(v) => Outcome::BadVersion(*v),
        FrameError::TooLarge { what, len, .. } => Outcome::TooLarge(
            match *what {
                "frame" => 1,
                "operation count" => 2,
                "token" => 3,
                w => panic!("unexpected {w}"),
            },
            *len,
        ),
        FrameError::Malformed(m) => Outcome::Malformed(
            MALFORMED
                .iter()
                .position(|x| x == m)
                .unwrap_or_else(|| panic!("unexpected {m}")) as u8
                + 1,
        ),
    }
}

fn key_of<'a>(r: &Request<'a>) -> Option<&'a [u8]> {
    match *r {
        Request::Get { key, .. }
        | Request::Put { key, .. }
        | Request::Update { key, .. }
        | Request::Delete { key, .. }
        | Request::PutExpiring { key, .. }
        | Request::Expire { key, .. }
        | Request::Ttl { key, .. }
        | Request::FetchAdd { key, .. }
        | Request::Cas { key, .. }
        | Request::Vector { key, .. } => Some(key),
        Request::Scan { lo, .. } => Some(lo),
        Request::ScanFloor { kl, .. } => Some(kl),
        Request::Auth { password, .. } => Some(password),
        _ => None,
    }
}

/// The parser's answer for `buf` equals `decode_request`'s under both limits.
fn check(p: &mut FrameParser, buf: &[u8]) -> Result<(), TestCaseError> {
    for limits in [Limits::default(), tight()] {
        let got = p
            .parse(buf, parser_limits(&limits))
            .expect("the parser finishes");
        match decode_request(buf, &limits) {
            Err(e) => prop_assert_eq!(got.outcome, expected(&e), "{:?} {:02x?}", e, buf),
            Ok((_, ops)) => {
                prop_assert_eq!(got.outcome, Outcome::Ok, "{:02x?}", buf);
                prop_assert_eq!(got.ops.len(), ops.len());
                for (g, w) in got.ops.iter().zip(&ops) {
                    prop_assert_eq!(g.opcode, w.opcode());
                    prop_assert_eq!(g.id, w.id());
                    let verdict = match w {
                        Request::Unknown { .. } => Verdict::Unknown,
                        Request::Invalid { status, .. } => Verdict::Invalid(*status as u8),
                        _ => Verdict::Ok,
                    };
                    prop_assert_eq!(g.verdict, verdict, "{:?}", w);
                    if let Some(k) = key_of(w) {
                        let off = k.as_ptr() as usize - buf.as_ptr() as usize;
                        prop_assert_eq!(g.key, (off, k.len()), "{:?}", w);
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn the_fuzz_corpus_parses_as_proto_decodes_it() {
    // The committed seed corpus (fuzz/seeds), and the local corpus a fuzz run grows
    // (fuzz/corpus, not committed) when there is one.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz");
    let mut p = FrameParser::new();
    let mut n = 0;
    for dir in ["seeds/frame_decode", "corpus/frame_decode"] {
        let Ok(entries) = std::fs::read_dir(format!("{root}/{dir}")) else {
            assert_ne!(dir, "seeds/frame_decode", "the seed corpus is committed");
            continue;
        };
        for e in entries {
            let buf = std::fs::read(e.unwrap().path()).unwrap();
            check(&mut p, &buf).unwrap();
            n += 1;
        }
    }
    assert!(n >= 50, "only {n} corpus inputs");
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Operations of every opcode (and unknown ones) with values shaped to hit each check.
fn op() -> impl Strategy<Value = (u8, u16, Vec<u8>, Vec<u8>)> {
    let opcode = prop_oneof![
        8 => prop::sample::select(vec![1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0x10, 0x11, 0x20]),
        1 => any::<u8>(),
    ];
    let value = prop_oneof![
        bytes(24),
        bytes(90),
        // FETCH_ADD, CAS and VECTOR shapes with small fields
        (0u8..7, 0u8..4, bytes(12)).prop_map(|(a, b, r)| [vec![a, b], r].concat()),
        // CAS: the expected length around the bytes left (the boundary cases)
        (0u8..3, bytes(20), -2i64..3).prop_map(|(p, r, d)| {
            let l = (r.len() as i64 + d).max(0) as u32;
            [vec![p], l.to_le_bytes().to_vec(), r].concat()
        }),
        // VECTOR: the name length around the bytes left
        (0u8..6, 0u8..9, 0u8..4, bytes(40), -2i64..3).prop_map(|(a, b, c, r, d)| {
            let n = (r.len() as i64 + d).clamp(0, 255) as u8;
            [vec![a, b, c, n], r].concat()
        }),
    ];
    (
        opcode,
        any::<u16>(),
        prop_oneof![Just(vec![]), bytes(6), bytes(30)],
        value,
    )
}

/// A frame with `ops` (the header's fields computed), by hand so any opcode can be sent.
fn frame(ops: &[(u8, u16, Vec<u8>, Vec<u8>)], token: Option<&[u8]>, id: u32) -> Vec<u8> {
    let mut f = vec![0xAC, 0x4B, 1, if token.is_some() { 2 } else { 0 }];
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(&(ops.len() as u16).to_le_bytes());
    if let Some(t) = token {
        f.push(t.len() as u8);
        f.extend_from_slice(t);
    }
    for (opc, id, k, v) in ops {
        f.extend_from_slice(&[*opc, 0]);
        f.extend_from_slice(&id.to_le_bytes());
        f.extend_from_slice(&(k.len() as u16).to_le_bytes());
        f.extend_from_slice(&(v.len() as u32).to_le_bytes());
        f.extend_from_slice(k);
        f.extend_from_slice(v);
    }
    let n = f.len() as u32;
    f[4..8].copy_from_slice(&n.to_le_bytes());
    f
}

#[derive(Clone, Debug)]
enum Mutation {
    None,
    Truncate(usize),
    Append(Vec<u8>),
    Flip(usize, u8),
    Field(usize, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::None),
        2 => any::<usize>().prop_map(Mutation::Truncate),
        1 => bytes(12).prop_map(Mutation::Append),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        // a header field (version, flags, frame_len, op_count) or an operation length
        2 => (prop::sample::select(vec![2usize, 3, 4, 12, 18, 20, 22]), 0u32..600)
            .prop_map(|(at, v)| Mutation::Field(at, v)),
    ]
}

fn mutate(mut f: Vec<u8>, m: &Mutation) -> Vec<u8> {
    match m {
        Mutation::None => {}
        Mutation::Truncate(n) => f.truncate(n % (f.len() + 1)),
        Mutation::Append(b) => f.extend_from_slice(b),
        Mutation::Flip(i, b) if !f.is_empty() => {
            let i = i % f.len();
            f[i] ^= b;
        }
        Mutation::Field(at, v) if *at + 2 <= f.len() => match at {
            2 | 3 => f[*at] = *v as u8,
            4 if f.len() >= 8 => f[4..8].copy_from_slice(&v.to_le_bytes()),
            _ => f[*at..*at + 2].copy_from_slice(&(*v as u16).to_le_bytes()),
        },
        _ => {}
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_frames_parse_as_proto_decodes_them(
        ops in proptest::collection::vec(op(), 0..12),
        token in proptest::option::of(bytes(12)),
        id in any::<u32>(),
        m in mutation(),
    ) {
        let mut p = FrameParser::new();
        let f = mutate(frame(&ops, token.as_deref(), id), &m);
        check(&mut p, &f)?;
    }
}

/// The client's own encoder, for the common operations, with ids and keys intact.
#[test]
fn encoded_request_frames_parse_to_their_operations() {
    let mut p = FrameParser::new();
    let ops = vec![
        Request::Get {
            id: 1,
            key: b"alpha",
        },
        Request::Put {
            id: 2,
            key: b"beta",
            value: b"value",
        },
        Request::Scan {
            id: 3,
            lo: b"a",
            hi: b"z",
            limit: 10,
        },
        Request::Delete {
            id: 4,
            key: b"gamma",
        },
    ];
    let mut f = Vec::new();
    encode_request(&mut f, 77, Some(b"secret"), &ops);
    let got = p.parse(&f, parser_limits(&Limits::default())).unwrap();
    assert_eq!(got.outcome, Outcome::Ok);
    assert_eq!(
        got.ops.iter().map(|o| o.id).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(&f[got.ops[1].value.0..][..got.ops[1].value.1], b"value");
    // a byte a cycle, plus a few cycles per operation
    assert!(
        got.cycles >= f.len() as u64 && got.cycles < f.len() as u64 + 40,
        "{}",
        got.cycles
    );
    check(&mut p, &f).unwrap();
}
