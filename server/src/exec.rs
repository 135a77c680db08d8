//! Executes binary request frames (the same code for TCP and UDP): writes on the calling
//! thread in frame order, then every read of the frame as one engine batch, then one
//! response frame with an answer per operation.

use crate::state::{OpClass, Shared};
use accelkv_engine::{Items, ReadEngine, Reply, Request as EngineRequest, Sink};
use accelkv_proto::frame::{begin_response, decode_request, encode_response_op, finish_response};
use accelkv_proto::{Body, FrameError, Request, Response, Status};
use accelkv_tree::Error;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which transport a frame came on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    Tcp,
    Udp,
}

/// A write copied out of the frame, to run on a writer thread.
enum WriteOp {
    Put(Vec<u8>, Vec<u8>),
    Update(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// An answer owning its bytes until the response frame is encoded.
enum Answer {
    Fail(Status, String),
    Empty,
    Bytes(Vec<u8>),
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

/// Waits for `n` completions in `sink`.
pub fn wait_all(sink: &Sink, n: usize) -> Vec<accelkv_engine::Completion> {
    let mut done = Vec::with_capacity(n);
    while done.len() < n {
        let need = n - done.len();
        sink.wait(&mut done, need, Duration::from_secs(30));
    }
    done
}

/// Executes the request frame in `frame` and appends its response frame to `out`.
/// `authed` is the connection's AUTH state (always false for UDP). An error means the frame
/// could not be decoded at all: drop the datagram or close the connection.
pub fn execute_frame(
    sh: &Arc<Shared>,
    frame: &[u8],
    transport: Transport,
    authed: &mut bool,
    sink: &Arc<Sink>,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let limits = &sh.settings.limits;
    let (h, ops) = decode_request(frame, limits)?;
    let start = Instant::now();
    sh.metrics.frames.fetch_add(1, Ordering::Relaxed);
    let password = sh.settings.password.as_deref().map(str::as_bytes);
    let token_ok = password.is_some_and(|p| h.token == Some(p));
    let frame_authed = password.is_none() || *authed || token_ok;
    let n = ops.len();
    let admitted = sh.admit(n);
    let mut answers: Vec<Option<Answer>> = (0..n).map(|_| None).collect();
    let mut reads: Vec<(u64, EngineRequest)> = Vec::new();
    let mut writes: Vec<(usize, WriteOp)> = Vec::new();
    let max_items = limits.max_scan_items;
    for (i, op) in ops.iter().enumerate() {
        let a = if !admitted {
            Some(Answer::Fail(Status::Busy, "server busy, retry".into()))
        } else if let Request::Auth {
            password: given, ..
        } = op
        {
            match password {
                None => Some(Answer::Empty),
                Some(p) if p == *given => {
                    *authed = true;
                    Some(Answer::Empty)
                }
                Some(_) => Some(Answer::Fail(
                    Status::Unauthorized,
                    "invalid password".into(),
                )),
            }
        } else if !frame_authed {
            Some(Answer::Fail(
                Status::Unauthorized,
                "authentication required".into(),
            ))
        } else {
            execute_op(sh, op, transport, i, max_items, &mut reads, &mut writes)
        };
        answers[i] = a;
    }
    if !writes.is_empty() {
        // The frame's writes, in frame order, as one job on a writer thread.
        let shared = sh.clone();
        let done = sh.writers.run(move || {
            writes
                .into_iter()
                .map(|(i, w)| (i, apply(&shared, w)))
                .collect::<Vec<_>>()
        });
        for (i, a) in done {
            answers[i] = Some(a);
        }
    }
    if !reads.is_empty() {
        let count = reads.len();
        sh.engine.submit(sink, reads);
        for c in wait_all(sink, count) {
            answers[c.tag as usize] = Some(match c.reply {
                Reply::Value(Some(v)) => Answer::Bytes(v),
                Reply::Value(None) => Answer::Fail(Status::NotFound, String::new()),
                Reply::Items(items) => {
                    // The engine was asked for one item more than the server's limit.
                    let truncated = items.len() > max_items;
                    let items = cap_items(items, max_items, limits.max_scan_bytes);
                    let cut = truncated || items.1;
                    Answer::Items(items.0, cut)
                }
                Reply::Error(e) => {
                    let (s, m) = status_of(&e);
                    Answer::Fail(s, m)
                }
            });
        }
    }
    if admitted {
        sh.release(n);
    }
    encode(h.frame_id, &ops, &answers, out);
    // UDP never amplifies: an unauthenticated datagram gets no larger reply (DESIGN §3.7).
    if transport == Transport::Udp && !token_ok && out.len() > frame.len() {
        out.clear();
        let squeezed: Vec<Option<Answer>> = answers
            .into_iter()
            .map(|a| match a {
                Some(Answer::Fail(s, _)) => Some(Answer::Fail(s, String::new())),
                Some(Answer::Empty) => Some(Answer::Empty),
                _ => Some(Answer::Fail(Status::TooLarge, String::new())),
            })
            .collect();
        encode(h.frame_id, &ops, &squeezed, out);
        if out.len() > frame.len() {
            out.clear(); // not even the statuses fit: no reply at all
        }
    }
    sh.record_latency(start.elapsed());
    Ok(())
}

/// Runs one operation: writes and local answers now; reads are queued for the engine.
fn execute_op(
    sh: &Shared,
    op: &Request<'_>,
    transport: Transport,
    index: usize,
    max_items: usize,
    reads: &mut Vec<(u64, EngineRequest)>,
    writes: &mut Vec<(usize, WriteOp)>,
) -> Option<Answer> {
    let tag = index as u64;
    let mut write = |w| {
        writes.push((index, w));
        None
    };
    // A scan asks the engine for one item more than the server sends, to know whether the
    // reply is cut short by the server's limit.
    let ask = |limit: u32| (limit as usize).min(max_items + 1);
    match *op {
        Request::Get { key, .. } => {
            sh.count(OpClass::Get);
            reads.push((tag, EngineRequest::get(key)));
            None
        }
        Request::Scan { lo, hi, limit, .. } => {
            sh.count(OpClass::Scan);
            let hi = (!hi.is_empty()).then_some(hi);
            reads.push((tag, EngineRequest::scan(lo, hi, ask(limit))));
            None
        }
        Request::ScanFloor { kl, ku, limit, .. } => {
            sh.count(OpClass::Floor);
            reads.push((tag, EngineRequest::scan_floor(kl, ku, ask(limit))));
            None
        }
        Request::Put { key, value, .. } => write(WriteOp::Put(key.to_vec(), value.to_vec())),
        Request::Delete { key, .. } => write(WriteOp::Delete(key.to_vec())),
        Request::Update { .. } if transport == Transport::Udp => Some(Answer::Fail(
            Status::Unsupported,
            "UPDATE is not allowed over UDP (not idempotent)".into(),
        )),
        Request::Update { key, value, .. } => write(WriteOp::Update(key.to_vec(), value.to_vec())),
        Request::Ping { payload, .. } => {
            sh.count(OpClass::Other);
            Some(Answer::Bytes(payload.to_vec()))
        }
        Request::Pad { .. } => Some(Answer::Empty),
        Request::Stats { .. } => {
            sh.count(OpClass::Other);
            Some(Answer::Bytes(sh.stats_text().into_bytes()))
        }
        Request::Auth { .. } => Some(Answer::Empty),
        Request::Unknown { opcode, .. } => Some(Answer::Fail(
            Status::Unsupported,
            format!("unknown opcode {opcode:#04x}"),
        )),
        Request::Invalid { status, .. } => Some(Answer::Fail(status, String::new())),
    }
}

/// Runs one write on the store (on a writer thread), under its key's stripe.
fn apply(sh: &Shared, w: WriteOp) -> Answer {
    let (class, r, absent_is_error) = match &w {
        WriteOp::Put(k, v) => {
            let _g = sh.stripe(k);
            (OpClass::Put, sh.store.put(k, v), false)
        }
        WriteOp::Update(k, v) => {
            let _g = sh.stripe(k);
            (OpClass::Update, sh.store.update(k, v), true)
        }
        WriteOp::Delete(k) => {
            let _g = sh.stripe(k);
            (OpClass::Delete, sh.store.delete(k), true)
        }
    };
    sh.count(class);
    match r {
        Ok(w) if absent_is_error && !w.existed => Answer::Fail(Status::NotFound, String::new()),
        Ok(w) => Answer::Version(w.version),
        Err(e) => {
            if !matches!(e, Error::NotFound) {
                sh.metrics.errors.fetch_add(1, Ordering::Relaxed);
            }
            let (s, m) = status_of(&e);
            Answer::Fail(s, m)
        }
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

fn encode(frame_id: u32, ops: &[Request<'_>], answers: &[Option<Answer>], out: &mut Vec<u8>) {
    let start = begin_response(out, frame_id, ops.len());
    for (op, a) in ops.iter().zip(answers) {
        let (status, body) = match a {
            Some(Answer::Fail(s, m)) => (*s, Body::Message(m.as_bytes())),
            Some(Answer::Empty) => (Status::Ok, Body::Empty),
            Some(Answer::Bytes(b)) => (Status::Ok, Body::Bytes(b)),
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
        encode_response_op(
            out,
            &Response {
                id: op.id(),
                opcode: op.opcode(),
                status,
                body,
            },
        );
    }
    finish_response(out, start);
}
