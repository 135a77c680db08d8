//! Executes binary request frames (the same code for TCP and UDP) on the event loop that read
//! them: writes in frame order through the reservation station, then every read of the frame
//! as one batch through the loop's read door, then one response frame with an answer per
//! operation (held back, when the frame wrote, until the writes are durable).
//!
//! With a memory budget, a frame whose writes reach a leaf that lives only in the page file
//! runs nothing at first: the leaves go to the loader threads and the frame runs again,
//! whole, once they are back ([`Framed::Later`]), so the loop never blocks on a page read.

use crate::binary::answer::{encode, read_answer, Answer};
use crate::binary::cluster::Step;
use crate::binary::execute::{execute_op, run_writes, Transport};
use crate::core::counters::Proto;
use crate::core::ops::Write;
use crate::core::reads::{NotYet, Reads};
use crate::core::route::{Forward, Settled};
use crate::core::shared::Shared;
use crate::core::station::Op;
use accelkv_engine::{Found, ReadRef, Reply};
use accelkv_proto::frame::decode_request;
use accelkv_proto::{FrameError, Request, Status};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

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
        sh.view().is_visible(self.version)
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
        sh.record_latency(Proto::Binary, self.start.elapsed());
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
    settled: Vec<(usize, Settled)>,
) -> Result<Framed, FrameError> {
    let limits = &sh.settings().limits;
    let (h, ops) = decode_request(frame, limits)?;
    let start = Instant::now();
    // The token is hashed and checked only when it matters: a connection that sent AUTH is
    // authenticated already (and `token_ok` is read for UDP's size rule, where it never is).
    let token_ok = !*authed && h.token.is_some_and(|t| sh.password_matches(t));
    let n = ops.len();
    let admitted = sh.admit(n);
    let release = || {
        if admitted {
            sh.release(n);
        }
    };
    let mut b = Batch {
        answers: (0..n).map(|_| None).collect(),
        to_read: Vec::new(),
        writes: Vec::new(),
        forwards: Vec::new(),
    };
    let gate = Gate {
        transport,
        admitted,
        frame_authed: !sh.needs_auth() || *authed || token_ok,
    };
    place_ops(sh, &ops, gate, authed, settled, &mut b);
    if !b.forwards.is_empty() {
        // Nothing here has changed the store (AUTH, the only effect, is idempotent).
        release();
        return Ok(Framed::Routed(b.forwards));
    }
    let Ok((wrote, version)) = run_frame_writes(sh, reads, &mut b) else {
        release();
        return Ok(Framed::Later);
    };
    let max = (limits.max_scan_items, limits.max_scan_bytes);
    let pending = run_frame_reads(sh, reads, &mut b, version, max);
    release();
    // Counted once it ran (a frame that ran `Later` first runs twice).
    sh.metrics().hot().frames.fetch_add(1, Ordering::Relaxed);
    Ok(Framed::Ran(Ran {
        frame_id: h.frame_id,
        frame_len: frame.len(),
        heads: ops.iter().map(|op| (op.id(), op.opcode())).collect(),
        answers: b.answers,
        wrote,
        version,
        transport,
        token_ok,
        start,
        pending,
        limits: max,
    }))
}

