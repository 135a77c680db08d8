//! Redis transactions and the multi-key commands that must be atomic: MULTI, EXEC,
//! DISCARD, WATCH, UNWATCH, and MSET, MSETNX, RENAME, RENAMENX.
//!
//! MULTI starts queueing: the gate (`gate.rs`) checks each command sent after it as it
//! checks any (an unknown command or a wrong argument count is answered with its error and
//! makes EXEC answer `-EXECABORT`, as Redis does) and queues it. EXEC runs them as one station transaction (station_tx.rs): every
//! key they touch is owned by the transaction from its first use to the commit, reads see
//! the transaction's own earlier writes, and the writes are released to readers as one
//! version, so no reader, scan or durable commit sees part of an EXEC. WATCH records each
//! key's version (`Store::key_version`) and whether it is live; EXEC first owns the watched
//! keys and answers a null array, running nothing, if any of them was touched since (written,
//! expired, or removed by a FLUSHALL). A command refused while queueing (unknown, wrong
//! arity, not allowed in MULTI, past maxmemory, or the disk failing) makes EXEC answer
//! `-EXECABORT`.
//!
//! Commands that walk the keyspace (SCAN, KEYS, RANDOMKEY, RANGE, FLOOR) and FLUSHALL are
//! not run inside a transaction (flag `no_multi`): queueing one aborts it.

use crate::core::counters::OpClass;
use crate::core::ops::{Outcome, Write};
use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::call::Call;
use crate::resp::call::From;
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use crate::resp::write_door::run_op;
use accelkv_proto::resp;
use std::borrow::Cow;

/// `MULTI`: starts queueing (the gate, `gate.rs`, queues what follows).
pub fn multi(x: &mut Call<'_, '_>) {
    if x.s.tx.queued.is_some() {
        // As Redis: answered, and the transaction goes on.
        return resp::error(x.out, "ERR MULTI calls can not be nested");
    }
    x.s.tx.queued = Some(Vec::new());
    x.s.tx.dirty = false;
    resp::simple(x.out, "OK");
}

/// `EXEC`: runs the queued commands as one transaction.
pub fn exec_cmd(x: &mut Call<'_, '_>) {
    if x.s.tx.queued.is_none() {
        return resp::error(x.out, "ERR EXEC without MULTI");
    }
    let d = x.dispatch;
    exec(x.sh, x.s, x.reads, x.out, |sh, s, c, reads, out| {
        (d.run)(sh, s, (d.find)(c[0]), c, From::Inner, reads, out)
    })
}

/// `DISCARD`: drops the queued commands and the watched keys.
pub fn discard(x: &mut Call<'_, '_>) {
    if x.s.tx.queued.is_none() {
        return resp::error(x.out, "ERR DISCARD without MULTI");
    }
    x.s.tx = Default::default();
    resp::simple(x.out, "OK");
}

/// `WATCH key [key ...]`.
pub fn watch_cmd(x: &mut Call<'_, '_>) {
    if x.s.tx.queued.is_some() {
        // As Redis: answered, and the transaction goes on.
        return resp::error(x.out, "ERR WATCH inside MULTI is not allowed");
    }
    watch(x.sh, x.s, &x.args[1..], x.out)
}

/// UNWATCH outside a transaction: forgets the watched keys.
pub fn unwatch(x: &mut Call<'_, '_>) {
    x.s.tx.watched.clear();
    resp::simple(x.out, "OK")
}

/// Remembers each key's version and whether it is live.
fn watch(sh: &Shared, s: &mut Session, keys: &[&[u8]], out: &mut Vec<u8>) {
    match versions(sh, keys) {
        Ok(w) => s.tx.watched.extend(w),
        Err(e) => return err_store(out, &e),
    }
    resp::simple(out, "OK");
}

/// A key as WATCH remembers it: the key, its version, whether it was live.
pub(crate) type Watched = (Vec<u8>, u64, bool);

/// Each key's version and whether it is live (WATCH, MIGRATE).
pub(crate) fn versions(sh: &Shared, keys: &[&[u8]]) -> Result<Vec<Watched>, accelkv_tree::Error> {
    keys.iter()
        .map(|k| Ok((k.to_vec(), sh.view().key_version(k)?, live(sh, k)?)))
        .collect()
}

/// Runs `f` as one transaction unless a key of `watched` was touched since its version was
/// taken (then nothing runs): whether it ran. Inside a running transaction it just runs.
pub(crate) fn unless_touched(
    sh: &Shared,
    s: &mut Session,
    watched: &[Watched],
    f: impl FnOnce(&mut Session),
) -> bool {
    if s.tx.running.is_some() {
        f(s);
        return true;
    }
    let mut tx = sh.writes().begin();
    for w in watched {
        sh.writes().own(&mut tx, &w.0);
        if touched(sh, w) {
            sh.writes().abort(tx);
            return false;
        }
    }
    s.tx.running = Some(Box::new(tx));
    guarded(sh, s, f);
    let _ = commit_running(sh, s);
    true
}

