//! The CPU back end: engine threads, each keeping up to `G` requests in flight (amac.rs) and
//! completing them out of order; the hot-key cache in front of GETs; the epoch each thread
//! publishes so reclamation never frees what an in-flight request can reach.
//!
//! Thread safety: `submit` may be called from any number of threads. Each engine thread
//! owns a shard: a queue of submitted requests and a reader slot.
//!
//! Invariants:
//! 1. A batch is given its read version after its shard's slot publishes an epoch no newer
//!    than the current one (the oldest in-flight batch's epoch, Honeycomb's S_old), and the
//!    slot moves forward only when every request of the oldest batch has completed.
//! 2. Completions are delivered after the engine has copied everything out of node memory.

use crate::amac::Flight;
use crate::hot::HotCache;
use crate::inline::InlineReader;
use crate::loader::Loader;
use crate::manager::{Counters, Judge, Manager, SampleChannel, Sampler};
use crate::request::{Completion, ReadRef, Reply, Request, Sink};
use crate::{EngineStats, ReadEngine};
use accelkv_tree::{Raw, ReaderSlot, Store};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the CPU engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Engine threads. Default: one per two cores, at least one. 0: none; batches run on the
    /// submitting thread ([`CpuEngine::reader`]).
    pub threads: usize,
    /// Requests each thread keeps in flight (G). Default 16, chosen by measurement
    /// (docs/BENCHMARKS.md).
    pub window: usize,
    /// Which levels a GET or scan walks interleaved with the other requests; the levels
    /// above them are walked straight in one step (they stay in the processor's caches,
    /// where a suspension costs more than it hides). Default [`Staging::Auto`].
    pub staging: Staging,
    /// Buckets of the hot-key cache (one item each); 0 turns the cache off. Default 0.
    pub cache_buckets: usize,
    /// One GET in this many is sampled for the popularity sketch. Default 8.
    pub sample_every: u32,
    /// How often the cache manager installs hot keys. Default 20 ms.
    pub manager_interval: Duration,
    /// How long an idle engine thread polls for new requests before it sleeps (lower
    /// completion latency at light load for some CPU). Default 50 µs.
    pub idle_spin: Duration,
    /// Loader threads that read evicted leaves back for inline readers that do not block
    /// ([`crate::Loader`]); started only for a store whose leaves may be evicted (a memory
    /// budget over a data directory). Default 2.
    pub load_threads: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        EngineConfig {
            threads: (cores / 2).max(1),
            window: 16,
            staging: Staging::Auto,
            cache_buckets: 0,
            sample_every: 8,
            manager_interval: Duration::from_millis(20),
            idle_spin: Duration::from_micros(50),
            load_threads: 2,
        }
    }
}

/// Which levels of a walk are interleaved with the other requests' (the rest walked
/// straight, one node after another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staging {
    /// The leaves alone while the nodes one level above them fit in [`STRAIGHT_BYTES`]
    /// (they stay in a core's caches), the leaves and those nodes beyond (chosen per batch;
    /// docs/ARCHITECTURE.md, "The CPU engine", has the measurement).
    Auto,
    /// This many levels above the leaves as well as the leaves (`u8::MAX`: every level).
    Levels(u8),
}

/// How many bytes of nodes one level above the leaves a walk still goes through straight
/// ([`Staging::Auto`]): a core's L2 cache on the machines measured (1 MiB). Measured with
/// `engine_bench --suites get,inline --staged-levels 0|1`, uniform GETs: at 1 M items
/// (about 400 KiB of such nodes) the straight walk ran 1.72 M/s inline against 1.33 M/s
/// staged; at 10 M (about 4 MiB) 0.60 M/s against 0.88 M/s.
pub const STRAIGHT_BYTES: usize = 1 << 20;

impl Staging {
    /// The levels above the leaves to interleave for a batch on `raw`'s tree now.
    pub fn levels(self, raw: accelkv_tree::Raw<'_>) -> u8 {
        match self {
            Staging::Levels(n) => n,
            Staging::Auto => u8::from(raw.level1_bytes() > STRAIGHT_BYTES),
        }
    }
}

