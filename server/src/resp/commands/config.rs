//! `INFO [section …]` (server, clients, memory, persistence, stats, replication, cpu,
//! keyspace), and
//! `CONFIG GET pattern…` and `CONFIG SET name value` over the settings a Redis client or
//! tool asks for, and `maxmemory` with the `noeviction` policy: a limit on the store's
//! memory (nodes, out-of-line values, page table) below `--memory-limit`, changeable at
//! run time; past it every write that can add memory is refused with Redis's
//! `-OOM command not allowed when used memory > 'maxmemory'.` and reads, deletes and
//! FLUSHALL go on.

use crate::config::size::Size;
use crate::core::glob;
use crate::core::shared::Shared;
use crate::resp::session::Session;
use accelkv_proto::resp;
use std::sync::atomic::Ordering;

/// A size as Redis's `memtoll` reads it (`k`/`m`/`g` powers of 1000, `kb`/`mb`/`gb` of 1024):
/// the server's one size syntax (core/size.rs), which also takes `KiB`/`MiB`/`GiB`.
fn mem_bytes(a: &[u8]) -> Option<usize> {
    Size::parse_bytes(a).map(Size::bytes)
}

/// INFO's CPU section: the process's and its children's user and system CPU seconds
/// (`getrusage`).
fn cpu_section() -> String {
    let usage = |who| {
        // SAFETY: getrusage writes only the `rusage` it is handed, which lives on this stack
        // and is zeroed first; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::getrusage(who, &mut r) } == 0;
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        if ok {
            (secs(r.ru_utime), secs(r.ru_stime))
        } else {
            (0.0, 0.0)
        }
    };
    let (user, sys) = usage(libc::RUSAGE_SELF);
    let (cuser, csys) = usage(libc::RUSAGE_CHILDREN);
    format!(
        "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\nused_cpu_user_children:{cuser:.6}\r\n"
    )
}

/// INFO's `# Clients` section.
fn clients_section(sh: &Shared, s: &Session) -> String {
    let (keys, on_nokey) = sh.blocked().keys();
    format!(
        "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntotal_blocking_keys:{keys}\r\ntotal_blocking_keys_on_nokey:{on_nokey}\r\nresp:{}\r\n",
        sh.connected(),
        sh.settings().max_connections,
        sh.blocked().waiting(),
        if s.proto == resp::Version::Resp3 { 3 } else { 2 }
    )
}

