//! `SWAPDB index1 index2`: two databases trade their keys by swapping two entries of the
//! database table (`dbmap.rs`), whatever they hold.

use crate::core::ops::Write;
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::dbmap::MAP_KEY;
use crate::resp::reply::err_store;
use accelkv_proto::resp;
use std::borrow::Cow;

/// `SWAPDB index1 index2`: the two databases trade their keys, for every connection, at
/// once; connections blocked on a key are woken to look again, and a transaction that
/// watched keys in a swapped database fails its EXEC (as Redis's SWAPDB touches the watched
/// keys of both: `Session::refresh_db`).
pub fn swapdb(x: &mut Call<'_, '_>) {
    if x.sh.router().is_some() {
        return resp::error(x.out, "ERR SWAPDB is not allowed in cluster mode");
    }
    let index = |a: &[u8], which: &str| match crate::resp::reply::parse_i64(a) {
        None => Err(format!("ERR invalid {which} DB index")),
        Some(n) if n < 0 || n >= x.sh.settings().databases as i64 => {
            Err("ERR DB index is out of range".to_string())
        }
        Some(n) => Ok(n as u16),
    };
    let (a, b) = match (index(x.args[1], "first"), index(x.args[2], "second")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return resp::error(x.out, &e),
    };
    let (sh, global) = (x.sh, x.s.global.clone());
    let written = global.dbs.swap(sh, a, b, |table| {
        let op = Op::new(MAP_KEY, Write::Put(Cow::Owned(table.to_vec())));
        let d = sh.writes().run_one(op);
        d.outcome.map(|_| d.version)
    });
    match written {
        Ok(v) => {
            x.s.unreleased = x.s.unreleased.max(v);
            x.s.refresh_db(sh);
            sh.blocked().wake_all();
            resp::simple(x.out, "OK")
        }
        Err(e) => err_store(x.out, &e),
    }
}