struct Pending {
    tag: u64,
    rv: u64,
    now: u64,
    batch: u64,
    req: Request,
}

/// A submitted batch: its sink, the epoch held for it, requests not yet completed.
struct Batch {
    id: u64,
    epoch: u64,
    remaining: usize,
    sink: Arc<Sink>,
}

#[derive(Default)]
struct Queue {
    incoming: VecDeque<Pending>,
    /// Batches with requests not yet completed, oldest first (ids are consecutive).
    batches: VecDeque<Batch>,
    next_batch: u64,
    /// The engine thread is waiting for work (so `submit` must wake it).
    idle: bool,
}

struct Shard {
    queue: Mutex<Queue>,
    ready: Condvar,
    slot: ReaderSlot,
}

/// The CPU read engine; see the module docs. Dropping it stops its threads.
pub struct CpuEngine {
    store: Arc<Store>,
    shards: Vec<Arc<Shard>>,
    next: AtomicUsize,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    cache: Option<Arc<HotCache>>,
    counters: Arc<Counters>,
    samples: Option<SampleChannel>,
    window: usize,
    staging: Staging,
    sample_every: u32,
    /// With no engine threads: the reader `submit` runs batches on, on the caller's thread.
    inline: Option<Mutex<InlineReader>>,
    /// Reads evicted leaves back for inline readers that defer their misses (only for a
    /// store whose leaves may be evicted).
    loader: Option<Arc<Loader>>,
}

impl CpuEngine {
    /// Starts the engine threads (and the cache manager when the cache is on). With
    /// `threads: 0` there are none: [`CpuEngine::reader`] gives each caller thread its own
    /// inline reader, and `submit` runs a batch on the submitting thread.
    pub fn start(store: Arc<Store>, cfg: EngineConfig) -> CpuEngine {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let cache = HotCache::attach(&store, cfg.cache_buckets);
        let mut threads = Vec::new();
        let samples = cache.as_ref().map(|c| {
            let (tx, rx) = channel();
            let spare = Arc::new(Mutex::new(Vec::new()));
            let sparse = Arc::new(AtomicU32::new(0));
            let m = Manager {
                store: store.clone(),
                cache: c.clone(),
                samples: rx,
                spare: spare.clone(),
                sparse: sparse.clone(),
                stop: stop.clone(),
                interval: cfg.manager_interval,
                judge: Judge::new(counters.clone()),
            };
            threads.push(
                std::thread::Builder::new()
                    .name("accelkv-cache-mgr".into())
                    .spawn(move || m.run())
                    .expect("spawn cache manager"),
            );
            SampleChannel { tx, spare, sparse }
        });
        let shards: Vec<Arc<Shard>> = (0..cfg.threads)
            .map(|_| {
                Arc::new(Shard {
                    queue: Mutex::new(Queue::default()),
                    ready: Condvar::new(),
                    slot: store.raw().reader_slot(),
                })
            })
            .collect();
        for (i, shard) in shards.iter().enumerate() {
            let w = Worker {
                store: store.clone(),
                shard: shard.clone(),
                stop: stop.clone(),
                window: cfg.window.max(1),
                staging: cfg.staging,
                cache: cache.clone(),
                sampler: Sampler::new(samples.clone(), cfg.sample_every),
                counters: counters.clone(),
                idle_spin: cfg.idle_spin,
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("accelkv-engine-{i}"))
                    .spawn(move || w.run())
                    .expect("spawn engine thread"),
            );
        }
        let mut engine = CpuEngine {
            store,
            shards,
            next: AtomicUsize::new(0),
            stop,
            threads,
            cache,
            counters,
            samples,
            window: cfg.window.max(1),
            staging: cfg.staging,
            sample_every: cfg.sample_every.max(1),
            inline: None,
            loader: None,
        };
        if engine.store.raw().evicts() {
            engine.loader = Some(Arc::new(Loader::start(
                engine.store.clone(),
                cfg.load_threads,
            )));
        }
        if engine.shards.is_empty() {
            engine.inline = Some(Mutex::new(engine.reader()));
        }
        engine
    }

    /// The loader threads that read evicted leaves back, when the store's leaves may be
    /// evicted: for readers that defer their misses ([`InlineReader::set_defer`]).
    pub fn loader(&self) -> Option<&Arc<Loader>> {
        self.loader.as_ref()
    }

    /// A reader that runs batches on the calling thread, sharing this engine's hot-key
    /// cache and counters (one per server loop).
    pub fn reader(&self) -> InlineReader {
        InlineReader::new(
            self.store.clone(),
            self.window,
            self.staging,
            self.cache.clone(),
            Sampler::new(self.samples.clone(), self.sample_every),
            self.counters.clone(),
        )
    }

    /// The hot-key cache, when on.
    pub fn cache(&self) -> Option<&Arc<HotCache>> {
        self.cache.as_ref()
    }

    /// The store the engine reads.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

