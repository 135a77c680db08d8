//! Gather: once per loop turn, the GETs at the head of every ready RESP connection's input
//! (and the one-key `get`s at the head of every memcached connection's) become one read
//! batch, run through the loop's read door (the interleaved walk) together,
//! so fifty clients sending one GET each are one window of fifty independent lookups, not
//! fifty batches of one. Each connection's replies go straight into its output buffer, in
//! its command order; whatever follows its GETs (writes, other commands, a GET after its own
//! write) is left in its input for the connection's normal run (`resp_batch.rs`), which
//! keeps every ordering rule in one place.
//!
//! A connection takes part only when nothing could make its GETs wait or answer otherwise:
//! RESP, authenticated (or no password), not closing, not parked, under its output limit and
//! with no write of its own still unreleased (read-your-writes). Nothing is allocated once
//! the loop's buffers have grown: keys are offsets into each connection's input.

use crate::conn::{Conn, Proto};
use crate::reads::Reads;
use crate::resp_batch::get_reply;
use crate::state::{OpClass, Shared};
use accelkv_engine::{Found, ReadRef};
use accelkv_proto::memcache::{self as mc, reply as mc_reply};
use accelkv_proto::resp::{self, Version};
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Keys handed to the read door at once.
const CHUNK: usize = 64;
/// GETs taken from one connection per turn.
const PER_CONN: usize = 64;
/// GETs gathered per turn (bounds the loop's buffers and the time before other work).
const PER_TURN: usize = 1024;

/// A loop's reusable buffers for gathering.
#[derive(Default)]
pub struct Gather {
    /// Per GET: its connection's slot, the key's offsets in that connection's input, and
    /// the connection's reply protocol.
    keys: Vec<(usize, usize, usize, Answer)>,
    /// Per connection that gave GETs: its slot, input bytes they span, how many.
    conns: Vec<(usize, usize, usize)>,
    spans: Vec<(usize, usize)>,
    /// Replies, encoded as they complete (out of order).
    replies: Vec<u8>,
    /// Each GET's reply in `replies`.
    segs: Vec<(usize, usize)>,
    /// Per GET: whether it reached a leaf that lives only in the page file (not answered).
    missed: Vec<bool>,
}

/// How a gathered GET is answered.
#[derive(Clone, Copy)]
enum Answer {
    Resp(Version),
    /// A memcached `get` of one key: its `VALUE` block with the item's flags, then `END`.
    Memcached,
}

/// The key of a memcached `get` of exactly one key at the front of `b`, as offsets, and
/// the bytes the command takes; `None` for anything else (left to the connection's run).
fn mc_get_one(b: &[u8], limits: &mc::McLimits) -> Option<((usize, usize), usize)> {
    if !b.starts_with(b"get ") {
        return None;
    }
    let Ok(Some((mc::Command::Get { mut keys, .. }, used))) = mc::parse(b, limits) else {
        return None;
    };
    let key = keys.next()?;
    if keys.next().is_some() {
        return None;
    }
    let x = key.as_ptr() as usize - b.as_ptr() as usize;
    Some(((x, x + key.len()), used))
}

/// Whether `b` starts with a RESP `GET` of one key (`*2\r\n$3\r\nGET\r\n`, any case): a
/// cheap test before decoding, so other commands cost nothing here.
fn starts_get(b: &[u8]) -> bool {
    b.len() >= 13
        && &b[..8] == b"*2\r\n$3\r\n"
        && b[8..11].eq_ignore_ascii_case(b"GET")
        && &b[11..13] == b"\r\n"
}

