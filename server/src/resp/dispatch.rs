//! The RESP dispatcher: a command that passed the gate (`gate.rs`, Redis's
//! `processCommand`: authentication, lookup and arity, transactions, scripts, writes) runs
//! here: its keys are moved into the connection's database, its handler runs, and it is
//! counted in INFO commandstats. Handlers check nothing of the gate's again. Reads go
//! through the loop's read door, every write through the reservation station (the one
//! write door); runs of GET, MGET and plain SET are batched by `batch.rs` before they reach
//! here.

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::call::{Call, Spec};
use crate::resp::gate::{self, From, Pass};
use crate::resp::session::Session;
use crate::resp::table::{find, position, table};
use std::sync::atomic::Ordering;

/// Runs one command (`c`: name first) from `from` through the gate, its reply appended to
/// `out`: a command EXEC runs from its queue, a script's, or one a cluster range applies.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub fn command(
    sh: &Shared,
    s: &mut Session,
    c: &[&[u8]],
    from: From,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) {
    let spec = c.first().and_then(|name| find(name));
    run(sh, s, spec, c, from, reads, out)
}

/// This dispatcher, as handlers see it ([`Call::dispatch`]).
static DISPATCHER: crate::resp::call::Dispatcher = crate::resp::call::Dispatcher {
    find,
    run,
    table: crate::resp::table::table,
};

/// [`command`] with the command's table entry already looked up (`None`: unknown). A
/// client's command that must wait ([`Pass::Wait`]) is not run: only `batch.rs`, which
/// runs it again, sends client commands, and through [`call`].
pub fn run(
    sh: &Shared,
    s: &mut Session,
    spec: Option<&'static Spec>,
    c: &[&[u8]],
    from: From,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) {
    if c.is_empty() {
        return;
    }
    if let Pass::Run(spec) = gate::check(sh, s, spec, c, from, out) {
        call(sh, s, spec, c, None, reads, out)
    }
}

/// Runs the handler of a command the gate let through (`value`: the command's value handed
/// over whole, [`Call::value`]: a SET whose value was streamed into its own allocation;
/// `c[2]` is then empty).
pub fn call(
    sh: &Shared,
    s: &mut Session,
    spec: &'static Spec,
    c: &[&[u8]],
    value: Option<Vec<u8>>,
    reads: &mut Reads,
    out: &mut Vec<u8>,
) {
    sh.metrics()
        .hot()
        .resp_commands
        .fetch_add(1, Ordering::Relaxed);
    let mark = out.len();
    s.last_cmd.set(spec.name);
    // Timed for the slow log and the latency monitor while one is on (slowlog.rs,
    // latency.rs).
    let slower_than = s.global.tuning.at(crate::resp::tuning::SLOWER_THAN);
    let latency_ms = s.global.tuning.at(crate::resp::tuning::LATENCY_THRESHOLD);
    let started = (slower_than >= 0 || latency_ms > 0).then(quanta::Instant::now);
    // In a database other than 0, the handler sees its keys under the database's prefix.
    let moved = crate::resp::db::rewrite(s.db, spec, c);
    let moved_args: Option<smallvec::SmallVec<[&[u8]; 8]>> = moved
        .as_ref()
        .map(|m| m.iter().map(Vec::as_slice).collect());
    let args = moved_args.as_deref().unwrap_or(c);
    let probe = crate::resp::notify::before(sh, s, spec, args);
    // MONITOR (one load while nobody monitors): a parked command woken to run again was
    // shown when it first ran; EVAL and its kin are shown before their scripts' commands.
    let (shown_before, shown_after) = match s.global.pubsub.monitoring() && s.block.until.is_none()
    {
        false => (false, false),
        true if crate::resp::monitor::shown_before(spec) => (true, false),
        true => (false, true),
    };
    if shown_before {
        crate::resp::monitor::feed(s, spec, c);
    }
    let mut call = Call {
        sh,
        s,
        args,
        reads,
        out,
        dispatch: &DISPATCHER,
        value,
    };
    (spec.run)(&mut call);
    if shown_after && !reads.submitted() {
        crate::resp::monitor::feed(s, spec, c);
    }
    // A command that parks or waits for an engine's read runs again from the top: counted
    // then.
    if s.block.req.is_none() && !reads.submitted() {
        if let Some(p) = probe {
            crate::resp::notify::after(sh, s, spec, args, p);
        }
        if s.tracking.is_some() {
            tracked_read(sh, s, spec, args);
        }
        let failed = out.get(mark) == Some(&b'-');
        let idx = crate::resp::subcommands::stats_index(table(), position(spec), c);
        s.global.cmdstats.ran(idx, failed);
        if failed {
            s.global.errors.count(&out[mark..]);
        }
        if let Some(t) = started {
            let took = t.elapsed();
            if slower_than >= 0 {
                slow(s, spec, c, took, slower_than);
            }
            if latency_ms > 0 && took.as_millis() as i64 >= latency_ms {
                let event = match spec.flags & crate::resp::call::flag::FAST {
                    0 => "command",
                    _ => "fast-command",
                };
                s.global.latency.add(event, took.as_millis() as u64);
            }
        }
    }
    let wrote = spec.flags & crate::resp::call::flag::WRITE != 0 && s.block.req.is_none();
    if wrote && sh.blocked().waiting() > 0 {
        // A write may have removed or replaced what a parked command waits on: XREADGROUP
        // answers NOGROUP or WRONGTYPE then, the others look again and stay parked (a
        // command that parked itself wakes nobody, so two parked commands never ping-pong).
        for at in crate::resp::db::key_positions(spec, args) {
            s.block.wake.push(args[at]);
        }
    }
    if !s.block.wake.is_empty() && s.tx.running.is_none() {
        // Committed: the connections parked on these keys may take what was pushed.
        sh.blocked().wake(s.block.wake.iter());
        s.block.wake.clear();
    }
    if !s.events.is_empty() && s.tx.running.is_none() {
        // Committed: its keyspace events are published (notify.rs).
        crate::resp::notify::flush(sh, s);
    }
}

