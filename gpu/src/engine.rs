//! The GPU engine's host side (Honeycomb §4–5 with a GPU as the accelerator): workers, one
//! per device stream, that take submitted batches, bring the device's page table and
//! interior-node cache up to date from the tree's remap stream, lay the requests out
//! (layout.rs), launch the kernels, and turn what they wrote into completions — resolving
//! out-of-line values and continuing scans that ran out of output room.
//!
//! Thread safety: `submit` may be called from any thread; each worker owns a shard (queue
//! and reader slot) and a stream; device updates are serialised by one mutex.
//!
//! Invariants:
//! 1. A submitted batch's read version is taken after its shard's reader slot publishes an
//!    epoch no newer than the current one, and the slot keeps an epoch that old until every
//!    request of the batch has completed (the oldest in-flight batch, Honeycomb's S_old):
//!    no buffer a kernel can reach is freed while it runs.
//! 2. Before a launch, every remap drained so far is applied on the device; a batch's read
//!    version was taken before the drain, so the device page table is current for it
//!    (remap.rs invariant 1).
//! 3. Node images copied into the interior cache are read under an epoch published before
//!    the remaps naming them were drained.

use crate::error::GpuError;
use crate::exec::{Exec, Shape};
use crate::layout::{decode, Batch, Outcome, Work};
use crate::mirror::Mirror;
use accelkv_engine::{
    Completion, EngineStats, ReadEngine, Reply, Request, Sink, Submission, Submissions,
};
use accelkv_tree::{Chunk, ReaderSlot, Remap, RemapFeed, Store, ValueRef};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How the GPU engine runs.
#[derive(Clone, Debug)]
pub struct GpuConfig {
    /// Workers, each with its own device stream. Default 4.
    pub streams: usize,
    /// Most requests per kernel launch. Default 16384.
    pub max_batch: usize,
    /// Device memory for the interior-node cache. Default 256 MiB.
    pub cache_bytes: usize,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            streams: 4,
            max_batch: 16384,
            cache_bytes: 256 << 20,
        }
    }
}

/// Counters of the GPU engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Kernel launches.
    pub launches: u64,
    /// Requests run on the device (a continued scan counts once per launch).
    pub device_requests: u64,
    /// Bytes the kernels read from host memory (across PCIe on a GPU), by their own count.
    pub host_bytes_read: u64,
    /// Page-table changes applied to the device.
    pub remaps_applied: u64,
    /// Interior nodes in the device cache now.
    pub cached_nodes: u64,
    /// Interior nodes that found the cache full.
    pub uncached_nodes: u64,
    /// Requests answered by the host's reference reader instead (a device error or a node
    /// that did not check; expected 0).
    pub fallbacks: u64,
    /// The last device error, if any.
    pub last_error: Option<String>,
}

/// One stream's queue of batches and the reader slot that protects them.
type Shard = Submissions;

struct DeviceState {
    mirror: Mirror,
    launches: u64,
    remaps: Vec<Remap>,
    chunks: Vec<Chunk>,
}

#[derive(Default)]
struct Counters {
    completed: AtomicU64,
    launches: AtomicU64,
    device_requests: AtomicU64,
    host_bytes: AtomicU64,
    remaps: AtomicU64,
    fallbacks: AtomicU64,
}

struct Inner {
    store: Arc<Store>,
    exec: Box<dyn Exec>,
    feed: Arc<RemapFeed>,
    device: Mutex<DeviceState>,
    update_slot: ReaderSlot,
    /// Launch id each worker has in flight (u64::MAX: none).
    inflight: Vec<AtomicU64>,
    shards: Vec<Shard>,
    next: AtomicUsize,
    stop: AtomicBool,
    counters: Counters,
    last_error: Mutex<Option<String>>,
    max_batch: usize,
    name: &'static str,
}