/// A frame's operations on their way: answers so far, reads and writes to run, and (cluster
/// mode) operations routed to their ranges' groups.
struct Batch<'a> {
    answers: Vec<Option<Answer>>,
    to_read: Vec<(usize, ReadRef<'a>)>,
    writes: Vec<(usize, Op<'a>)>,
    forwards: Vec<(usize, Forward)>,
}

/// What every operation of a frame is checked against before it runs.
#[derive(Clone, Copy)]
struct Gate {
    transport: Transport,
    /// Room for its operations under `--max-inflight`.
    admitted: bool,
    /// The connection authenticated, or the frame carries the password.
    frame_authed: bool,
}

/// Answers or places each operation: BUSY, AUTH, refused before authentication, routed
/// (cluster mode), or run ([`execute_op`]).
fn place_ops<'a>(
    sh: &Arc<Shared>,
    ops: &[Request<'a>],
    g: Gate,
    authed: &mut bool,
    mut settled: Vec<(usize, Settled)>,
    b: &mut Batch<'a>,
) {
    let max_items = sh.settings().limits.max_scan_items;
    let cluster = sh.router();
    for (i, op) in ops.iter().enumerate() {
        let a = if !g.admitted {
            Some(Answer::Fail(Status::Busy, "server busy, retry".into()))
        } else if let Request::Auth {
            password: given, ..
        } = op
        {
            Some(auth(sh, given, authed))
        } else if !g.frame_authed {
            Some(Answer::Fail(
                Status::Unauthorized,
                "authentication required".into(),
            ))
        } else {
            // Cluster mode places the operation first: it runs here, is answered, or is
            // routed to its range's group.
            let step = match cluster {
                Some(cl) => {
                    let udp = g.transport == Transport::Udp;
                    crate::binary::cluster::step(sh, cl, op, i, udp, &mut settled, &mut b.forwards)
                }
                None => Step::Run,
            };
            match step {
                Step::Run => execute_op(
                    sh,
                    op,
                    g.transport,
                    i,
                    max_items,
                    &mut b.to_read,
                    &mut b.writes,
                ),
                Step::Answer(a) => Some(a),
                Step::Routed => None,
            }
        };
        b.answers[i] = a;
    }
}

/// AUTH: the password checked in constant time; the connection is authenticated from now on.
fn auth(sh: &Shared, given: &[u8], authed: &mut bool) -> Answer {
    if !sh.needs_auth() {
        Answer::Empty
    } else if sh.password_matches(given) {
        *authed = true;
        Answer::Empty
    } else {
        Answer::Fail(Status::Unauthorized, "invalid password".into())
    }
}

/// Runs the frame's writes, in frame order, through the reservation station: the indexes of
/// the operations that wrote and the newest version they rest on. Refused while the disk is
/// failing; past maxmemory only writes that free memory run. `Err`: a write's leaf is being
/// read back from the page file, and nothing has changed (AUTH, the only effect so far, is
/// idempotent; refusals are answers the re-run gives again).
fn run_frame_writes(
    sh: &Shared,
    reads: &mut Reads,
    b: &mut Batch<'_>,
) -> Result<(Vec<usize>, u64), NotYet> {
    if b.writes.is_empty() {
        return Ok((Vec::new(), 0));
    }
    if let Err(m) = sh.writable() {
        // The device is failing: refuse the writes before they change anything.
        for (i, _) in b.writes.drain(..) {
            b.answers[i] = Some(Answer::Fail(Status::Disk, m.clone()));
        }
        return Ok((Vec::new(), 0));
    }
    if sh.over_maxmemory() {
        // Past maxmemory (noeviction): writes that can add memory are refused.
        let answers = &mut b.answers;
        b.writes.retain(|(i, op)| {
            let frees = matches!(op.write, Write::Delete | Write::Remove | Write::GetDel);
            if !frees {
                let m = crate::core::shared::OOM.to_string();
                answers[*i] = Some(Answer::Fail(Status::Error, m));
            }
            frees
        });
    }
    if !b.writes.is_empty() {
        reads.probe_write(b.writes.iter().map(|w| w.1.key.as_ref()))?;
    }
    let wrote = b.writes.iter().map(|w| w.0).collect();
    let (done, version) = run_writes(sh, std::mem::take(&mut b.writes));
    for (i, a) in done {
        b.answers[i] = Some(a);
    }
    Ok((wrote, version))
}

/// Runs the frame's reads as one batch once its writes are visible (a wait only when an
/// older writer elsewhere has not completed yet). Submitted to an engine with workers of
/// its own: the wait and the answer index of each read, answered when it completes.
fn run_frame_reads(
    sh: &Shared,
    reads: &mut Reads,
    b: &mut Batch<'_>,
    version: u64,
    (max_items, max_bytes): (usize, usize),
) -> Option<(u64, Vec<usize>)> {
    if b.to_read.is_empty() {
        return None;
    }
    sh.view().wait_visible(version);
    let reqs: Vec<ReadRef<'_>> = b.to_read.iter().map(|r| r.1).collect();
    let (answers, to_read) = (&mut b.answers, &b.to_read);
    let ran = sh.read(reads, &reqs, |j, found| {
        answers[to_read[j].0] = Some(read_answer(found, max_items, max_bytes));
    });
    if ran.is_err() {
        let at = b.to_read.iter().map(|r| r.0).collect();
        return reads.take_submitted().map(|id| (id, at));
    }
    None
}
