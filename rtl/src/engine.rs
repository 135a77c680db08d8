//! The `rtl` read engine (`--engine rtl`): a back end of `accelkv_engine::ReadEngine` that
//! runs each batch's lookups through the simulated tree-walk engine (sv/walk.sv), cycle by
//! cycle, over the live store's page table and nodes. Slow (a simulation) and exact: the
//! server answers as with the CPU engine.
//!
//! * GET: the walk engine answers; the host copies the value from the leaf it names.
//! * SCAN: the walk engine finds the leaf `lo` routes to; the host reads the leaves' items
//!   from there (Honeycomb's range scan units are not built yet).
//! * SCAN_FLOOR, keys longer than the engine takes, and invalid requests: the reference
//!   reader on the host (counted as fallbacks).
//!
//! Invariants:
//! 1. A batch's epoch is published in the worker's reader slot before its read version is
//!    taken, and stays published until the batch is delivered (`accelkv_engine::Submissions`,
//!    as for the GPU engine); so every node a walk reaches stays allocated, and the
//!    engine's node cache, flushed at the start of every run, only ever holds live buffers.

use crate::store_mem::StoreMemory;
use crate::walk::{Lookup, WalkConfig, WalkSim, Walked, MAX_KEY, MAX_NODE};
use accelkv_engine::{
    Accelerator, Completion, EngineStats, Items, Offload, ReadEngine, Reply, Request, Sample, Sink,
    Submission, Submissions,
};
use accelkv_tree::{Store, ROOT_LID};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The RTL engine as an [`accelkv_engine::Accelerator`] (`--engine rtl`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Rtl;

impl Accelerator for Rtl {
    fn probe(&self) -> Result<String, String> {
        Ok(device())
    }

    fn start(&self, store: Arc<Store>, _streams: usize) -> Result<Box<dyn Offload>, String> {
        RtlEngine::start(store, WalkConfig::default()).map(|e| Box::new(e) as Box<dyn Offload>)
    }
}

fn device() -> String {
    "a Verilator simulation of rtl/sv/walk.sv".into()
}

#[derive(Default)]
struct Counters {
    completed: AtomicU64,
    lookups: AtomicU64,
    fallbacks: AtomicU64,
    cycles: AtomicU64,
    node_reads: AtomicU64,
    cache_hits: AtomicU64,
    node_bytes: AtomicU64,
}

struct Inner {
    store: Arc<Store>,
    subs: Submissions,
    stop: AtomicBool,
    counters: Counters,
}

/// The running RTL engine: one worker thread that owns the simulation.
pub struct RtlEngine {
    inner: Arc<Inner>,
    cfg: WalkConfig,
    thread: Option<JoinHandle<()>>,
}

impl RtlEngine {
    /// Starts the engine over `store` with `cfg` (its root is the tree's). An error for a
    /// store whose leaves may live only in the page file, or whose nodes are larger than
    /// the engine's buffers.
    pub fn start(store: Arc<Store>, cfg: WalkConfig) -> Result<RtlEngine, String> {
        let raw = store.raw();
        if raw.evicts() {
            return Err(
                "leaves may live only in the page file (a memory budget over \
                        --data-dir): the RTL engine reads every leaf from memory"
                    .into(),
            );
        }
        if raw.node_size() > MAX_NODE {
            return Err(format!(
                "nodes of {} bytes are larger than the RTL engine's {MAX_NODE}-byte buffers",
                raw.node_size()
            ));
        }
        let cfg = WalkConfig {
            root: ROOT_LID,
            ..cfg
        };
        let inner = Arc::new(Inner {
            subs: Submissions::new(raw.reader_slot()),
            store,
            stop: AtomicBool::new(false),
            counters: Counters::default(),
        });
        let worker = inner.clone();
        let thread = std::thread::Builder::new()
            .name("accelkv-rtl".into())
            .spawn(move || worker.run(cfg))
            .map_err(|e| format!("cannot start the RTL engine's thread: {e}"))?;
        Ok(RtlEngine {
            inner,
            cfg,
            thread: Some(thread),
        })
    }
}

impl Inner {
    fn run(&self, cfg: WalkConfig) {
        let mut sim = WalkSim::new(cfg);
        while let Some(subs) = self.subs.take_all(&self.stop) {
            for sub in &subs {
                let done = self.batch(&mut sim, sub);
                // Counted before they are handed over, so a caller that has its
                // completions sees them in the stats too.
                self.counters
                    .completed
                    .fetch_add(done.len() as u64, Ordering::Relaxed);
                sub.sink.push_all(done);
            }
            // Invariant 1: the next batch's epoch replaces these ones' only now.
            self.subs.finished();
        }
    }

    /// Runs one batch: lookups through the simulation, the rest on the host.
    fn batch(&self, sim: &mut WalkSim, sub: &Submission) -> Vec<Completion> {
        let raw = self.store.raw();
        let max_key = self.store.config().max_key;
        let (rv, now) = (sub.rv, sub.now);
        let mut replies: Vec<Option<Reply>> = vec![None; sub.reqs.len()];
        let mut lookups = Vec::new();
        for (i, (_, req)) in sub.reqs.iter().enumerate() {
            let key = match req {
                Request::Get { key } if key.len() <= MAX_KEY => key,
                Request::Scan { lo, limit, .. } if lo.len() <= MAX_KEY && *limit > 0 => lo,
                _ => continue,
            };
            if req.invalid(max_key).is_some() {
                continue;
            }
            lookups.push(Lookup {
                tag: i as u32,
                key,
                rv,
                now,
            });
        }
        // SAFETY: invariant 1 — the worker's slot holds an epoch published before `rv`; the
        // store does not evict (checked at start).
        let mut mem = unsafe { StoreMemory::new(raw) };
        let mut walked = Vec::with_capacity(lookups.len());
        match sim.run(&mut mem, &lookups, |d| walked.push(d)) {
            Ok(stats) => {
                let c = &self.counters;
                c.lookups.fetch_add(lookups.len() as u64, Ordering::Relaxed);
                c.cycles.fetch_add(stats.cycles, Ordering::Relaxed);
                c.node_reads.fetch_add(stats.node_reads, Ordering::Relaxed);
                c.cache_hits.fetch_add(stats.cache_hits, Ordering::Relaxed);
                c.node_bytes.fetch_add(mem.node_bytes, Ordering::Relaxed);
            }
            Err(e) => {
                // A bug, never an answer: the simulation is rebuilt and the batch answered by
                // the reference reader.
                eprintln!("accelkv-rtl: {e}; answering the batch on the host");
                *sim = WalkSim::new(sim.config());
                walked.clear();
            }
        }
        for d in walked {
            let i = d.tag as usize;
            replies[i] = self.finish(&sub.reqs[i].1, d.answer, rv, now);
        }
        sub.reqs
            .iter()
            .zip(replies)
            .map(|((tag, req), r)| Completion {
                tag: *tag,
                version: rv,
                reply: r.unwrap_or_else(|| self.host_answer(req, rv, now)),
                from_cache: false,
            })
            .collect()
    }

    /// The reply from the walk engine's answer (`None`: answer on the host).
    fn finish(&self, req: &Request, answer: Walked, rv: u64, now: u64) -> Option<Reply> {
        let raw = self.store.raw();
        match (req, answer) {
            (Request::Get { .. }, Walked::NotFound { .. }) => Some(Reply::Value(None)),
            (Request::Get { .. }, Walked::Found { leaf, value_off }) => {
                // SAFETY: invariant 1 keeps the leaf the walk reached allocated.
                let bytes = unsafe {
                    let v = raw.view(leaf);
                    raw.value(v.value_at(value_off).0).to_vec()
                };
                Some(Reply::Value(Some(bytes)))
            }
            (
                Request::Scan { lo, hi, limit },
                Walked::NotFound { leaf } | Walked::Found { leaf, .. },
            ) => {
                let mut items = Items::default();
                // SAFETY: invariant 1; `leaf` is where `lo` routes at `rv`.
                let r = unsafe {
                    raw.reference_scan_from(leaf, lo, hi.as_deref(), *limit, rv, now, |k, v| {
                        items.push(k, v)
                    })
                };
                Some(match r {
                    Ok(()) => Reply::Items(items),
                    Err(e) => Reply::Error(e),
                })
            }
            _ => None,
        }
    }

    /// The store API's error for an invalid request, else the reference reader's answer.
    fn host_answer(&self, req: &Request, rv: u64, now: u64) -> Reply {
        if let Some(e) = req.invalid(self.store.config().max_key) {
            return Reply::Error(e);
        }
        self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
        // SAFETY: invariant 1.
        unsafe { req.reference_reply(self.store.raw(), rv, now) }
    }
}

impl ReadEngine for RtlEngine {
    fn submit(&self, sink: &Arc<Sink>, batch: Vec<(u64, Request)>) {
        if batch.is_empty() {
            return;
        }
        self.inner.subs.push(self.inner.store.raw(), sink, batch);
    }

    fn name(&self) -> &'static str {
        "rtl"
    }

    fn stats(&self) -> EngineStats {
        let queued = self.inner.subs.queued();
        EngineStats {
            completed: self.inner.counters.completed.load(Ordering::Relaxed),
            queued,
            ..EngineStats::default()
        }
    }
}