/// Client-side caching (`tracking.rs`): a tracking connection's read notes its keys (in
/// OPTIN mode only after CLIENT CACHING yes, in OPTOUT mode unless after CLIENT CACHING
/// no), and CLIENT CACHING's answer lasts one command (the whole of an EXEC or script).
#[cold]
fn tracked_read(sh: &Shared, s: &mut Session, spec: &Spec, args: &[&[u8]]) {
    let Some(t) = s.tracking.as_mut() else {
        return;
    };
    let caching = t.caching;
    let wanted = !t.opts.bcast
        && match (t.opts.optin, t.opts.optout) {
            (true, _) => caching == Some(true),
            (_, true) => caching != Some(false),
            _ => true,
        };
    let caching_cmd = spec.name == "CLIENT"
        && args
            .get(1)
            .is_some_and(|a| a.eq_ignore_ascii_case(b"CACHING"));
    if !caching_cmd && s.tx.running.is_none() && !s.scripting {
        t.caching = None;
    }
    if wanted && spec.flags & crate::resp::call::flag::WRITE == 0 {
        let at = crate::resp::db::key_positions(spec, args);
        if !at.is_empty() {
            let keys: Vec<&[u8]> = at.iter().filter_map(|&i| args.get(i).copied()).collect();
            let to = crate::resp::tracking::Reach {
                pubsub: &s.global.pubsub,
                clients: sh.clients(),
            };
            s.global.tracking.read(&to, s.id, &keys);
        }
    }
}

/// Logs a command in the slow log if it took at least `slower_than` microseconds.
fn slow(s: &Session, spec: &Spec, c: &[&[u8]], took: std::time::Duration, slower_than: i64) {
    if (took.as_micros() as i64) < slower_than || crate::resp::slowlog::skipped(spec.name) {
        return;
    }
    let addr = s
        .client
        .as_ref()
        .map_or(String::new(), |r| r.entry.addr.to_string());
    let name = s.name.clone().unwrap_or_default();
    let max = s
        .global
        .tuning
        .at(crate::resp::tuning::SLOWLOG_MAX_LEN)
        .max(0) as usize;
    s.global.slowlog.record(c, took, (addr, name), max);
}
