//! RESP server commands: FLUSHALL, FLUSHDB, DBSIZE, TIME, WAIT, CLUSTER, INFO and CONFIG.

use crate::resp::call::Call;
use crate::resp::commands::types::keyspace::user_keys;
use crate::resp::reply::{err_store, upper, wrong_args};
use accelkv_proto::resp;

/// FLUSHALL and FLUSHDB `[SYNC | ASYNC]`: one write for the whole keyspace
/// (`Store::clear`), atomic for readers; the old tree's memory is reclaimed in the
/// background (ASYNC and SYNC alike).
pub fn flushall(x: &mut Call<'_, '_>) {
    let c = x.args;
    if c.len() > 2 || (c.len() == 2 && !matches!(upper(c[1]).as_slice(), b"SYNC" | b"ASYNC")) {
        return resp::error(x.out, "ERR syntax error");
    }
    let (sh, dbs) = (x.sh, &x.s.global.dbs);
    // Functions outlive FLUSHALL, as in Redis: read before the store is cleared, written
    // again after.
    let scripts = x.s.global.scripts.clone();
    crate::resp::commands::script::functions::ensure_loaded(sh, &scripts);
    match dbs.cleared(|| sh.writes().clear()) {
        Ok(v) => {
            x.s.refresh_db(sh);
            x.s.unreleased = x.s.unreleased.max(v);
            if scripts.functions.any() {
                if let Err(e) = crate::resp::commands::script::functions::persist(sh, x.s) {
                    return resp::error(x.out, &e);
                }
            }
            // Parked XREADGROUPs answer NOGROUP, the other blocked commands park again.
            if sh.blocked().waiting() > 0 {
                sh.blocked().wake_all();
            }
            flushed(x);
            resp::simple(x.out, "OK")
        }
        Err(e) => err_store(x.out, &e),
    }
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`: stops the server as SIGTERM does (the
/// loops stop, the data directory is flushed, the process exits 0) and closes this
/// connection without a reply, as Redis does. NOSAVE skips the final flush (what the sync
/// policy made durable stays; the rest is lost, as in a crash); SAVE is the default here,
/// since every write already goes to the data directory; NOW and FORCE change nothing
/// (no replicas to wait for, no snapshot to fail); ABORT has no shutdown to abort.
pub fn shutdown(x: &mut Call<'_, '_>) {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for a in &x.args[1..] {
        match upper(a).as_slice() {
            b"SAVE" => save = true,
            b"NOSAVE" => nosave = true,
            b"NOW" | b"FORCE" => {}
            b"ABORT" => abort = true,
            _ => return resp::error(x.out, "ERR syntax error"),
        }
    }
    if (save && nosave) || (abort && x.args.len() > 2) {
        return resp::error(x.out, "ERR syntax error");
    }
    if abort {
        return resp::error(x.out, "ERR No shutdown in progress.");
    }
    if !x.sh.request_shutdown(!nosave) {
        return resp::error(x.out, "ERR Errors trying to SHUTDOWN. Check logs.");
    }
    x.s.quit = true;
}

/// `FLUSHDB [SYNC | ASYNC]`: the selected database's keys. While every other database is
/// empty this is FLUSHALL's one write; otherwise each key of the database is removed in
/// turn (its collections' fields reclaimed in the background), so a concurrent reader may
/// see part of it gone.
pub fn flushdb(x: &mut Call<'_, '_>) {
    let c = x.args;
    if c.len() > 2 || (c.len() == 2 && !matches!(upper(c[1]).as_slice(), b"SYNC" | b"ASYNC")) {
        return resp::error(x.out, "ERR syntax error");
    }
    // Database 0 alone holds keys: one write, as FLUSHALL.
    if x.s.db == 0 {
        let others =
            x.sh.view()
                .try_scan(&crate::resp::db::DB_PREFIX, Some(&[0xFF, 0xFF]), 1);
        match others {
            Ok(o) if o.is_empty() => return flushall(x),
            Ok(_) => {}
            Err(e) => return err_store(x.out, &e),
        }
    }
    let (mut from, hi) = crate::resp::db::range(x.s.db);
    let mut version = 0;
    loop {
        let page = match x.sh.view().try_scan(&from, Some(&hi), 1024) {
            Ok(p) => p,
            Err(e) => return err_store(x.out, &e),
        };
        for (k, _) in &page {
            let op = crate::core::station::Op::new(k, crate::core::ops::Write::Remove);
            let done = x.sh.writes().run_one(op);
            if let Err(e) = done.outcome {
                return err_store(x.out, &e);
            }
            version = version.max(done.version);
        }
        match page.last() {
            Some((k, _)) if page.len() == 1024 => {
                from = k.clone();
                from.push(0);
            }
            _ => break,
        }
    }
    x.s.unreleased = x.s.unreleased.max(version);
    if x.sh.blocked().waiting() > 0 {
        x.sh.blocked().wake_all();
    }
    flushed(x);
    resp::simple(x.out, "OK")
}

/// Client-side caching: every tracking connection drops everything (`invalidate` with a
/// null), as Redis tells them after a flush.
fn flushed(x: &Call<'_, '_>) {
    let g = &x.s.global;
    if g.tracking.active() {
        let to = crate::resp::tracking::Reach {
            pubsub: &g.pubsub,
            clients: x.sh.clients(),
        };
        g.tracking.flushed(&to);
    }
}

pub fn dbsize(x: &mut Call<'_, '_>) {
    resp::integer(x.out, user_keys(x.sh, x.s.db) as i64)
}

pub fn time(x: &mut Call<'_, '_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    resp::array(x.out, 2);
    resp::bulk(x.out, Some(now.as_secs().to_string().as_bytes()));
    resp::bulk(x.out, Some(now.subsec_micros().to_string().as_bytes()));
}

/// LASTSAVE: when the data last became durable (Unix seconds; `Shared::last_save`).
pub fn lastsave(x: &mut Call<'_, '_>) {
    resp::integer(x.out, x.sh.last_save() as i64)
}

/// WAIT: no replicas, nothing to wait for.
pub fn wait(x: &mut Call<'_, '_>) {
    resp::integer(x.out, 0)
}

/// `CLUSTER`: the range map in cluster mode, a one-node cluster's answers with
/// `--cluster-mode emulated` (cluster_emulated.rs).
pub fn cluster(x: &mut Call<'_, '_>) {
    match x.sh.router() {
        Some(cl) => cl.command(&x.args[1..], x.s.proto, x.out),
        None if x.sh.settings().cluster_emulated => {
            crate::resp::commands::cluster_emulated::cluster(x)
        }
        None => resp::error(x.out, "ERR This instance has cluster support disabled"),
    }
}

pub fn info(x: &mut Call<'_, '_>) {
    let mut text = crate::resp::commands::config::info(x.sh, x.s, &x.args[1..]);
    // commandstats: only when asked for by name, or with `all` or `everything`, as Redis.
    let asked = x.args[1..].iter().any(|a| {
        let a = a.to_ascii_lowercase();
        matches!(a.as_slice(), b"commandstats" | b"all" | b"everything")
    });
    if asked {
        let names = crate::resp::subcommands::names((x.dispatch.table)());
        let section = x.s.global.cmdstats.section(names.iter());
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&section);
    }
    resp::verbatim(x.out, text.as_bytes(), x.s.proto);
}

/// CONFIG GET, SET and RESETSTAT.
pub fn config(x: &mut Call<'_, '_>) {
    let (sh, c) = (x.sh, x.args);
    match (upper(c[1]).as_slice(), c.len()) {
        (b"GET", n) if n >= 3 => crate::resp::commands::config::get(sh, x.s, &c[2..], x.out),
        (b"RESETSTAT", 2) => {
            x.s.global.cmdstats.reset();
            x.s.global.errors.reset();
            crate::resp::commands::introspect::reset_stats(sh, x.out)
        }
        (b"SET", _) => crate::resp::commands::config::set(sh, x.s, c, x.dispatch, x.out),
        _ => wrong_args(x.out, c[0]),
    }
}
