//! memcached's text protocol on its own port (`--memcached-port`), run to completion on the
//! event loop that read it, like RESP (resp/batch.rs): commands are decoded in place
//! (`accelkv_proto::memcache`), a `get`'s keys go through the loop's read door as one
//! interleaved batch, every write (and every read that answers a CAS unique or a TTL) goes
//! through the reservation station as a memcached write (ops/memcache.rs), and replies are
//! encoded straight into the connection's output buffer. The keyspace is the one RESP and
//! the binary protocol serve; an item's client flags are stored with it.
//!
//! Auth: with a password, a connection must first send memcached's ASCII authentication
//! (a `set` of any key whose data is `<user> <password>`; the user is not checked), as
//! memcached's `-Y` does; every other command before it gets
//! `CLIENT_ERROR unauthenticated`.

use crate::core::counters::OpClass;
use crate::core::ops::typed::is_typed;
use crate::core::ops::{Failure, ItemCond, ItemWrite, Outcome};
use crate::core::reads::{NotYet, Reads};
use crate::core::shared::Shared;
use accelkv_engine::{Found, ReadRef, Reply};
use accelkv_proto::memcache::{self as mc, reply, Command, McError, McLimits, StoreOp};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

use crate::memcache::door::{classic_write, refused, station, store_error, ttl_of, write};
use crate::memcache::state::McSession;

/// Keys of one read batch.
const BATCH: usize = 64;

/// Runs the commands of one UDP datagram (`s` from [`McSession::for_datagram`]); an
/// incomplete command at its end is ignored.
pub fn run_datagram(
    sh: &Shared,
    s: &mut McSession,
    payload: &[u8],
    reads: &mut Reads,
    sc: &mut McScratch,
    out: &mut Vec<u8>,
) {
    run(sh, s, payload, reads, sc, out, usize::MAX);
}

/// A loop's reusable buffers for memcached batches.
#[derive(Default)]
pub struct McScratch {
    replies: Vec<u8>,
    segs: Vec<(usize, usize)>,
}

/// What running the buffered input did.
pub struct McRan {
    /// Input bytes consumed.
    pub used: usize,
    /// Close the connection (a line longer than memcached accepts).
    pub close: bool,
}

/// The decoder's limits on this server: memcached's, with the server's largest item.
pub fn limits(sh: &Shared) -> McLimits {
    McLimits {
        max_value: sh.settings().memcached_item_max,
        ..McLimits::default()
    }
}

/// Runs the complete commands at the start of `buf`, appending replies to `out`, until the
/// input runs out, the connection quits, a read waits for an engine, a command must wait
/// for this connection's own writes to become visible, or `out` is over `max_out`.
pub fn run(
    sh: &Shared,
    s: &mut McSession,
    buf: &[u8],
    reads: &mut Reads,
    sc: &mut McScratch,
    out: &mut Vec<u8>,
    max_out: usize,
) -> McRan {
    let lim = limits(sh);
    let mut pos = 0;
    while out.len() <= max_out && !s.quit && pos < buf.len() {
        if s.swallow > 0 {
            let n = s.swallow.min(buf.len() - pos);
            s.swallow -= n;
            pos += n;
            continue;
        }
        let (cmd, used) = match mc::parse(&buf[pos..], &lim) {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                sh.metrics().bad_input.fetch_add(1, Ordering::Relaxed);
                if !e.write_reply(out) {
                    return McRan {
                        used: pos,
                        close: true,
                    };
                }
                match e {
                    McError::Unknown { skip } | McError::Client { skip, .. } => pos += skip,
                    McError::TooLarge { skip, swallow } => {
                        pos += skip;
                        s.swallow = swallow;
                        // memcached drops the old item too: a failed set must not leave a
                        // stale value behind (only for a client allowed to write).
                        let may_write = !s.datagram
                            && (s.authed || !sh.needs_auth())
                            && refused(sh, false).is_none();
                        if let Some(key) =
                            too_large_key(&buf[pos - skip..pos]).filter(|_| may_write)
                        {
                            drop(write(sh, s, key, ItemWrite::Delete { cas: None }));
                        }
                    }
                    McError::LineTooLong => unreachable!("write_reply returned false"),
                }
                continue;
            }
        };
        if s.datagram && (is_write(&cmd) || matches!(cmd, Command::Get { touch: Some(_), .. })) {
            reply::line(out, "SERVER_ERROR writes are not accepted over UDP");
            pos += used;
            continue;
        }
        if s.unreleased > 0 && !is_write(&cmd) && !sh.visible_soon(s.unreleased) {
            break; // runs once this connection's writes are visible
        }
        let mark = out.len();
        match command(sh, s, cmd, reads, sc, out) {
            Ok(()) => pos += used,
            Err(NotYet) => {
                out.truncate(mark);
                break; // submitted to an engine's workers: runs again when answered
            }
        }
    }
    McRan {
        used: pos,
        close: false,
    }
}

