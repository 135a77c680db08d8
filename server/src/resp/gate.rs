//! The one gate every RESP command passes before its handler runs, as Redis's
//! `processCommand`: the pipeline's batched GETs and SETs (`batch.rs`), the gather of GETs
//! across connections (`adapter.rs`), a streamed command (`streamed.rs`), any other command
//! (`dispatch.rs`), a command EXEC runs from its queue, one a script calls, and one a
//! cluster range applies from its log. A check changed here changes for every one of them;
//! nothing after the gate checks a command's flags again.
//!
//! In order, for a command looked up once in the table (`table.rs`):
//! 1. **Visibility** (a client's command): a command that is not a write waits until the
//!    connection's earlier writes are visible to readers (its replies are in order).
//! 2. **Authentication**: without `no_auth`, refused until AUTH when a password is set.
//! 3. **Cluster routing** (a client's command, cluster mode): it goes where its range lives
//!    (`resp/cluster.rs` classifies it by the `local` flag and its key positions).
//! 4. **Lookup and arity**: unknown, or the wrong number of arguments; with
//!    `--cluster-mode emulated`, keys of several hash slots (`-CROSSSLOT`).
//! 5. **Scripts**: inside a script, `noscript` and `no_multi` commands, XREAD BLOCK, and a
//!    write from a read-only script are refused.
//! 6. **Transactions**: inside MULTI, a `no_multi` command is refused.
//! 7. **Writes**: refused from clients and scripts while this server follows a primary
//!    (`replica/`), while the disk is failing, past `maxmemory` when `denyoom`, and when
//!    they name a key in the reserved part of the key space.
//! 8. **Queueing**: inside MULTI every command but EXEC, DISCARD, MULTI, WATCH, RESET and the
//!    `no_auth` ones is queued (`+QUEUED`).
//!
//! A refusal inside MULTI aborts the transaction (EXEC answers `-EXECABORT`), as in Redis.
//! While the data directory loads there is no store to run commands against: the loading
//! door (`loading.rs`) asks [`while_loading`] which commands the `loading` flag lets through.
//! The flags not checked here (`readonly`, `fast`, `admin`, `stale`, `allow_busy`) describe a
//! command to clients through COMMAND INFO, as Redis's do; `call.rs` says why none of them
//! changes what this server allows.

use crate::core::acl::Denied;
use crate::core::route::Route;
use crate::core::shared::{Shared, OOM};
use crate::resp::call::flag::{DENYOOM, LOADING, NOSCRIPT, NO_AUTH, NO_MULTI, WRITE};
use crate::resp::call::Spec;
use crate::resp::commands::types::encoding::user_key_ok;
use crate::resp::reply::unknown_command;
use crate::resp::session::Session;
use crate::resp::table::position;
use accelkv_proto::resp;
use std::sync::atomic::Ordering;

/// Most commands one transaction may queue (the station owns a slot per key; the tree's
/// atomic batch holds at most `accelkv_tree::MAX_BATCH` writes).
pub const MAX_QUEUED: usize = 16_384;

/// The error for a write naming a key in the reserved part of the key space.
pub const RESERVED_KEY: &str =
    "ERR keys beginning with the bytes FF FF or FF FE are reserved (accelkv keeps collection fields and the keys of databases other than 0 there)";

pub use crate::resp::call::From;