/// The GPU read engine; see the module docs. Dropping it stops its workers.
pub struct GpuEngine {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

/// Size of the device page table: every LID the store can hand out under its memory limit
/// (a LID names a live node, and nodes are arena buffers), capped at the tree's table.
fn pt_capacity(store: &Store, copied: usize) -> u64 {
    let cfg = store.config();
    let buffers = (cfg.memory_limit / cfg.node_size) as u64 + 64;
    buffers.min(1 << 28).max(copied as u64 + 64)
}

impl GpuEngine {
    /// Starts the engine on the first CUDA device.
    pub fn start(store: Arc<Store>, cfg: GpuConfig) -> Result<GpuEngine, GpuError> {
        Self::start_with(store, cfg, "gpu", |shape| {
            Ok(Box::new(crate::cuda::CudaExec::new(shape)?))
        })
    }

    /// Starts the engine on the host emulation of the kernels (tests, and checking the GPU
    /// path on a machine without a GPU). Not a fast engine: see emu.rs. Fails only where the
    /// emulation was not built (no C++ compiler at build time; [`crate::HOST_EMULATION`]).
    pub fn start_emulated(store: Arc<Store>, cfg: GpuConfig) -> Result<GpuEngine, GpuError> {
        #[cfg(not(akv_no_host_emu))]
        return Self::start_with(store, cfg, "gpu-emulated", |shape| {
            Ok(Box::new(crate::emu::HostExec::new(shape)))
        });
        #[cfg(akv_no_host_emu)]
        {
            let _ = (store, cfg);
            Err(GpuError::NoEmulation)
        }
    }