/// The key of a refused storage command's line (to drop the old item).
fn too_large_key(line: &[u8]) -> Option<&[u8]> {
    let mut t = mc::Tokens::new(line.strip_suffix(b"\r\n").unwrap_or(line));
    match t.next()? {
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" | b"ms" => t.next(),
        _ => None,
    }
}

fn is_write(c: &Command<'_>) -> bool {
    use accelkv_proto::memcache::MetaCmd;
    match c {
        Command::Store { .. }
        | Command::Delete { .. }
        | Command::Arith { .. }
        | Command::Touch { .. }
        | Command::FlushAll { .. } => true,
        Command::Meta(m) => matches!(m.cmd, MetaCmd::Set | MetaCmd::Delete | MetaCmd::Arith),
        _ => false,
    }
}

fn command(
    sh: &Shared,
    s: &mut McSession,
    cmd: Command<'_>,
    reads: &mut Reads,
    sc: &mut McScratch,
    out: &mut Vec<u8>,
) -> Result<(), NotYet> {
    if sh.needs_auth() && !s.authed {
        unauthenticated(sh, s, cmd, out);
        return Ok(());
    }
    sh.metrics()
        .hot()
        .memcached_commands
        .fetch_add(1, Ordering::Relaxed);
    match cmd {
        Command::Get {
            keys,
            cas: false,
            touch: None,
        } => get(sh, keys, reads, sc, out, s.datagram)?,
        Command::Get { keys, cas, touch } => {
            let touch = touch.map(ttl_of);
            for key in keys {
                sh.count(OpClass::Get);
                let d = station(sh, s, key, ItemWrite::Read { touch }, touch.is_some());
                if let Ok(Outcome::Item(i)) = &d.outcome {
                    reply::value(out, key, i.flags, &i.value, cas.then_some(i.cas));
                }
            }
            reply::line(out, "END");
        }
        Command::FlushAll { delay, noreply } => {
            let mark = out.len();
            match crate::memcache::admin::flush_all(sh, s, delay) {
                Ok(()) => reply::line(out, "OK"),
                Err(e) => store_error(out, &e),
            }
            if noreply {
                out.truncate(mark);
            }
        }
        Command::Version => version(out),
        Command::Verbosity { noreply } => {
            if !noreply {
                reply::line(out, "OK");
            }
        }
        Command::Stats { args } => crate::memcache::admin::stats(sh, args, out),
        Command::Quit => s.quit = true,
        Command::Shutdown => reply::line(out, "ERROR: shutdown not enabled"),
        Command::Meta(m) => crate::memcache::meta::run(sh, s, &m, out),
        storage => storage_command(sh, s, storage, out),
    }
    Ok(())
}

/// Before authentication: a `set` whose data is `<user> <password>` authenticates (the
/// password checked in constant time); `quit` and `version` are answered; nothing else.
fn unauthenticated(sh: &Shared, s: &mut McSession, cmd: Command<'_>, out: &mut Vec<u8>) {
    match cmd {
        Command::Store { data, .. } => {
            let ok = data
                .split(|&b| b == b' ')
                .nth(1)
                .is_some_and(|p| sh.password_matches(p.strip_suffix(b"\n").unwrap_or(p)));
            s.authed = ok;
            let r = if ok {
                "STORED"
            } else {
                "CLIENT_ERROR authentication failure"
            };
            reply::line(out, r);
        }
        Command::Quit => s.quit = true,
        Command::Version => version(out),
        _ => reply::line(out, "CLIENT_ERROR unauthenticated"),
    }
}

