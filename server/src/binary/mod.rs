//! Executes binary request frames (the same code for TCP and UDP) on the event loop that read
//! them: writes in frame order through the reservation station, then every read of the frame
//! as one batch through the loop's read door, then one response frame with an answer per
//! operation (held back, when the frame wrote, until the writes are durable).
//!
//! With a memory budget, a frame whose writes reach a leaf that lives only in the page file
//! runs nothing at first: the leaves go to the loader threads and the frame runs again,
//! whole, once they are back ([`Framed::Later`]), so the loop never blocks on a page read.

pub mod cluster;
pub mod session;
pub mod udp;

use crate::binary::cluster::Step;
use crate::core::counters::OpClass;
use crate::core::ops::vector::{Elem, Overflow, VectorError, VectorOp};
use crate::core::ops::{Cond, ExpireCond, Failure, Outcome, Ttl, Write};
use crate::core::reads::Reads;
use crate::core::route::{Forward, Settled};
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use accelkv_engine::{Found, Items, ReadRef, Reply};
use accelkv_proto::frame::{begin_response, decode_request, encode_response_op, finish_response};
use accelkv_proto::{Body, FrameError, Request, Response, Status};
use accelkv_tree::Error;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Which transport a frame came on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    Tcp,
    Udp,
}

/// An answer owning its bytes until the response frame is encoded.
pub(crate) enum Answer {
    Fail(Status, String),
    Empty,
    Bytes(Vec<u8>),
    Word([u8; 8]),
    Version(u64),
    Items(Items, bool),
}

/// Maps a store error to a status and message.
pub fn status_of(e: &Error) -> (Status, String) {
    let s = match e {
        Error::KeyTooLong { .. } | Error::ValueTooLarge { .. } => Status::TooLarge,
        Error::EmptyKey => Status::Malformed,
        Error::NotFound => Status::NotFound,
        _ => Status::Error,
    };
    (s, e.to_string())
}

/// A frame whose operations have run, waiting (if it wrote) for durability before its
/// response is encoded. It owns everything it needs, so a loop can park it.
pub struct Ran {
    frame_id: u32,
    frame_len: usize,
    /// Each operation's id and opcode, for its answer.
    heads: Vec<(u16, u8)>,
    answers: Vec<Option<Answer>>,
    /// Operations that wrote (their answers turn into DISK if durability fails).
    wrote: Vec<usize>,
    /// The newest version the answers rest on: sent once it is visible (and durable).
    pub version: u64,
    transport: Transport,
    token_ok: bool,
    start: Instant,
    /// Reads submitted to an engine with workers of its own and not answered yet: the
    /// wait's id and the answer index of each read.
    pending: Option<(u64, Vec<usize>)>,
    /// The scan limits (items, bytes) its reads are answered under.
    limits: (usize, usize),
}

impl Ran {
    /// The wait its reads are in, if they were submitted and not answered yet.
    pub fn awaiting(&self) -> Option<u64> {
        self.pending.as_ref().map(|p| p.0)
    }

    /// Fills in the answers of its submitted reads (in submission order).
    pub fn complete_reads(&mut self, replies: Vec<Reply>) {
        let Some((_, at)) = self.pending.take() else {
            return;
        };
        let (max_items, max_bytes) = self.limits;
        for (i, r) in at.into_iter().zip(replies) {
            self.answers[i] = Some(read_answer(Found::Reply(r), max_items, max_bytes));
        }
    }

    /// Whether the response must wait until the frame's writes are durable.
    pub fn must_wait(&self, sh: &Shared) -> bool {
        !self.wrote.is_empty() && sh.waits_for_durability()
    }

    /// Whether what the answers rest on is visible to readers.
    pub fn visible(&self, sh: &Shared) -> bool {
        sh.store().is_visible(self.version)
    }