/// `INFO [section …]`: the sections asked for (`all`, `everything`, `default` or none: every
/// one), in Redis's `# Section` / `name:value` text, sections separated by an empty line as
/// Redis separates them. O(1) in the store's size, but for the
/// keyspace section's key count, which walks the collections' fields (see
/// `types::keyspace::user_keys`).
pub fn info(sh: &Shared, s: &Session, sections: &[&[u8]]) -> String {
    let wants = |name: &str| {
        sections.is_empty()
            || sections.iter().any(|a| {
                let a = a.to_ascii_lowercase();
                a == name.as_bytes() || matches!(a.as_slice(), b"all" | b"everything" | b"default")
            })
    };
    // Each section its own text; Redis separates them with an empty line.
    let mut parts: Vec<String> = Vec::new();
    if wants("server") {
        let mut t = String::new();
        t.push_str("# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n");
        t.push_str(&format!(
            "accelkv_version:{}\r\nprocess_id:{}\r\nuptime_in_seconds:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            sh.started().elapsed().as_secs()
        ));
        parts.push(t);
    }
    if wants("clients") {
        parts.push(clients_section(sh, s));
    }
    if wants("memory") {
        let mut t = String::new();
        let used = sh.view().memory_used();
        let max = sh.maxmemory();
        t.push_str(&format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{:.2}M\r\nmaxmemory:{max}\r\nmaxmemory_policy:noeviction\r\nmemory_limit:{}\r\n",
            used as f64 / f64::from(1 << 20),
            sh.settings().memory_limit
        ));
        parts.push(t);
    }
    if wants("persistence") {
        let mut t = String::new();
        t.push_str("# Persistence\r\n");
        t.push_str(&sh.persistence_text());
        parts.push(t);
    }
    if wants("stats") {
        let mut t = String::new();
        t.push_str("# Stats\r\n");
        t.push_str(&sh.stats_text());
        let reclaimed = s
            .global
            .reclaimed
            .load(std::sync::atomic::Ordering::Relaxed);
        t.push_str(&format!("reclaimed_subkeys:{reclaimed}\r\n"));
        t.push_str(&s.global.acl_log.stats_text());
        // MIGRATE opens a connection per command and keeps none.
        t.push_str("migrate_cached_sockets:0\r\n");
        let tr = &s.global.tracking;
        t.push_str(&format!(
            "tracking_total_keys:{}\r\ntracking_total_prefixes:{}\r\n",
            tr.keys(),
            tr.prefixes()
        ));
        t.push_str(&format!(
            "total_error_replies:{}\r\n",
            s.global.errors.total()
        ));
        parts.push(t);
    }
    if wants("replication") {
        // A standalone server: a primary without replicas (cluster mode replicates each
        // range through Raft instead: docs/CLUSTER.md).
        parts.push(
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
                .to_string(),
        );
    }
    if wants("cpu") {
        parts.push(cpu_section());
    }
    if wants("errorstats") {
        parts.push(s.global.errors.section());
    }
    if wants("keyspace") {
        let mut t = String::new();
        t.push_str("# Keyspace\r\n");
        // Each physical database under the number clients select it by (dbmap.rs).
        let databases = sh.settings().databases;
        let mut per_db: Vec<(u16, usize)> = crate::resp::commands::types::keyspace::keys_per_db(sh)
            .into_iter()
            .filter_map(|(p, n)| Some((s.global.dbs.logical(p, databases)?, n)))
            .collect();
        per_db.sort_unstable();
        // As Redis, only the databases holding keys; the expiring keys are counted for the
        // whole store, on the first line.
        let mut expires = sh.view().expiring_len();
        for (db, n) in per_db.into_iter().filter(|d| d.1 > 0) {
            t.push_str(&format!("db{db}:keys={n},expires={expires},avg_ttl=0\r\n"));
            expires = 0;
        }
        parts.push(t);
    }
    parts.join("\r\n")
}

/// The parameters CONFIG GET answers, with their values now.
fn params(sh: &Shared, s: &Session) -> Vec<(&'static str, String)> {
    let maxmemory = match sh.maxmemory() {
        0 => sh.settings().memory_limit,
        m => m,
    };
    let mut all = vec![
        // redis-benchmark asks for `save` and `appendonly`: no snapshots and no
        // append-only file (durability is the page file, --data-dir).
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("maxmemory", maxmemory.to_string()),
        ("maxmemory-policy", "noeviction".into()),
        ("databases", sh.settings().databases.to_string()),
        ("maxclients", sh.settings().max_connections.to_string()),
        (
            "timeout",
            sh.settings()
                .idle_timeout
                .map_or(0, |d| d.as_secs())
                .to_string(),
        ),
        // The largest value a request may carry: --max-value, set at start.
        (
            "proto-max-bulk-len",
            sh.view().config().max_value.to_string(),
        ),
    ];
    let limit = s
        .global
        .scripts
        .limit_ms
        .load(Ordering::Relaxed)
        .to_string();
    all.push(("lua-time-limit", limit.clone()));
    all.push(("busy-reply-threshold", limit));
    all.push(("notify-keyspace-events", s.global.notify.text()));
    all.extend(s.global.tuning.all());
    all.extend(crate::resp::acl::config::params(sh, s));
    all
}

/// `CONFIG GET pattern [pattern …]`: a map (RESP3) or flat array of the matching
/// parameters, each once.
pub fn get(sh: &Shared, s: &Session, patterns: &[&[u8]], out: &mut Vec<u8>) {
    let all = params(sh, s);
    let found: Vec<&(&str, String)> = all
        .iter()
        .filter(|(name, _)| {
            patterns
                .iter()
                .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
        })
        .collect();
    resp::map(out, found.len(), s.proto);
    for (name, value) in found {
        resp::bulk(out, Some(name.as_bytes()));
        resp::bulk(out, Some(value.as_bytes()));
    }
}

