//! The RESP handlers' doors into the core: a write (or several) through the reservation
//! station, inside the connection's transaction when one runs, noting the version its reply
//! rests on; a read through the loop's read door, or through the transaction.

use crate::core::ops::{Outcome, Write};
use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::reply::reply;
use crate::resp::session::Session;
use crate::resp::tx::run_in_tx;
use accelkv_engine::{Found, ReadRef, Reply};
use smallvec::SmallVec;

/// Runs `ops` through the reservation station (the one write door, so two loops writing one
/// key are ordered by its slot) and returns each one's answer once its effect is in the
/// tree, noting the newest version the replies rest on. The station usually runs them on
/// this thread; if another loop is draining a slot, this waits for that burst.
pub(crate) fn through_station<'a>(
    sh: &Shared,
    s: &mut Session,
    ops: impl IntoIterator<Item = Op<'a>>,
) -> SmallVec<[Done; 8]> {
    let mut done: SmallVec<[Done; 8]> = SmallVec::new();
    if s.tx.running.is_some() {
        for op in ops {
            done.push(run_in_tx(sh, s, op));
        }
        return done;
    }
    sh.station().run(sh.store(), ops, &mut done);
    for d in &done {
        s.unreleased = s.unreleased.max(d.version);
    }
    done
}

/// One write through the station, its reply appended to `out`.
pub(crate) fn write_one(
    sh: &Shared,
    s: &mut Session,
    op: Op<'_>,
    out: &mut Vec<u8>,
    ok: impl FnOnce(&mut Vec<u8>),
    skipped: impl FnOnce(&mut Vec<u8>),
) {
    let d = run_in_tx(sh, s, op);
    s.unreleased = s.unreleased.max(d.version);
    reply(out, &d, s.proto, ok, skipped);
}

/// A read through the loop's read door: the owned reply. Through an engine's workers the
/// read is submitted instead and this answers a placeholder: the caller (`batch.rs`)
/// sees `reads.submitted()`, drops the command's output and runs it again when answered.
pub(crate) fn read_one(sh: &Shared, reads: &mut Reads, req: ReadRef<'_>) -> Reply {
    let mut reply = Reply::Value(None);
    let _ = reads.run(sh.engine(), &[req], |_, f: Found<'_>| {
        reply = f.into_reply()
    });
    reply
}

/// The value of `key` for a command: inside a transaction, through it (seeing its own
/// writes, the key owned until the commit); otherwise through the loop's read door.
pub(crate) fn get_value(sh: &Shared, s: &mut Session, reads: &mut Reads, key: &[u8]) -> Reply {
    if s.tx.running.is_none() {
        return read_one(sh, reads, ReadRef::Get(key));
    }
    match run_in_tx(sh, s, Op::new(key, Write::Read)).outcome {
        Ok(Outcome::Old(v)) => Reply::Value(v),
        Err(e) => Reply::Error(e),
        Ok(_) => Reply::Value(None),
    }
}