    /// Encodes the response into `out`; `durable` is the outcome of waiting for the frame's
    /// writes (`Ok` when nothing was waited for).
    pub fn finish(mut self, sh: &Shared, durable: Result<(), String>, out: &mut Vec<u8>) {
        if let Err(m) = durable {
            sh.metrics().errors.fetch_add(1, Ordering::Relaxed);
            for &i in &self.wrote {
                if !matches!(self.answers[i], Some(Answer::Fail(..))) {
                    self.answers[i] = Some(Answer::Fail(Status::Disk, m.clone()));
                }
            }
        }
        let (ops, answers) = (&self.heads, self.answers);
        let start = out.len();
        encode(self.frame_id, ops, &answers, out);
        // UDP never amplifies: an unauthenticated datagram gets no larger reply (DESIGN §3.7).
        if self.transport == Transport::Udp && !self.token_ok && out.len() - start > self.frame_len
        {
            out.truncate(start);
            let squeezed: Vec<Option<Answer>> = answers
                .into_iter()
                .map(|a| match a {
                    Some(Answer::Fail(s, _)) => Some(Answer::Fail(s, String::new())),
                    Some(Answer::Empty) => Some(Answer::Empty),
                    _ => Some(Answer::Fail(Status::TooLarge, String::new())),
                })
                .collect();
            encode(self.frame_id, ops, &squeezed, out);
            if out.len() - start > self.frame_len {
                out.truncate(start); // not even the statuses fit: no reply at all
            }
        }
        sh.record_latency(self.start.elapsed());
    }
}

/// What running a frame came to.
pub enum Framed {
    /// Its operations ran (its reads may still be in flight: [`Ran::awaiting`]).
    Ran(Ran),
    /// Nothing ran: a write's leaf is being read back from the page file for the current
    /// waiter (`Reads::take_submitted` names the wait). The caller keeps the frame and runs
    /// it again, whole, once the wait is answered (`Reads::resume`).
    Later,
    /// Cluster mode: its keyed operations were routed to their ranges' groups. The caller
    /// keeps the frame, submits these, and runs it again, whole, with what they settled
    /// to (`crate::binary::cluster`).
    Routed(Vec<(usize, Forward)>),
}