impl Offload for RtlEngine {
    fn engine(&self) -> &dyn ReadEngine {
        self
    }

    fn device(&self) -> String {
        format!(
            "{} ({} request slots, {} key search units, memory latency {} cycles)",
            device(),
            self.cfg.slots,
            self.cfg.ksus,
            self.cfg.latency
        )
    }

    fn info(&self) -> Vec<(&'static str, String)> {
        let c = &self.inner.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        vec![
            ("engine_device", self.device()),
            ("rtl_lookups", l(&c.lookups)),
            ("rtl_cycles", l(&c.cycles)),
            ("rtl_node_reads", l(&c.node_reads)),
            ("rtl_cache_hits", l(&c.cache_hits)),
            ("rtl_node_bytes_read", l(&c.node_bytes)),
            ("rtl_fallbacks", l(&c.fallbacks)),
        ]
    }

    fn samples(&self) -> Vec<Sample> {
        let c = &self.inner.counters;
        let counter = |name, help, a: &AtomicU64| Sample {
            name,
            help,
            counter: true,
            value: a.load(Ordering::Relaxed),
        };
        vec![
            counter(
                "accelkv_rtl_lookups_total",
                "Lookups the simulated RTL engine ran.",
                &c.lookups,
            ),
            counter(
                "accelkv_rtl_cycles_total",
                "Clock cycles the simulated RTL engine ran.",
                &c.cycles,
            ),
            counter(
                "accelkv_rtl_node_reads_total",
                "Tree nodes the simulated RTL engine read from memory.",
                &c.node_reads,
            ),
            counter(
                "accelkv_rtl_cache_hits_total",
                "Node reads the simulated RTL engine's node cache answered.",
                &c.cache_hits,
            ),
            counter(
                "accelkv_rtl_fallbacks_total",
                "Lookups the RTL engine handed back to the CPU reader.",
                &c.fallbacks,
            ),
        ]
    }
}

impl Drop for RtlEngine {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        self.inner.subs.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.inner.subs.clear();
    }
}
