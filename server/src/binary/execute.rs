//! What each binary operation does (docs/PROTOCOL.md): a read becomes a read of the read
//! door, a write an [`Op`] for the reservation station, anything else is answered at once;
//! and a frame's writes run through the station in frame order.

use crate::binary::answer::{answer_of, Answer};
use crate::core::counters::OpClass;
use crate::core::ops::typed::user_key_ok;
use crate::core::ops::vector::{Elem, Overflow, VectorCall, VectorOp};
use crate::core::ops::{Cond, ExpireCond, Ttl, Write};
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use accelkv_engine::ReadRef;
use accelkv_proto::{Request, Status};
use smallvec::SmallVec;
use std::borrow::Cow;

/// Which transport a frame came on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    Tcp,
    Udp,
}

/// Runs operation `index` of a frame as far as it goes here: a read is pushed to `reads`,
/// a write to `writes` (each answered once the frame's batch runs); anything else, or a
/// refusal, is answered now.
pub(crate) fn execute_op<'a>(
    sh: &Shared,
    op: &Request<'a>,
    transport: Transport,
    index: usize,
    max_items: usize,
    reads: &mut Vec<(usize, ReadRef<'a>)>,
    writes: &mut Vec<(usize, Op<'a>)>,
) -> Option<Answer> {
    if let Some((class, r)) = read_of(op, max_items) {
        sh.count(class);
        reads.push((index, r));
        return None;
    }
    let w = match write_of(op, transport) {
        Ok(None) => atomic_of(op, transport),
        w => w,
    };
    match w {
        Ok(Some((_, key, _))) if !user_key_ok(key) => Some(Answer::Fail(
            Status::Malformed,
            "keys beginning with the bytes FF FF are reserved".into(),
        )),
        Ok(Some((class, key, w))) => {
            sh.count(class);
            writes.push((index, Op::new(key, w)));
            None
        }
        Ok(None) => Some(other(sh, op)),
        Err(a) => Some(a),
    }
}

/// A write: its counter class, key and [`Write`]; `Ok(None)`: not one of these.
type Writing<'a> = Result<Option<(OpClass, &'a [u8], Write<'a>)>, Answer>;

/// A read operation as a read of the read door. A scan asks the engine for one item more
/// than the server sends, to know whether the reply is cut short by the server's limit.
fn read_of<'a>(op: &Request<'a>, max_items: usize) -> Option<(OpClass, ReadRef<'a>)> {
    let ask = |limit: u32| (limit as usize).min(max_items + 1);
    Some(match *op {
        Request::Get { key, .. } => (OpClass::Get, ReadRef::Get(key)),
        Request::Scan { lo, hi, limit, .. } => {
            let hi = (!hi.is_empty()).then_some(hi);
            let limit = ask(limit);
            (OpClass::Scan, ReadRef::Scan { lo, hi, limit })
        }
        Request::ScanFloor { kl, ku, limit, .. } => {
            let limit = ask(limit);
            (OpClass::Floor, ReadRef::ScanFloor { kl, ku, limit })
        }
        _ => return None,
    })
}

/// The plain writes: PUT, DELETE, PUT with a deadline, EXPIRE, TTL, UPDATE.
fn write_of<'a>(op: &Request<'a>, transport: Transport) -> Writing<'a> {
    Ok(Some(match *op {
        Request::Put { key, value, .. } => (OpClass::Put, key, Write::Put(Cow::Borrowed(value))),
        Request::Delete { key, .. } => (OpClass::Delete, key, Write::Delete),
        Request::PutExpiring {
            key,
            value,
            deadline,
            ..
        } => {
            let w = Write::Set {
                value: Cow::Borrowed(value),
                cond: Cond::Always,
                get: false,
                ttl: Ttl::Set(deadline),
            };
            (OpClass::Put, key, w)
        }
        Request::Expire { key, deadline, .. } => {
            let cond = ExpireCond::default();
            (OpClass::Update, key, Write::Expire { deadline, cond })
        }
        Request::Ttl { key, .. } => (OpClass::Get, key, Write::ReadDeadline),
        Request::Update { .. } if transport == Transport::Udp => {
            return Err(Answer::Fail(
                Status::Unsupported,
                "UPDATE is not allowed over UDP (not idempotent)".into(),
            ))
        }
        Request::Update { key, value, .. } => {
            (OpClass::Update, key, Write::Update(Cow::Borrowed(value)))
        }
        _ => return Ok(None),
    }))
}