/// Runs the operations of the request frame in `frame`, reads through `reads`; an error means
/// the frame could not be decoded at all (drop the datagram or close the connection).
/// `authed` is the connection's AUTH state (always false for UDP).
pub fn run_frame(
    sh: &Arc<Shared>,
    frame: &[u8],
    transport: Transport,
    authed: &mut bool,
    reads: &mut Reads,
    mut settled: Vec<(usize, Settled)>,
) -> Result<Framed, FrameError> {
    let limits = &sh.settings().limits;
    let (h, ops) = decode_request(frame, limits)?;
    let start = Instant::now();
    let token_ok = h.token.is_some_and(|t| sh.password_matches(t));
    let frame_authed = !sh.needs_auth() || *authed || token_ok;
    let n = ops.len();
    let admitted = sh.admit(n);
    let mut answers: Vec<Option<Answer>> = (0..n).map(|_| None).collect();
    let mut to_read: Vec<(usize, ReadRef<'_>)> = Vec::new();
    let mut writes: Vec<(usize, Op<'_>)> = Vec::new();
    let max_items = limits.max_scan_items;
    let cluster = sh.router();
    let mut forwards = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let a = if !admitted {
            Some(Answer::Fail(Status::Busy, "server busy, retry".into()))
        } else if let Request::Auth {
            password: given, ..
        } = op
        {
            if !sh.needs_auth() {
                Some(Answer::Empty)
            } else if sh.password_matches(given) {
                *authed = true;
                Some(Answer::Empty)
            } else {
                Some(Answer::Fail(
                    Status::Unauthorized,
                    "invalid password".into(),
                ))
            }
        } else if !frame_authed {
            Some(Answer::Fail(
                Status::Unauthorized,
                "authentication required".into(),
            ))
        } else if let Some(cl) = cluster {
            let udp = transport == Transport::Udp;
            match crate::binary::cluster::step(sh, cl, op, i, udp, &mut settled, &mut forwards) {
                Step::Run => execute_op(sh, op, transport, i, max_items, &mut to_read, &mut writes),
                Step::Answer(a) => Some(a),
                Step::Routed => None,
            }
        } else {
            execute_op(sh, op, transport, i, max_items, &mut to_read, &mut writes)
        };
        answers[i] = a;
    }
    if !forwards.is_empty() {
        // Nothing here has changed the store (AUTH, the only effect, is idempotent).
        if admitted {
            sh.release(n);
        }
        return Ok(Framed::Routed(forwards));
    }
    let mut wrote = Vec::new();
    let mut version = 0;
    if !writes.is_empty() {
        if let Err(m) = sh.writable() {
            // The device is failing: refuse the writes before they change anything.
            for (i, _) in writes {
                answers[i] = Some(Answer::Fail(Status::Disk, m.clone()));
            }
        } else {
            if sh.over_maxmemory() {
                // Past maxmemory (noeviction): writes that can add memory are refused.
                writes.retain(|(i, op)| {
                    let frees = matches!(op.write, Write::Delete | Write::Remove | Write::GetDel);
                    if !frees {
                        let m = crate::resp::config::OOM.to_string();
                        answers[*i] = Some(Answer::Fail(Status::Error, m));
                    }
                    frees
                });
            }
            // Only writes that will run wait for their leaves. Nothing has changed yet
            // (AUTH, the only effect so far, is idempotent; refusals above are answers
            // the re-run gives again).
            if !writes.is_empty()
                && reads
                    .probe_write(writes.iter().map(|w| w.1.key.as_ref()))
                    .is_err()
            {
                if admitted {
                    sh.release(n);
                }
                return Ok(Framed::Later);
            }
            // The frame's writes, in frame order, through the reservation station.
            wrote = writes.iter().map(|w| w.0).collect();
            let (done, v) = run_writes(sh, writes);
            version = v;
            for (i, a) in done {
                answers[i] = Some(a);
            }
        }
    }
    let mut pending = None;
    if !to_read.is_empty() {
        // Reads follow the frame's writes: wait until those are visible (a wait only when
        // an older writer elsewhere has not completed yet).
        sh.store().wait_visible(version);
        let reqs: Vec<ReadRef<'_>> = to_read.iter().map(|r| r.1).collect();
        let max_bytes = limits.max_scan_bytes;
        let ran = reads.run(sh.engine(), &reqs, |j, found| {
            answers[to_read[j].0] = Some(read_answer(found, max_items, max_bytes));
        });
        if ran.is_err() {
            // Submitted to an engine with workers of its own: answered when it completes.
            let at = to_read.iter().map(|r| r.0).collect();
            pending = reads.take_submitted().map(|id| (id, at));
        }
    }
    if admitted {
        sh.release(n);
    }
    // Counted once it ran (a frame that ran `Later` first runs twice).
    sh.metrics().hot().frames.fetch_add(1, Ordering::Relaxed);
    Ok(Framed::Ran(Ran {
        frame_id: h.frame_id,
        frame_len: frame.len(),
        heads: ops.iter().map(|op| (op.id(), op.opcode())).collect(),
        answers,
        wrote,
        version,
        transport,
        token_ok,
        start,
        pending,
        limits: (max_items, limits.max_scan_bytes),
    }))
}

/// A binary answer for a read.
fn read_answer(found: Found<'_>, max_items: usize, max_bytes: usize) -> Answer {
    match found {
        Found::Value(Some(v), _) => Answer::Bytes(v.to_vec()),
        Found::Value(None, _) => Answer::Fail(Status::NotFound, String::new()),
        Found::Reply(Reply::Value(Some(v))) => Answer::Bytes(v),
        Found::Reply(Reply::Value(None)) => Answer::Fail(Status::NotFound, String::new()),
        Found::Reply(Reply::Items(items)) => {
            // The engine was asked for one item more than the server's limit.
            let truncated = items.len() > max_items;
            let items = cap_items(items, max_items, max_bytes);
            Answer::Items(items.0, truncated || items.1)
        }
        Found::Reply(Reply::Error(e)) => {
            let (s, m) = status_of(&e);
            Answer::Fail(s, m)
        }
    }
}

fn execute_op<'a>(
    sh: &Shared,
    op: &Request<'a>,
    transport: Transport,
    index: usize,
    max_items: usize,
    reads: &mut Vec<(usize, ReadRef<'a>)>,
    writes: &mut Vec<(usize, Op<'a>)>,
) -> Option<Answer> {
    let mut write = |class, key, w| {
        sh.count(class);
        writes.push((index, Op::new(key, w)));
        None
    };
    // A scan asks the engine for one item more than the server sends, to know whether the
    // reply is cut short by the server's limit.
    let ask = |limit: u32| (limit as usize).min(max_items + 1);
    match *op {
        Request::Get { key, .. } => {
            sh.count(OpClass::Get);
            reads.push((index, ReadRef::Get(key)));
            None
        }
        Request::Scan { lo, hi, limit, .. } => {
            sh.count(OpClass::Scan);
            let hi = (!hi.is_empty()).then_some(hi);
            reads.push((
                index,
                ReadRef::Scan {
                    lo,
                    hi,
                    limit: ask(limit),
                },
            ));
            None
        }
        Request::ScanFloor { kl, ku, limit, .. } => {
            sh.count(OpClass::Floor);
            reads.push((
                index,
                ReadRef::ScanFloor {
                    kl,
                    ku,
                    limit: ask(limit),
                },
            ));
            None
        }
        Request::Put { key, value, .. } => {
            write(OpClass::Put, key, Write::Put(Cow::Borrowed(value)))
        }
        Request::Delete { key, .. } => write(OpClass::Delete, key, Write::Delete),
        Request::PutExpiring {
            key,
            value,
            deadline,
            ..
        } => write(
            OpClass::Put,
            key,
            Write::Set {
                value: Cow::Borrowed(value),
                cond: Cond::Always,
                get: false,
                ttl: Ttl::Set(deadline),
            },
        ),
        Request::Expire { key, deadline, .. } => write(
            OpClass::Update,
            key,
            Write::Expire {
                deadline,
                cond: ExpireCond::default(),
            },
        ),
        Request::Ttl { key, .. } => write(OpClass::Get, key, Write::ReadDeadline),
        Request::Update { .. } if transport == Transport::Udp => Some(Answer::Fail(
            Status::Unsupported,
            "UPDATE is not allowed over UDP (not idempotent)".into(),
        )),
        Request::Update { key, value, .. } => {
            write(OpClass::Update, key, Write::Update(Cow::Borrowed(value)))
        }
        Request::FetchAdd { .. } | Request::Cas { .. } if transport == Transport::Udp => {
            Some(Answer::Fail(
                Status::Unsupported,
                "atomics are not allowed over UDP (a retried datagram would apply twice)".into(),
            ))
        }
        Request::FetchAdd {
            key,
            kind,
            overflow,
            delta,
            ..
        } => {
            // The decoder admits only valid bytes; anything else is malformed, not guessed.
            let (Some(elem), Some(overflow)) = (Elem::from_u8(kind), Overflow::from_u8(overflow))
            else {
                return Some(Answer::Fail(Status::Malformed, String::new()));
            };
            write(
                OpClass::Atomic,
                key,
                Write::FetchAdd {
                    elem,
                    overflow,
                    delta,
                },
            )
        }
        Request::Cas {
            key, expected, new, ..
        } => write(
            OpClass::Atomic,
            key,
            Write::Cas {
                expected: expected.map(Cow::Borrowed),
                new: Cow::Borrowed(new),
            },
        ),
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
                return Some(Answer::Fail(Status::Malformed, String::new()));
            };
            if transport == Transport::Udp && op.updates() {
                return Some(Answer::Fail(
                    Status::Unsupported,
                    "vector updates are not allowed over UDP (a retried datagram would apply twice)"
                        .into(),
                ));
            }
            write(
                OpClass::Vector,
                key,
                Write::Vector {
                    op,
                    elem,
                    overflow,
                    function: String::from_utf8_lossy(function),
                    operand: Cow::Borrowed(operand),
                },
            )
        }
        Request::Ping { payload, .. } => {
            sh.count(OpClass::Other);
            Some(Answer::Bytes(payload.to_vec()))
        }
        Request::Pad { .. } => Some(Answer::Empty),
        Request::Stats { .. } => {
            sh.count(OpClass::Other);
            Some(Answer::Bytes(
                (sh.persistence_text() + &sh.stats_text()).into_bytes(),
            ))
        }
        Request::Auth { .. } => Some(Answer::Empty),
        Request::Unknown { opcode, .. } => Some(Answer::Fail(
            Status::Unsupported,
            format!("unknown opcode {opcode:#04x}"),
        )),
        Request::Invalid { status, .. } => Some(Answer::Fail(status, String::new())),
    }
}