/// What the gate decided.
#[derive(Debug)]
pub enum Pass {
    /// Run it: its handler, or the batch's cheap case of it.
    Run(&'static Spec),
    /// Answered here: refused (its error written), queued inside MULTI, or answered by
    /// cluster mode.
    Answered,
    /// Not now: its connection's writes are not visible yet, or cluster mode routed it to
    /// its range's group. It runs again from the top later.
    Wait,
}

/// Why a command is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    NoAuth,
    Unknown,
    Arity,
    NotInScript,
    ScriptUnknown,
    ScriptBlock,
    ScriptWrite,
    NotInMulti,
    Disk,
    Oom,
    /// EXEC of a transaction holding a `denyoom` command, past `maxmemory`.
    ExecOom,
    Reserved,
    /// A client's write while this server follows a primary (`replica/`).
    ReadOnlyReplica,
    /// `--cluster-mode emulated`: the keys hash to more than one slot.
    CrossSlot,
    TooManyQueued,
    /// RESP2 with a subscription: only the pub/sub commands, PING, QUIT and RESET.
    PubSubContext,
    /// The user's permissions refuse it: what, where it ran (ACL LOG's context: `toplevel`,
    /// `multi`, `lua`) and the client's command (EXEC or EVAL for the ones they run).
    NoPerm(Denied, &'static str, &'static str),
}

/// What [`decide`] found, before anything is written.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Run,
    Wait,
    /// CLIENT PAUSE holds it until this time (Unix milliseconds): it parks.
    Paused(u64),
    Refuse(Refusal),
    Queue,
}

/// Checks `args` (name first; `spec`: its table entry, `None` when unknown) coming from
/// `from`, in the order the module docs give: refusals and `+QUEUED` are written to `out`.
#[inline]
pub fn check(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    args: &[&[u8]],
    from: From,
    out: &mut Vec<u8>,
) -> Pass {
    if s.acl_epoch != sh.acl().epoch() {
        s.refresh_user(sh.acl());
    }
    if let Some(v) = before_route(sh, s, spec, from) {
        return act(sh, s, spec, args, v, out);
    }
    if from == From::Client && sh.router().is_some() {
        // A routed command runs on its range's replicas as the server's own: the user's
        // permissions are checked here, before it leaves.
        if let Some(r) = spec.and_then(|sp| permission(s, sp, args, from)) {
            return act(sh, s, spec, args, Verdict::Refuse(r), out);
        }
        match route(sh, s, args, out) {
            Route::Here => {}
            Route::Wait => return Pass::Wait,
            _ => return Pass::Answered,
        }
    }
    let v = after_route(sh, s, spec, args, from);
    act(sh, s, spec, args, v, out)
}

/// Cluster mode: whether a client's command that follows the routed write its connection
/// stopped at joins it (`Router::join`: sent and answered with it), after the checks
/// [`check`] makes before routing (authentication, the user's permissions, the argument
/// count). Nothing is written; a command that does not join is checked in full later.
pub fn joins_routed(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    args: &[&[u8]],
) -> bool {
    let (Some(cl), Some(sp)) = (sh.router(), spec) else {
        return false;
    };
    if s.acl_epoch != sh.acl().epoch() || before_route(sh, s, spec, From::Client).is_some() {
        return false;
    }
    if !sp.arity_ok(args.len()) || permission(s, sp, args, From::Client).is_some() {
        return false;
    }
    cl.join(&mut s.cluster, args, s.proto)
}

/// Whether [`check`] would let a client's command run now, writing nothing: for the
/// commands a batch takes after the first of its run (`batch.rs`) and for the gather. In
/// cluster mode nothing runs without being routed, so nothing passes here.
pub fn runs(sh: &Shared, s: &Session, spec: Option<&'static Spec>, args: &[&[u8]]) -> bool {
    sh.router().is_none()
        && s.acl_epoch == sh.acl().epoch()
        && before_route(sh, s, spec, From::Client).is_none()
        && after_route(sh, s, spec, args, From::Client) == Verdict::Run
}

/// Whether a client's command passes as `first`, which passed [`check`] just before on
/// this connection with nothing run since, did: it is the same command, its own argument
/// count fits, and a write names no reserved key (what else the gate looks at, the
/// connection's and the server's state, is what `first` passed in). For a run of one
/// command the batch takes at once, checked in a few instructions; anything else is asked
/// of [`runs`].
#[inline(always)]
pub fn again(first: &'static Spec, spec: Option<&'static Spec>, args: &[&[u8]]) -> bool {
    spec.is_some_and(|sp| std::ptr::eq(sp, first))
        && first.arity_ok(args.len())
        && (first.flags & WRITE == 0 || args[1..].iter().all(|a| a.first() != Some(&0xFF)))
}