/// Whether `key` holds a value that has not expired.
pub(crate) fn live(sh: &Shared, key: &[u8]) -> Result<bool, accelkv_tree::Error> {
    Ok(sh.view().snapshot().get_item(key)?.is_some())
}

/// Whether a watched key was touched since WATCH, as Redis 7.0 counts it: its version
/// changed (a write), or it was live then and has expired since (no write needed: expiry
/// is lazy here too). A FLUSHALL touches only keys that were live: a key absent at WATCH
/// and absent now whose version is the last FLUSHALL's was changed by nothing else since
/// (a write to it before that FLUSHALL is not seen, where Redis would abort).
fn touched(sh: &Shared, (key, version, alive): &Watched) -> bool {
    let now_alive = live(sh, key).unwrap_or(true);
    match sh.view().key_version(key) {
        Ok(v) if v == *version => *alive && !now_alive,
        Ok(v) => *alive || now_alive || v != sh.writes().last_clear(),
        Err(_) => true,
    }
}

/// Runs the queued commands as one transaction, each through `run` (the dispatcher).
fn exec(
    sh: &Shared,
    s: &mut Session,
    reads: &mut Reads,
    out: &mut Vec<u8>,
    run: impl Fn(&Shared, &mut Session, &[&[u8]], &mut Reads, &mut Vec<u8>),
) {
    let st = std::mem::take(&mut s.tx);
    let queued = st.queued.unwrap_or_default();
    if st.dirty {
        return resp::error(
            out,
            "EXECABORT Transaction discarded because of previous errors.",
        );
    }
    if st.stale {
        return resp::null_array(out, s.proto);
    }
    let mut tx = sh.writes().begin();
    for w in &st.watched {
        sh.writes().own(&mut tx, &w.0);
        if touched(sh, w) {
            sh.writes().abort(tx);
            return resp::null_array(out, s.proto);
        }
    }
    s.tx.running = Some(Box::new(tx));
    // Each command's reply, and the range of its operations in the transaction.
    let mut replies: Vec<(Vec<u8>, std::ops::Range<usize>)> = Vec::with_capacity(queued.len());
    for args in &queued {
        let c: smallvec::SmallVec<[&[u8]; 8]> = args.iter().map(Vec::as_slice).collect();
        let from = s.tx.running.as_ref().map_or(0, |t| t.ops());
        let mut reply = Vec::new();
        guarded(sh, s, |s| run(sh, s, &c, reads, &mut reply));
        let to = s.tx.running.as_ref().map_or(0, |t| t.ops());
        replies.push((reply, from..to));
    }
    let Some(done) = commit_running(sh, s) else {
        return resp::error(out, "ERR internal error: the transaction was lost");
    };
    resp::array(out, replies.len());
    for (reply, ops) in replies {
        match done.failed[ops].iter().flatten().next() {
            Some(e) => err_store(out, e),
            None => out.extend_from_slice(&reply),
        }
    }
}

/// Commits the running transaction; the connection's replies now rest on its version.
pub(crate) fn commit_running(
    sh: &Shared,
    s: &mut Session,
) -> Option<crate::core::station_tx::Committed> {
    let done = sh.writes().commit(*s.tx.running.take()?);
    s.unreleased = s.unreleased.max(done.version.max(done.seen));
    Some(done)
}

/// Runs `f`, which works in the connection's running transaction; should it panic, the
/// transaction is dropped (its slots and the station's one-transaction flag let go, so
/// every other connection's writes go on) before the panic goes on.
pub(crate) fn guarded<R>(sh: &Shared, s: &mut Session, f: impl FnOnce(&mut Session) -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *s))) {
        Ok(r) => r,
        Err(panic) => {
            if let Some(tx) = s.tx.running.take() {
                sh.writes().abort(*tx);
            }
            std::panic::resume_unwind(panic)
        }
    }
}