/// Answers the leading GETs of the connections in `ready` (slots, no duplicates) as one
/// batch; see the module docs.
pub fn run(
    sh: &Shared,
    conns: &mut [Option<Conn>],
    ready: &[usize],
    reads: &mut Reads,
    g: &mut Gather,
) {
    g.keys.clear();
    g.conns.clear();
    if sh.cluster.get().is_some() {
        // Cluster mode routes every read on its own (resp_batch.rs, cluster.rs).
        return;
    }
    if reads.is_ring() {
        // An engine with workers of its own batches submissions itself; each connection
        // submits its reads and waits on its own (reads.rs).
        return;
    }
    let limits = &sh.settings.limits;
    let mc_limits = &crate::mc::limits(sh);
    let max_out = sh.settings.max_output;
    let open = sh.settings.password.is_none();
    for &slot in ready {
        if g.keys.len() >= PER_TURN {
            break;
        }
        let Some(c) = conns.get(slot).and_then(Option::as_ref) else {
            continue;
        };
        if let Proto::Memcached(s) = &c.proto {
            if c.closing || c.parked.is_some() || c.out.len() > max_out || !s.gatherable(open) {
                continue;
            }
            let data = c.inb.data();
            let (first, mut at) = (g.keys.len(), 0);
            while g.keys.len() - first < PER_CONN && g.keys.len() < PER_TURN {
                let Some(((x, y), used)) = mc_get_one(&data[at..], mc_limits) else {
                    break;
                };
                g.keys.push((slot, at + x, at + y, Answer::Memcached));
                at += used;
            }
            if g.keys.len() > first {
                g.conns.push((slot, at, g.keys.len() - first));
            }
            continue;
        }
        let Proto::Resp(s) = &c.proto else {
            continue;
        };
        if c.closing
            || c.parked.is_some()
            || c.out.len() > max_out
            || s.quit
            || s.unreleased > 0
            || s.tx.queued.is_some()
            || !(open || s.authed)
        {
            continue;
        }
        // As many as fit under the output limit, judging by this connection's replies so far.
        let per_reply = match s.reply_hint {
            0 => limits.max_value,
            n => n,
        };
        let want = ((max_out + 1 - c.out.len()) / per_reply.max(1)).clamp(1, PER_CONN);
        let data = c.inb.data();
        let (first, mut at) = (g.keys.len(), 0);
        while g.keys.len() - first < want && g.keys.len() < PER_TURN && starts_get(&data[at..]) {
            g.spans.clear();
            match resp::parse_command_spans(&data[at..], limits, &mut g.spans) {
                Ok(Some(used)) if g.spans.len() == 2 => {
                    let (x, y) = g.spans[1];
                    g.keys.push((slot, at + x, at + y, Answer::Resp(s.proto)));
                    at += used;
                }
                _ => break, // incomplete or malformed: the normal run deals with it
            }
        }
        if g.keys.len() > first {
            g.conns.push((slot, at, g.keys.len() - first));
        }
    }
    let n = g.keys.len();
    if n == 0 {
        return;
    }
    if !sh.admit(n) {
        return; // left in the inputs: the normal run answers BUSY
    }
    let start = Instant::now();
    let Gather {
        keys,
        replies,
        segs,
        missed,
        ..
    } = g;
    replies.clear();
    segs.clear();
    segs.resize(n, (0, 0));
    missed.clear();
    missed.resize(n, false);
    for base in (0..n).step_by(CHUNK) {
        let part = &keys[base..n.min(base + CHUNK)];
        let reqs: SmallVec<[ReadRef<'_>; CHUNK]> = part
            .iter()
            .map(|&(slot, x, y, _)| {
                let key = conns.get(slot).and_then(Option::as_ref);
                ReadRef::Get(key.map_or(&[][..], |c| &c.inb.data()[x..y]))
            })
            .collect();
        // Inline (checked above): answered before it returns, but for misses.
        reads.run_gathered(
            &reqs,
            |j, found| {
                let at = replies.len();
                match (part[j].3, &reqs[j]) {
                    (Answer::Resp(ver), _) => get_reply(replies, found, ver, false),
                    (Answer::Memcached, ReadRef::Get(key)) => {
                        if let Found::Value(Some(v), flags) = found {
                            mc_reply::value(replies, key, flags, v, None);
                        }
                        replies.extend_from_slice(b"END\r\n");
                    }
                    (Answer::Memcached, _) => replies.extend_from_slice(b"END\r\n"),
                }
                segs[base + j] = (at, replies.len());
            },
            |j| missed[base + j] = true,
        );
    }
    sh.release(n);
    let (mut next, mut answered) = (0, 0);
    let (mut resp_commands, mut mc_commands) = (0, 0);
    for &(slot, used, k) in &g.conns {
        let span = next..next + k;
        next += k;
        let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) else {
            continue;
        };
        if g.missed[span.clone()].contains(&true) {
            // A GET reached a leaf in the page file: the connection's own run answers its
            // GETs, waiting for the leaf without blocking the loop (reads.rs).
            continue;
        }
        answered += k;
        let before = c.out.len();
        for &(x, y) in &g.segs[span] {
            c.out.extend_from_slice(&g.replies[x..y]);
        }
        c.inb.consume(used);
        match &mut c.proto {
            Proto::Resp(s) => {
                s.reply_hint = (c.out.len() - before) / k;
                resp_commands += k as u64;
            }
            _ => mc_commands += k as u64,
        }
        sh.record_latency(start.elapsed());
    }
    sh.count_n(OpClass::Get, answered);
    let hot = sh.metrics.hot();
    hot.resp_commands
        .fetch_add(resp_commands, Ordering::Relaxed);
    hot.memcached_commands
        .fetch_add(mc_commands, Ordering::Relaxed);
    if g.replies.capacity() > 4 << 20 {
        g.replies = Vec::new(); // do not keep a big batch's memory per loop
    }
}

#[cfg(test)]
mod tests {
    use super::starts_get;

    #[test]
    fn recognises_only_a_get_of_one_key() {
        assert!(starts_get(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"));
        assert!(starts_get(b"*2\r\n$3\r\nget\r\n$1\r\n"));
        assert!(!starts_get(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"));
        assert!(!starts_get(b"*3\r\n$3\r\nGET\r\n"));
        assert!(!starts_get(b"GET k\r\n"));
        assert!(!starts_get(b"*2\r\n$3\r\nGE"));
    }
}