/// Which commands the `loading` flag lets through while the data directory loads.
pub fn while_loading(spec: Option<&'static Spec>) -> bool {
    spec.is_some_and(|sp| sp.has(LOADING))
}

/// Steps 1 and 2: visibility, authentication.
#[inline(always)]
fn before_route(
    sh: &Shared,
    s: &Session,
    spec: Option<&'static Spec>,
    from: From,
) -> Option<Verdict> {
    let flags = spec.map_or(0, |sp| sp.flags);
    if from == From::Client
        && s.unreleased > 0
        && flags & WRITE == 0
        && !sh.visible_soon(s.unreleased)
    {
        return Some(Verdict::Wait);
    }
    if flags & NO_AUTH == 0 && !s.authed && sh.needs_auth() {
        return Some(Verdict::Refuse(Refusal::NoAuth));
    }
    None
}

/// Steps 4 to 8: lookup, arity, scripts, transactions, writes, queueing.
#[inline(always)]
fn after_route(
    sh: &Shared,
    s: &Session,
    spec: Option<&'static Spec>,
    args: &[&[u8]],
    from: From,
) -> Verdict {
    let script = match from {
        From::Script { ro } => Some(ro),
        _ => None,
    };
    let Some(spec) = spec else {
        return Verdict::Refuse(match script {
            Some(_) => Refusal::ScriptUnknown,
            None => Refusal::Unknown,
        });
    };
    if let Some(ro) = script {
        if let Some(r) = script_refusal(spec, args, ro) {
            return Verdict::Refuse(r);
        }
    }
    if !spec.arity_ok(args.len()) {
        return Verdict::Refuse(Refusal::Arity);
    }
    if let Some(r) = permission(s, spec, args, from) {
        return Verdict::Refuse(r);
    }
    if sh.settings().cluster_emulated && from != From::Inner && cross_slot(spec, args) {
        return Verdict::Refuse(Refusal::CrossSlot);
    }
    let queued = match (from, &s.tx.queued) {
        (From::Client, Some(q)) => Some(q.len()),
        _ => None,
    };
    if queued.is_some() && spec.has(NO_MULTI) {
        return Verdict::Refuse(Refusal::NotInMulti);
    }
    if spec.flags & WRITE != 0 {
        if from != From::Inner && s.global.replication.read_only() {
            return Verdict::Refuse(Refusal::ReadOnlyReplica);
        }
        match write_refusal(sh, spec, args) {
            // A function flagged `allow-oom` writes past maxmemory, as in Redis.
            Some(Refusal::Oom) if matches!(from, From::Script { .. }) && s.allow_oom => {}
            Some(r) => return Verdict::Refuse(r),
            None => {}
        }
    }
    if from == From::Client && s.in_pubsub_resp2() && !in_pubsub_context(spec) {
        return Verdict::Refuse(Refusal::PubSubContext);
    }
    if from == From::Client {
        if let Some(end) = crate::resp::pause_rules::holds(s, spec, args) {
            return Verdict::Paused(end);
        }
    }
    match queued {
        Some(_) if spec.name == "EXEC" && s.tx.denyoom && sh.over_maxmemory() => {
            Verdict::Refuse(Refusal::ExecOom)
        }
        Some(_) if runs_in_multi(spec) => Verdict::Run,
        Some(n) if n >= MAX_QUEUED => Verdict::Refuse(Refusal::TooManyQueued),
        Some(_) => Verdict::Queue,
        None => Verdict::Run,
    }
}

