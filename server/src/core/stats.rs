//! The server's statistics as `name:value` lines (Redis's INFO format, and the binary
//! protocol's STATS answer): persistence and the leaf cache, then requests, the engine, the
//! station and the tree.

use crate::core::counters::CLASSES;
use crate::core::shared::Shared;
use accelkv_engine::ReadEngine;
use std::sync::atomic::Ordering;

/// Appends an INFO line, `name:value\r\n`.
fn info_line(out: &mut String, k: &str, v: &str) {
    out.push_str(k);
    out.push(':');
    out.push_str(v);
    out.push_str("\r\n");
}

impl Shared {
    /// LASTSAVE's answer, Unix seconds: when the last commit of the data directory became
    /// durable, or, before the first (and without a data directory), when the server
    /// started.
    pub fn last_save(&self) -> u64 {
        let unix = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        };
        let started = unix(std::time::SystemTime::now()) - self.started().elapsed().as_secs();
        match self.persist().map(|p| p.stats().last_commit_at_ms) {
            Some(ms) if ms > 0 => ms / 1000,
            _ => started,
        }
    }

    /// `name:value` lines of INFO's persistence section: the sync policy, how far the page
    /// writer is behind (what a crash now could lose), backpressure, commits, recovery.
    pub fn persistence_text(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: String| info_line(&mut out, k, &v);
        line("loading", "0".into());
        line("aof_enabled", "0".into());
        line("rdb_last_save_time", self.last_save().to_string());
        let Some(p) = self.persist() else {
            line("durability", "none (in memory)".into());
            line("rdb_changes_since_last_save", "0".into());
            return out;
        };
        let d = p.stats();
        let ms = |d: std::time::Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
        let path = p
            .path()
            .map(|x| x.display().to_string())
            .unwrap_or_default();
        line("durability", format!("pages {}", d.policy));
        line("data_dir", path);
        // Redis's name for writes not yet persisted, which monitoring tools read.
        line("rdb_changes_since_last_save", d.lag_versions.to_string());
        line("durable_version", d.durable_version.to_string());
        line("durable_lag_versions", d.lag_versions.to_string());
        line("durable_lag_ms", ms(d.lag));
        line("durable_max_lag_ms", ms(d.max_lag));
        line("durable_write_stalls", d.stalls.to_string());
        line(
            "durable_stall_ms",
            format!("{:.3}", d.stall_us as f64 / 1e3),
        );
        line(
            "durable_last_commit_ms",
            format!("{:.3}", d.last_commit_us as f64 / 1e3),
        );
        line(
            "durable_max_commit_ms",
            format!("{:.3}", d.max_commit_us as f64 / 1e3),
        );
        line("durable_commits", d.commits.to_string());
        line("durable_syncs", d.syncs.to_string());
        line("durable_bytes_written", d.bytes_written.to_string());
        line(
            "durable_leaf_pages_written",
            d.leaf_pages_written.to_string(),
        );
        line("durable_ext_pages_written", d.ext_pages_written.to_string());
        line(
            "durable_delta_pages_written",
            d.delta_pages_written.to_string(),
        );
        line("durable_live_pages", d.live_pages.to_string());
        line("durable_live_delta_pages", d.live_delta_pages.to_string());
        line("durable_delta_keys", d.delta_keys.to_string());
        line("durable_failed", d.failed.unwrap_or_else(|| "no".into()));
        // The leaf cache over the page file (issue 18).
        let m = self.store().mirror_stats();
        line("leaf_cache_budget_bytes", m.budget_bytes.to_string());
        line("leaf_cache_resident_bytes", m.resident_bytes.to_string());
        line("leaf_cache_hit_ratio", format!("{:.4}", m.hit_ratio()));
        line("leaf_cache_leaf_visits", m.leaf_visits.to_string());
        line("leaf_cache_loads", m.loads.to_string());
        line("leaf_cache_load_errors", m.load_errors.to_string());
        line("leaf_cache_load_us_mean", m.load_us_mean.to_string());
        line("leaf_cache_load_us_max", m.load_us_max.to_string());
        line("leaf_cache_evictions", m.evictions.to_string());
        line("leaf_cache_evicted_leaves", m.evicted_leaves.to_string());
        line("leaf_cache_write_backs", d.write_backs.to_string());
        let (deferred_loads, deferred_waits) = self.engine().deferred_reads();
        line("leaf_cache_deferred_waits", deferred_waits.to_string());
        line("leaf_cache_deferred_loads", deferred_loads.to_string());
        line("recovery", p.recovery().to_string());
        out
    }

    /// `name:value` lines for STATS and INFO's stats section.
    pub fn stats_text(&self) -> String {
        // O(1): INFO is sent by some clients on every connection (ioredis).
        let s = self.store().summary();
        let e = self.engine().stats();
        let m = &self.metrics();
        let hit_rate = if e.cache_hits + e.cache_misses > 0 {
            e.cache_hits as f64 / (e.cache_hits + e.cache_misses) as f64
        } else {
            0.0
        };
        let mut out = String::new();
        let mut line = |k: &str, v: String| info_line(&mut out, k, &v);
        line(
            "uptime_in_seconds",
            self.started().elapsed().as_secs().to_string(),
        );
        // Redis's names first (tools read them): RESP commands plus binary frames.
        line(
            "total_connections_received",
            m.connections_total.load(Ordering::Relaxed).to_string(),
        );
        line(
            "total_commands_processed",
            (m.sum(|h| &h.resp_commands) + m.sum(|h| &h.frames)).to_string(),
        );
        line(
            "rejected_connections",
            m.connections_rejected.load(Ordering::Relaxed).to_string(),
        );
        line("set_batches", m.sum(|h| &h.set_batches).to_string());
        line("set_batched", m.sum(|h| &h.set_batched).to_string());
        line("expired_keys", self.expired_keys().to_string());
        line("engine", self.engine().name().to_string());
        for (k, v) in self.engine().info() {
            line(k, v);
        }
        let st = &self.station().stats;
        line("station_ops", st.ops.load(Ordering::Relaxed).to_string());
        line(
            "station_tree_writes",
            st.tree_writes.load(Ordering::Relaxed).to_string(),
        );
        line(
            "station_forwarded",
            st.forwarded.load(Ordering::Relaxed).to_string(),
        );
        line(
            "station_queued",
            st.queued.load(Ordering::Relaxed).to_string(),
        );
        line("connected_clients", self.connected().to_string());
        line("keys", s.items.to_string());
        line("tree_depth", s.depth.to_string());
        line("tree_buffers", s.buffers_live.to_string());
        line(
            "used_memory",
            (s.node_bytes as u64 + s.out_of_line_bytes + s.page_table_bytes as u64).to_string(),
        );
        line("bytes_per_item", format!("{:.1}", s.bytes_per_item));
        line("read_version", s.read_version.to_string());
        line("engine_completed", e.completed.to_string());
        line("hot_cache_hits", e.cache_hits.to_string());
        line("hot_cache_misses", e.cache_misses.to_string());
        line("hot_cache_hit_rate", format!("{hit_rate:.3}"));
        line("hot_cache_active", u8::from(e.cache_active).to_string());
        line("inflight", self.inflight().to_string());
        for (i, c) in CLASSES.iter().enumerate() {
            line(&format!("ops_{c}"), m.sum(|h| &h.ops[i]).to_string());
        }
        line("errors", m.errors.load(Ordering::Relaxed).to_string());
        line("busy", m.busy.load(Ordering::Relaxed).to_string());
        out
    }
}
