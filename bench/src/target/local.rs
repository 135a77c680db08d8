//! In-process targets: accelkv through its reference reader, accelkv through a read engine
//! (the CPU engine with the hot-key cache, as the server runs it, or the GPU engine), and a `BTreeMap` behind a
//! `RwLock` (the baseline a Rust program would write first).

use super::{Conn, Op, Outcome, Result, Target, TargetError};
use accelkv_engine::{
    EngineConfig, EngineKind, EngineStats, Offload, ReadEngine, Reply, Request, Sink, Started,
};
use accelkv_tree::{Config, Store};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Hot-key cache buckets of the engine target: the server's default.
const CACHE_BUCKETS: usize = 1 << 16;

/// accelkv in this process.
pub struct Accelkv {
    store: Arc<Store>,
    engine: Option<Arc<dyn ReadEngine>>,
    /// The options given (`mvcc=off`, `log=…`, `cache=…`), for the target's name.
    options: String,
}

/// Options of the in-process accelkv targets, the knobs of Honeycomb's evaluation:
/// `mvcc=off` (new node versions keep no old-version pointer, so a reader at an older
/// snapshot reads newer state: GET, PUT and DELETE stay linearizable, scans do not; a
/// benchmark mode only, `Config::debug_no_old_versions`), `log=<bytes>` (the log-block
/// threshold, `Config::log_threshold`, default 1024) and, for the engine, `cache=<buckets>`
/// (the hot-key cache, default 65,536; 0 turns it off).
pub struct StoreOptions {
    pub config: Config,
    pub cache_buckets: usize,
    /// The options as given, joined by commas.
    pub given: String,
}

impl StoreOptions {
    /// Parses `opts` (comma-separated `key=value`); `target` names the spec in errors.
    pub fn parse<'a>(target: &str, opts: impl Iterator<Item = &'a str>) -> Result<StoreOptions> {
        let mut o = StoreOptions {
            config: Config::default(),
            cache_buckets: CACHE_BUCKETS,
            given: String::new(),
        };
        for p in opts.filter(|p| !p.is_empty()) {
            let bad = || {
                TargetError(format!(
                    "{target}: unknown option {p:?} (mvcc=off, log=<bytes>, cache=<buckets>)"
                ))
            };
            match p.split_once('=').ok_or_else(bad)? {
                ("mvcc", "off") => o.config.debug_no_old_versions = true,
                ("mvcc", "on") => o.config.debug_no_old_versions = false,
                ("log", n) => o.config.log_threshold = n.parse().map_err(|_| bad())?,
                ("cache", n) => o.cache_buckets = n.parse().map_err(|_| bad())?,
                _ => return Err(bad()),
            }
            if !o.given.is_empty() {
                o.given.push(',');
            }
            o.given.push_str(p);
        }
        Ok(o)
    }
}

/// accelkv with a data directory (a fresh temporary one, removed when dropped): writes
/// return once durable per the sync policy; reads run on the calling thread through the
/// reference reader (as RocksDB's do), never touching the device.
pub struct Durable {
    durable: Arc<accelkv_durable::Store>,
    /// Removed when the target is dropped (after the leaf cache's line below).
    _dir: super::scratch::Scratch,
    policy: String,
}