/// The user's permissions (`acl/check.rs`), with where the command runs for ACL LOG.
#[cold]
/// The user's permission check (step 4), unless every user may run everything or the
/// command needs no authentication: before a command is routed in cluster mode, and after
/// (`after_route`) otherwise.
#[inline(always)]
fn permission(s: &Session, spec: &'static Spec, args: &[&[u8]], from: From) -> Option<Refusal> {
    match s.acl_open || spec.has(NO_AUTH) {
        true => None,
        false => acl_refusal(s, spec, args, from),
    }
}

fn acl_refusal(s: &Session, spec: &'static Spec, args: &[&[u8]], from: From) -> Option<Refusal> {
    let user = s.user.as_ref()?;
    let table = crate::resp::table::table();
    let d = crate::resp::acl::check::check(user, table, spec, position(spec), args).err()?;
    let (context, cmd) = match from {
        From::Client if s.tx.queued.is_some() => ("multi", spec.name),
        From::Client => ("toplevel", spec.name),
        _ => (crate::resp::acl::command::context(from), s.last_cmd.get()),
    };
    Some(Refusal::NoPerm(d, context, cmd))
}

/// Whether a command's keys hash to more than one slot (emulated cluster mode).
#[cold]
fn cross_slot(spec: &Spec, args: &[&[u8]]) -> bool {
    let at = crate::resp::db::key_positions(spec, args);
    at.len() > 1
        && crate::resp::commands::cluster_emulated::cross_slot(
            at.iter().filter_map(|&i| args.get(i).copied()),
        )
}

/// Inside a script: what Redis refuses there.
#[cold]
fn script_refusal(spec: &Spec, args: &[&[u8]], ro: bool) -> Option<Refusal> {
    if spec.has(NOSCRIPT) || spec.has(NO_MULTI) {
        return Some(Refusal::NotInScript);
    }
    let reads = spec.name == "XREAD" || spec.name == "XREADGROUP";
    if reads && args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK")) {
        return Some(Refusal::ScriptBlock);
    }
    // Commands that would be replicated are writes to a read-only script, as in Redis.
    (ro && (spec.has(WRITE) || spec.may_replicate())).then_some(Refusal::ScriptWrite)
}

/// A write may start: the disk is writable, past `maxmemory` (noeviction) only commands
/// without `denyoom` (deletes, renames, expiry changes) go on, and no key it names is in
/// the reserved part of the key space (`resp/commands/types/encoding.rs`).
#[inline(always)]
fn write_refusal(sh: &Shared, spec: &Spec, args: &[&[u8]]) -> Option<Refusal> {
    if sh.writable().is_err() {
        return Some(Refusal::Disk);
    }
    if spec.has(DENYOOM) && sh.over_maxmemory() {
        return Some(Refusal::Oom);
    }
    // Cheap first: only a command with an argument starting 0xFF can name a reserved key.
    if args[1..].iter().any(|a| a.first() == Some(&0xFF))
        && !crate::resp::db::key_positions(spec, args)
            .iter()
            .all(|&i| args.get(i).is_none_or(|k| user_key_ok(k)))
    {
        return Some(Refusal::Reserved);
    }
    None
}

/// What a RESP2 connection with a subscription may run.
fn in_pubsub_context(spec: &Spec) -> bool {
    spec.subscribes() || matches!(spec.name, "PING" | "QUIT" | "RESET")
}

/// The commands that run at once inside MULTI (Redis's list, and the `no_auth` ones:
/// AUTH, HELLO, QUIT). MULTI and WATCH answer their own errors there, which do not abort
/// the transaction.
fn runs_in_multi(spec: &Spec) -> bool {
    spec.has(NO_AUTH) || matches!(spec.name, "EXEC" | "DISCARD" | "MULTI" | "WATCH" | "RESET")
}