/// Runs `f` inside a transaction: the one EXEC runs, or a new one committed at the end (a
/// multi-key command outside MULTI). When a key's write fails at commit, the reply `f`
/// wrote is replaced by the error.
pub(crate) fn atomically(
    sh: &Shared,
    s: &mut Session,
    out: &mut Vec<u8>,
    f: impl FnOnce(&Shared, &mut Session, &mut Vec<u8>),
) {
    if s.tx.running.is_some() {
        return f(sh, s, out);
    }
    s.tx.running = Some(Box::new(sh.writes().begin()));
    let mark = out.len();
    let events = crate::resp::notify::mark(s);
    guarded(sh, s, |s| f(sh, s, out));
    let Some(done) = commit_running(sh, s) else {
        return;
    };
    if let Some(e) = done.failed.iter().flatten().next() {
        out.truncate(mark);
        err_store(out, e);
        crate::resp::notify::drop_since(s, events);
    }
}

pub(crate) fn failed(out: &mut Vec<u8>, d: &Done) -> bool {
    match &d.outcome {
        Err(e) => {
            err_store(out, e);
            true
        }
        Ok(Outcome::Failed(f)) => {
            resp::error(out, &crate::resp::reply::failure_text(f));
            true
        }
        Ok(_) => false,
    }
}

/// `MSET k v [k v ...]`: every pair, atomically.
pub fn mset(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    atomically(sh, s, out, |sh, s, out| {
        for kv in c[1..].chunks(2) {
            sh.count(OpClass::Put);
            let d = run_op(sh, s, Op::new(kv[0], Write::Put(Cow::Borrowed(kv[1]))));
            if failed(out, &d) {
                return;
            }
            crate::resp::notify::event(s, crate::resp::notify::STRING, "set", kv[0]);
        }
        resp::simple(out, "OK");
    })
}

/// `MSETNX k v [k v ...]`: every pair if no key exists (1), else nothing (0), atomically.
pub fn msetnx(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    atomically(sh, s, out, |sh, s, out| {
        for kv in c[1..].chunks(2) {
            let d = run_op(sh, s, Op::new(kv[0], Write::ReadDeadline));
            if failed(out, &d) {
                return;
            }
            if !matches!(d.outcome, Ok(Outcome::Deadline(None))) {
                return resp::integer(out, 0);
            }
        }
        for kv in c[1..].chunks(2) {
            sh.count(OpClass::Put);
            let d = run_op(sh, s, Op::new(kv[0], Write::Put(Cow::Borrowed(kv[1]))));
            if failed(out, &d) {
                return;
            }
            crate::resp::notify::event(s, crate::resp::notify::STRING, "set", kv[0]);
        }
        resp::integer(out, 1);
    })
}

/// `MSET k v [k v ...]` (an even count of arguments is a wrong number of them).
pub fn mset_cmd(x: &mut Call<'_, '_>) {
    if x.args.len().is_multiple_of(2) {
        return crate::resp::reply::wrong_args(x.out, x.args[0]);
    }
    mset(x.sh, x.s, x.args, x.out)
}

/// `MSETNX k v [k v ...]`.
pub fn msetnx_cmd(x: &mut Call<'_, '_>) {
    if x.args.len().is_multiple_of(2) {
        return crate::resp::reply::wrong_args(x.out, x.args[0]);
    }
    msetnx(x.sh, x.s, x.args, x.out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Args, Settings};
    use crate::resp::session::RespGlobal;
    use clap::Parser;
    use std::sync::Arc;

    fn server() -> Arc<Shared> {
        let args = Args::parse_from(["accelkv-server"]);
        let settings = Settings::resolve(args).unwrap();
        Shared::with_registry(settings, Default::default(), Arc::default()).unwrap()
    }

    /// A command that panics inside a transaction (a bug) lets the transaction go: the
    /// next one, on another connection, starts at once and writes the key the first one
    /// held. Before, it waited forever on the station's one-transaction flag.
    #[test]
    fn a_panic_inside_a_transaction_lets_it_go() {
        let sh = server();
        let mut s = Session::new(1, None, Arc::new(RespGlobal::default()));
        let mut out = Vec::new();
        let hit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            atomically(&sh, &mut s, &mut out, |sh, s, _| {
                run_op(sh, s, Op::new(b"k", Write::Put(Cow::Borrowed(b"old"))));
                panic!("a bug in a command");
            })
        }));
        assert!(hit.is_err());
        assert!(s.tx.running.is_none(), "the transaction was dropped");
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let sh2 = sh.clone();
        std::thread::spawn(move || {
            let mut s = Session::new(2, None, Arc::new(RespGlobal::default()));
            let mut out = Vec::new();
            atomically(&sh2, &mut s, &mut out, |sh, s, _| {
                run_op(sh, s, Op::new(b"k", Write::Put(Cow::Borrowed(b"new"))));
            });
            done_tx.send(s.unreleased).unwrap();
        });
        let v = done_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the next transaction ran");
        sh.view().wait_visible(v);
        assert_eq!(sh.view().get(b"k").unwrap(), Some(b"new".to_vec()));
    }
}