impl ReadEngine for CpuEngine {
    fn submit(&self, sink: &Arc<Sink>, batch: Vec<(u64, Request)>) {
        if batch.is_empty() {
            return;
        }
        if let Some(inline) = &self.inline {
            let reqs: Vec<ReadRef<'_>> = batch.iter().map(|(_, r)| r.as_ref()).collect();
            let mut done = Vec::with_capacity(batch.len());
            let mut reader = inline.lock().unwrap_or_else(|e| e.into_inner());
            let rv = reader.run(&reqs, |i, found| {
                done.push((i, found.into_reply()));
            });
            drop(reader);
            sink.push_all(done.into_iter().map(|(i, reply)| Completion {
                tag: batch[i].0,
                version: rv,
                reply,
                from_cache: false,
            }));
            return;
        }
        let shard = &self.shards[self.next.fetch_add(1, Ordering::Relaxed) % self.shards.len()];
        let raw = self.store.raw();
        let mut q = shard.queue.lock().unwrap_or_else(|e| e.into_inner());
        // Invariant 1: publish before taking the read version.
        let epoch = raw.current_epoch();
        if q.batches.is_empty() {
            shard.slot.hold(epoch);
        }
        let rv = raw.read_version();
        let now = accelkv_tree::now_ms();
        let id = q.next_batch;
        q.next_batch += 1;
        q.batches.push_back(Batch {
            id,
            epoch,
            remaining: batch.len(),
            sink: sink.clone(),
        });
        for (tag, req) in batch {
            q.incoming.push_back(Pending {
                tag,
                rv,
                now,
                batch: id,
                req,
            });
        }
        let wake = q.idle;
        drop(q);
        if wake {
            shard.ready.notify_one();
        }
    }

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn stats(&self) -> EngineStats {
        let c = &self.counters;
        let cs = self.cache.as_ref().map(|c| c.stats()).unwrap_or_default();
        EngineStats {
            completed: c.completed.load(Ordering::Relaxed),
            cache_hits: c.hits.load(Ordering::Relaxed),
            cache_misses: c.misses.load(Ordering::Relaxed),
            cache_installs: cs.installs,
            cache_evictions: cs.evictions,
            cache_active: cs.active,
            queued: self
                .shards
                .iter()
                .map(|s| {
                    s.queue
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .incoming
                        .len() as u64
                })
                .sum(),
        }
    }
}