/// Writes what `v` says and notes it: a refusal's error (a transaction being queued is
/// aborted by it), `+QUEUED`, or that the connection is about to write.
#[inline(always)]
fn act(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    args: &[&[u8]],
    v: Verdict,
    out: &mut Vec<u8>,
) -> Pass {
    match (v, spec) {
        (Verdict::Run, Some(spec)) => {
            if spec.flags & WRITE != 0 {
                // Its replies wait for durability where the sync policy asks.
                s.wrote = true;
            }
            Pass::Run(spec)
        }
        (Verdict::Wait, _) => Pass::Wait,
        (Verdict::Paused(end), _) => {
            park_paused(sh, s, end);
            Pass::Wait
        }
        (v, spec) => answer(sh, s, spec, args, v, out),
    }
}

/// Parks the connection until the pause ending at `end` (Unix milliseconds) is over or
/// lifted (`pause.rs`): its command runs again from the top then.
#[cold]
fn park_paused(sh: &Shared, s: &mut Session, end: u64) {
    let left = end.saturating_sub(accelkv_tree::now_ms());
    s.block.req = Some(crate::resp::block::BlockReq {
        keys: vec![crate::resp::pause::PAUSE_KEY.to_vec()],
        deadline: Some(std::time::Instant::now() + std::time::Duration::from_millis(left)),
        seen: sh.blocked().epoch(),
        on_nokey: false,
        takes: false,
        behind: false,
    });
}

/// A command the gate answers itself: refused, or queued inside MULTI.
#[cold]
fn answer(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    args: &[&[u8]],
    v: Verdict,
    out: &mut Vec<u8>,
) -> Pass {
    match v {
        Verdict::Queue => {
            if let Some(q) = s.tx.queued.as_mut() {
                q.push(args.iter().map(|a| a.to_vec()).collect());
            }
            s.tx.denyoom |= spec.is_some_and(|sp| sp.has(DENYOOM));
            resp::simple(out, "QUEUED");
        }
        Verdict::Refuse(r) => refuse(sh, s, spec, args, r, out),
        // Not reached: an unknown command is refused, and waiting is not an answer.
        Verdict::Run | Verdict::Wait | Verdict::Paused(_) => return Pass::Wait,
    }
    // Counted in INFO's `total_commands_processed` as a command that ran is.
    sh.metrics()
        .hot()
        .resp_commands
        .fetch_add(1, Ordering::Relaxed);
    Pass::Answered
}

/// Writes refusal `r`'s error; counts it in INFO commandstats (`rejected_calls`) and, inside
/// MULTI, aborts the transaction.
#[cold]
fn refuse(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    args: &[&[u8]],
    r: Refusal,
    out: &mut Vec<u8>,
) {
    if let Some(spec) = spec {
        s.global.cmdstats.rejected(position(spec));
    }
    if s.tx.queued.is_some() {
        s.tx.dirty = true;
    }
    let name = || String::from_utf8_lossy(args[0]).to_lowercase();
    let mark = out.len();
    refusal_text(sh, s, args, r, out, name);
    if let Some(reply) = out.get(mark..) {
        s.global.errors.count(reply);
    }
}

