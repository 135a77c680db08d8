//! The commands of replication and snapshots: `REPLICAOF host port` (and its old name
//! `SLAVEOF`) to follow a Redis primary, `REPLICAOF NO ONE` to stop and keep the data,
//! `ROLE` (`replica/` runs the link), and `SAVE` / `BGSAVE`, which write every database as
//! an RDB file redis-server loads (`dump.rdb` in the data directory, else the working
//! directory, as Redis's `dir` and `dbfilename`), so leaving is as easy as coming.

use crate::resp::call::Call;
use crate::resp::commands::sync::snapshot;
use crate::resp::commands::types::access::fail;
use crate::resp::replica::LinkState;
use accelkv_proto::resp;
use std::path::PathBuf;

/// `REPLICAOF host port | NO ONE`.
pub fn replicaof(x: &mut Call<'_, '_>) {
    if x.sh.settings().cluster.is_some() {
        return resp::error(
            x.out,
            "ERR REPLICAOF not allowed in cluster mode (each range replicates through Raft)",
        );
    }
    let (host, port) = (x.args[1], x.args[2]);
    let r = &x.s.global.replication;
    if host.eq_ignore_ascii_case(b"NO") && port.eq_ignore_ascii_case(b"ONE") {
        if r.status().primary.is_some() {
            tracing::info!("REPLICAOF NO ONE: this server is a primary again");
            r.follow(None);
        }
        return resp::simple(x.out, "OK");
    }
    let Some(port) = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p > 0)
    else {
        return resp::error(x.out, "ERR Invalid master port");
    };
    let host = String::from_utf8_lossy(host).to_string();
    let same = r.status().primary == Some((host.clone(), port));
    if same {
        return resp::simple(x.out, "OK Already connected to specified master");
    }
    tracing::info!(
        "REPLICAOF {host} {port}: following it (a full synchronization replaces every key)"
    );
    r.follow(Some((host, port)));
    resp::simple(x.out, "OK")
}

/// `ROLE`: `master`, the offset, no replicas; or `slave`, the primary, the link's state
/// and the offset applied.
pub fn role(x: &mut Call<'_, '_>) {
    let r = &x.s.global.replication;
    let st = r.status();
    match st.primary {
        None => {
            resp::array(x.out, 3);
            resp::bulk(x.out, Some(b"master"));
            resp::integer(x.out, r.offset() as i64);
            resp::array(x.out, 0);
        }
        Some((host, port)) => {
            resp::array(x.out, 5);
            resp::bulk(x.out, Some(b"slave"));
            resp::bulk(x.out, Some(host.as_bytes()));
            resp::integer(x.out, i64::from(port));
            let state = match st.state {
                LinkState::None => LinkState::Connect.role_name(),
                s => s.role_name(),
            };
            resp::bulk(x.out, Some(state.as_bytes()));
            resp::integer(x.out, r.offset() as i64);
        }
    }
}

/// Where SAVE writes: `dump.rdb` in the data directory, else in the working directory.
fn rdb_path(x: &Call<'_, '_>) -> PathBuf {
    let dir = x.sh.settings().data_dir.clone().unwrap_or_default();
    dir.join("dump.rdb")
}

/// Writes `bytes` to `path` through a temporary file renamed over it, synced, as Redis
/// writes `temp-<pid>.rdb` and renames it.
fn write_rdb(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_file_name(format!("temp-{}.rdb", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `SAVE`: the RDB file of every database at one snapshot, written before the reply.
pub fn save(x: &mut Call<'_, '_>) {
    let path = rdb_path(x);
    match snapshot(x.sh, x.s, false) {
        Ok(bytes) => match write_rdb(&path, &bytes) {
            Ok(()) => resp::simple(x.out, "OK"),
            Err(e) => resp::error(x.out, &format!("ERR writing {}: {e}", path.display())),
        },
        Err(e) => fail(x.out, &e),
    }
}

/// `BGSAVE [SCHEDULE]`: the snapshot taken now, the file written by a thread of its own.
pub fn bgsave(x: &mut Call<'_, '_>) {
    if x.args.len() > 2 || (x.args.len() == 2 && !x.args[1].eq_ignore_ascii_case(b"SCHEDULE")) {
        return resp::error(x.out, "ERR syntax error");
    }
    let path = rdb_path(x);
    let bytes = match snapshot(x.sh, x.s, false) {
        Ok(b) => b,
        Err(e) => return fail(x.out, &e),
    };
    let spawned = std::thread::Builder::new()
        .name("accelkv-bgsave".into())
        .spawn(move || match write_rdb(&path, &bytes) {
            Ok(()) => tracing::info!("BGSAVE: {} written", path.display()),
            Err(e) => tracing::warn!("BGSAVE: writing {}: {e}", path.display()),
        });
    match spawned {
        Ok(_) => resp::simple(x.out, "Background saving started"),
        Err(e) => resp::error(x.out, &format!("ERR BGSAVE: {e}")),
    }
}