/// The classic storage commands: set/add/replace/cas/append/prepend, delete, incr/decr,
/// touch.
fn storage_command(sh: &Shared, s: &mut McSession, cmd: Command<'_>, out: &mut Vec<u8>) {
    match cmd {
        Command::Store {
            op,
            key,
            flags,
            exptime,
            data,
            cas,
            noreply,
        } => {
            let w = match op {
                StoreOp::Append | StoreOp::Prepend => ItemWrite::Concat {
                    data: Cow::Borrowed(data),
                    prepend: op == StoreOp::Prepend,
                    cas: None,
                },
                _ => ItemWrite::Store {
                    value: Cow::Borrowed(data),
                    flags,
                    ttl: ttl_of(exptime),
                    cond: match op {
                        StoreOp::Add => ItemCond::IfAbsent,
                        StoreOp::Replace => ItemCond::IfPresent,
                        _ => ItemCond::Always,
                    },
                    cas: (op == StoreOp::Cas).then_some(cas),
                },
            };
            sh.count(OpClass::Put);
            classic_write(sh, s, key, w, noreply, out, |out, o| match o {
                Outcome::Done => reply::line(out, "STORED"),
                Outcome::Mismatch { absent: true } => reply::line(out, "NOT_FOUND"),
                Outcome::Mismatch { absent: false } => reply::line(out, "EXISTS"),
                Outcome::Failed(Failure::TooLarge) => {
                    reply::line(out, "SERVER_ERROR out of memory storing object")
                }
                _ => reply::line(out, "NOT_STORED"),
            });
        }
        Command::Delete { key, noreply } => {
            sh.count(OpClass::Delete);
            let w = ItemWrite::Delete { cas: None };
            classic_write(sh, s, key, w, noreply, out, |out, o| match o {
                Outcome::Done => reply::line(out, "DELETED"),
                _ => reply::line(out, "NOT_FOUND"),
            });
        }
        Command::Arith {
            key,
            delta,
            incr,
            noreply,
        } => {
            sh.count(OpClass::Atomic);
            let w = ItemWrite::Arith {
                delta,
                incr,
                cas: None,
                vivify: None,
            };
            classic_write(sh, s, key, w, noreply, out, |out, o| match o {
                Outcome::Uint(n) => reply::number(out, n),
                Outcome::Failed(Failure::NotInteger) => reply::line(
                    out,
                    "CLIENT_ERROR cannot increment or decrement non-numeric value",
                ),
                _ => reply::line(out, "NOT_FOUND"),
            });
        }
        Command::Touch {
            key,
            exptime,
            noreply,
        } => {
            sh.count(OpClass::Update);
            let w = ItemWrite::Touch {
                ttl: ttl_of(exptime),
            };
            classic_write(sh, s, key, w, noreply, out, |out, o| match o {
                Outcome::Done => reply::line(out, "TOUCHED"),
                _ => reply::line(out, "NOT_FOUND"),
            });
        }
        _ => {}
    }
}

fn version(out: &mut Vec<u8>) {
    reply::line(
        out,
        concat!("VERSION 1.6.0 accelkv-", env!("CARGO_PKG_VERSION")),
    );
}

/// A `get` of `keys`: through the loop's read door in batches of [`BATCH`] (the interleaved
/// walk, with the item's flags), or, when reads go through an engine's own workers (whose
/// replies carry no flags), from the store on this thread. `Err(NotYet)`: a read was
/// submitted; nothing was written.
fn get(
    sh: &Shared,
    keys: mc::Tokens<'_>,
    reads: &mut Reads,
    sc: &mut McScratch,
    out: &mut Vec<u8>,
    direct_only: bool,
) -> Result<(), NotYet> {
    let keys: SmallVec<[&[u8]; BATCH]> = keys.collect();
    sh.count_n(OpClass::Get, keys.len());
    if reads.is_ring() || direct_only {
        for key in &keys {
            direct(sh, key, out);
        }
        reply::line(out, "END");
        return Ok(());
    }
    if !sh.admit(keys.len()) {
        reply::line(out, "SERVER_ERROR too many operations in flight");
        return Ok(());
    }
    sc.replies.clear();
    sc.segs.clear();
    sc.segs.resize(keys.len(), (0, 0));
    for base in (0..keys.len()).step_by(BATCH) {
        let part = &keys[base..keys.len().min(base + BATCH)];
        let reqs: SmallVec<[ReadRef<'_>; BATCH]> = part.iter().map(|k| ReadRef::Get(k)).collect();
        let (replies, segs) = (&mut sc.replies, &mut sc.segs);
        let ran = sh.read(reads, &reqs, |j, found| {
            let start = replies.len();
            match found {
                Found::Value(Some(v), flags) if !is_typed(flags) => {
                    reply::value(replies, part[j], flags, v, None)
                }
                // Answers handed back after a wait carry no flags: read the item again (its
                // leaf is resident now).
                Found::Reply(Reply::Value(Some(_))) => direct(sh, part[j], replies),
                _ => {}
            }
            segs[base + j] = (start, replies.len());
        });
        if let Err(e) = ran {
            sh.release(keys.len());
            return Err(e);
        }
    }
    sh.release(keys.len());
    for &(x, y) in &sc.segs {
        out.extend_from_slice(&sc.replies[x..y]);
    }
    reply::line(out, "END");
    if sc.replies.capacity() > 4 << 20 {
        sc.replies = Vec::new();
    }
    Ok(())
}

/// One key's `VALUE` block, read from the store on this thread.
fn direct(sh: &Shared, key: &[u8], out: &mut Vec<u8>) {
    let _ = sh.view().get_item_with(key, 0, |v, _, f| {
        if !is_typed(f) {
            reply::value(out, key, f, v, None)
        }
    });
}
