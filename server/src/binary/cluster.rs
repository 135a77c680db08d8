#![cfg_attr(not(feature = "cluster"), allow(dead_code))]
//! Binary frames in cluster mode (docs/CLUSTER.md, "The binary protocol"). Each keyed
//! operation of a frame is placed by its key's range: on a node that does not lead the
//! range it is answered MOVED (the leader's binary address) or TRYAGAIN, never served from
//! a replica's state; on the leader a write is replicated as `ACCELKV.OP <one-op frame>`
//! (every replica applies it through the same operation code and write door as a
//! standalone server, so its answer, write version included, is the one it would give),
//! and a read waits for a read index and then runs here. The frame's answers are sent
//! together once every routed operation has settled: the frame stays in the connection's
//! input meanwhile and runs again with the settled answers.

use crate::binary::answer::Answer;
use crate::core::route::{encode, Forward, Located, Router, Settled};
use crate::core::shared::Shared;
use accelkv_proto::frame::encode_request;
use accelkv_proto::resp::Version;
use accelkv_proto::{Request, Status};
use std::sync::{Arc, Mutex};

/// The replicated command that carries one binary operation.
pub(crate) const OP: &[u8] = b"ACCELKV.OP";

/// How a keyed binary operation is routed.
pub(crate) struct Keyed<'a> {
    pub key: &'a [u8],
    /// A scan's end (`Some(None)`: unbounded); `None` for a one-key operation.
    pub upto: Option<Option<&'a [u8]>>,
    /// A SCAN_FLOOR (it may start before its key).
    pub floor: bool,
    /// It changes the store (replicated), rather than reads it (a read index, then here).
    pub write: bool,
    /// It can only free memory (allowed past maxmemory).
    pub frees: bool,
}

/// The key an operation touches and how, or `None` for one that touches no key.
pub(crate) fn keyed<'a>(op: &Request<'a>) -> Option<Keyed<'a>> {
    let one = |key, write, frees| Keyed {
        key,
        upto: None,
        floor: false,
        write,
        frees,
    };
    Some(match *op {
        Request::Get { key, .. } | Request::Ttl { key, .. } => one(key, false, false),
        Request::Scan { lo, hi, .. } => Keyed {
            upto: Some((!hi.is_empty()).then_some(hi)),
            ..one(lo, false, false)
        },
        Request::ScanFloor { kl, ku, .. } => Keyed {
            upto: Some(Some(ku)),
            floor: true,
            ..one(kl, false, false)
        },
        Request::Vector { key, op, .. } => {
            let updates = accelkv_proto::operand::VectorOp::from_u8(op).is_none_or(|o| o.updates());
            one(key, updates, false)
        }
        Request::Delete { key, .. } => one(key, true, true),
        Request::Put { key, .. }
        | Request::Update { key, .. }
        | Request::PutExpiring { key, .. }
        | Request::Expire { key, .. }
        | Request::FetchAdd { key, .. }
        | Request::Cas { key, .. } => one(key, true, false),
        Request::Ping { .. }
        | Request::Auth { .. }
        | Request::Stats { .. }
        | Request::Pad { .. }
        | Request::Unknown { .. }
        | Request::Invalid { .. } => return None,
    })
}

/// What operation `i` of a frame does in cluster mode before it runs.
pub(crate) enum Step {
    /// Run it here as a standalone server would (it touches no key, or it is a read
    /// whose read index has passed).
    Run,
    /// Answer this.
    Answer(Answer),
    /// It was routed (pushed to the frame's forwards): the frame waits for it.
    Routed,
}