/// Writes refusal `r`'s error.
fn refusal_text(
    sh: &Shared,
    s: &mut Session,
    args: &[&[u8]],
    r: Refusal,
    out: &mut Vec<u8>,
    name: impl Fn() -> String,
) {
    match r {
        Refusal::NoAuth => resp::error(out, "NOAUTH Authentication required."),
        Refusal::Unknown => resp::error(out, &unknown_command(args)),
        Refusal::Arity => resp::error(
            out,
            &format!("ERR wrong number of arguments for '{}' command", name()),
        ),
        Refusal::NotInScript => {
            resp::error(out, "ERR This Redis command is not allowed from script")
        }
        Refusal::ScriptUnknown => resp::error(out, "ERR Unknown Redis command called from script"),
        Refusal::ScriptBlock => resp::error(
            out,
            &format!(
                "ERR {} command is not allowed with BLOCK option from scripts",
                name().to_uppercase()
            ),
        ),
        Refusal::ScriptWrite => resp::error(
            out,
            "ERR Write commands are not allowed from read-only scripts.",
        ),
        Refusal::NotInMulti => resp::error(out, "ERR Command not allowed inside a transaction"),
        Refusal::Disk => {
            let m = sh
                .writable()
                .err()
                .unwrap_or_else(|| "the disk failed".into());
            resp::error(out, &format!("ERR {m}"))
        }
        Refusal::Oom => resp::error(out, OOM),
        Refusal::ExecOom => {
            // As Redis: the transaction is discarded, its watches with it.
            s.tx = Default::default();
            resp::error(
                out,
                &format!("EXECABORT Transaction discarded because of: {OOM}"),
            )
        }
        Refusal::Reserved => resp::error(out, RESERVED_KEY),
        Refusal::CrossSlot => {
            resp::error(out, "CROSSSLOT Keys in request don't hash to the same slot")
        }
        Refusal::ReadOnlyReplica => {
            resp::error(out, "READONLY You can't write against a read only replica.")
        }
        Refusal::PubSubContext => resp::error(
            out,
            &format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                crate::resp::subcommands::full_name(args)
            ),
        ),
        Refusal::TooManyQueued => resp::error(
            out,
            &format!("ERR a transaction holds at most {MAX_QUEUED} commands"),
        ),
        Refusal::NoPerm(d, context, cmd) => {
            s.note_client(Some(cmd));
            crate::resp::acl::command::log_denied(s, args, d, context);
            let user = String::from_utf8_lossy(s.user_name()).into_owned();
            let text = crate::resp::acl::command::denied_text(&user, args, d, false);
            resp::error(out, &format!("NOPERM {text}"))
        }
    }
}

/// Cluster mode: where the command goes (`Route::Answer` and `Route::Refuse` are written
/// to `out`).
fn route(sh: &Shared, s: &mut Session, args: &[&[u8]], out: &mut Vec<u8>) -> Route {
    let Some(cl) = sh.router() else {
        return Route::Here;
    };
    // EVALSHA goes on as EVAL with its body: the range's replicas run it, and the script
    // was loaded here (SCRIPT LOAD answers on the node that received it).
    let body = match by_sha(s, args) {
        Ok(b) => b,
        Err(()) => {
            resp::error(out, "NOSCRIPT No matching script. Please use EVAL.");
            return Route::Refuse(String::new());
        }
    };
    let as_eval: Option<Vec<&[u8]>> = body.as_ref().map(|(name, b)| {
        let mut a: Vec<&[u8]> = vec![name, b.as_slice()];
        a.extend_from_slice(&args[2..]);
        a
    });
    let r = cl.route(&mut s.cluster, as_eval.as_deref().unwrap_or(args), s.proto);
    match &r {
        Route::Answer(reply) => out.extend_from_slice(reply),
        Route::Refuse(e) => resp::error(out, e),
        Route::Here | Route::Wait => {}
    }
    r
}

/// EVAL's (or EVAL_RO's) name and a script's body.
type AsEval = (&'static [u8], std::sync::Arc<Vec<u8>>);

/// EVALSHA's (or EVALSHA_RO's) EVAL name and script body (`Ok(None)`: not one; `Err`: no
/// script has that SHA-1 here).
#[allow(clippy::result_unit_err)]
fn by_sha(s: &Session, args: &[&[u8]]) -> Result<Option<AsEval>, ()> {
    let name: &'static [u8] = match args[0].to_ascii_uppercase().as_slice() {
        b"EVALSHA" => b"EVAL",
        b"EVALSHA_RO" => b"EVAL_RO",
        _ => return Ok(None),
    };
    let Some(sha) = args.get(1) else {
        return Ok(None); // the arity error is answered where it runs
    };
    let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
    let bodies = s.global.scripts.bodies.lock();
    let bodies = bodies.unwrap_or_else(|e| e.into_inner());
    bodies.get(&sha).map(|b| Some((name, b.clone()))).ok_or(())
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