/// KV-Direct's atomics and vector operations: FETCH_ADD, CAS, VECTOR. The decoder admits
/// only valid bytes for their kinds; anything else is malformed, not guessed. Over UDP only
/// what may safely run twice (a retried datagram) is allowed.
fn atomic_of<'a>(op: &Request<'a>, transport: Transport) -> Writing<'a> {
    let udp = transport == Transport::Udp;
    let malformed = || Answer::Fail(Status::Malformed, String::new());
    let twice = |what: &str| {
        Answer::Fail(
            Status::Unsupported,
            format!("{what} not allowed over UDP (a retried datagram would apply twice)"),
        )
    };
    Ok(Some(match *op {
        Request::FetchAdd { .. } | Request::Cas { .. } if udp => return Err(twice("atomics are")),
        Request::FetchAdd {
            key,
            kind,
            overflow,
            delta,
            ..
        } => {
            let (Some(elem), Some(overflow)) = (Elem::from_u8(kind), Overflow::from_u8(overflow))
            else {
                return Err(malformed());
            };
            let w = Write::FetchAdd {
                elem,
                overflow,
                delta,
            };
            (OpClass::Atomic, key, w)
        }
        Request::Cas {
            key, expected, new, ..
        } => {
            let w = Write::Cas {
                expected: expected.map(Cow::Borrowed),
                new: Cow::Borrowed(new),
            };
            (OpClass::Atomic, key, w)
        }
        Request::Vector {
            key,
            op,
            elem,
            overflow,
            function,
            operand,
            ..
        } => {
            let (Some(op), Some(elem), Some(overflow)) = (
                VectorOp::from_u8(op),
                Elem::from_u8(elem),
                Overflow::from_u8(overflow),
            ) else {
                return Err(malformed());
            };
            if udp && op.updates() {
                return Err(twice("vector updates are"));
            }
            let w = Write::Vector(VectorCall {
                op,
                elem,
                overflow,
                function: String::from_utf8_lossy(function),
                operand: Cow::Borrowed(operand),
            });
            (OpClass::Vector, key, w)
        }
        _ => return Ok(None),
    }))
}

/// The operations answered at once: PING, PAD, STATS, AUTH (checked by the frame), and
/// what is unknown or invalid.
fn other(sh: &Shared, op: &Request<'_>) -> Answer {
    match *op {
        Request::Ping { payload, .. } => {
            sh.count(OpClass::Other);
            Answer::Bytes(payload.to_vec())
        }
        Request::Stats { .. } => {
            sh.count(OpClass::Other);
            Answer::Bytes((sh.persistence_text() + &sh.stats_text()).into_bytes())
        }
        Request::Unknown { opcode, .. } => {
            Answer::Fail(Status::Unsupported, format!("unknown opcode {opcode:#04x}"))
        }
        Request::Invalid { status, .. } => Answer::Fail(status, String::new()),
        // PAD, AUTH (and the reads and writes, handled before).
        _ => Answer::Empty,
    }
}

/// Runs a frame's writes (on the loop's thread) through the reservation station and returns
/// their answers once every one is in the tree, with the newest version they need visible.
pub(crate) fn run_writes(sh: &Shared, writes: Vec<(usize, Op<'_>)>) -> (Vec<(usize, Answer)>, u64) {
    let index: SmallVec<[usize; 16]> = writes.iter().map(|w| w.0).collect();
    let mut done: SmallVec<[Done; 16]> = SmallVec::new();
    sh.writes().run(writes.into_iter().map(|w| w.1), &mut done);
    let version = done.iter().map(|d| d.version).max().unwrap_or(0);
    let answers = index
        .into_iter()
        .zip(done)
        .map(|(i, d)| (i, answer_of(sh, d)))
        .collect();
    (answers, version)
}

/// Runs one replicated write operation on a replica (cluster mode) as a frame of its own
/// would run it here, once the write is visible.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn run_replicated(sh: &Shared, op: &Request<'_>) -> Answer {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    let max_items = sh.settings().limits.max_scan_items;
    if let Some(a) = execute_op(
        sh,
        op,
        Transport::Tcp,
        0,
        max_items,
        &mut reads,
        &mut writes,
    ) {
        return a;
    }
    if writes.is_empty() {
        return Answer::Fail(Status::Error, "a replicated operation must write".into());
    }
    let (mut done, version) = run_writes(sh, writes);
    sh.view().wait_visible(version);
    done.pop()
        .map_or(Answer::Fail(Status::Error, "no answer".into()), |d| d.1)
}
