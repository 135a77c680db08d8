//! SYNC, PSYNC and REPLCONF as `redis-cli --rdb` (and `--functions-rdb`) uses them: after
//! `REPLCONF rdb-only 1`, SYNC answers an RDB file of every database at one snapshot
//! (`accelkv_proto::rdb::File`: strings, lists, sets, sorted sets, hashes and streams with
//! their deadlines, in each database's number as clients select it, and the functions'
//! libraries), sent as a bulk string's header and the file's bytes, then closes the
//! connection, as Redis closes an RDB-only transfer. `redis-server` loads the file at start.
//! accelkv does not replicate: SYNC without rdb-only, and PSYNC, are refused with that
//! reason. The file is built in memory, once per SYNC: as large as the data it holds.

use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::dump::value_at;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::session::{RdbOnly, Session};
use accelkv_proto::rdb::File;
use accelkv_proto::resp;

/// Keys read per step of a database's walk.
const STEP: usize = 1024;

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
fn snapshot(sh: &Shared, s: &mut Session, functions_only: bool) -> Result<Vec<u8>, Fail> {
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
    // A first walk counts the keys and deadlines (RESIZEDB), the second writes them; each
    // holds one step's keys at a time.
    let (mut keys, mut expiring) = (0u64, 0u64);
    let mut from = Some(lo.clone());
    while let Some(at) = from {
        let (step, next) = chunk(sh, s, src, (&at, &hi))?;
        for k in &step {
            keys += 1;
            if snap.get_entry(k)?.is_some_and(|(_, d)| d != 0) {
                expiring += 1;
            }
        }
        from = next;
    }
    if keys == 0 {
        return Ok(());
    }
    file.select(logical, keys, expiring);
    let mut from = Some(lo);
    while let Some(at) = from {
        let (step, next) = chunk(sh, s, src, (&at, &hi))?;
        for key in step {
            let deadline = snap.get_entry(&key)?.map(|(_, d)| d).filter(|&d| d != 0);
            if let Some(v) = value_at(sh, s, src, &key)? {
                file.entry(crate::resp::db::shown(&key), &v, deadline);
            }
        }
        from = next;
    }
    Ok(())
}

/// One step's keys, and where the next step starts.
type Step = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// Up to [`STEP`] keys from `from` below `hi` at the snapshot, and where the next step
/// starts (`None`: the range is done).
fn chunk(
    sh: &Shared,
    s: &Session,
    src: &Src<'_>,
    (from, hi): (&[u8], &[u8]),
) -> Result<Step, Fail> {
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(STEP);
    src.scan(sh, s, (from, hi), STEP, |k, _| keys.push(k.to_vec()))?;
    let next = match keys.last() {
        Some(k) if keys.len() == STEP => {
            let mut n = k.clone();
            n.push(0);
            Some(n)
        }
        _ => None,
    };
    Ok((keys, next))
}