impl Durable {
    /// Opens a fresh store from `spec`: a sync policy (`sync`, `interval=<ms>`, `none`),
    /// optionally followed by `,budget=<MiB>`: a memory budget, past which leaves live only
    /// in the page file (the mirror cache, `Config::evict`), and by `,whole`: commits image
    /// whole leaves (delta pages off, `Deltas::OFF`).
    pub fn open(spec: &str) -> Result<Durable> {
        let mut parts = spec.split(',');
        let policy = parts.next().unwrap_or_default();
        let (mut budget, mut deltas) = (None, accelkv_durable::Deltas::default());
        for p in parts {
            match p.split_once('=') {
                Some(("budget", b)) => {
                    budget = Some(b.parse::<usize>().map_err(|_| {
                        TargetError(format!("accelkv-durable={spec}: budget in MiB"))
                    })?)
                }
                None if p == "whole" => deltas = accelkv_durable::Deltas::OFF,
                _ => {
                    return Err(TargetError(format!(
                        "accelkv-durable={spec}: unknown option {p:?} (budget=<MiB>, whole)"
                    )))
                }
            }
        }
        let sync = policy.parse().map_err(TargetError)?;
        let dir = super::scratch::Scratch::new("durable");
        let config = match budget {
            Some(mib) => Config {
                memory_limit: mib << 20,
                evict: true,
                ..Config::default()
            },
            None => Config::default(),
        };
        let opts = accelkv_durable::Options {
            config,
            sync,
            deltas,
            ..Default::default()
        };
        let durable = Arc::new(
            accelkv_durable::Store::open_with(dir.path(), opts)
                .map_err(|e| TargetError::from_display("accelkv-durable", e))?,
        );
        Ok(Durable {
            durable,
            _dir: dir,
            policy: spec.to_string(),
        })
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        let m = self.durable.tree().mirror_stats();
        if m.budget_bytes > 0 && m.leaf_visits > 0 {
            eprintln!(
                "{}: leaf cache: {} leaf visits, {} loads (hit ratio {:.3}), {} evictions, {} write-backs, mean load {} us, {} of {} bytes resident",
                self.name(),
                m.leaf_visits,
                m.loads,
                m.hit_ratio(),
                m.evictions,
                self.durable.durability().stats().write_backs,
                m.load_us_mean,
                m.resident_bytes,
                m.budget_bytes
            );
        }
    }
}

impl Target for Durable {
    fn name(&self) -> String {
        format!("accelkv-durable({})", self.policy)
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        Ok(Box::new(AccelkvConn {
            store: self.durable.tree().clone(),
            engine: None,
            durable: Some(self.durable.clone()),
            sink: Sink::new(),
            batch: Vec::new(),
        }))
    }

    fn uses_device(&self) -> bool {
        true
    }
}

impl Accelkv {
    /// Reads through the reference reader on the calling thread.
    pub fn reference(o: StoreOptions) -> Result<Accelkv> {
        let store = Store::new(o.config).map_err(|e| TargetError::from_display("store", e))?;
        Ok(Accelkv {
            store: Arc::new(store),
            engine: None,
            options: o.given,
        })
    }

    /// Reads (GET, SCAN) through the read engine `kind` picks (`auto`: the GPU engine when
    /// a GPU is usable, else the CPU engine); writes on the calling thread.
    pub fn engine(kind: EngineKind, o: StoreOptions) -> Result<Accelkv> {
        let store =
            Arc::new(Store::new(o.config).map_err(|e| TargetError::from_display("store", e))?);
        let cpu = EngineConfig {
            cache_buckets: o.cache_buckets,
            ..EngineConfig::default()
        };
        let streams = accelkv_gpu::GpuConfig::default().streams;
        let started = accelkv_engine::start(
            store.clone(),
            kind,
            cpu,
            streams,
            Some(&accelkv_gpu::Gpu::default()),
        )
        .map_err(|e| TargetError::from_display("accelkv-engine=gpu", e))?;
        let engine: Arc<dyn ReadEngine> = match started {
            Started::Offload(g) => Arc::new(OffloadEngine(g)),
            Started::Cpu { engine, .. } => Arc::from(engine as Box<dyn ReadEngine>),
        };
        Ok(Accelkv {
            store,
            engine: Some(engine),
            options: o.given,
        })
    }
}

impl Target for Accelkv {
    fn name(&self) -> String {
        let base = match &self.engine {
            Some(e) if e.name() == "cpu" => "accelkv-engine".into(),
            Some(e) => format!("accelkv-{}", e.name()),
            None => "accelkv".into(),
        };
        if self.options.is_empty() {
            base
        } else {
            format!("{base}({})", self.options)
        }
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        Ok(Box::new(AccelkvConn {
            store: self.store.clone(),
            engine: self.engine.clone(),
            durable: None,
            sink: Sink::new(),
            batch: Vec::new(),
        }))
    }
}

