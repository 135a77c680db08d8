//! The RESP handlers' doors into the core: a write (or several) through the reservation
//! station, inside the connection's transaction when one runs, noting the version its reply
//! rests on; a read through the loop's read door, or through the transaction.

use crate::core::ops::typed::is_typed;
use crate::core::ops::{Outcome, Write};
use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::commands::types::encoding::MAGIC;
use crate::resp::commands::types::keyspace;
use crate::resp::commands::types::keyspace::item_now;
use crate::resp::reply::{err_store, reply, WRONGTYPE};
use crate::resp::session::Session;
use crate::resp::write_door::run_op;
use accelkv_engine::{Found, ReadRef, Reply};
use accelkv_proto::resp::{self, Version};
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
            done.push(run_op(sh, s, op));
        }
        return done;
    }
    sh.writes().run(ops, &mut done);
    for d in &done {
        s.unreleased = s.unreleased.max(d.version);
    }
    done
}

/// What one write did, as its keyspace event depends on it (`notify.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ran {
    /// Done, or answered a number or bytes.
    Done,
    /// Its condition did not hold (or the key was absent): nothing changed.
    Skipped,
    /// It answered the old value (`true`: there was one).
    Old(bool),
    /// Refused or failed: nothing changed.
    Failed,
}

/// One write through the station, its reply appended to `out`; what it did.
pub(crate) fn write_one(
    sh: &Shared,
    s: &mut Session,
    op: Op<'_>,
    out: &mut Vec<u8>,
    ok: impl FnOnce(&mut Vec<u8>),
    skipped: impl FnOnce(&mut Vec<u8>),
) -> Ran {
    let d = run_op(sh, s, op);
    s.unreleased = s.unreleased.max(d.version);
    reply(out, &d, s.proto, ok, skipped);
    match &d.outcome {
        Ok(Outcome::Skipped) => Ran::Skipped,
        Ok(Outcome::Old(v)) => Ran::Old(v.is_some()),
        Ok(Outcome::Failed(_)) | Err(_) => Ran::Failed,
        Ok(_) => Ran::Done,
    }
}

/// A read through the loop's read door: the owned reply. Through an engine's workers the
/// read is submitted instead and this answers a placeholder: the caller (`batch.rs`)
/// sees `reads.submitted()`, drops the command's output and runs it again when answered.
pub(crate) fn read_one(sh: &Shared, reads: &mut Reads, req: ReadRef<'_>) -> Reply {
    let mut reply = Reply::Value(None);
    let _ = sh.read(reads, &[req], |_, f: Found<'_>| reply = f.into_reply());
    reply
}

/// Appends the reply to one GET (or one key of an MGET, whose errors are nils, as Redis
/// answers them) in protocol `ver`. A collection's key is Redis's WRONGTYPE (nil in an
/// MGET); an answer that came without flags (through a ring) and looks like a
/// collection's metadata is confirmed through `sh`.
pub fn get_reply(
    out: &mut Vec<u8>,
    found: Found<'_>,
    ver: Version,
    mget: bool,
    check: Option<(&Shared, &[u8])>,
) {
    let typed = match &found {
        Found::Value(Some(_), f) => is_typed(*f),
        Found::Reply(Reply::Value(Some(v))) => keyspace::looks_typed(check, v),
        _ => false,
    };
    match found {
        _ if typed && mget => resp::bulk_in(out, None, ver),
        _ if typed => resp::error(out, WRONGTYPE),
        Found::Value(v, _) => resp::bulk_in(out, v, ver),
        Found::Reply(Reply::Value(v)) => resp::bulk_in(out, v.as_deref(), ver),
        Found::Reply(Reply::Error(_)) if mget => resp::bulk_in(out, None, ver),
        Found::Reply(Reply::Error(e)) => err_store(out, &e),
        Found::Reply(Reply::Items(_)) => resp::bulk_in(out, None, ver),
    }
}

/// GET, or one key of an MGET (`mget`), for a handler: inside a transaction through it
/// (seeing its own writes), otherwise through the loop's read door; answered by
/// [`get_reply`], as the pipeline's read batches and the gather answer theirs.
pub(crate) fn get(
    (sh, s): (&Shared, &mut Session),
    reads: &mut Reads,
    key: &[u8],
    mget: bool,
    out: &mut Vec<u8>,
) {
    let ver = s.proto;
    if s.tx.running.is_none() {
        let _ = sh.read(reads, &[ReadRef::Get(key)], |_, f: Found<'_>| {
            get_reply(out, f, ver, mget, Some((sh, key)))
        });
        return;
    }
    let found = match run_op(sh, s, Op::new(key, Write::ReadItem)).outcome {
        Ok(Outcome::Item(i)) => {
            return get_reply(out, Found::Value(Some(&i.value), i.flags), ver, mget, None)
        }
        Err(e) => Found::Reply(Reply::Error(e)),
        Ok(_) => Found::Value(None, 0),
    };
    get_reply(out, found, ver, mget, None)
}

/// A key's item as a command sees it.
pub(crate) enum Got {
    /// A string (`None`: the key is absent).
    Str(Option<Vec<u8>>),
    /// A collection: its metadata record's value and client flags (`resp/commands/types/`).
    Typed(Vec<u8>, u32),
    /// The read failed.
    Err(accelkv_tree::Error),
}

/// The item at `key` for a command: inside a transaction, through it (seeing its own
/// writes, the key owned until the commit); otherwise through the loop's read door.
pub(crate) fn get_value(sh: &Shared, s: &mut Session, reads: &mut Reads, key: &[u8]) -> Got {
    if s.tx.running.is_none() {
        let mut got = Got::Str(None);
        let _ = sh.read(reads, &[ReadRef::Get(key)], |_, f: Found<'_>| {
            got = match f {
                Found::Value(Some(v), flags) if is_typed(flags) => Got::Typed(v.to_vec(), flags),
                Found::Value(v, _) => Got::Str(v.map(<[u8]>::to_vec)),
                Found::Reply(Reply::Value(Some(v))) if v.starts_with(&MAGIC) => {
                    typed_now(sh, key, v)
                }
                Found::Reply(Reply::Value(v)) => Got::Str(v),
                Found::Reply(Reply::Error(e)) => Got::Err(e),
                Found::Reply(Reply::Items(_)) => Got::Str(None),
            }
        });
        return got;
    }
    match run_op(sh, s, Op::new(key, Write::ReadItem)).outcome {
        Ok(Outcome::Item(i)) if is_typed(i.flags) => Got::Typed(i.value, i.flags),
        Ok(Outcome::Item(i)) => Got::Str(Some(i.value)),
        Err(e) => Got::Err(e),
        Ok(_) => Got::Str(None),
    }
}

/// A value a ring engine answered without flags that looks like a collection's metadata:
/// the key's item read again with its flags.
fn typed_now(sh: &Shared, key: &[u8], v: Vec<u8>) -> Got {
    match item_now(sh, key) {
        Ok(Some((v, flags))) if is_typed(flags) => Got::Typed(v, flags),
        Ok(Some((v, _))) => Got::Str(Some(v)),
        Ok(None) => Got::Str(None),
        Err(_) => Got::Str(Some(v)),
    }
}
