//! Prometheus text metrics for the admin endpoint: operation counts, latency percentiles
//! (hdrhistogram), engine completions and queue depth, hot-cache hit rate, memory,
//! connections.

use crate::core::counters::CLASSES;
use crate::core::shared::Shared;
use accelkv_engine::ReadEngine;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// One unlabelled sample per metric, each after its `# TYPE` line.
fn samples<V: std::fmt::Display>(
    o: &mut String,
    kind: &str,
    metrics: impl IntoIterator<Item = (&'static str, V)>,
) {
    for (name, v) in metrics {
        let _ = writeln!(o, "# TYPE {name} {kind}\n{name} {v}");
    }
}

/// Every metric, in Prometheus's text format.
pub fn prometheus(sh: &Shared) -> String {
    let mut o = String::new();
    requests(sh, &mut o);
    engine_and_store(sh, &mut o);
    if let Some(p) = sh.persist() {
        durability(sh, p, &mut o);
    }
    let e = sh.engine().stats();
    let _ = writeln!(
        o,
        "# TYPE accelkv_engine_completed_total counter\naccelkv_engine_completed_total{{engine=\"{}\"}} {}",
        sh.engine().name(),
        e.completed
    );
    for (name, counter, v) in sh.engine().offload_samples() {
        let kind = if counter { "counter" } else { "gauge" };
        let _ = writeln!(o, "# TYPE {name} {kind}\n{name} {v}");
    }
    o
}

/// Requests by class, errors, connections, and request latency.
fn requests(sh: &Shared, o: &mut String) {
    let m = sh.metrics();
    let _ = writeln!(o, "# TYPE accelkv_ops_total counter");
    for (i, c) in CLASSES.iter().enumerate() {
        let _ = writeln!(
            o,
            "accelkv_ops_total{{op=\"{c}\"}} {}",
            m.sum(|h| &h.ops[i])
        );
    }
    let counters = [
        ("accelkv_errors_total", m.errors.load(Ordering::Relaxed)),
        ("accelkv_busy_total", m.busy.load(Ordering::Relaxed)),
        ("accelkv_frames_total", m.sum(|h| &h.frames)),
        ("accelkv_resp_commands_total", m.sum(|h| &h.resp_commands)),
        (
            "accelkv_memcached_commands_total",
            m.sum(|h| &h.memcached_commands),
        ),
        ("accelkv_udp_datagrams_total", m.sum(|h| &h.udp_datagrams)),
        ("accelkv_set_batches_total", m.sum(|h| &h.set_batches)),
        ("accelkv_set_batched_total", m.sum(|h| &h.set_batched)),
        (
            "accelkv_bad_input_total",
            m.bad_input.load(Ordering::Relaxed),
        ),
        (
            "accelkv_connections_total",
            m.connections_total.load(Ordering::Relaxed),
        ),
        (
            "accelkv_connections_rejected_total",
            m.connections_rejected.load(Ordering::Relaxed),
        ),
    ];
    samples(o, "counter", counters);
    if let Some(h) = m.latency() {
        let _ = writeln!(o, "# TYPE accelkv_request_latency_microseconds summary");
        for q in [0.5, 0.9, 0.99, 0.999] {
            let _ = writeln!(
                o,
                "accelkv_request_latency_microseconds{{quantile=\"{q}\"}} {}",
                h.value_at_quantile(q)
            );
        }
        let _ = writeln!(o, "accelkv_request_latency_microseconds_count {}", h.len());
    }
}

/// Gauges of the engine and the store, and the reservation station's counters.
fn engine_and_store(sh: &Shared, o: &mut String) {
    let e = sh.engine().stats();
    let s = sh.store().summary();
    let hit = if e.cache_hits + e.cache_misses > 0 {
        e.cache_hits as f64 / (e.cache_hits + e.cache_misses) as f64
    } else {
        0.0
    };
    let gauges = [
        ("accelkv_connections", sh.connected() as f64),
        ("accelkv_inflight_operations", sh.inflight() as f64),
        ("accelkv_keys", s.items as f64),
        (
            "accelkv_memory_bytes",
            (s.node_bytes as u64 + s.out_of_line_bytes + s.page_table_bytes as u64) as f64,
        ),
        ("accelkv_tree_depth", s.depth as f64),
        ("accelkv_hot_cache_hit_ratio", hit),
        ("accelkv_engine_queue_depth", e.queued as f64),
    ];
    samples(o, "gauge", gauges);
    let st = &sh.station().stats;
    samples(
        o,
        "counter",
        [
            ("accelkv_station_ops_total", st.ops.load(Ordering::Relaxed)),
            (
                "accelkv_station_tree_writes_total",
                st.tree_writes.load(Ordering::Relaxed),
            ),
            (
                "accelkv_station_forwarded_total",
                st.forwarded.load(Ordering::Relaxed),
            ),
            (
                "accelkv_station_queued_total",
                st.queued.load(Ordering::Relaxed),
            ),
        ],
    );
}

/// The durability layer's counters and lags, and the leaf cache over the page file.
fn durability(sh: &Shared, p: &accelkv_durable::Store, o: &mut String) {
    let d = p.stats();
    samples(
        o,
        "counter",
        [
            ("accelkv_durable_commits_total", d.commits),
            ("accelkv_durable_syncs_total", d.syncs),
            ("accelkv_durable_bytes_written_total", d.bytes_written),
            (
                "accelkv_durable_leaf_pages_written_total",
                d.leaf_pages_written,
            ),
            (
                "accelkv_durable_ext_pages_written_total",
                d.ext_pages_written,
            ),
            ("accelkv_durable_failures_total", d.failures),
            ("accelkv_durable_write_stalls_total", d.stalls),
        ],
    );
    let _ = writeln!(
        o,
        "# TYPE accelkv_durable_stall_seconds_total counter\naccelkv_durable_stall_seconds_total {}",
        d.stall_us as f64 / 1e6
    );
    // What a crash now could lose: writes released but not yet durable, and how old the
    // oldest of them can be; the bound the sync policy holds the age under.
    let _ = writeln!(
        o,
        "# TYPE accelkv_durable_lag_versions gauge\naccelkv_durable_lag_versions {}\n# TYPE accelkv_durable_lag_seconds gauge\naccelkv_durable_lag_seconds {}\n# TYPE accelkv_durable_max_lag_seconds gauge\naccelkv_durable_max_lag_seconds {}\n# TYPE accelkv_durable_last_commit_seconds gauge\naccelkv_durable_last_commit_seconds {}",
        d.lag_versions,
        d.lag.as_secs_f64(),
        d.max_lag.as_secs_f64(),
        d.last_commit_us as f64 / 1e6
    );
    let m = sh.store().mirror_stats();
    let (deferred_loads, deferred_waits) = sh.engine().deferred_reads();
    samples(
        o,
        "counter",
        [
            ("accelkv_leaf_cache_leaf_visits_total", m.leaf_visits),
            ("accelkv_leaf_cache_loads_total", m.loads),
            ("accelkv_leaf_cache_load_errors_total", m.load_errors),
            ("accelkv_leaf_cache_evictions_total", m.evictions),
            ("accelkv_leaf_cache_write_backs_total", d.write_backs),
            ("accelkv_leaf_cache_deferred_waits_total", deferred_waits),
            ("accelkv_leaf_cache_deferred_loads_total", deferred_loads),
        ],
    );
    let _ = writeln!(
        o,
        "# TYPE accelkv_leaf_cache_resident_bytes gauge\naccelkv_leaf_cache_resident_bytes {}\n# TYPE accelkv_leaf_cache_budget_bytes gauge\naccelkv_leaf_cache_budget_bytes {}\n# TYPE accelkv_leaf_cache_evicted_leaves gauge\naccelkv_leaf_cache_evicted_leaves {}\n# TYPE accelkv_leaf_cache_load_seconds_mean gauge\naccelkv_leaf_cache_load_seconds_mean {}",
        m.resident_bytes,
        m.budget_bytes,
        m.evicted_leaves,
        m.load_us_mean as f64 / 1e6
    );
    let failed = u8::from(d.failed.is_some());
    let _ = writeln!(
        o,
        "# TYPE accelkv_durable_live_pages gauge\naccelkv_durable_live_pages {}\n# TYPE accelkv_durable_failing gauge\naccelkv_durable_failing {failed}",
        d.live_pages
    );
}