/// Places operation `i` of a frame: `settled` holds what its routed operations settled
/// to when the frame runs again (each taken as it is used).
pub(crate) fn step(
    sh: &Shared,
    cl: &dyn Router,
    op: &Request<'_>,
    i: usize,
    udp: bool,
    settled: &mut Vec<(usize, Settled)>,
    forwards: &mut Vec<(usize, Forward)>,
) -> Step {
    let Some(k) = keyed(op) else {
        return Step::Run;
    };
    if udp {
        return Step::Answer(Answer::Fail(
            Status::Unsupported,
            "cluster mode serves keys over binary TCP and RESP, not UDP (docs/CLUSTER.md)".into(),
        ));
    }
    if let Some(at) = settled.iter().position(|s| s.0 == i) {
        match settled.swap_remove(at).1 {
            Settled::Reply(r) => return Step::Answer(answer_of_reply(cl, &r)),
            // (Only a RESP connection's joined writes are answered so.)
            Settled::Replies(mut r) => return Step::Answer(answer_of_reply(cl, &r.swap_remove(0))),
            // The bounds again: a split applied since the read index was asked for.
            Settled::Granted => match cl.locate(k.key, k.upto, k.floor, false) {
                Located::Lead(_) => return Step::Run,
                Located::Refused(s, m) => return Step::Answer(Answer::Fail(s, m)),
                Located::Settle(f) => {
                    forwards.push((i, f));
                    return Step::Routed;
                }
            },
            // The map changed under it: placed afresh below.
            Settled::Again => {}
        }
    }
    let range = match cl.locate(k.key, k.upto, k.floor, true) {
        Located::Lead(range) => range,
        Located::Refused(s, m) => return Step::Answer(Answer::Fail(s, m)),
        Located::Settle(f) => {
            forwards.push((i, f));
            return Step::Routed;
        }
    };
    if !k.write {
        forwards.push((i, Forward::Barrier { range }));
        return Step::Routed;
    }
    if !k.frees && sh.over_maxmemory() {
        let m = crate::core::shared::OOM.to_string();
        return Step::Answer(Answer::Fail(Status::Error, m));
    }
    let mut frame = Vec::new();
    encode_request(&mut frame, 0, None, std::slice::from_ref(op));
    let cmd = encode(&[OP.to_vec(), frame], Version::Resp2);
    forwards.push((i, Forward::Write { range, cmd }));
    Step::Routed
}

/// Submits a frame's routed operations; `done` gets them all, settled, once the last one
/// has.
pub(crate) fn submit(
    cl: &dyn Router,
    forwards: Vec<(usize, Forward)>,
    done: impl FnOnce(Vec<(usize, Settled)>) + Send + 'static,
) {
    let n = forwards.len();
    let acc = Arc::new(Mutex::new((Vec::with_capacity(n), Some(done))));
    for (i, f) in forwards {
        let acc = acc.clone();
        cl.submit(
            f,
            Box::new(move |s| {
                let mut g = acc.lock().unwrap_or_else(|e| e.into_inner());
                g.0.push((i, s));
                if g.0.len() == n {
                    let all = std::mem::take(&mut g.0);
                    if let Some(done) = g.1.take() {
                        drop(g);
                        done(all);
                    }
                }
            }),
        );
    }
}

/// A replicated operation's reply (its response operation, or a RESP error from the
/// group) as the answer sent to the client.
fn answer_of_reply(cl: &dyn Router, r: &[u8]) -> Answer {
    if r.first() == Some(&b'-') {
        let (s, m) = cl.binary_error(r);
        return Answer::Fail(s, m);
    }
    let parsed = (|| {
        let status = Status::from_u8(*r.first()?)?;
        let len = u32::from_le_bytes(r.get(4..8)?.try_into().ok()?) as usize;
        Some((status, r.get(8..8 + len)?))
    })();
    match parsed {
        Some((Status::Ok, body)) => Answer::Bytes(body.to_vec()),
        Some((s, body)) => Answer::Fail(s, String::from_utf8_lossy(body).into_owned()),
        None => Answer::Fail(Status::Error, "the replicas answered wrongly".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_classified_by_key() {
        let k = |op: Request<'static>| keyed(&op).map(|k| (k.key, k.upto, k.write, k.frees));
        assert_eq!(
            k(Request::Get { id: 1, key: b"a" }),
            Some((&b"a"[..], None, false, false))
        );
        assert_eq!(
            k(Request::Scan {
                id: 1,
                lo: b"a",
                hi: b"",
                limit: 3
            }),
            Some((&b"a"[..], Some(None), false, false))
        );
        assert_eq!(
            k(Request::Scan {
                id: 1,
                lo: b"a",
                hi: b"m",
                limit: 3
            }),
            Some((&b"a"[..], Some(Some(&b"m"[..])), false, false))
        );
        assert_eq!(
            k(Request::Put {
                id: 1,
                key: b"a",
                value: b"v"
            }),
            Some((&b"a"[..], None, true, false))
        );
        assert_eq!(
            k(Request::Delete { id: 1, key: b"a" }),
            Some((&b"a"[..], None, true, true))
        );
        assert_eq!(
            k(Request::Ping {
                id: 1,
                payload: b""
            }),
            None
        );
        assert_eq!(k(Request::Stats { id: 1 }), None);
    }
}
