//! RESP commands with big arguments, read into memory of their own (Redis does the same
//! for arguments of 32 KiB and more). When a connection's input ends inside a bulk string
//! of at least [`STREAM_MIN`] bytes, the command's earlier arguments are copied out, and the
//! event loop reads the big one straight into an allocation of exactly its size
//! (`net/conn.rs`), so a 512 MB value is not held in a growing input buffer; the
//! command then runs from here with those arguments. A plain `SET key <big value> [options]`
//! hands its value to the store whole, as the item's out-of-line value: the value is held
//! once, never copied. Any other command sees its arguments as slices, as usual.

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::batch::dispatch_one;
use crate::resp::gate::{self, From, Pass};
use crate::resp::session::{Session, Streamed};
use crate::resp::table::find;
use accelkv_proto::resp::{self, RespError};
use accelkv_proto::resp_stream::{Partial, Progress, STREAM_MIN};
use smallvec::SmallVec;

/// What running a connection's input from its streamed command did.
pub struct Step {
    /// Input bytes taken.
    pub used: usize,
    /// Malformed input: the error is in `out`; close after it.
    pub bad: Option<RespError>,
    /// Read this many bytes next into an argument of their own.
    pub stream: Option<usize>,
    /// The command ran (or failed): the rest of the input runs as usual from `used`.
    pub done: bool,
}

/// Starts streaming the command at the front of `rest` (what a run of the input left
/// unparsed), if it is incomplete inside a big bulk string: the bytes it took and the
/// argument to stream.
pub fn start(sh: &Shared, s: &mut Session, rest: &[u8]) -> Option<(usize, usize)> {
    if rest.first() != Some(&b'*') || s.quit {
        return None;
    }
    let limits = &sh.settings().limits;
    match Partial::start(rest, limits, STREAM_MIN) {
        Ok(Some((partial, Progress::Stream { used, len }))) => {
            s.streamed = Some(Box::new(Streamed {
                partial,
                complete: false,
            }));
            Some((used, len))
        }
        // Anything else is the whole-command parser's to take (or refuse) as it grows.
        _ => None,
    }
}

/// Reads more of the connection's streamed command from `input` and runs it once whole.
pub fn resume(
    sh: &Shared,
    s: &mut Session,
    input: &[u8],
    reads: &mut Reads,
    out: &mut Vec<u8>,
) -> Step {
    let Some(mut st) = s.streamed.take() else {
        return step(0, None, true);
    };
    let mut used = 0;
    if !st.complete {
        let limits = &sh.settings().limits;
        match st.partial.resume(input, limits, STREAM_MIN) {
            Err(e) => {
                resp::error(out, &format!("ERR {e}"));
                return Step {
                    used: input.len(),
                    bad: Some(e),
                    stream: None,
                    done: true,
                };
            }
            Ok(Progress::More { used }) => {
                s.streamed = Some(st);
                return step(used, None, false);
            }
            Ok(Progress::Stream { used, len }) => {
                s.streamed = Some(st);
                return step(used, Some(len), false);
            }
            Ok(Progress::Complete { used: u }) => {
                st.complete = true;
                used = u;
            }
        }
    }
    if run(sh, s, &mut st.partial, reads, out) {
        step(used, None, true)
    } else {
        // It runs again, from the top, when the connection may go on.
        s.streamed = Some(st);
        step(used, None, false)
    }
}

fn step(used: usize, stream: Option<usize>, done: bool) -> Step {
    Step {
        used,
        bad: None,
        stream,
        done,
    }
}

/// Runs a whole streamed command as `batch.rs` runs any other: false when it must wait
/// and run again. A plain SET's value is moved into the store. Its reply is kept as
/// CLIENT REPLY says.
fn run(
    sh: &Shared,
    s: &mut Session,
    p: &mut Partial,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) -> bool {
    let mark = out.len();
    let ran = run_whole(sh, s, p, reads, out);
    if ran {
        s.replies.after(out, mark, false);
    }
    ran
}

fn run_whole(
    sh: &Shared,
    s: &mut Session,
    p: &mut Partial,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) -> bool {
    let spec = p.args().first().and_then(|name| find(name));
    let spec = {
        let args: SmallVec<[&[u8]; 8]> = p.args().iter().map(Vec::as_slice).collect();
        match gate::check(sh, s, spec, &args, From::Client, out) {
            Pass::Wait => return false,
            Pass::Answered => return true,
            Pass::Run(spec) => spec,
        }
    };
    // Past the gate: authenticated, and not being queued in MULTI.
    let moves = spec.name == "SET"
        && p.args().len() >= 3
        && p.args()[2].len() >= STREAM_MIN
        && sh.router().is_none();
    if moves {
        // Whether the write may start is decided before the value is taken (a write
        // that waits for its leaf runs again with it).
        let keys: [&[u8]; 1] = [&p.args()[1]];
        if reads.probe_write(keys.into_iter()).is_err() {
            return false;
        }
    }
    let value = if moves { p.take(2) } else { None };
    let args: SmallVec<[&[u8]; 8]> = p.args().iter().map(Vec::as_slice).collect();
    dispatch_one(sh, s, spec, &args, value, reads, out)
}
