//! State shared by every event loop: the store, the read engine, the reservation station
//! (the one write door), limits, counters and latency histograms.

use crate::config::Settings;
use crate::engines::Engine;
use accelkv_engine::ReadEngine;
use accelkv_tree::{Config, Store};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Operation classes counted in metrics.
#[derive(Clone, Copy, Debug)]
pub enum OpClass {
    Get = 0,
    Put = 1,
    Update = 2,
    Delete = 3,
    Scan = 4,
    Floor = 5,
    Other = 6,
    Atomic = 7,
    Vector = 8,
}

pub const CLASSES: [&str; 9] = [
    "get",
    "put",
    "update",
    "delete",
    "scan",
    "scan_floor",
    "other",
    "atomic",
    "vector",
];

/// Appends an INFO line, `name:value\r\n`.
fn info_line(out: &mut String, k: &str, v: &str) {
    out.push_str(k);
    out.push(':');
    out.push_str(v);
    out.push_str("\r\n");
}

/// Counters bumped on every request: one set per event loop, on cache lines of its own
/// (a counter shared by all loops would bounce between their cores on every request),
/// summed when read.
#[repr(align(128))]
#[derive(Default)]
pub struct Hot {
    pub ops: [AtomicU64; 9],
    pub frames: AtomicU64,
    pub resp_commands: AtomicU64,
    /// memcached commands (text and meta, TCP and UDP).
    pub memcached_commands: AtomicU64,
    pub udp_datagrams: AtomicU64,
    /// Runs of pipelined SETs written as one station batch after one interleaved descent
    /// (resp_expire.rs `set_run`), and the SETs in them.
    pub set_batches: AtomicU64,
    pub set_batched: AtomicU64,
}

