//! memcached's administrative commands on the memcached port: `stats` (the general group,
//! `settings`, `items`, `slabs` and `reset`, with the fields tools read) and `flush_all`
//! with its optional delay (run by the sweep thread when due).

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::memcache::state::McSession;
use accelkv_proto::memcache::{Expiry, Exptime, Tokens};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// `flush_all [delay]`: every item gone now, or at the delay's moment (which a later
/// `flush_all` replaces, as memcached's).
pub fn flush_all(
    sh: &Shared,
    s: &mut McSession,
    delay: Exptime,
) -> Result<(), accelkv_tree::Error> {
    match delay.at(accelkv_tree::now_ms()) {
        Expiry::At(t) => {
            s.global.flush_at.store(t, Ordering::Relaxed);
            Ok(())
        }
        Expiry::Never | Expiry::Past => {
            s.global.flush_at.store(0, Ordering::Relaxed);
            s.wrote = true;
            let v = sh.writes().clear()?;
            s.unreleased = s.unreleased.max(v);
            Ok(())
        }
    }
}

/// `stats [group]`.
pub fn stats(sh: &Shared, mut args: Tokens<'_>, out: &mut Vec<u8>) {
    let mut o = String::new();
    let mut stat = |name: &str, v: &dyn std::fmt::Display| {
        let _ = write!(o, "STAT {name} {v}\r\n");
    };
    let items = sh.view().len();
    let bytes = sh.view().memory_used();
    let ops = |c: OpClass| sh.metrics().sum(|h| &h.ops[c as usize]);
    match args.next() {
        None => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            stat("pid", &std::process::id());
            stat("uptime", &sh.started().elapsed().as_secs());
            stat("time", &now);
            stat("version", &env!("CARGO_PKG_VERSION"));
            stat("pointer_size", &(8 * std::mem::size_of::<usize>()));
            stat("curr_connections", &sh.connected());
            stat(
                "total_connections",
                &sh.metrics().connections_total.load(Ordering::Relaxed),
            );
            stat("cmd_get", &ops(OpClass::Get));
            stat("cmd_set", &ops(OpClass::Put));
            stat("cmd_touch", &ops(OpClass::Update));
            stat("curr_items", &items);
            stat("bytes", &bytes);
            stat("limit_maxbytes", &sh.settings().memory_limit);
            stat("threads", &sh.settings().threads);
            stat("evictions", &0);
            stat("expired_unfetched", &sh.expired_keys());
        }
        Some(b"settings") => {
            stat("maxbytes", &sh.settings().memory_limit);
            stat("maxconns", &sh.settings().max_connections);
            stat("tcpport", &sh.settings().memcached_port.unwrap_or(0));
            stat(
                "udpport",
                &if sh.settings().memcached_udp {
                    sh.settings().memcached_port.unwrap_or(0)
                } else {
                    0
                },
            );
            stat("item_size_max", &sh.settings().memcached_item_max);
            stat("num_threads", &sh.settings().threads);
            stat("cas_enabled", &"yes");
            stat("evictions", &"off");
            stat("auth_enabled_ascii", &sh.needs_auth());
        }
        Some(b"items") => {
            stat("items:1:number", &items);
            stat("items:1:age", &0);
            stat("items:1:evicted", &0);
            stat("items:1:outofmemory", &0);
        }
        Some(b"slabs") => {
            stat("1:chunk_size", &sh.settings().node_size);
            stat("active_slabs", &1);
            stat("total_malloced", &bytes);
        }
        Some(b"reset") => {
            sh.metrics().reset();
            out.extend_from_slice(b"RESET\r\n");
            return;
        }
        Some(_) => {
            out.extend_from_slice(b"ERROR\r\n");
            return;
        }
    }
    out.extend_from_slice(o.as_bytes());
    out.extend_from_slice(b"END\r\n");
}
