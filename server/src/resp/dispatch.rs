//! The RESP dispatcher, as Redis's `processCommand`: a command is looked up once in the
//! command table (`table.rs`), then checked against its entry — authentication, the
//! transaction being queued, arity, and for a write the disk and `maxmemory` — and only
//! then its handler runs. Handlers check nothing of this again. Reads go through the
//! loop's read door, every write through the reservation station (the one write door);
//! runs of GET, MGET and plain SET are batched by `batch.rs` before they reach here.

use crate::core::reads::Reads;
use crate::core::shared::{Shared, OOM};
use crate::resp::call::flag::{DENYOOM, NO_AUTH, WRITE};
use crate::resp::call::{Call, Spec};
use crate::resp::reply::{unknown_command, wrong_args};
use crate::resp::session::Session;
use crate::resp::table::{find, position};
use crate::resp::types::encoding::user_key_ok;
use accelkv_proto::resp;
use std::sync::atomic::Ordering;

/// Runs one command (`c`: name first), its reply appended to `out`. (A GET or MGET here is
/// one outside a read batch: before AUTH, or inside a transaction, say.)
pub fn command(sh: &Shared, s: &mut Session, c: &[&[u8]], reads: &mut Reads, out: &mut Vec<u8>) {
    let spec = c.first().and_then(|name| find(name));
    run(sh, s, spec, c, reads, out)
}

/// This dispatcher, as handlers see it ([`Call::dispatch`]).
static DISPATCHER: crate::resp::call::Dispatcher = crate::resp::call::Dispatcher {
    find,
    run,
    table: crate::resp::table::table,
};

/// [`command`] with the command's table entry already looked up (`None`: unknown).
pub fn run(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    c: &[&[u8]],
    reads: &mut Reads,
    out: &mut Vec<u8>,
) {
    run_with(sh, s, spec, c, None, reads, out)
}

/// [`run`] with the command's value handed over whole ([`Call::value`]: a SET whose value
/// was streamed into its own allocation; `c[2]` is then empty).
pub fn run_with(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    c: &[&[u8]],
    value: Option<Vec<u8>>,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) {
    sh.metrics()
        .hot()
        .resp_commands
        .fetch_add(1, Ordering::Relaxed);
    let Some(&name) = c.first() else {
        return;
    };
    let no_auth = spec.is_some_and(|s| s.has(NO_AUTH));
    if !no_auth && sh.needs_auth() && !s.authed {
        if let Some(spec) = spec {
            s.global.cmdstats.rejected(position(spec));
        }
        return resp::error(out, "NOAUTH Authentication required.");
    }
    if !no_auth
        && s.tx.queued.is_some()
        && crate::resp::tx::intercept(sh, s, spec, c, reads, out, command)
    {
        return;
    }
    let Some(spec) = spec else {
        return resp::error(out, &unknown_command(c));
    };
    if !spec.arity_ok(c.len()) {
        s.global.cmdstats.rejected(position(spec));
        return wrong_args(out, name);
    }
    if spec.has(WRITE) && !admit_write(sh, s, spec, c, out) {
        s.global.cmdstats.rejected(position(spec));
        return;
    }
    let mark = out.len();
    // In a database other than 0, the handler sees its keys under the database's prefix.
    let moved = crate::resp::db::rewrite(s.db, spec, c);
    let moved_args: Option<smallvec::SmallVec<[&[u8]; 8]>> = moved
        .as_ref()
        .map(|m| m.iter().map(Vec::as_slice).collect());
    let mut call = Call {
        sh,
        s,
        args: moved_args.as_deref().unwrap_or(c),
        reads,
        out,
        dispatch: &DISPATCHER,
        value,
    };
    (spec.run)(&mut call);
    // A command that parks or waits for an engine's read runs again from the top: counted
    // then.
    if s.block.req.is_none() && !reads.submitted() {
        let failed = out.get(mark) == Some(&b'-');
        s.global.cmdstats.ran(position(spec), failed);
    }
    if !s.block.wake.is_empty() && s.tx.running.is_none() {
        // Committed: the connections parked on these keys may take what was pushed.
        sh.blocked().wake(s.block.wake.iter());
        s.block.wake.clear();
    }
}

/// The error for a write naming a key in the reserved part of the key space.
pub const RESERVED_KEY: &str =
    "ERR keys beginning with the bytes FF FF or FF FE are reserved (accelkv keeps collection fields and the keys of databases other than 0 there)";

/// A write may start: the disk is writable, past `maxmemory` (noeviction) only commands
/// without `denyoom` (deletes, renames, expiry changes) go on, and no key it names is in
/// the reserved part of the key space (`resp/types/encoding.rs`). Notes that the
/// connection wrote (its replies wait for durability where the sync policy asks).
fn admit_write(sh: &Shared, s: &mut Session, spec: &Spec, c: &[&[u8]], out: &mut Vec<u8>) -> bool {
    if let Err(m) = sh.writable() {
        resp::error(out, &format!("ERR {m}"));
        return false;
    }
    if spec.has(DENYOOM) && sh.over_maxmemory() {
        resp::error(out, OOM);
        return false;
    }
    // Cheap first: only a command with an argument starting 0xFF can name a reserved key.
    if c[1..].iter().any(|a| a.first() == Some(&0xFF))
        && !crate::resp::db::key_positions(spec, c)
            .iter()
            .all(|&i| c.get(i).is_none_or(|k| user_key_ok(k)))
    {
        resp::error(out, RESERVED_KEY);
        return false;
    }
    s.wrote = true;
    true
}
