//! A RESP pipeline run to completion on the event loop that read it: commands are decoded in
//! place (argument offsets into the input buffer, no copy), runs of GET and MGET go through
//! the loop's read door as one interleaved batch, runs of plain SETs through the station as
//! one batch, and everything else in order through the dispatcher (`dispatch.rs`, driven by
//! the command table; writes through the reservation station). Every command, those of a
//! run included, passes the gate (`gate.rs`) first: the runs are their handlers' cheap
//! case, not a second set of checks. Every reply is encoded
//! straight into the connection's output buffer. Nothing is allocated per command once the
//! loop's scratch buffers have grown.

use crate::core::counters::OpClass;
use crate::core::reads::{NotYet, Reads};
use crate::core::shared::Shared;
use crate::resp::call::flag::WRITE;
use crate::resp::call::Spec;
use crate::resp::dispatch;
use crate::resp::door::get_reply;
use crate::resp::gate::{self, From, Pass};
use crate::resp::session::Session;
use crate::resp::table::find;
use accelkv_engine::ReadRef;
use accelkv_proto::resp::{self, RespError, Version};
use smallvec::SmallVec;

/// Keys of one read batch (and commands decoded per step).
const BATCH: usize = 64;

/// A loop's reusable buffers for RESP batches.
#[derive(Default)]
pub struct Scratch {
    /// Argument offsets of the decoded commands.
    spans: Vec<(usize, usize)>,
    /// Each decoded command's range in `spans`.
    cmds: Vec<(usize, usize)>,
    /// Where each decoded command ends in the input.
    ends: Vec<usize>,
    /// Replies of a read batch, encoded as they complete (out of order).
    replies: Vec<u8>,
    /// Each key's reply in `replies`.
    segs: Vec<(usize, usize)>,
}

/// What running the buffered input did.
pub struct Ran {
    /// Input bytes consumed (complete commands).
    pub used: usize,
    /// The input is malformed: the error was written to `out`; close after it.
    pub bad: Option<RespError>,
}

/// `SET key value` with no options: what a run of SETs may batch.
fn is_plain_set(spec: &Spec, args: &[&[u8]]) -> bool {
    args.len() == 3 && spec.name == "SET"
}

/// GET or MGET (the gate checked their arity): what a read batch may run.
fn is_read(spec: &Spec, _args: &[&[u8]]) -> bool {
    matches!(spec.name, "GET" | "MGET")
}

/// Whether a command after the first of a run (`first`, which passed the gate) joins it:
/// it is what the run batches (`kind`), and the gate lets it run now (asked in full in
/// emulated cluster mode, where an MGET's keys may span slots).
#[inline]
fn joins(
    (sh, s): (&Shared, &Session),
    first: &'static Spec,
    args: &[&[u8]],
    kind: fn(&Spec, &[&[u8]]) -> bool,
) -> bool {
    let spec = find(args[0]);
    spec.is_some_and(|sp| kind(sp, args))
        && ((s.acl_open && !sh.settings().cluster_emulated && gate::again(first, spec, args))
            || gate::runs(sh, s, spec, args))
}

