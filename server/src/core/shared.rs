//! State shared by every event loop and every protocol: the store, the read engine, the
//! reservation station (the one write door), limits, counters and the client registry.

use crate::config::Settings;
use crate::core::acl::Acl;
use crate::core::clients::Clients;
use crate::core::counters::{Metrics, OpClass, Proto};
use crate::core::engines::Engine;
use crate::core::route::Router;
use crate::core::station::Station;
use accelkv_tree::{Config, Store};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The error a write that would add memory gets past `maxmemory` (Redis's words, which
/// clients match on).
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// What every protocol needs: the store, the read engine, the reservation station (the one
/// write door), settings and limits, counters, the client registry and (cluster mode) the
/// router. Its fields are private: an adapter reaches them through the methods below, and
/// state that belongs to one protocol (RESP's SCAN cursors, memcached's delayed flush) lives
/// in that protocol's adapter.
pub struct Shared {
    settings: Settings,
    store: Arc<Store>,
    /// The durable store around `store` when the server has a data directory.
    persist: Option<accelkv_durable::Store>,
    engine: Engine,
    station: Station,
    metrics: Metrics,
    /// The users (`--password` is the default user's), checked in constant time.
    acl: Acl,
    /// `maxmemory` in bytes (CONFIG SET; 0: only `--memory-limit`).
    maxmemory: AtomicUsize,
    connections: AtomicUsize,
    inflight: AtomicUsize,
    next_client: AtomicU64,
    started: Instant,
    /// Keys the active expiry sweep removed (INFO's `expired_keys`).
    expired_keys: AtomicU64,
    /// Whether the active expiry sweep runs (DEBUG SET-ACTIVE-EXPIRE; on by default).
    active_expire: std::sync::atomic::AtomicBool,
    /// DEBUG PAUSE-CRON: the periodic jobs (the expiry sweep, reclaim, idle timeouts) wait.
    cron_paused: std::sync::atomic::AtomicBool,
    /// Until when (Unix milliseconds) the sweep removes no expired key (CLIENT PAUSE).
    expiry_paused_until: AtomicU64,
    /// SHUTDOWN NOSAVE asked the shutdown to skip the final flush of the data directory.
    skip_final_flush: std::sync::atomic::AtomicBool,
    /// The connections in the registry (CLIENT LIST/KILL).
    clients: Arc<Clients>,
    /// Connections parked by blocking commands (BLPOP…).
    blocked: Arc<crate::core::blocked::Blocked>,
    /// Cluster mode: the node's ranges and their groups (docs/CLUSTER.md); unset otherwise.
    router: OnceLock<Arc<dyn Router>>,
}

impl Shared {
    /// Shared state whose vector operations use `registry`; recovering a data directory
    /// reports how far it has read to `progress`.
    pub fn with_registry(
        settings: Settings,
        registry: crate::core::ops::vector::Registry,
        progress: Arc<accelkv_durable::LoadProgress>,
    ) -> Result<Arc<Shared>, String> {
        let config = Config {
            node_size: settings.node_size,
            log_threshold: settings.log_threshold,
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
                    progress,
                    ..Default::default()
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
            station: Station::new(settings.station_slots, settings.forwarding, registry),
            metrics: Metrics::new(settings.threads)?,
            maxmemory: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            next_client: AtomicU64::new(1),
            started: Instant::now(),
            expired_keys: AtomicU64::new(0),
            active_expire: std::sync::atomic::AtomicBool::new(true),
            cron_paused: std::sync::atomic::AtomicBool::new(false),
            expiry_paused_until: AtomicU64::new(0),
            skip_final_flush: std::sync::atomic::AtomicBool::new(false),
            clients: Arc::default(),
            blocked: Arc::default(),
            router: Default::default(),
            acl: Acl::new(settings.password.as_deref()),
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
        self.metrics.count_n(class, n);
    }

    pub fn count(&self, class: OpClass) {
        self.metrics.count(class);
    }

    pub fn record_latency(&self, p: Proto, d: Duration) {
        self.metrics.record_latency(p, d);
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

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The durable store, when the server has a data directory.
    pub fn persist(&self) -> Option<&accelkv_durable::Store> {
        self.persist.as_ref()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn station(&self) -> &Station {
        &self.station
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn blocked(&self) -> &Arc<crate::core::blocked::Blocked> {
        &self.blocked
    }

    pub fn clients(&self) -> &Arc<Clients> {
        &self.clients
    }

    /// Cluster mode's router; `None` on a standalone server.
    pub fn router(&self) -> Option<&dyn Router> {
        self.router.get().map(|r| &**r)
    }

    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    /// Joins the cluster: from now on keyed commands are routed through `r` (once).
    pub fn set_router(&self, r: Arc<dyn Router>) {
        let _ = self.router.set(r);
    }

    /// Whether a connection must log in first (the default user needs a password).
    pub fn needs_auth(&self) -> bool {
        self.acl.needs_auth()
    }

    /// Whether `given` logs in as the default user (constant time; `false` when it needs
    /// no password: there is nothing to log in to).
    pub fn password_matches(&self, given: &[u8]) -> bool {
        self.acl.needs_auth()
            && self
                .acl
                .authenticate(crate::core::acl::DEFAULT_USER, given)
                .is_some()
    }

    /// The users and their permissions.
    pub fn acl(&self) -> &Acl {
        &self.acl
    }

    /// `maxmemory` in bytes (0: none beyond `--memory-limit`).
    pub fn maxmemory(&self) -> usize {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// The memory limit in force: `maxmemory`, or `--memory-limit` when it is 0 (what
    /// CONFIG GET maxmemory answers).
    pub fn memory_cap(&self) -> usize {
        match self.maxmemory() {
            0 => self.settings().memory_limit,
            m => m,
        }
    }

    pub fn set_maxmemory(&self, bytes: usize) {
        self.maxmemory.store(bytes, Ordering::Relaxed);
    }

    /// Takes a connection slot under `--max-connections`: false (counted as rejected) when
    /// the server is full. Each `true` is paired with one [`Shared::close_connection`].
    pub fn open_connection(&self) -> bool {
        let n = self.connections.fetch_add(1, Ordering::Relaxed);
        if n >= self.settings.max_connections {
            self.connections.fetch_sub(1, Ordering::Relaxed);
            self.metrics
                .connections_rejected
                .fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.metrics
            .connections_total
            .fetch_add(1, Ordering::Relaxed);
        true
    }

    pub fn close_connection(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections open now.
    pub fn connected(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Operations admitted and not yet released.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Relaxed)
    }

    /// A new client id (CLIENT ID), unique for the server's life.
    pub fn next_client_id(&self) -> u64 {
        self.next_client.fetch_add(1, Ordering::Relaxed)
    }

    /// When the server started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Counts keys the expiry sweep removed.
    pub fn count_expired(&self, n: u64) {
        self.expired_keys.fetch_add(n, Ordering::Relaxed);
    }

    /// CONFIG RESETSTAT: the expired-keys count starts again from 0.
    pub fn reset_expired(&self) {
        self.expired_keys.store(0, Ordering::Relaxed);
    }

    pub fn expired_keys(&self) -> u64 {
        self.expired_keys.load(Ordering::Relaxed)
    }

    /// DEBUG PAUSE-CRON: whether the periodic jobs wait (the expiry sweep and the ticks
    /// beside it, the idle-connection timeouts).
    pub fn cron_paused(&self) -> bool {
        self.cron_paused.load(Ordering::Relaxed)
    }

    pub fn pause_cron(&self, on: bool) {
        self.cron_paused.store(on, Ordering::Relaxed);
    }

    /// Whether the active expiry sweep runs (expired keys stay invisible either way).
    pub fn active_expire(&self) -> bool {
        self.active_expire.load(Ordering::Relaxed)
            && self.expiry_paused_until.load(Ordering::Relaxed) <= accelkv_tree::now_ms()
    }

    /// Keeps the sweep from removing expired keys until `until` (Unix milliseconds; 0:
    /// from now on it removes them again): CLIENT PAUSE, as Redis pauses its expiry so that
    /// nothing changes while clients are paused. Reads still see no expired key.
    pub fn pause_expiry(&self, until: u64) {
        self.expiry_paused_until.store(until, Ordering::Relaxed);
    }

    /// DEBUG SET-ACTIVE-EXPIRE.
    pub fn set_active_expire(&self, on: bool) {
        self.active_expire.store(on, Ordering::Relaxed);
    }

    /// Starts the server's shutdown as SIGTERM does (SHUTDOWN): the process signals itself,
    /// and the thread that serves stops the loops and flushes the data directory, unless
    /// `flush` is false (NOSAVE: what the sync policy made durable stays, the rest is lost
    /// as in a crash). Returns whether the signal was sent.
    pub fn request_shutdown(&self, flush: bool) -> bool {
        self.skip_final_flush.store(!flush, Ordering::SeqCst);
        // SAFETY: kill(2) with this process's own pid and SIGTERM touches no memory; the
        // server's signal iterator (lib.rs `serve_with`) was installed before any thread.
        unsafe { libc::kill(libc::getpid(), libc::SIGTERM) == 0 }
    }

    /// Whether SHUTDOWN NOSAVE asked to skip the final flush.
    pub fn skip_final_flush(&self) -> bool {
        self.skip_final_flush.load(Ordering::SeqCst)
    }
}
