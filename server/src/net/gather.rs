//! Gather: once per loop turn, the GETs at the head of every ready RESP connection's input
//! (and the one-key `get`s at the head of every memcached connection's) become one read
//! batch, run through the loop's read door (the interleaved walk) together,
//! so fifty clients sending one GET each are one window of fifty independent lookups, not
//! fifty batches of one. Each connection's replies go straight into its output buffer, in
//! its command order; whatever follows its GETs (writes, other commands, a GET after its own
//! write) is left in its input for the connection's normal run (its session), which
//! keeps every ordering rule in one place.
//!
//! A connection takes part only when nothing could make its GETs wait or answer otherwise:
//! not closing, not parked, under its output limit, and its session says which GETs at the
//! head of its input qualify ([`Session::gather`](crate::net::session::Session::gather):
//! authenticated, no write of its own still unreleased, by the same rule as the session's own
//! read batches). Nothing is allocated once the loop's buffers have grown: keys are offsets
//! into each connection's input.

use crate::core::counters::OpClass;
use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::net::conn::Conn;
use accelkv_engine::ReadRef;
use smallvec::SmallVec;
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
    /// Per GET: its connection's slot and the key's offsets in that connection's input.
    keys: Vec<(usize, usize, usize)>,
    /// One connection's keys, as its session gives them (reused).
    found: Vec<(usize, usize)>,
    /// Per connection that gave GETs: its slot, input bytes they span, how many.
    conns: Vec<(usize, usize, usize)>,
    /// Replies, encoded as they complete (out of order).
    replies: Vec<u8>,
    /// Each GET's reply in `replies`.
    segs: Vec<(usize, usize)>,
    /// Per GET: whether it reached a leaf that lives only in the page file (not answered).
    missed: Vec<bool>,
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
    if sh.router().is_some() {
        // Cluster mode routes every read on its own (resp/batch.rs, cluster/).
        return;
    }
    if reads.is_ring() {
        // An engine with workers of its own batches submissions itself; each connection
        // submits its reads and waits on its own (reads.rs).
        return;
    }
    collect(sh, conns, ready, g);
    let n = g.keys.len();
    if n == 0 {
        return;
    }
    if !sh.admit(n) {
        return; // left in the inputs: the normal run answers BUSY
    }
    let start = Instant::now();
    read_all(conns, reads, g);
    sh.release(n);
    // Each GET's share of the batch's read (LATENCY HISTOGRAM, INFO commandstats).
    let each = start.elapsed() / n as u32;
    let (mut next, mut answered) = (0, 0);
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
        if c.out.is_empty() && g.segs[span.clone()] == [(0, g.replies.len())] {
            // The batch's only reply (a big value's, say) becomes the output as it is:
            // not copied, so the value is held once more, not twice.
            std::mem::swap(&mut c.out, &mut g.replies);
        } else {
            for &(x, y) in &g.segs[span] {
                c.out.extend_from_slice(&g.replies[x..y]);
            }
        }
        c.inb.consume(used);
        let bytes = c.out.len() - before;
        c.session.gathered(sh, k, bytes, each * k as u32);
        sh.record_latency(c.session.protocol(), start.elapsed());
    }
    sh.count_n(OpClass::Get, answered);
    if g.replies.capacity() > 4 << 20 {
        g.replies = Vec::new(); // do not keep a big batch's memory per loop
    }
}

/// The GETs each ready connection's session offers, up to the per-connection and per-turn
/// bounds.
fn collect(sh: &Shared, conns: &[Option<Conn>], ready: &[usize], g: &mut Gather) {
    let max_out = sh.settings().max_output;
    for &slot in ready {
        if g.keys.len() >= PER_TURN {
            break;
        }
        let Some(c) = conns.get(slot).and_then(Option::as_ref) else {
            continue;
        };
        if c.closing || c.parked.is_some() || c.out.len() > max_out {
            continue;
        }
        let room = PER_CONN.min(PER_TURN - g.keys.len());
        g.found.clear();
        let used = c
            .session
            .gather(sh, c.inb.data(), c.out.len(), room, &mut g.found);
        if g.found.is_empty() {
            continue;
        }
        g.keys.extend(g.found.iter().map(|&(x, y)| (slot, x, y)));
        g.conns.push((slot, used, g.found.len()));
    }
}

/// Reads every gathered key through the read door (inline: answered before it returns, but
/// for misses), each reply encoded by its connection's session.
fn read_all(conns: &[Option<Conn>], reads: &mut Reads, g: &mut Gather) {
    let n = g.keys.len();
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
            .map(|&(slot, x, y)| {
                let key = conns.get(slot).and_then(Option::as_ref);
                ReadRef::Get(key.map_or(&[][..], |c| &c.inb.data()[x..y]))
            })
            .collect();
        reads.run_gathered(
            &reqs,
            |j, found| {
                let at = replies.len();
                let (slot, x, y) = part[j];
                if let Some(c) = conns.get(slot).and_then(Option::as_ref) {
                    c.session
                        .gathered_reply(&c.inb.data()[x..y], found, replies);
                }
                segs[base + j] = (at, replies.len());
            },
            |j| missed[base + j] = true,
        );
    }
}
