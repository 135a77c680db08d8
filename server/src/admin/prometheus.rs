//! The admin endpoint's Prometheus metrics, encoded by `prometheus-client` (the text format
//! 0.0.4, `# HELP` and `# TYPE` on every family): requests by class, request latency per
//! protocol as histograms in seconds, engine completions and queue depth, hot-cache hit
//! rate, memory, connections, the reservation station, durability lag and the leaf cache
//! over the page file, the Raft groups in cluster mode, and build info. Every value is read
//! from the server's counters at the scrape ([`Collector`]), so serving requests costs no
//! more than it did before.

use crate::admin::samples::{self, Out};
use crate::core::counters::{Proto, CLASSES, PROTOCOLS};
use crate::core::loading::Progress;
use crate::core::shared::Shared;
use accelkv_engine::ReadEngine;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The `Content-Type` of what [`prometheus`] writes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// What a scrape reads: the server's shared state.
struct Server(Arc<Shared>);

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("accelkv server metrics")
    }
}

impl Collector for Server {
    fn encode(&self, e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sh = &*self.0;
        let mut o = Out(e);
        requests(sh, &mut o)?;
        latency(sh, &mut o)?;
        engine_and_store(sh, &mut o)?;
        if let Some(p) = sh.persist() {
            durability(sh, p, &mut o)?;
        }
        if let Some(r) = sh.router() {
            samples::raft(&r.groups(), &mut o)?;
        }
        o.gauge("accelkv_loading", LOADING_HELP, 0.0)?;
        samples::build_info(sh.engine().name(), &mut o)
    }
}

const LOADING_HELP: &str = "1 while the data directory is recovered (the ports answer LOADING).";

/// What a scrape reads while the data directory is recovered.
struct Loading(Arc<Progress>);

impl std::fmt::Debug for Loading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("accelkv loading metrics")
    }
}

impl Collector for Loading {
    fn encode(&self, e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut o = Out(e);
        let (read, total, _) = self.0.read();
        o.gauge("accelkv_loading", LOADING_HELP, 1.0)?;
        o.gauge(
            "accelkv_loading_loaded_bytes",
            "Bytes of the page file recovery has read.",
            read as f64,
        )?;
        o.gauge(
            "accelkv_loading_total_bytes",
            "Bytes of the page file being recovered.",
            total as f64,
        )
    }
}

/// The registry the admin endpoint encodes while the data directory is recovered.
pub fn loading_registry(p: Arc<Progress>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Loading(p)));
    r
}

/// The registry the admin endpoint encodes on every scrape.
pub fn registry(sh: Arc<Shared>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Server(sh)));
    r
}

/// Every metric, in Prometheus's text format.
pub fn prometheus(r: &Registry) -> String {
    let mut o = String::new();
    // Writing to a String fails only if a metric's own encoding does, which these do not.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut o, r);
    o
}

/// A counter's value now.
fn ld(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Requests by class, errors, connections.
fn requests(sh: &Shared, o: &mut Out) -> std::fmt::Result {
    let m = sh.metrics();
    let by_class: Vec<(&str, u64)> = CLASSES
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, m.sum(|h| &h.ops[i])))
        .collect();
    o.counter_family(
        "accelkv_ops_total",
        "Operations served, by class (binary protocol ops, RESP and memcached commands mapped to them).",
        "op",
        &by_class,
    )?;
    o.counters(&[
        (
            "accelkv_errors_total",
            "Requests answered with an error status.",
            ld(&m.errors),
        ),
        (
            "accelkv_busy_total",
            "Requests refused because too many operations were in flight.",
            ld(&m.busy),
        ),
        (
            "accelkv_frames_total",
            "Binary protocol frames served.",
            m.sum(|h| &h.frames),
        ),
        (
            "accelkv_resp_commands_total",
            "RESP commands served.",
            m.sum(|h| &h.resp_commands),
        ),
        (
            "accelkv_memcached_commands_total",
            "memcached commands served (text and meta, TCP and UDP).",
            m.sum(|h| &h.memcached_commands),
        ),
        (
            "accelkv_udp_datagrams_total",
            "UDP datagrams received.",
            m.sum(|h| &h.udp_datagrams),
        ),
        (
            "accelkv_set_batches_total",
            "Runs of pipelined SETs written as one batch after one descent.",
            m.sum(|h| &h.set_batches),
        ),
        (
            "accelkv_set_batched_total",
            "SETs written in those runs.",
            m.sum(|h| &h.set_batched),
        ),
        (
            "accelkv_bad_input_total",
            "Malformed or oversized requests refused.",
            ld(&m.bad_input),
        ),
        (
            "accelkv_connections_total",
            "Connections accepted.",
            ld(&m.connections_total),
        ),
        (
            "accelkv_connections_rejected_total",
            "Connections refused at the connection limit.",
            ld(&m.connections_rejected),
        ),
    ])?;
    Ok(())
}

/// The request latency histograms, one series per protocol.
fn latency(sh: &Shared, o: &mut Out) -> std::fmt::Result {
    let m = sh.metrics();
    let series: Vec<(&str, hdrhistogram::Histogram<u64>)> =
        [Proto::Resp, Proto::Memcached, Proto::Binary]
            .into_iter()
            .filter_map(|p| Some((PROTOCOLS[p as usize], m.latency(p)?)))
            .collect();
    o.histograms(
        "accelkv_request_duration_seconds",
        "Time from reading an input batch (a RESP or memcached pipeline read at once, a binary frame) to its answer, by protocol.",
        "protocol",
        &series,
    )
}