impl Drop for CpuEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in &self.shards {
            s.ready.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct Worker {
    store: Arc<Store>,
    shard: Arc<Shard>,
    stop: Arc<AtomicBool>,
    window: usize,
    staging: Staging,
    cache: Option<Arc<HotCache>>,
    sampler: Sampler,
    counters: Arc<Counters>,
    idle_spin: Duration,
}

/// Validates a request the way the store's API does.
fn check(store: &Store, req: &Request) -> Option<Reply> {
    req.invalid(store.config().max_key).map(Reply::Error)
}

/// A GET admitted while the hot-key cache is on. Its two buckets were prefetched when it was
/// admitted; it is looked up on the next pass, after a round of the flights' stages has hidden
/// the fetch (a lookup at admission waited for its bucket, which with a table larger than
/// the processor's caches cost more than the hits saved).
struct Probe {
    p: Pending,
    sink: usize,
}

/// What the engine thread keeps between passes.
#[derive(Default)]
struct Passes {
    flights: Vec<Flight>,
    /// GETs admitted this pass whose buckets are being fetched.
    probes: Vec<Probe>,
    sinks: Vec<Arc<Sink>>,
    out: Vec<Vec<Completion>>,
    finished: Vec<u64>,
    last_sink: Option<(u64, usize)>,
    hits: u64,
    misses: u64,
    /// Levels above the leaves interleaved for the requests admitted now.
    staged: u8,
}

impl Passes {
    fn in_flight(&self) -> usize {
        self.flights.len() + self.probes.len()
    }

    fn complete(&mut self, sink: usize, batch: u64, c: Completion) {
        self.out[sink].push(c);
        self.finished.push(batch);
    }
}

impl Worker {
    fn run(mut self) {
        let store = self.store.clone();
        let raw = store.raw();
        let mut s = Passes {
            flights: Vec::with_capacity(self.window),
            probes: Vec::with_capacity(self.window),
            ..Passes::default()
        };
        let mut ready: Vec<Probe> = Vec::with_capacity(self.window);
        loop {
            // The probes admitted last pass: their buckets have arrived.
            ready.append(&mut s.probes);
            for pr in ready.drain(..) {
                self.resolve(raw, &mut s, pr);
            }
            if s.in_flight() < self.window && !self.admit(raw, &mut s) {
                return;
            }
            // One stage of every request in flight, round robin.
            let mut i = 0;
            while i < s.flights.len() {
                // SAFETY: every flight's batch holds an epoch in this shard's slot that was
                // published before its read version was taken (invariant 1).
                match unsafe { s.flights[i].step(raw, false) }.into_reply() {
                    None => i += 1,
                    Some(reply) => {
                        let f = s.flights.swap_remove(i);
                        let c = Completion {
                            tag: f.tag,
                            version: f.rv,
                            reply,
                            from_cache: false,
                        };
                        s.complete(f.sink, f.batch, c);
                    }
                }
            }
            if !s.finished.is_empty() {
                self.deliver(&s.sinks, &mut s.out, &mut s.finished);
            }
            let idle = s.in_flight() == 0;
            if s.hits + s.misses >= 1024 || (idle && s.hits + s.misses > 0) {
                self.counters.hits.fetch_add(s.hits, Ordering::Relaxed);
                self.counters.misses.fetch_add(s.misses, Ordering::Relaxed);
                (s.hits, s.misses) = (0, 0);
            }
            if idle {
                // Everything is delivered: forget the sinks seen so far.
                s.sinks.clear();
                s.out.clear();
                s.last_sink = None;
            }
        }
    }

