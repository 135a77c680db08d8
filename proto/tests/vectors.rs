//! The test vectors of docs/PROTOCOL.md: each decodes to its documented meaning and
//! re-encodes to the same bytes.

use accelkv_proto::frame::{decode_request, decode_response, encode_request, encode_response};
use accelkv_proto::{Body, Limits, Request, Response, Status};

fn vectors() -> Vec<(String, Vec<u8>)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROTOCOL.md"))
        .expect("docs/PROTOCOL.md");
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l.strip_prefix("#### vector: ") else {
            continue;
        };
        let mut hex = String::new();
        let mut inside = false;
        for l in lines.by_ref() {
            if l.starts_with("```hex") {
                inside = true;
            } else if inside && l.starts_with("```") {
                break;
            } else if inside {
                hex.push_str(l);
                hex.push(' ');
            }
        }
        let bytes = hex
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
            .collect();
        out.push((name.trim().to_string(), bytes));
    }
    out
}

/// (frame id, token, operations) a request vector means.
type RequestMeaning = (u32, Option<&'static [u8]>, Vec<Request<'static>>);

fn request_meaning(name: &str) -> Option<RequestMeaning> {
    Some(match name {
        "get" => (1, None, vec![Request::Get { id: 7, key: b"k1" }]),
        "put_delete_auth" => (
            2,
            Some(b"pw"),
            vec![
                Request::Put {
                    id: 1,
                    key: b"a",
                    value: b"xy",
                },
                Request::Delete { id: 2, key: b"b" },
            ],
        ),
        "scans" => (
            3,
            None,
            vec![
                Request::Scan {
                    id: 9,
                    lo: b"a",
                    hi: b"c",
                    limit: 10,
                },
                Request::ScanFloor {
                    id: 10,
                    kl: b"m",
                    ku: b"p",
                    limit: 4,
                },
            ],
        ),
        "atomics" => (
            4,
            None,
            vec![
                Request::FetchAdd {
                    id: 1,
                    key: b"n",
                    kind: 3,
                    overflow: 0,
                    delta: 5,
                },
                Request::Cas {
                    id: 2,
                    key: b"c",
                    expected: Some(b"a"),
                    new: b"b",
                },
                Request::Vector {
                    id: 3,
                    key: b"v",
                    op: 3,
                    elem: 2,
                    overflow: 0,
                    function: b"add",
                    operand: &[0, 0, 0, 0],
                },
            ],
        ),
        _ => return None,
    })
}

fn response_meaning(name: &str) -> Option<(u32, Vec<Response<'static>>)> {
    Some(match name {
        "get_resp" => (
            1,
            vec![Response {
                id: 7,
                opcode: 1,
                status: Status::Ok,
                body: Body::Bytes(b"v1"),
            }],
        ),
        "put_delete_resp" => (
            2,
            vec![
                Response {
                    id: 2,
                    opcode: 4,
                    status: Status::NotFound,
                    body: Body::Message(b""),
                },
                Response {
                    id: 1,
                    opcode: 2,
                    status: Status::Ok,
                    body: Body::Version(42),
                },
            ],
        ),
        "scan_resp" => (
            3,
            vec![Response {
                id: 9,
                opcode: 5,
                status: Status::Ok,
                body: Body::Items {
                    truncated: false,
                    items: vec![(b"a", b"1"), (b"b", b"2")],
                },
            }],
        ),
        "atomics_resp" => (
            4,
            vec![
                Response {
                    id: 1,
                    opcode: 0x10,
                    status: Status::Ok,
                    body: Body::Bytes(&[5, 0, 0, 0, 0, 0, 0, 0]),
                },
                Response {
                    id: 2,
                    opcode: 0x11,
                    status: Status::Mismatch,
                    body: Body::Message(b""),
                },
                Response {
                    id: 3,
                    opcode: 0x20,
                    status: Status::Ok,
                    body: Body::Bytes(&[10, 0, 0, 0]),
                },
            ],
        ),
        _ => return None,
    })
}

#[test]
fn every_documented_vector_decodes_and_round_trips() {
    let limits = Limits::default();
    let vs = vectors();
    assert_eq!(
        vs.len(),
        8,
        "vectors found in PROTOCOL.md: {:?}",
        vs.iter().map(|v| &v.0).collect::<Vec<_>>()
    );
    for (name, bytes) in &vs {
        if let Some((id, token, ops)) = request_meaning(name) {
            let (h, got) = decode_request(bytes, &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((h.frame_id, h.token, &got), (id, token, &ops), "{name}");
            assert_eq!(h.frame_len, bytes.len(), "{name}");
            let mut again = Vec::new();
            encode_request(&mut again, id, token, &ops);
            assert_eq!(&again, bytes, "{name} re-encodes");
        } else if let Some((id, ops)) = response_meaning(name) {
            let (h, got) =
                decode_response(bytes, &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((h.frame_id, &got), (id, &ops), "{name}");
            let mut again = Vec::new();
            encode_response(&mut again, id, &ops);
            assert_eq!(&again, bytes, "{name} re-encodes");
        } else {
            panic!("vector {name} has no meaning in this test");
        }
    }
}
