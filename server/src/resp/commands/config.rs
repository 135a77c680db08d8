//! `INFO [section …]` (server, clients, memory, persistence, stats, replication, cpu,
//! keyspace), and
//! `CONFIG GET pattern…` and `CONFIG SET name value` over the settings a Redis client or
//! tool asks for, and `maxmemory` with the `noeviction` policy: a limit on the store's
//! memory (nodes, out-of-line values, page table) below `--memory-limit`, changeable at
//! run time; past it every write that can add memory is refused with Redis's
//! `-OOM command not allowed when used memory > 'maxmemory'.` and reads, deletes and
//! FLUSHALL go on.

use crate::config::size::Size;
use crate::core::clients::ClientLimit;
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

/// INFO's `# Memory` section.
fn memory_section(sh: &Shared) -> String {
    let used = sh.view().memory_used();
    let max = sh.maxmemory();
    format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{:.2}M\r\nmaxmemory:{max}\r\nmaxmemory_policy:noeviction\r\nmemory_limit:{}\r\nmem_clients_normal:{}\r\n",
            used as f64 / f64::from(1 << 20),
            sh.settings().memory_limit,
            sh.clients().memory(),
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
        parts.push(memory_section(sh));
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
        // MIGRATE's connections kept for the next MIGRATE to the same target.
        t.push_str(&format!(
            "migrate_cached_sockets:{}\r\n",
            s.global.migrate_sockets.count()
        ));
        let tr = &s.global.tracking;
        t.push_str(&format!(
            "tracking_total_keys:{}\r\ntracking_total_prefixes:{}\r\n",
            tr.keys(),
            tr.prefixes()
        ));
        t.push_str(&format!(
            "total_error_replies:{}\r\nevicted_clients:{}\r\n",
            s.global.errors.total(),
            sh.clients().evicted()
        ));
        parts.push(t);
    }
    if wants("replication") {
        // A primary without replicas, or a replica of a Redis primary (replica/); cluster
        // mode replicates each range through Raft instead (docs/CLUSTER.md).
        parts.push(s.global.replication.info());
    }
    if wants("cpu") {
        parts.push(cpu_section());
    }
    if wants("errorstats") {
        parts.push(s.global.errors.section());
    }
    if wants("cluster") {
        let on = u8::from(sh.settings().cluster_enabled());
        parts.push(format!("# Cluster\r\ncluster_enabled:{on}\r\n"));
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
    let maxmemory = sh.memory_cap();
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
    // Client eviction (core/clients.rs): bytes, or a percentage of maxmemory; 0 is off.
    all.push(("maxmemory-clients", sh.clients().limit().to_string()));
    // The longest command a connection's input may hold (its big arguments apart).
    all.push((
        "client-query-buffer-limit",
        sh.settings().limits.max_resp_command().to_string(),
    ));
    all.push(("client-output-buffer-limit", s.global.output_limits.text()));
    // Where it listens for RESP (set at start: --bind, --resp-port).
    all.push(("bind", sh.settings().bind.to_string()));
    all.push(("port", sh.settings().resp_port.to_string()));
    // The primary followed (REPLICAOF: "host port"), or none; replicas refuse writes.
    let primary = (s.global.replication.status().primary)
        .map(|(h, p)| format!("{h} {p}"))
        .unwrap_or_default();
    all.push(("replicaof", primary.clone()));
    all.push(("slaveof", primary));
    all.push(("replica-read-only", "yes".into()));
    // Where SAVE and BGSAVE write (replication.rs): the data directory, else the working one.
    let dir = sh.settings().data_dir.clone().unwrap_or_default();
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    all.push(("dir", dir.display().to_string()));
    all.push(("dbfilename", "dump.rdb".into()));
    let cluster = if sh.settings().cluster_enabled() {
        "yes"
    } else {
        "no"
    };
    all.push(("cluster-enabled", cluster.into()));
    // accelkv runs in the foreground; a service manager starts it (packaging/).
    all.push(("daemonize", "no".into()));
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

/// `CONFIG SET name value [name value …]`, as Redis 7 runs it: each parameter once, set in
/// order; when one is refused, the ones set before it get their earlier values back and the
/// reply is that refusal.
pub fn set(
    sh: &Shared,
    s: &Session,
    c: &[&[u8]],
    dispatch: &crate::resp::call::Dispatcher,
    out: &mut Vec<u8>,
) {
    if c.len() < 4 || !c.len().is_multiple_of(2) {
        return resp::error(
            out,
            "ERR wrong number of arguments for 'config|set' command",
        );
    }
    let pairs: Vec<(String, &[u8])> = c[2..]
        .chunks(2)
        .map(|p| (String::from_utf8_lossy(p[0]).to_ascii_lowercase(), p[1]))
        .collect();
    for (i, (name, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(n, _)| n == name) {
            return resp::error(
                out,
                &format!("ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"),
            );
        }
    }
    let before = params(sh, s);
    for (i, (name, value)) in pairs.iter().enumerate() {
        if let Err(e) = set_one(sh, s, name, value, dispatch) {
            for (n, _) in pairs[..i].iter().rev() {
                if let Some((_, old)) = before.iter().find(|(b, _)| b == n) {
                    let _ = set_one(sh, s, n, old.as_bytes(), dispatch);
                }
            }
            return resp::error(out, &e);
        }
    }
    resp::simple(out, "OK")
}

/// The refusal of `value` for parameter `name`, in Redis's words.
fn failed(name: &str, why: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

/// Sets one parameter: `maxmemory` (0 removes the limit below `--memory-limit`),
/// `maxmemory-clients`, `maxmemory-policy noeviction`, the encoding parameters, the ACL
/// ones, and the others CONFIG GET reports when given the value they have.
fn set_one(
    sh: &Shared,
    s: &Session,
    name: &str,
    value: &[u8],
    dispatch: &crate::resp::call::Dispatcher,
) -> Result<(), String> {
    let known = s.global.tuning.set(name, value);
    if let Some(r) = known.or_else(|| crate::resp::acl::config::set(sh, s, name, value, dispatch)) {
        return r;
    }
    match name {
        "maxmemory" => {
            let n =
                mem_bytes(value).ok_or_else(|| failed(name, "argument must be a memory value"))?;
            sh.set_maxmemory(n);
            Ok(())
        }
        "maxmemory-clients" => {
            sh.clients()
                .set_limit(client_limit(value).map_err(|e| failed(name, e))?);
            // A lower limit evicts at once (the caller's own connection is marked no-evict
            // or closes at its turn's end).
            sh.clients().evict(sh.memory_cap() as u64, s.id);
            Ok(())
        }
        "client-output-buffer-limit" => {
            let set = s
                .global
                .output_limits
                .set(value)
                .map_err(|e| failed(name, e))?;
            for (class, l) in set {
                if class == crate::resp::output_limits::Class::Pubsub {
                    s.global.pubsub.set_queue_limit(l.hard);
                }
            }
            Ok(())
        }
        // When Redis starts answering BUSY around a long script: accelkv serves the other
        // loops' clients meanwhile, so it is kept and reported only (script/eval.rs).
        "lua-time-limit" | "busy-reply-threshold" => {
            let ms = std::str::from_utf8(value)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or_else(|| failed(name, "argument couldn't be parsed into an integer"))?;
            s.global.scripts.limit_ms.store(ms, Ordering::Relaxed);
            Ok(())
        }
        "notify-keyspace-events" => s.global.notify.set(value).map_err(|e| failed(name, e)),
        "maxmemory-policy" if value.eq_ignore_ascii_case(b"noeviction") => Ok(()),
        "maxmemory-policy" => Err(failed(name, "accelkv supports noeviction only")),
        // What accelkv already is: no RDB snapshots, no append-only file.
        "save" if value.is_empty() => Ok(()),
        "appendonly" if value.eq_ignore_ascii_case(b"no") => Ok(()),
        "save" | "appendonly" => Err(failed(
            name,
            "accelkv has no RDB snapshots or AOF: durability is --data-dir",
        )),
        "proto-max-bulk-len" if value == sh.view().config().max_value.to_string().as_bytes() => {
            Ok(())
        }
        "proto-max-bulk-len" => Err(failed(
            name,
            &format!(
                "accelkv's largest value is set at start: --max-value (now {}, up to 536870912)",
                sh.view().config().max_value
            ),
        )),
        _ => unchanged(sh, s, name, value),
    }
}

/// `maxmemory-clients`' value: a memory value, or a percentage of `maxmemory` up to 100.
fn client_limit(value: &[u8]) -> Result<ClientLimit, &'static str> {
    match value.strip_suffix(b"%") {
        Some(p) => {
            let p = std::str::from_utf8(p)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or("argument must be a memory or percent value")?;
            match p {
                0..=100 => Ok(ClientLimit::Percent(p)),
                _ => Err("percentage argument must be less or equal to 100"),
            }
        }
        None => mem_bytes(value)
            .map(|b| ClientLimit::Bytes(b as u64))
            .ok_or("argument must be a memory or percent value"),
    }
}

/// CONFIG SET of a parameter CONFIG GET reports but only a start sets (Redis's immutable
/// ones): accepted when the value is the one it has (tools write back what they read),
/// refused otherwise.
fn unchanged(sh: &Shared, s: &Session, name: &str, value: &[u8]) -> Result<(), String> {
    match params(sh, s).into_iter().find(|(n, _)| *n == name) {
        Some((_, now)) if now.as_bytes() == value => Ok(()),
        Some(_) => Err(failed(
            name,
            "can't set immutable config (accelkv sets it at start: a flag or the config file)",
        )),
        None => Err(format!(
            "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
        )),
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