thread_local! {
    /// Which `Hot` set and latency histogram this thread uses (0: threads that are not loops).
    static SHARD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes this thread use the counters of event loop `i`.
pub fn use_loop_counters(i: usize) {
    SHARD.with(|s| s.set(i + 1));
}

/// Counters and histograms.
pub struct Metrics {
    hot: Box<[Hot]>,
    pub errors: AtomicU64,
    pub busy: AtomicU64,
    pub bad_input: AtomicU64,
    pub connections_total: AtomicU64,
    pub connections_rejected: AtomicU64,
    /// Latency of binary frames and RESP command batches, in microseconds, per loop.
    latency: Box<[Mutex<Histogram<u64>>]>,
}

impl Metrics {
    fn new(loops: usize) -> Result<Metrics, String> {
        let shards = loops + 1;
        Ok(Metrics {
            hot: (0..shards).map(|_| Hot::default()).collect(),
            errors: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            bad_input: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            latency: (0..shards)
                .map(|_| {
                    Histogram::new_with_bounds(1, 60_000_000, 3)
                        .map(Mutex::new)
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<_, _>>()?,
        })
    }

    /// This thread's counters.
    pub fn hot(&self) -> &Hot {
        &self.hot[SHARD.with(|s| s.get()) % self.hot.len()]
    }

    /// CONFIG RESETSTAT: zeroes the request, error and connection counters and the latency
    /// histograms (every loop's).
    pub fn reset(&self) {
        for h in self.hot.iter() {
            for c in h.ops.iter().chain([
                &h.frames,
                &h.resp_commands,
                &h.memcached_commands,
                &h.udp_datagrams,
                &h.set_batches,
                &h.set_batched,
            ]) {
                c.store(0, Ordering::Relaxed);
            }
        }
        for c in [
            &self.errors,
            &self.busy,
            &self.bad_input,
            &self.connections_total,
            &self.connections_rejected,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for h in self.latency.iter() {
            if let Ok(mut h) = h.lock() {
                h.reset();
            }
        }
    }

    /// A counter summed over every loop.
    pub fn sum(&self, f: impl Fn(&Hot) -> &AtomicU64) -> u64 {
        self.hot.iter().map(|h| f(h).load(Ordering::Relaxed)).sum()
    }

    /// Every loop's latencies in one histogram.
    pub fn latency(&self) -> Option<Histogram<u64>> {
        let mut all = self.latency[0].lock().ok()?.clone();
        for h in &self.latency[1..] {
            let _ = all.add(&*h.lock().ok()?);
        }
        Some(all)
    }
}

/// Everything a connection handler needs.
pub struct Shared {
    pub settings: Settings,
    pub store: Arc<Store>,
    /// The durable store around `store` when the server has a data directory.
    pub persist: Option<accelkv_durable::Store>,
    pub engine: Engine,
    pub station: crate::station::Station,
    pub metrics: Metrics,
    /// SCAN's cursors.
    pub cursors: crate::resp_keys::Cursors,
    /// `maxmemory` in bytes (CONFIG SET; 0: only `--memory-limit-mib`).
    pub maxmemory: AtomicUsize,
    pub connections: AtomicUsize,
    pub inflight: AtomicUsize,
    pub next_client: AtomicU64,
    pub started: Instant,
    /// Keys the active expiry sweep removed (INFO's `expired_keys`).
    pub expired_keys: AtomicU64,
    /// A memcached `flush_all <delay>` pending: when it clears the store (ms since the Unix
    /// epoch; 0: none). The sweep thread runs it; a later `flush_all` replaces it.
    pub mc_flush_at: AtomicU64,
    /// The RESP connections (CLIENT LIST/KILL).
    pub clients: Arc<crate::clients::Clients>,
    /// Cluster mode: the node's ranges and their groups (docs/CLUSTER.md); unset otherwise.
    pub cluster: std::sync::OnceLock<Arc<dyn crate::cluster_route::Router>>,
}

impl Shared {
    /// Shared state whose vector operations use `registry`.
    pub fn with_registry(
        settings: Settings,
        registry: crate::vector::Registry,
    ) -> Result<Arc<Shared>, String> {
        let config = Config {
            node_size: settings.node_size,
            memory_limit: settings.memory_limit,
            max_value: settings.limits.max_value,
            ..Config::default()
        };
        let (store, persist) = match &settings.data_dir {
            None => (
                Arc::new(Store::new(config).map_err(|e| e.to_string())?),
                None,
            ),
            Some(dir) => {
                // With a data directory the memory limit is the mirror cache's budget:
                // leaves past it live only in the page file (docs/ARCHITECTURE.md).
                let opts = accelkv_durable::Options {
                    config: Config {
                        evict: true,
                        ..config
                    },
                    sync: settings.sync,
                };
                let p = accelkv_durable::Store::open_with(dir, opts)
                    .map_err(|e| format!("{}: {e}", dir.display()))?;
                (p.tree().clone(), Some(p))
            }
        };
        // Test hook (server/tests/serving.rs): `key:ms` makes every write of `key` stall that
        // long between taking its version and completing it, as a descheduled writer would.
        if let Ok(spec) = std::env::var("ACCELKV_TEST_STALL_WRITES") {
            if let Some((key, ms)) = spec.rsplit_once(':') {
                let ms = ms
                    .parse()
                    .map_err(|_| format!("ACCELKV_TEST_STALL_WRITES: {spec}"))?;
                store.stall_writes_of(key.as_bytes(), std::time::Duration::from_millis(ms));
            }
        }
        let engine = Engine::start(store.clone(), &settings)?;
        Ok(Arc::new(Shared {
            store,
            persist,
            engine,
            station: crate::station::Station::new(
                settings.station_slots,
                settings.forwarding,
                registry,
            ),
            metrics: Metrics::new(settings.threads)?,
            cursors: Default::default(),
            maxmemory: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            next_client: AtomicU64::new(1),
            started: Instant::now(),
            expired_keys: AtomicU64::new(0),
            mc_flush_at: AtomicU64::new(0),
            clients: Arc::default(),
            cluster: Default::default(),
            settings,
        }))
    }

    /// Whether writes may start: `Err` with the disk error while the data directory's device
    /// is failing (nothing is changed then).
    pub fn writable(&self) -> Result<(), String> {
        match &self.persist {
            Some(p) => p.durability().writable().map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Whether the store is past `maxmemory` (writes that add memory are refused; O(1)).
    pub fn over_maxmemory(&self) -> bool {
        let m = self.maxmemory.load(Ordering::Relaxed);
        m > 0 && self.store.memory_used() > m
    }

    /// Whether write `version` is visible to readers, spinning briefly (256 rounds) first:
    /// an older writer on another thread usually completes within microseconds.
    pub fn visible_soon(&self, version: u64) -> bool {
        for _ in 0..256 {
            if self.store.is_visible(version) {
                return true;
            }
            std::hint::spin_loop();
        }
        self.store.is_visible(version)
    }

    /// Whether a reply to a write must wait for the durability layer: with a data directory
    /// under `sync`, always (until the write is durable); under `interval` and `none`, only
    /// while the page writer is further behind than the policy allows (backpressure: the
    /// window a crash can lose stays bounded).
    pub fn waits_for_durability(&self) -> bool {
        self.persist
            .as_ref()
            .is_some_and(|p| p.durability().must_wait())
    }

    /// Calls `done` (on the committer's thread, or at once) when every write up to `version`
    /// may be answered (see [`Shared::waits_for_durability`]), with the disk error if it
    /// cannot be made durable. An event loop parks a connection's replies meanwhile.
    pub fn when_durable(&self, version: u64, done: Box<dyn FnOnce(Result<(), String>) + Send>) {
        match &self.persist {
            Some(p) => p.durability().on_durable(
                version,
                Box::new(move |r| done(r.map_err(|e| e.to_string()))),
            ),
            None => done(Ok(())),
        }
    }

    pub fn count_n(&self, class: OpClass, n: usize) {
        self.metrics.hot().ops[class as usize].fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn count(&self, class: OpClass) {
        self.metrics.hot().ops[class as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_latency(&self, d: Duration) {
        let us = d.as_micros().max(1) as u64;
        let shard = SHARD.with(|s| s.get()) % self.metrics.latency.len();
        if let Ok(mut h) = self.metrics.latency[shard].lock() {
            h.saturating_record(us);
        }
    }

    /// Reserves room for `n` operations in flight; false (and nothing reserved) when the
    /// server is at its limit.
    pub fn admit(&self, n: usize) -> bool {
        let cur = self.inflight.fetch_add(n, Ordering::AcqRel);
        if cur + n > self.settings.max_inflight {
            self.inflight.fetch_sub(n, Ordering::AcqRel);
            self.metrics.busy.fetch_add(n as u64, Ordering::Relaxed);
            return false;
        }
        true
    }

    pub fn release(&self, n: usize) {
        self.inflight.fetch_sub(n, Ordering::AcqRel);
    }

    /// `name:value` lines of INFO's persistence section: the sync policy, how far the page
    /// writer is behind (what a crash now could lose), backpressure, commits, recovery.
    pub fn persistence_text(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: String| info_line(&mut out, k, &v);
        line("loading", "0".into());
        line("aof_enabled", "0".into());
        let Some(p) = &self.persist else {
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
        line("durable_live_pages", d.live_pages.to_string());
        line("durable_failed", d.failed.unwrap_or_else(|| "no".into()));
        // The leaf cache over the page file (issue 18).
        let m = self.store.mirror_stats();
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
        let (deferred_loads, deferred_waits) = self.engine.deferred_reads();
        line("leaf_cache_deferred_waits", deferred_waits.to_string());
        line("leaf_cache_deferred_loads", deferred_loads.to_string());
        line("recovery", p.recovery().to_string());
        out
    }

    /// `name:value` lines for STATS and INFO's stats section.
    pub fn stats_text(&self) -> String {
        // O(1): INFO is sent by some clients on every connection (ioredis).
        let s = self.store.summary();
        let e = self.engine.stats();
        let m = &self.metrics;
        let hit_rate = if e.cache_hits + e.cache_misses > 0 {
            e.cache_hits as f64 / (e.cache_hits + e.cache_misses) as f64
        } else {
            0.0
        };
        let mut out = String::new();
        let mut line = |k: &str, v: String| info_line(&mut out, k, &v);
        line(
            "uptime_in_seconds",
            self.started.elapsed().as_secs().to_string(),
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
        line(
            "expired_keys",
            self.expired_keys.load(Ordering::Relaxed).to_string(),
        );
        line("engine", self.engine.name().to_string());
        for (k, v) in self.engine.info() {
            line(k, v);
        }
        let st = &self.station.stats;
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
        line(
            "connected_clients",
            self.connections.load(Ordering::Relaxed).to_string(),
        );
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
        line(
            "inflight",
            self.inflight.load(Ordering::Relaxed).to_string(),
        );
        for (i, c) in CLASSES.iter().enumerate() {
            line(&format!("ops_{c}"), m.sum(|h| &h.ops[i]).to_string());
        }
        line("errors", m.errors.load(Ordering::Relaxed).to_string());
        line("busy", m.busy.load(Ordering::Relaxed).to_string());
        out
    }
}