/// Runs a frame's writes (on the loop's thread) through the reservation station and returns
/// their answers once every one is in the tree, with the newest version they need visible.
fn run_writes(sh: &Shared, writes: Vec<(usize, Op<'_>)>) -> (Vec<(usize, Answer)>, u64) {
    let index: SmallVec<[usize; 16]> = writes.iter().map(|w| w.0).collect();
    let mut done: SmallVec<[Done; 16]> = SmallVec::new();
    sh.station()
        .run(sh.store(), writes.into_iter().map(|w| w.1), &mut done);
    let version = done.iter().map(|d| d.version).max().unwrap_or(0);
    let answers = index
        .into_iter()
        .zip(done)
        .map(|(i, d)| (i, answer_of(sh, d)))
        .collect();
    (answers, version)
}

/// A binary answer for a write's outcome.
fn answer_of(sh: &Shared, d: Done) -> Answer {
    match d.outcome {
        Err(e) => fail_store(sh, &e),
        Ok(Outcome::Done) => Answer::Version(d.version),
        Ok(Outcome::Skipped) => Answer::Fail(Status::NotFound, String::new()),
        Ok(Outcome::Fetched(b)) => Answer::Word(b),
        Ok(Outcome::Bytes(b)) => Answer::Bytes(b),
        Ok(Outcome::Old(b)) => Answer::Bytes(b.unwrap_or_default()),
        Ok(Outcome::Int(n)) => Answer::Bytes(n.to_le_bytes().to_vec()),
        // memcached outcomes (the binary protocol sends no memcached write).
        Ok(Outcome::Uint(n) | Outcome::Created(n)) => Answer::Word(n.to_le_bytes()),
        Ok(Outcome::Item(i)) => Answer::Bytes(i.value),
        Ok(Outcome::Deadline(Some(d))) => Answer::Word(d.to_le_bytes()),
        Ok(Outcome::Deadline(None)) => Answer::Fail(Status::NotFound, String::new()),
        Ok(Outcome::Mismatch { absent }) => {
            let m = if absent {
                "the key is absent"
            } else {
                "the value differs"
            };
            Answer::Fail(Status::Mismatch, m.into())
        }
        Ok(Outcome::Failed(Failure::Vector(e))) => Answer::Fail(vector_status(&e), e.to_string()),
        Ok(Outcome::Failed(f)) => {
            sh.metrics().errors.fetch_add(1, Ordering::Relaxed);
            Answer::Fail(Status::Error, f.to_string())
        }
    }
}

fn fail_store(sh: &Shared, e: &Error) -> Answer {
    if !matches!(e, Error::NotFound) {
        sh.metrics().errors.fetch_add(1, Ordering::Relaxed);
    }
    let (s, m) = status_of(e);
    Answer::Fail(s, m)
}

fn vector_status(e: &VectorError) -> Status {
    match e {
        VectorError::BadLength(_) => Status::BadLength,
        VectorError::UnknownFunction(_) => Status::UnknownFunction,
        VectorError::TypeMismatch(_) => Status::TypeMismatch,
        VectorError::Overflow => Status::Overflow,
    }
}

/// Keeps at most `max_items` items and `max_bytes` key and value bytes; says if it cut.
fn cap_items(items: Items, max_items: usize, max_bytes: usize) -> (Items, bool) {
    let mut bytes = 0;
    let mut kept = Items::default();
    let mut cut = false;
    for (k, v) in items.iter() {
        if kept.len() == max_items || bytes + k.len() + v.len() > max_bytes {
            cut = true;
            break;
        }
        bytes += k.len() + v.len();
        kept.push(k, v);
    }
    (kept, cut)
}

fn encode(frame_id: u32, heads: &[(u16, u8)], answers: &[Option<Answer>], out: &mut Vec<u8>) {
    let start = begin_response(out, frame_id, heads.len());
    for (&(id, opcode), a) in heads.iter().zip(answers) {
        encode_response_op(out, &response(id, opcode, a.as_ref()));
    }
    finish_response(out, start);
}

/// The response operation of an answer (`None`: none was given).
fn response<'a>(id: u16, opcode: u8, a: Option<&'a Answer>) -> Response<'a> {
    let (status, body) = match a {
        Some(Answer::Fail(s, m)) => (*s, Body::Message(m.as_bytes())),
        Some(Answer::Empty) => (Status::Ok, Body::Empty),
        Some(Answer::Bytes(b)) => (Status::Ok, Body::Bytes(b)),
        Some(Answer::Word(b)) => (Status::Ok, Body::Bytes(b)),
        Some(Answer::Version(v)) => (Status::Ok, Body::Version(*v)),
        Some(Answer::Items(items, truncated)) => (
            Status::Ok,
            Body::Items {
                truncated: *truncated,
                items: items.iter().collect(),
            },
        ),
        None => (Status::Error, Body::Message(b"no answer")),
    };
    Response {
        id,
        opcode,
        status,
        body,
    }
}

/// One response operation, alone: a replicated operation's reply (`crate::binary::cluster`).
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn encode_answer(id: u16, opcode: u8, a: &Answer) -> Vec<u8> {
    let mut out = Vec::new();
    encode_response_op(&mut out, &response(id, opcode, Some(a)));
    out
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
    sh.store().wait_visible(version);
    done.pop()
        .map_or(Answer::Fail(Status::Error, "no answer".into()), |d| d.1)
}
