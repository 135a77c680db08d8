//! RESP server commands: FLUSHALL, DBSIZE, TIME, WAIT, CLUSTER, INFO and CONFIG.

use crate::resp::call::Call;
use crate::resp::reply::{err_store, upper, wrong_args};
use crate::resp::types::keyspace::user_keys;
use accelkv_proto::resp;

/// FLUSHALL and FLUSHDB `[SYNC | ASYNC]`: one write for the whole keyspace
/// (`Store::clear`), atomic for readers; the old tree's memory is reclaimed in the
/// background (ASYNC and SYNC alike).
pub fn flushall(x: &mut Call<'_, '_>) {
    let c = x.args;
    if c.len() > 2 || (c.len() == 2 && !matches!(upper(c[1]).as_slice(), b"SYNC" | b"ASYNC")) {
        return resp::error(x.out, "ERR syntax error");
    }
    match x.sh.station().clear(x.sh.store()) {
        Ok(v) => {
            x.s.unreleased = x.s.unreleased.max(v);
            resp::simple(x.out, "OK")
        }
        Err(e) => err_store(x.out, &e),
    }
}

pub fn dbsize(x: &mut Call<'_, '_>) {
    resp::integer(x.out, user_keys(x.sh) as i64)
}

pub fn time(x: &mut Call<'_, '_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    resp::array(x.out, 2);
    resp::bulk(x.out, Some(now.as_secs().to_string().as_bytes()));
    resp::bulk(x.out, Some(now.subsec_micros().to_string().as_bytes()));
}

/// WAIT: no replicas, nothing to wait for.
pub fn wait(x: &mut Call<'_, '_>) {
    resp::integer(x.out, 0)
}

pub fn cluster(x: &mut Call<'_, '_>) {
    match x.sh.router() {
        Some(cl) => cl.command(&x.args[1..], x.s.proto, x.out),
        None => resp::error(x.out, "ERR This instance has cluster support disabled"),
    }
}

pub fn info(x: &mut Call<'_, '_>) {
    let text = crate::resp::config::info(x.sh, x.s, &x.args[1..]);
    resp::verbatim(x.out, text.as_bytes(), x.s.proto);
}

/// CONFIG GET, SET and RESETSTAT.
pub fn config(x: &mut Call<'_, '_>) {
    let (sh, c) = (x.sh, x.args);
    match (upper(c[1]).as_slice(), c.len()) {
        (b"GET", n) if n >= 3 => crate::resp::config::get(sh, x.s, &c[2..], x.out),
        (b"RESETSTAT", 2) => crate::resp::introspect::reset_stats(sh, x.out),
        (b"SET", _) => crate::resp::config::set(sh, c, x.out),
        _ => wrong_args(x.out, c[0]),
    }
}