/// Runs the complete commands at the start of `buf`, appending replies to `out`, until the
/// input runs out, the connection quits, or `out` holds more than `max_out` bytes (the
/// caller stops reading until the client takes them: backpressure).
pub fn run(
    sh: &Shared,
    s: &mut Session,
    buf: &[u8],
    reads: &mut Reads,
    sc: &mut Scratch,
    out: &mut Vec<u8>,
    max_out: usize,
) -> Ran {
    let limits = &sh.settings().limits;
    let mut pos = 0;
    while out.len() <= max_out && !s.quit {
        // Decode up to BATCH commands, fewer when replies have been big (so a connection's
        // output overshoots its limit by about one reply, not by a batch of them).
        let room = max_out + 1 - out.len();
        let per_reply = match s.reply_hint {
            // Nothing seen yet: assume a large reply (the largest value, up to 1 MiB).
            0 => limits.max_value.min(1 << 20),
            n => n,
        };
        let want = (room / per_reply.max(1)).clamp(1, BATCH);
        sc.spans.clear();
        sc.cmds.clear();
        sc.ends.clear();
        let mut at = pos;
        let mut bad = None;
        while sc.cmds.len() < want {
            let mark = sc.spans.len();
            match resp::parse_command_spans(&buf[at..], limits, &mut sc.spans) {
                Ok(Some(used)) => {
                    for sp in &mut sc.spans[mark..] {
                        (sp.0, sp.1) = (sp.0 + at, sp.1 + at);
                    }
                    at += used;
                    if sc.spans.len() > mark {
                        sc.cmds.push((mark, sc.spans.len()));
                        sc.ends.push(at);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        if sc.cmds.is_empty() && at == pos {
            if let Some(e) = &bad {
                resp::error(out, &format!("ERR {e}"));
            }
            return Ran { used: pos, bad };
        }
        let before = out.len();
        let ran = run_decoded(sh, s, buf, reads, sc, out);
        s.reply_hint = (out.len() - before) / ran.max(1);
        if sc.replies.capacity() > 4 << 20 {
            sc.replies = Vec::new(); // do not keep a big batch's memory per loop
        }
        if sc.spans.capacity() > 1 << 16 {
            sc.spans = Vec::new(); // nor a command of many arguments' offsets
        }
        if ran < sc.cmds.len() {
            // Stopped before a command that must see this connection's writes, which are
            // not visible yet: the rest waits in the input until they are.
            let used = if ran == 0 { pos } else { sc.ends[ran - 1] };
            return Ran { used, bad: None };
        }
        pos = at;
        if let Some(e) = bad {
            resp::error(out, &format!("ERR {e}"));
            return Ran {
                used: pos,
                bad: Some(e),
            };
        }
    }
    Ran {
        used: pos,
        bad: None,
    }
}

/// Runs the commands in `sc.cmds`, in order; returns how many ran (fewer than all when a
/// command that is not a write follows a write of this connection that is not visible yet,
/// or waits: on an engine's workers, a leaf being read back, or its range's group). Each
/// passes the gate (`gate.rs`) first; a run of GETs and MGETs, or of plain SETs, is then the
/// cheap case of their handlers: one batch.
fn run_decoded(
    sh: &Shared,
    s: &mut Session,
    buf: &[u8],
    reads: &mut Reads,
    sc: &mut Scratch,
    out: &mut Vec<u8>,
) -> usize {
    let n = sc.cmds.len();
    let mut i = 0;
    while i < n && !s.quit {
        let args = args_of(buf, &sc.spans, sc.cmds[i]);
        let mark = out.len();
        let spec = match gate::check(sh, s, find(args[0]), &args, From::Client, out) {
            Pass::Wait => {
                // Cluster mode: the plain writes after a routed one to its range go with it.
                let mut j = i + 1;
                while j < n && sh.router().is_some() {
                    let next = args_of(buf, &sc.spans, sc.cmds[j]);
                    if !gate::joins_routed(sh, s, find(next[0]), &next) {
                        break;
                    }
                    j += 1;
                }
                return i;
            }
            Pass::Answered => {
                s.replies.after(out, mark, false);
                i += 1;
                continue;
            }
            Pass::Run(spec) => spec,
        };
        if is_read(spec, &args) && s.may_batch_reads() {
            match get_run((sh, s), spec, buf, reads, sc, i, out) {
                Some(end) => {
                    count_run(s, buf, sc, (i, end));
                    i = end;
                }
                None => return i, // submitted to an engine's workers: resumed when answered
            }
            continue;
        }
        if is_plain_set(spec, &args) && s.db == 0 && sh.router().is_none() && s.may_batch_sets() {
            match set_run((sh, s), spec, buf, reads, sc, i, out) {
                Ok(Some(end)) => {
                    count_run(s, buf, sc, (i, end));
                    i = end;
                    continue;
                }
                Ok(None) => {}
                Err(NotYet) => return i,
            }
        }
        if !dispatch_one(sh, s, spec, &args, None, reads, out) {
            return i;
        }
        s.replies.after(out, mark, spec.subscribes());
        i += 1;
    }
    i
}

/// Runs one command the gate let through (`value`: its value handed over whole, see
/// [`dispatch::call`]); false when it did not run and must run again from the top (its
/// write's leaf is being read back from the page file, it blocks, or a read was submitted
/// to an engine's workers), its output dropped.
pub(crate) fn dispatch_one(
    sh: &Shared,
    s: &mut Session,
    spec: &'static Spec,
    args: &[&[u8]],
    value: Option<Vec<u8>>,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) -> bool {
    // A write whose leaf lives only in the page file waits for it without blocking the
    // loop (reads.rs), then runs from here. (A caller handing a value over probed first:
    // once taken, the value cannot wait.)
    if value.is_none() && spec.has(WRITE) && reads.probe_write(spec.keys_of(args)).is_err() {
        return false;
    }
    let mark = out.len();
    dispatch::call(sh, s, spec, args, value, reads, out);
    if s.block.req.is_some() {
        // A blocking command found nothing to take: it parks (adapter.rs) and runs
        // again, from the top, when woken.
        out.truncate(mark);
        return false;
    }
    if reads.submitted() {
        // A read of this command was submitted to an engine's workers: it runs again,
        // from the top, when answered (reads have no side effects to repeat).
        out.truncate(mark);
        return false;
    }
    true
}

/// Counts a run of GETs, MGETs or SETs the batch answered (INFO commandstats): each by its
/// table entry, consecutive ones of one command together.
fn count_run(s: &Session, buf: &[u8], sc: &Scratch, (from, to): (usize, usize)) {
    let name = |j: usize| {
        let (x, y) = sc.spans[sc.cmds[j].0];
        &buf[x..y]
    };
    let mut j = from;
    while j < to {
        let mut k = j + 1;
        while k < to && name(k).eq_ignore_ascii_case(name(j)) {
            k += 1;
        }
        if let Some(spec) = find(name(j)) {
            s.last_cmd.set(spec.name);
            let n = (k - j) as u64;
            s.global
                .cmdstats
                .ran_many(crate::resp::table::position(spec), n);
        }
        j = k;
    }
}

/// A run of GET/MGET from command `i`, up to BATCH keys (an MGET longer than that on its
/// own; in cluster mode one command, each routed on its own): where it ended, or `None`
/// when it was submitted to an engine's workers.
fn get_run(
    (sh, s): (&Shared, &Session),
    first: &'static Spec,
    buf: &[u8],
    reads: &mut Reads,
    sc: &mut Scratch,
    i: usize,
    out: &mut Vec<u8>,
) -> Option<usize> {
    let (n, cluster) = (sc.cmds.len(), sh.router().is_some());
    let mut end = i;
    let mut keys = 0;
    while end < n && !(cluster && end > i) {
        let a = args_of(buf, &sc.spans, sc.cmds[end]);
        // The first passed the gate; each after it must too (it does, for a GET after a
        // GET: the connection's state has not changed).
        let joins = end == i || joins((sh, s), first, &a, is_read);
        if !joins || (keys > 0 && keys + a.len() - 1 > BATCH) {
            break;
        }
        keys += a.len() - 1;
        end += 1;
    }
    read_run(sh, buf, reads, sc, (i, end), s.proto, out).ok()?;
    Some(end)
}

/// A run of plain SETs from command `i`: one station batch whose tree writes start where
/// one interleaved descent for all their keys found them. `Ok(None)`: a run of one (run it
/// as any command); `Err`: a leaf is being read back from the page file.
fn set_run(
    (sh, s): (&Shared, &mut Session),
    first: &'static Spec,
    buf: &[u8],
    reads: &mut Reads,
    sc: &Scratch,
    i: usize,
    out: &mut Vec<u8>,
) -> Result<Option<usize>, NotYet> {
    let n = sc.cmds.len();
    let mut end = i + 1;
    while end < n
        && end - i < BATCH
        && joins(
            (sh, s),
            first,
            &args_of(buf, &sc.spans, sc.cmds[end]),
            is_plain_set,
        )
    {
        end += 1;
    }
    if end - i == 1 {
        return Ok(None);
    }
    let sets: SmallVec<[(&[u8], &[u8]); BATCH]> = (i..end)
        .map(|j| {
            let a = args_of(buf, &sc.spans, sc.cmds[j]);
            (a[1], a[2])
        })
        .collect();
    reads.probe_write(sets.iter().map(|kv| kv.0))?;
    crate::resp::commands::expire::set_run(sh, s, &sets, out);
    if sh.blocked().waiting() > 0 {
        // As any write (dispatch.rs): a parked XREADGROUP on a key SET replaced answers.
        sh.blocked().wake(sets.iter().map(|kv| kv.0));
    }
    Ok(Some(end))
}

type Args<'a> = SmallVec<[&'a [u8]; 8]>;

fn args_of<'a>(buf: &'a [u8], spans: &[(usize, usize)], (a, b): (usize, usize)) -> Args<'a> {
    spans[a..b].iter().map(|&(x, y)| &buf[x..y]).collect()
}

/// GET and MGET commands `from..to` of `sc.cmds` as one read batch (inline, in chunks of
/// BATCH keys; through a ring, in one submission). `Err(NotYet)`: submitted, nothing written.
fn read_run(
    sh: &Shared,
    buf: &[u8],
    reads: &mut Reads,
    sc: &mut Scratch,
    (from, to): (usize, usize),
    ver: Version,
    out: &mut Vec<u8>,
) -> Result<(), NotYet> {
    // Every key of the run, in order, and whether it belongs to an MGET (whose errors are
    // nils, as Redis answers them).
    let mut keys: SmallVec<[(ReadRef<'_>, bool); BATCH]> = SmallVec::new();
    for &(a, b) in &sc.cmds[from..to] {
        let mget = sc.spans[a].1 - sc.spans[a].0 == 4;
        for &(x, y) in &sc.spans[a + 1..b] {
            keys.push((ReadRef::Get(&buf[x..y]), mget));
        }
    }
    if !sh.admit(keys.len()) {
        for _ in from..to {
            resp::error(out, "BUSY server has too many operations in flight");
        }
        return Ok(());
    }
    // One GET (not an MGET, whose array header goes first) is in order by itself: its
    // reply goes straight into `out`, so a big value is copied once. The scratch buffer is
    // for replies that complete out of order.
    let direct = matches!(keys[..], [(_, false)]);
    let mark = out.len();
    sc.replies.clear();
    sc.segs.clear();
    sc.segs.resize(keys.len(), (0, 0));
    let chunk = if reads.is_ring() {
        keys.len().max(1)
    } else {
        BATCH
    };
    for base in (0..keys.len()).step_by(chunk) {
        let part = &keys[base..keys.len().min(base + chunk)];
        let reqs: SmallVec<[ReadRef<'_>; BATCH]> = part.iter().map(|k| k.0).collect();
        let replies = if direct { &mut *out } else { &mut sc.replies };
        let segs = &mut sc.segs;
        let ran = sh.read(reads, &reqs, |j, found| {
            let start = replies.len();
            let key = match part[j].0 {
                ReadRef::Get(k) => k,
                _ => &[],
            };
            get_reply(replies, found, ver, part[j].1, Some((sh, key)));
            segs[base + j] = (start, replies.len());
        });
        if let Err(e) = ran {
            sh.release(keys.len());
            out.truncate(mark);
            return Err(e);
        }
    }
    sh.release(keys.len());
    sh.count_n(OpClass::Get, keys.len());
    sh.metrics()
        .hot()
        .resp_commands
        .fetch_add((to - from) as u64, std::sync::atomic::Ordering::Relaxed);
    if direct {
        return Ok(());
    }
    let mut next = 0;
    for &(a, b) in &sc.cmds[from..to] {
        if sc.spans[a].1 - sc.spans[a].0 == 4 {
            resp::array(out, b - a - 1);
        }
        for _ in a + 1..b {
            let (x, y) = sc.segs[next];
            out.extend_from_slice(&sc.replies[x..y]);
            next += 1;
        }
    }
    Ok(())
}
