//! memcached's text protocol on its own port (`--memcached-port`), run to completion on the
//! event loop that read it, like RESP (resp_batch.rs): commands are decoded in place
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

pub mod admin;
pub mod meta;
pub mod session;
pub mod udp;

use crate::core::counters::OpClass;
use crate::core::ops::{Failure, ItemCond, ItemTtl, ItemWrite, Outcome, Write};
use crate::core::reads::{NotYet, Reads};
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use accelkv_engine::{Found, ReadRef, Reply};
use accelkv_proto::memcache::{
    self as mc, reply, Command, Expiry, Exptime, McError, McLimits, StoreOp,
};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use admin::McGlobal;

/// Keys of one read batch.
const BATCH: usize = 64;

/// A memcached connection's state.
pub struct McSession {
    /// The adapter's server-wide state (the pending delayed flush).
    pub global: Arc<McGlobal>,
    pub authed: bool,
    /// `quit` was received: close after the replies.
    pub quit: bool,
    /// A write ran since the connection last waited for durability.
    pub wrote: bool,
    /// The newest write version the replies since the last park rest on (0: none).
    pub unreleased: u64,
    /// Bytes of a refused storage command's data still to drop as they arrive.
    swallow: usize,
    /// A UDP datagram: reads come from the store on this thread, writes are refused.
    datagram: bool,
}

impl McSession {
    /// Whether the loop's gathered batch may answer this connection's leading `get`s
    /// (gather.rs): nothing of its own to wait for, nothing to swallow, authenticated.
    pub fn gatherable(&self, open: bool) -> bool {
        !self.quit
            && self.unreleased == 0
            && self.swallow == 0
            && !self.datagram
            && (open || self.authed)
    }

    /// A new connection's state.
    pub fn new(global: Arc<McGlobal>) -> McSession {
        McSession {
            global,
            authed: false,
            quit: false,
            wrote: false,
            unreleased: 0,
            swallow: 0,
            datagram: false,
        }
    }

    /// The session of one UDP datagram (`authed` when the server has no password).
    pub fn for_datagram(global: Arc<McGlobal>, authed: bool) -> McSession {
        McSession {
            authed,
            datagram: true,
            ..McSession::new(global)
        }
    }
}

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

/// The decoder's limits on this server: memcached's, with the server's largest value.
pub fn limits(sh: &Shared) -> McLimits {
    McLimits {
        max_value: sh.settings().limits.max_value,
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

/// An exptime as an item's new deadline, now.
pub fn ttl_of(e: Exptime) -> ItemTtl {
    match e.at(accelkv_tree::now_ms()) {
        Expiry::Never => ItemTtl::Never,
        Expiry::Past => ItemTtl::Past,
        Expiry::At(d) => ItemTtl::At(d),
    }
}

/// Runs one memcached write through the reservation station.
pub fn write<'a>(sh: &Shared, s: &mut McSession, key: &'a [u8], w: ItemWrite<'a>) -> Done {
    station(sh, s, key, w, true)
}

/// Runs one memcached operation through the reservation station; `changes`: it may write
/// (so its reply waits for durability where the sync policy asks), false for a read.
pub fn station<'a>(
    sh: &Shared,
    s: &mut McSession,
    key: &'a [u8],
    w: ItemWrite<'a>,
    changes: bool,
) -> Done {
    s.wrote |= changes;
    let d = sh
        .station()
        .run_one(sh.store(), Op::new(key, Write::Item(w)));
    s.unreleased = s.unreleased.max(d.version);
    d
}

/// Why a write cannot run now (the disk is failing, or past `maxmemory`), as memcached's
/// server error.
pub fn refused(sh: &Shared, adds_memory: bool) -> Option<String> {
    if let Err(m) = sh.writable() {
        return Some(format!("SERVER_ERROR {m}"));
    }
    (adds_memory && sh.over_maxmemory())
        .then(|| "SERVER_ERROR out of memory storing object".to_string())
}

/// A store error as memcached's `SERVER_ERROR` line.
pub fn store_error(out: &mut Vec<u8>, e: &accelkv_tree::Error) {
    match e {
        accelkv_tree::Error::OutOfMemory { .. } => {
            reply::line(out, "SERVER_ERROR out of memory storing object")
        }
        other => reply::line(out, &format!("SERVER_ERROR {other}")),
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
    }
    Ok(())
}

fn version(out: &mut Vec<u8>) {
    reply::line(
        out,
        concat!("VERSION 1.6.0 accelkv-", env!("CARGO_PKG_VERSION")),
    );
}

/// A classic write: refused while writes cannot run (the disk fails; past `maxmemory`, for
/// a write that can add memory), else run through the reservation station and answered by
/// `answer`; a store error is memcached's `SERVER_ERROR`. With `noreply` nothing is sent.
fn classic_write<'a>(
    sh: &Shared,
    s: &mut McSession,
    key: &'a [u8],
    w: ItemWrite<'a>,
    noreply: bool,
    out: &mut Vec<u8>,
    answer: impl FnOnce(&mut Vec<u8>, Outcome),
) {
    let mark = out.len();
    let adds_memory = !matches!(w, ItemWrite::Delete { .. } | ItemWrite::Touch { .. });
    match refused(sh, adds_memory) {
        Some(m) => reply::line(out, &m),
        None => match write(sh, s, key, w).outcome {
            Ok(o) => answer(out, o),
            Err(e) => store_error(out, &e),
        },
    }
    if noreply {
        out.truncate(mark);
    }
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
        let ran = reads.run(sh.engine(), &reqs, |j, found| {
            let start = replies.len();
            match found {
                Found::Value(Some(v), flags) => reply::value(replies, part[j], flags, v, None),
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
    let _ = sh
        .store()
        .get_item_with(key, 0, |v, _, f| reply::value(out, key, f, v, None));
}