struct AccelkvConn {
    store: Arc<Store>,
    engine: Option<Arc<dyn ReadEngine>>,
    durable: Option<Arc<accelkv_durable::Store>>,
    sink: Arc<Sink>,
    batch: Vec<(u64, Request)>,
}

fn store_err(e: accelkv_tree::Error) -> TargetError {
    TargetError::from_display("accelkv", e)
}

impl Conn for AccelkvConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        let first = out.len();
        // Writes run here (the CPU runs writes); reads are collected into one engine batch.
        for (i, op) in ops.iter().enumerate() {
            let outcome = match op {
                Op::Update(k, v) | Op::Insert(k, v) => {
                    match &self.durable {
                        Some(d) => {
                            d.put(k, v)
                                .map_err(|e| TargetError::from_display("accelkv-durable", e))?;
                        }
                        None => {
                            self.store.put(k, v).map_err(store_err)?;
                        }
                    }
                    Outcome::Written
                }
                Op::Read(k) if self.engine.is_some() => {
                    self.batch.push((i as u64, Request::get(k)));
                    Outcome::Written // replaced by the completion below
                }
                Op::Scan(k, n) if self.engine.is_some() => {
                    self.batch.push((i as u64, Request::scan(k, None, *n)));
                    Outcome::Written
                }
                Op::Read(k) => Outcome::Value(self.store.get(k).map_err(store_err)?),
                Op::Scan(k, n) => Outcome::Items(self.store.scan(k, None, *n)),
            };
            out.push(outcome);
        }
        let Some(engine) = &self.engine else {
            return Ok(());
        };
        if self.batch.is_empty() {
            return Ok(());
        }
        let want = self.batch.len();
        engine.submit(&self.sink, std::mem::take(&mut self.batch));
        let mut done = Vec::with_capacity(want);
        while done.len() < want {
            if self.sink.wait(&mut done, want, Duration::from_secs(30)) == 0 {
                return Err(TargetError("the engine did not answer in 30 s".into()));
            }
        }
        for c in done {
            out[first + c.tag as usize] = match c.reply {
                Reply::Value(v) => Outcome::Value(v),
                Reply::Items(items) => Outcome::Items(items.to_vec()),
                Reply::Error(e) => return Err(store_err(e)),
            };
        }
        Ok(())
    }
}

/// `BTreeMap` behind a `RwLock`.
#[derive(Default)]
pub struct BTree {
    map: Arc<RwLock<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl Target for BTree {
    fn name(&self) -> String {
        "btreemap".into()
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        Ok(Box::new(BTreeConn {
            map: self.map.clone(),
        }))
    }
}

struct BTreeConn {
    map: Arc<RwLock<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl Conn for BTreeConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        for op in ops {
            out.push(match op {
                Op::Update(k, v) | Op::Insert(k, v) => {
                    let mut m = self.map.write().unwrap_or_else(|e| e.into_inner());
                    m.insert(k.clone(), v.clone());
                    Outcome::Written
                }
                Op::Read(k) => {
                    let m = self.map.read().unwrap_or_else(|e| e.into_inner());
                    Outcome::Value(m.get(k).cloned())
                }
                Op::Scan(k, n) => {
                    let m = self.map.read().unwrap_or_else(|e| e.into_inner());
                    Outcome::Items(
                        m.range(k.clone()..)
                            .take(*n)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    )
                }
            });
        }
        Ok(())
    }
}

/// An engine with memory of its own (the GPU engine) as a plain [`ReadEngine`].
struct OffloadEngine(Box<dyn Offload>);

impl ReadEngine for OffloadEngine {
    fn submit(&self, sink: &Arc<Sink>, batch: Vec<(u64, Request)>) {
        self.0.engine().submit(sink, batch)
    }

    fn name(&self) -> &'static str {
        self.0.engine().name()
    }

    fn stats(&self) -> EngineStats {
        self.0.engine().stats()
    }
}