    /// Admits requests up to the window, waiting for some when nothing is in flight.
    /// Returns false when the engine stops.
    fn admit(&mut self, raw: Raw<'_>, s: &mut Passes) -> bool {
        // Nothing to run and nothing to deliver (hits resolved this pass are delivered
        // after it): wait for requests.
        let empty = |s: &Passes| s.in_flight() == 0 && s.finished.is_empty();
        if empty(s) {
            self.poll_briefly();
        }
        let mut q = self.shard.queue.lock().unwrap_or_else(|e| e.into_inner());
        while empty(s) && q.incoming.is_empty() {
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            q.idle = true;
            q = self
                .shard
                .ready
                .wait_timeout(q, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            q.idle = false;
        }
        let first = q.batches.front().map_or(0, |b| b.id);
        if !q.incoming.is_empty() {
            s.staged = self.staging.levels(raw);
        }
        while s.in_flight() < self.window {
            let Some(p) = q.incoming.pop_front() else {
                break;
            };
            // One sink lookup per batch, not an Arc clone per request (the count's cache
            // line would bounce between the submitter's core and this one).
            let si = match s.last_sink {
                Some((id, si)) if id == p.batch => si,
                _ => {
                    let b = &q.batches[(p.batch - first) as usize];
                    let si = match s.sinks.iter().position(|x| Arc::ptr_eq(x, &b.sink)) {
                        Some(i) => i,
                        None => {
                            s.sinks.push(b.sink.clone());
                            s.out.push(Vec::new());
                            s.sinks.len() - 1
                        }
                    };
                    s.last_sink = Some((p.batch, si));
                    si
                }
            };
            if let Some(err) = check(&self.store, &p.req) {
                let c = Completion {
                    tag: p.tag,
                    version: p.rv,
                    reply: err,
                    from_cache: false,
                };
                s.complete(si, p.batch, c);
                continue;
            }
            if let (Request::Get { key }, Some(cache)) = (&p.req, &self.cache) {
                self.sampler.see(key);
                // After the request's read version was taken (hot.rs invariant 5).
                if cache.is_active() {
                    cache.prefetch(key);
                    s.probes.push(Probe { p, sink: si });
                    continue;
                }
            }
            s.flights
                .push(Flight::new(raw, p.tag, p.rv, p.now, p.batch, si, p.req).staged(s.staged));
        }
        true
    }

    /// Looks a probe up in the cache: a hit completes it, a miss enters the window.
    fn resolve(&self, raw: Raw<'_>, s: &mut Passes, pr: Probe) {
        let Probe { p, sink } = pr;
        if let (Request::Get { key }, Some(cache)) = (&p.req, &self.cache) {
            // Still after the request's read version was taken (hot.rs invariant 5).
            if cache.is_active() {
                if let Some(v) = cache.lookup(key, p.rv) {
                    s.hits += 1;
                    let c = Completion {
                        tag: p.tag,
                        version: p.rv,
                        reply: Reply::Value(Some(v)),
                        from_cache: true,
                    };
                    s.complete(sink, p.batch, c);
                    return;
                }
                s.misses += 1;
            }
        }
        s.flights
            .push(Flight::new(raw, p.tag, p.rv, p.now, p.batch, sink, p.req).staged(s.staged));
    }

    /// With nothing in flight, polls the queue for up to `idle_spin` before the caller
    /// sleeps on it.
    fn poll_briefly(&self) {
        let start = std::time::Instant::now();
        while start.elapsed() < self.idle_spin {
            let q = self.shard.queue.lock().unwrap_or_else(|e| e.into_inner());
            if !q.incoming.is_empty() || self.stop.load(Ordering::Relaxed) {
                return;
            }
            drop(q);
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
    }

    /// Hands completions to their sinks, then releases the epochs of finished batches
    /// (invariant 2: nothing is read from node memory after this for those requests).
    fn deliver(&self, sinks: &[Arc<Sink>], out: &mut [Vec<Completion>], finished: &mut Vec<u64>) {
        // Count first, so a submitter that has all its completions sees them counted.
        let n: usize = out.iter().map(Vec::len).sum();
        self.counters
            .completed
            .fetch_add(n as u64, Ordering::Relaxed);
        for (sink, done) in sinks.iter().zip(out.iter_mut()) {
            if !done.is_empty() {
                sink.push_all(done.drain(..));
            }
        }
        let mut q = self.shard.queue.lock().unwrap_or_else(|e| e.into_inner());
        // Batch ids are consecutive, so a batch's place in the queue is its id minus the
        // oldest id.
        let first = q.batches.front().map_or(0, |b| b.id);
        for id in finished.drain(..) {
            if let Some(b) = q.batches.get_mut((id - first) as usize) {
                debug_assert_eq!(b.id, id);
                b.remaining -= 1;
            }
        }
        let mut moved = false;
        while q.batches.front().is_some_and(|b| b.remaining == 0) {
            q.batches.pop_front();
            moved = true;
        }
        if moved {
            match q.batches.front() {
                Some(b) => self.shard.slot.hold(b.epoch),
                None => self.shard.slot.clear(),
            }
        }
    }
}