/// `CONFIG SET name value`: `maxmemory` (0 removes the limit below `--memory-limit`)
/// and `maxmemory-policy noeviction`; anything else is refused as Redis refuses an unknown
/// option.
pub fn set(
    sh: &Shared,
    s: &Session,
    c: &[&[u8]],
    dispatch: &crate::resp::call::Dispatcher,
    out: &mut Vec<u8>,
) {
    if c.len() != 4 {
        return resp::error(
            out,
            "ERR wrong number of arguments for 'config|set' command",
        );
    }
    let name = String::from_utf8_lossy(c[2]).to_ascii_lowercase();
    let known = s.global.tuning.set(&name, c[3]);
    match known.or_else(|| crate::resp::acl::config::set(sh, s, &name, c[3], dispatch)) {
        Some(Ok(())) => return resp::simple(out, "OK"),
        Some(Err(e)) => return resp::error(out, &e),
        None => {}
    }
    match name.as_str() {
        "maxmemory" => match mem_bytes(c[3]) {
            Some(n) => {
                sh.set_maxmemory(n);
                resp::simple(out, "OK")
            }
            None => resp::error(
                out,
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
            ),
        },
        // When Redis starts answering BUSY around a long script: accelkv serves the other
        // loops' clients meanwhile, so it is kept and reported only (script/eval.rs).
        "lua-time-limit" | "busy-reply-threshold" => match std::str::from_utf8(c[3])
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
        {
            Some(ms) => {
                s.global.scripts.limit_ms.store(ms, Ordering::Relaxed);
                resp::simple(out, "OK")
            }
            None => resp::error(
                out,
                &format!("ERR CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"),
            ),
        },
        "notify-keyspace-events" => match s.global.notify.set(c[3]) {
            Ok(()) => resp::simple(out, "OK"),
            Err(e) => resp::error(
                out,
                &format!("ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - {e}"),
            ),
        },
        "maxmemory-policy" if c[3].eq_ignore_ascii_case(b"noeviction") => {
            resp::simple(out, "OK")
        }
        // What accelkv already is: no RDB snapshots, no append-only file.
        "save" if c[3].is_empty() => resp::simple(out, "OK"),
        "appendonly" if c[3].eq_ignore_ascii_case(b"no") => resp::simple(out, "OK"),
        "save" | "appendonly" => resp::error(
            out,
            &format!("ERR CONFIG SET failed (possibly related to argument '{name}') - accelkv has no RDB snapshots or AOF: durability is --data-dir"),
        ),
        "proto-max-bulk-len"
            if c[3] == sh.view().config().max_value.to_string().as_bytes() =>
        {
            resp::simple(out, "OK")
        }
        "proto-max-bulk-len" => resp::error(
            out,
            &format!("ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - accelkv's largest value is set at start: --max-value (now {}, up to 536870912)", sh.view().config().max_value),
        ),
        "maxmemory-policy" => resp::error(
            out,
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - accelkv supports noeviction only",
        ),
        _ => unchanged(sh, s, &name, c[3], out),
    }
}

/// CONFIG SET of a parameter CONFIG GET reports but only a start sets: accepted when the
/// value is the one it has (tools write back what they read), refused otherwise.
fn unchanged(sh: &Shared, s: &Session, name: &str, value: &[u8], out: &mut Vec<u8>) {
    match params(sh, s).into_iter().find(|(n, _)| *n == name) {
        Some((_, now)) if now.as_bytes() == value => resp::simple(out, "OK"),
        Some(_) => resp::error(
            out,
            &format!("ERR CONFIG SET failed (possibly related to argument '{name}') - accelkv sets it at start only (a flag or the config file)"),
        ),
        None => resp::error(
            out,
            &format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::mem_bytes;

    #[test]
    fn memory_values_as_redis_reads_them() {
        assert_eq!(mem_bytes(b"1024"), Some(1024));
        assert_eq!(mem_bytes(b"1k"), Some(1000));
        assert_eq!(mem_bytes(b"1KB"), Some(1024));
        assert_eq!(mem_bytes(b"100mb"), Some(100 << 20));
        assert_eq!(mem_bytes(b"2g"), Some(2_000_000_000));
        assert_eq!(mem_bytes(b"0"), Some(0));
        assert_eq!(mem_bytes(b"x"), None);
        assert_eq!(mem_bytes(b"1tb"), None);
        assert_eq!(mem_bytes(b"-1"), None);
    }
}