/// Gauges of the engine and the store, and the reservation station's counters.
fn engine_and_store(sh: &Shared, o: &mut Out) -> std::fmt::Result {
    let e = sh.engine().stats();
    let s = sh.store().summary();
    let hit = if e.cache_hits + e.cache_misses > 0 {
        e.cache_hits as f64 / (e.cache_hits + e.cache_misses) as f64
    } else {
        0.0
    };
    let memory = s.node_bytes as u64 + s.out_of_line_bytes + s.page_table_bytes as u64;
    o.gauges(&[
        (
            "accelkv_connections",
            "Open client connections.",
            sh.connected() as f64,
        ),
        (
            "accelkv_inflight_operations",
            "Operations accepted and not yet answered.",
            sh.inflight() as f64,
        ),
        ("accelkv_keys", "Items in the store.", s.items as f64),
        (
            "accelkv_memory_bytes",
            "Bytes of tree nodes, out-of-line values and the page table.",
            memory as f64,
        ),
        ("accelkv_tree_depth", "Levels of the tree.", s.depth as f64),
        (
            "accelkv_hot_cache_hit_ratio",
            "Share of engine lookups the hot-key cache answered.",
            hit,
        ),
        (
            "accelkv_engine_queue_depth",
            "Reads queued for the read engine.",
            e.queued as f64,
        ),
    ])?;
    let st = sh.writes().stats();
    o.counters(&[
        (
            "accelkv_station_ops_total",
            "Writes the reservation station took.",
            ld(&st.ops),
        ),
        (
            "accelkv_station_tree_writes_total",
            "Tree writes the reservation station made (merged writes count once).",
            ld(&st.tree_writes),
        ),
        (
            "accelkv_station_forwarded_total",
            "Reads the reservation station answered from a write in flight.",
            ld(&st.forwarded),
        ),
        (
            "accelkv_station_queued_total",
            "Writes that waited behind another on the same key.",
            ld(&st.queued),
        ),
    ])?;
    o.counter_family(
        "accelkv_engine_completed_total",
        "Reads the read engine completed, by engine.",
        "engine",
        &[(sh.engine().name(), e.completed)],
    )?;
    for s in sh.engine().offload_samples() {
        if s.counter {
            o.counter(s.name, s.help, s.value)?;
        } else {
            o.gauge(s.name, s.help, s.value as f64)?;
        }
    }
    Ok(())
}

/// The durability layer's counters and lags, and the leaf cache over the page file.
fn durability(sh: &Shared, p: &accelkv_durable::Store, o: &mut Out) -> std::fmt::Result {
    let d = p.stats();
    o.counters(&[
        (
            "accelkv_durable_commits_total",
            "Commits written to the page file.",
            d.commits,
        ),
        (
            "accelkv_durable_syncs_total",
            "fsyncs of the page file.",
            d.syncs,
        ),
        (
            "accelkv_durable_bytes_written_total",
            "Bytes written to the page file.",
            d.bytes_written,
        ),
        (
            "accelkv_durable_leaf_pages_written_total",
            "Leaf pages written.",
            d.leaf_pages_written,
        ),
        (
            "accelkv_durable_ext_pages_written_total",
            "Extension pages (large values) written.",
            d.ext_pages_written,
        ),
        (
            "accelkv_durable_delta_pages_written_total",
            "Delta pages (changed keys of leaves not imaged whole) written.",
            d.delta_pages_written,
        ),
        (
            "accelkv_durable_failures_total",
            "Commits that failed (disk errors).",
            d.failures,
        ),
        (
            "accelkv_durable_write_stalls_total",
            "Writers that waited for the durable lag to shrink under its bound.",
            d.stalls,
        ),
    ])?;
    o.counter_f64(
        "accelkv_durable_stall_seconds_total",
        "Time writers waited for the durable lag.",
        d.stall_us as f64 / 1e6,
    )?;
    // What a crash now could lose: writes released but not yet durable, and how old the
    // oldest of them can be; the bound the sync policy holds the age under.
    o.gauges(&[
        (
            "accelkv_durable_lag_versions",
            "Writes acknowledged and not yet durable (what a crash now could lose).",
            d.lag_versions as f64,
        ),
        (
            "accelkv_durable_lag_seconds",
            "Age of the oldest write acknowledged and not yet durable.",
            d.lag.as_secs_f64(),
        ),
        (
            "accelkv_durable_max_lag_seconds",
            "The bound the sync policy holds the lag under.",
            d.max_lag.as_secs_f64(),
        ),
        (
            "accelkv_durable_last_commit_seconds",
            "How long the last commit took.",
            d.last_commit_us as f64 / 1e6,
        ),
        (
            "accelkv_durable_live_pages",
            "Pages of the page file holding live data.",
            d.live_pages as f64,
        ),
        (
            "accelkv_durable_live_delta_pages",
            "Delta pages holding some key's newest durable state.",
            d.live_delta_pages as f64,
        ),
        (
            "accelkv_durable_delta_keys",
            "Keys whose newest durable state is in a delta page.",
            d.delta_keys as f64,
        ),
        (
            "accelkv_durable_failing",
            "1 while the page file refuses writes after a disk error.",
            f64::from(u8::from(d.failed.is_some())),
        ),
    ])?;
    samples::leaf_cache(sh, &d, o)
}
