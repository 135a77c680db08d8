//! SYNC, PSYNC and REPLCONF as `redis-cli --rdb` (and `--functions-rdb`) uses them: after
//! `REPLCONF rdb-only 1`, SYNC answers an RDB file of every database at one snapshot
//! (`accelkv_proto::rdb::File`: strings, lists, sets, sorted sets, hashes and streams with
//! their deadlines, in each database's number as clients select it, and the functions'
//! libraries), sent as a bulk string's header and the file's bytes, then closes the
//! connection, as Redis closes an RDB-only transfer. `redis-server` loads the file at start.
//! accelkv does not replicate: SYNC without rdb-only, and PSYNC, are refused with that
//! reason. The file is built in memory, once per SYNC: as large as the data it holds.

use crate::core::ops::typed::is_typed;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::dump::value_at;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::session::{RdbOnly, Session};
use accelkv_proto::rdb::File;
use accelkv_proto::resp;
use accelkv_tree::Snapshot;

/// `REPLCONF option value [option value …]`: `rdb-only 0|1` and `rdb-filter-only
/// ""|functions` shape the next SYNC; `capa`, `listening-port` and `ip-address` are
/// accepted and change nothing.
pub fn replconf(x: &mut Call<'_, '_>) {
    let a = &x.args[1..];
    if !a.len().is_multiple_of(2) {
        return resp::error(x.out, "ERR syntax error");
    }
    for pair in a.chunks(2) {
        let (opt, v) = (pair[0].to_ascii_lowercase(), pair[1]);
        match (opt.as_slice(), v) {
            (b"rdb-only", b"1") if x.s.rdb_only == RdbOnly::No => x.s.rdb_only = RdbOnly::All,
            (b"rdb-only", b"1") => {}
            (b"rdb-only", b"0") => x.s.rdb_only = RdbOnly::No,
            (b"rdb-filter-only", b"") => {}
            (b"rdb-filter-only", f) if f.eq_ignore_ascii_case(b"functions") => {
                x.s.rdb_only = RdbOnly::Functions
            }
            (b"rdb-filter-only", _) => {
                return resp::error(x.out, "ERR Unsupported rdb-filter-only option")
            }
            (b"capa" | b"listening-port" | b"ip-address", _) => {}
            _ => {
                let o = String::from_utf8_lossy(pair[0]);
                return resp::error(x.out, &format!("ERR Unrecognized REPLCONF option: {o}"));
            }
        }
    }
    resp::simple(x.out, "OK")
}

/// `SYNC`: after `REPLCONF rdb-only 1`, the RDB file, then the connection closes.
pub fn sync(x: &mut Call<'_, '_>) {
    if x.s.rdb_only == RdbOnly::No {
        return resp::error(
            x.out,
            "ERR accelkv does not replicate: SYNC serves an RDB snapshot after REPLCONF rdb-only 1 (redis-cli --rdb)",
        );
    }
    let functions_only = x.s.rdb_only == RdbOnly::Functions;
    match snapshot(x.sh, x.s, functions_only) {
        Ok(file) => {
            x.out
                .extend_from_slice(format!("${}\r\n", file.len()).as_bytes());
            x.out.extend_from_slice(&file);
            x.s.quit = true;
        }
        Err(e) => fail(x.out, &e),
    }
}

/// `PSYNC replid offset`: refused, accelkv has no replication stream to serve.
pub fn psync(x: &mut Call<'_, '_>) {
    resp::error(
        x.out,
        "ERR accelkv does not replicate: no replication stream (SYNC serves redis-cli --rdb)",
    )
}

/// The RDB file of every database (or of the functions alone) at one snapshot.
pub(crate) fn snapshot(
    sh: &Shared,
    s: &mut Session,
    functions_only: bool,
) -> Result<Vec<u8>, Fail> {
    let ctime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string();
    let mut file = File::new(&[
        ("accelkv-ver", env!("CARGO_PKG_VERSION").as_bytes()),
        ("redis-bits", b"64"),
        ("ctime", ctime.as_bytes()),
    ]);
    if !functions_only {
        let src = Src::Snap(sh.view().snapshot());
        let databases = sh.settings().databases;
        for physical in 0..databases.min(usize::from(u16::MAX) + 1) as u16 {
            let Some(logical) = s.global.dbs.logical(physical, databases) else {
                continue;
            };
            database(sh, s, &src, physical, u64::from(logical), &mut file)?;
        }
    }
    for code in s.global.scripts.functions.codes() {
        file.function(&code);
    }
    Ok(file.finish())
}

/// Database `physical`'s keys, as database `logical` of the file (nothing when empty).
fn database(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    physical: u16,
    logical: u64,
    file: &mut File,
) -> Result<(), Fail> {
    let (lo, hi) = crate::resp::db::range(physical);
    let Src::Snap(snap) = src else {
        return Err(Fail::Reply("ERR SYNC needs a snapshot".into()));
    };
    // A first walk counts the keys and deadlines (RESIZEDB), the second writes them.
    let (mut keys, mut expiring) = (0u64, 0u64);
    leaves(snap, (&lo, &hi), |_, _, deadline, _| {
        keys += 1;
        expiring += u64::from(deadline != 0);
        Ok(())
    })?;
    if keys == 0 {
        return Ok(());
    }
    file.select(logical, keys, expiring);
    leaves(snap, (&lo, &hi), |key, value, deadline, flags| {
        let deadline = (deadline != 0).then_some(deadline);
        let name = crate::resp::db::shown(key);
        if !is_typed(flags) {
            file.string(name, value, deadline);
        } else if let Some(v) = value_at(sh, s, src, key)? {
            file.entry(name, &v, deadline);
        }
        Ok(())
    })
}

/// Calls `f` with every item in `[lo, hi)` at the snapshot (key, value, deadline, client
/// flags), a leaf at a time: one descent per leaf, no copy of a string's value.
fn leaves(
    snap: &Snapshot<'_>,
    (lo, hi): (&[u8], &[u8]),
    mut f: impl FnMut(&[u8], &[u8], u64, u32) -> Result<(), Fail>,
) -> Result<(), Fail> {
    let mut at = lo.to_vec();
    loop {
        let next = snap.leaf(&at, |leaf| -> Result<Option<Vec<u8>>, Fail> {
            for &(k, v, deadline, flags) in &leaf.items {
                if k < at.as_slice() {
                    continue;
                }
                if k >= hi {
                    return Ok(None);
                }
                f(k, v, deadline, flags)?;
            }
            Ok(leaf.high.map(<[u8]>::to_vec))
        })??;
        match next {
            Some(n) if n.as_slice() < hi => at = n,
            _ => return Ok(()),
        }
    }
}