    fn start_with(
        store: Arc<Store>,
        cfg: GpuConfig,
        name: &'static str,
        make: impl FnOnce(&Shape) -> Result<Box<dyn Exec>, GpuError>,
    ) -> Result<GpuEngine, GpuError> {
        let raw = store.raw();
        let update_slot = raw.reader_slot();
        // Engine invariant 3: the epoch is published before the table is copied, so no
        // buffer the copy names is freed while the images are read.
        update_slot.hold(raw.current_epoch());
        let sub = raw.subscribe_remaps();
        let streams = cfg.streams.max(1);
        let shape = Shape {
            pt_cap: pt_capacity(&store, sub.table.len()),
            slots: (cfg.cache_bytes / raw.node_size()).min(u32::MAX as usize) as u32,
            max_chunks: raw.max_chunks(),
            node_size: raw.node_size(),
            chunk_size: raw.chunk_size(),
            head: store.config().geometry().sorted_start(),
            streams,
        };
        let exec = make(&shape)?;
        let shards = (0..streams)
            .map(|_| Submissions::new(raw.reader_slot()))
            .collect();
        let initial: Vec<Remap> = sub
            .table
            .iter()
            .enumerate()
            .filter(|(_, &off)| off != u64::MAX)
            .map(|(lid, &off)| Remap {
                lid: lid as u64,
                off,
                version: 0,
            })
            .collect();
        let inner = Arc::new(Inner {
            exec,
            feed: sub.feed,
            device: Mutex::new(DeviceState {
                mirror: Mirror::new(shape.pt_cap, shape.slots),
                launches: 0,
                remaps: initial,
                chunks: Vec::new(),
            }),
            update_slot,
            inflight: (0..streams).map(|_| AtomicU64::new(u64::MAX)).collect(),
            shards,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            last_error: Mutex::new(None),
            max_batch: cfg.max_batch.max(1),
            name,
            store: store.clone(),
        });
        // The first update holds the copied table (and is applied with the epoch above).
        inner.update(None)?;
        let threads = (0..streams)
            .map(|i| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("accelkv-gpu-{i}"))
                    .spawn(move || inner.worker(i))
                    .expect("spawn GPU engine worker")
            })
            .collect();
        Ok(GpuEngine { inner, threads })
    }

    /// GPU counters.
    pub fn gpu_stats(&self) -> GpuStats {
        let c = &self.inner.counters;
        let d = self.inner.device.lock().unwrap_or_else(|e| e.into_inner());
        GpuStats {
            launches: c.launches.load(Ordering::Relaxed),
            device_requests: c.device_requests.load(Ordering::Relaxed),
            host_bytes_read: c.host_bytes.load(Ordering::Relaxed),
            remaps_applied: c.remaps.load(Ordering::Relaxed),
            cached_nodes: d.mirror.cached as u64,
            uncached_nodes: d.mirror.uncached,
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            last_error: self
                .inner
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// The device, in words.
    pub fn device(&self) -> String {
        self.inner.exec.describe()
    }
}

impl Inner {
    /// Brings the device up to date with the remap stream (invariant 2); with `stream`,
    /// registers that worker's next launch and returns its id.
    fn update(&self, stream: Option<usize>) -> Result<u64, GpuError> {
        let raw = self.store.raw();
        let mut d = self.device.lock().unwrap_or_else(|e| e.into_inner());
        let d = &mut *d;
        if stream.is_some() {
            self.update_slot.hold(raw.current_epoch());
        }
        // Remaps first, then chunks: a drained remap's chunk was announced before it.
        self.feed.drain_remaps(&mut d.remaps);
        self.feed.drain_chunks(&mut d.chunks);
        let result = (|| {
            self.exec.map_chunks(&d.chunks)?;
            d.chunks.clear();
            let tag = d.launches;
            let oldest = self
                .inflight
                .iter()
                .map(|a| a.load(Ordering::Acquire))
                .min()
                .unwrap_or(u64::MAX);
            let mut interior = |off: u64| {
                // SAFETY: invariant 3 — `update_slot` holds an epoch published before these
                // remaps were drained, and `off` is a buffer a drained remap names.
                !unsafe { raw.view(off) }.is_leaf()
            };
            let u = d
                .mirror
                .apply(&d.remaps, &mut interior, tag, oldest)
                .map_err(|e| GpuError::TableFull(e.0))?;
            let images: Vec<Vec<u8>> = u
                .copies
                .iter()
                .map(|&(_, off)| {
                    // SAFETY: as above.
                    let v = unsafe { raw.view(off) };
                    let mut img = Vec::with_capacity(v.used());
                    img.extend_from_slice(&((v.used() as u64) << 32).to_le_bytes());
                    img.extend_from_slice(&[0; 8]);
                    img.extend_from_slice(v.published());
                    img
                })
                .collect();
            self.exec.apply(&u, &images)?;
            self.counters
                .remaps
                .fetch_add(u.pt.len() as u64, Ordering::Relaxed);
            d.remaps.clear();
            if let Some(i) = stream {
                self.inflight[i].store(tag, Ordering::Release);
                d.launches += 1;
            }
            Ok(tag)
        })();
        self.update_slot.clear();
        result
    }

    fn worker(&self, i: usize) {
        let shard = &self.shards[i];
        loop {
            let Some(subs) = shard.take_all(&self.stop) else {
                return;
            };
            // A bug in this worker must not leave its submitters waiting forever (nor its
            // epoch held): whatever it had not delivered is answered by the reference reader.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run(i, &subs)));
            if let Err(p) = ran {
                let why = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".into());
                self.record_error(format!("engine worker {i} panicked: {why}"));
                self.inflight[i].store(u64::MAX, Ordering::Release);
                for s in &subs {
                    let done: Vec<Completion> = s
                        .reqs
                        .iter()
                        .map(|(tag, req)| Completion {
                            tag: *tag,
                            version: s.rv,
                            reply: self.host_answer(req, s.rv, s.now),
                            from_cache: false,
                        })
                        .collect();
                    s.sink.push_all(done);
                }
            }
            shard.finished();
        }
    }

    /// Runs the requests of `subs` to completion and delivers them.
    fn run(&self, stream: usize, subs: &[Submission]) {
        let cfg = self.store.config();
        let mut works: Vec<Work> = Vec::new();
        let mut dest: Vec<(usize, u64)> = Vec::new();
        let mut replies: Vec<Option<Reply>> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        for (si, s) in subs.iter().enumerate() {
            for (tag, req) in &s.reqs {
                dest.push((si, *tag));
                // Invalid requests, and keys longer than any node can hold, never reach the
                // device.
                if req.invalid(cfg.max_key).is_some() || longest_key(req) > cfg.max_key {
                    replies.push(Some(self.host_answer(req, s.rv, s.now)));
                } else {
                    pending.push(works.len());
                    replies.push(None);
                }
                works.push(Work::new(req.clone(), s.rv, s.now));
            }
        }
        let mut batch = Batch::new(cfg.max_key, cfg.max_inline_value);
        let raw = self.store.raw();
        while !pending.is_empty() {
            let mut again = Vec::new();
            for chunk in pending.chunks(self.max_batch) {
                batch.clear();
                for &w in chunk {
                    batch.push(&works[w]);
                }
                let launched = self.update(Some(stream)).and_then(|_| {
                    let mut bytes = 0u64;
                    let r = self.exec.lookup(stream, &batch, &mut |out| {
                        for (j, &w) in chunk.iter().enumerate() {
                            let mut resolve = |handle: u64, len: u32| {
                                // SAFETY: invariant 1 — the shard's slot holds an epoch
                                // published before this request's read version was taken,
                                // so the value (freed only with its last buffer) is alive.
                                unsafe { raw.value(ValueRef::out_of_line(handle, len)) }.to_vec()
                            };
                            let (o, fetched) =
                                decode(&mut works[w], &batch.reqs[j], out, &mut resolve);
                            bytes += fetched;
                            match o {
                                Outcome::Done(r) => replies[w] = Some(r),
                                Outcome::Again => again.push(w),
                                Outcome::BadNode => {
                                    replies[w] = Some(self.fallback(
                                        &works[w].req,
                                        works[w].rv,
                                        works[w].now,
                                    ))
                                }
                            }
                        }
                    });
                    self.inflight[stream].store(u64::MAX, Ordering::Release);
                    self.counters.host_bytes.fetch_add(bytes, Ordering::Relaxed);
                    r
                });
                match launched {
                    Ok(()) => {
                        self.counters.launches.fetch_add(1, Ordering::Relaxed);
                        self.counters
                            .device_requests
                            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        self.record_error(e.to_string());
                        for &w in chunk {
                            if replies[w].is_none() {
                                replies[w] =
                                    Some(self.fallback(&works[w].req, works[w].rv, works[w].now));
                            }
                        }
                        again.retain(|w| replies[*w].is_none());
                    }
                }
            }
            pending = again;
        }
        // Deliver, one push per sink.
        let mut out: Vec<Vec<Completion>> = (0..subs.len()).map(|_| Vec::new()).collect();
        for ((si, tag), reply) in dest.into_iter().zip(replies) {
            out[si].push(Completion {
                tag,
                version: subs[si].rv,
                reply: reply.unwrap_or(Reply::Value(None)),
                from_cache: false,
            });
        }
        let n: usize = out.iter().map(Vec::len).sum();
        self.counters
            .completed
            .fetch_add(n as u64, Ordering::Relaxed);
        for (s, done) in subs.iter().zip(out) {
            s.sink.push_all(done);
        }
    }

    fn record_error(&self, e: String) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
    }

    /// The answer of a request the device does not run: the store API's error for an
    /// invalid one, else the reference reader's.
    fn host_answer(&self, req: &Request, rv: u64, now: u64) -> Reply {
        match req.invalid(self.store.config().max_key) {
            Some(e) => Reply::Error(e),
            None => self.fallback(req, rv, now),
        }
    }

    /// The reference reader's answer at read version `rv` and clock `now`.
    fn fallback(&self, req: &Request, rv: u64, now: u64) -> Reply {
        self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
        // SAFETY: invariant 1 — the shard's slot protects everything reachable at `rv`.
        unsafe { req.reference_reply(self.store.raw(), rv, now) }
    }
}

fn longest_key(req: &Request) -> usize {
    match req {
        Request::Get { key } => key.len(),
        Request::Scan { lo, hi, .. } => lo.len().max(hi.as_ref().map_or(0, Vec::len)),
        Request::ScanFloor { kl, ku, .. } => kl.len().max(ku.len()),
    }
}

impl ReadEngine for GpuEngine {
    fn submit(&self, sink: &Arc<Sink>, batch: Vec<(u64, Request)>) {
        if batch.is_empty() {
            return;
        }
        let inner = &self.inner;
        let shard = &inner.shards[inner.next.fetch_add(1, Ordering::Relaxed) % inner.shards.len()];
        shard.push(inner.store.raw(), sink, batch);
    }

    fn name(&self) -> &'static str {
        self.inner.name
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            completed: self.inner.counters.completed.load(Ordering::Relaxed),
            queued: self.inner.shards.iter().map(Submissions::queued).sum(),
            ..EngineStats::default()
        }
    }
}

impl Drop for GpuEngine {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        for s in &self.inner.shards {
            s.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
