//! Read-engine benchmarks (docs/BENCHMARKS.md): the CPU engine with one engine thread
//! against the reference reader running one request at a time on the caller's thread, in
//! the same process, on the same store.
//!
//! `cargo run --release -p accelkv-engine --example engine_bench -- --items 10000000`
//!
//! Both sides produce owned answers (a copied value; scan items in one flat buffer), as a
//! server needs. Suites: uniform GET; Zipfian (θ = 0.99, YCSB's scrambled Zipfian) GET with and without
//! the hot-key cache; SCAN of 3–4 items (Honeycomb's cloud-storage scan) and of 100;
//! throughput against the window G; completion latency at a fixed offered load; `cache`:
//! the hot-key cache against its size on Zipfian and ETC popularity, with hit ratio and the
//! engine's and cache manager's CPU per GET (scripts/cache-eval.sh).

use accelkv_engine::{
    Completion, CpuEngine, EngineConfig, Found, Items, ReadEngine, ReadRef, Request, Sink, Staging,
};
use accelkv_tree::{Config, Store};
use clap::Parser;
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// Requests are allocated by the client thread and freed by the engine thread, and answers
// the other way round; mimalloc handles cross-thread frees far better than glibc's malloc.
// Both the reference reader and the engine run under it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
struct Args {
    /// Items in the store.
    #[arg(long, default_value_t = 10_000_000)]
    items: u64,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Window G for the suites other than the G sweep.
    #[arg(long, default_value_t = 16)]
    window: usize,
    /// Hot-cache buckets for the Zipfian suite (64 bytes each).
    #[arg(long, default_value_t = 1 << 20)]
    cache_buckets: usize,
    /// The hot cache's sampling: one GET in this many is sent to the control plane.
    #[arg(long, default_value_t = EngineConfig::default().sample_every)]
    sample_every: u32,
    /// Cache sizes (buckets) for the cache suite, at most four.
    #[arg(long, default_value = "16384,65536,262144,1048576")]
    cache_sizes: String,
    /// Levels above the leaves walked interleaved as well as the leaves
    /// (`EngineConfig::staging`; 255: every level; absent: `Staging::Auto`), for the engine
    /// threads and the inline reader alike.
    #[arg(long)]
    staged_levels: Option<u8>,
    /// Which suites to run (comma separated): get, inline, zipf, cache, scan, window,
    /// latency.
    #[arg(long, default_value = "get,inline,zipf,scan,window,latency")]
    suites: String,
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// YCSB's ScrambledZipfianGenerator: a Zipfian (θ = 0.99) over 10^10 items with YCSB's
/// precomputed zeta, hashed with FNV-64 and taken modulo the item count.
struct ScrambledZipf {
    items: u64,
    zetan: f64,
    theta: f64,
    alpha: f64,
    eta: f64,
}

impl ScrambledZipf {
    const ITEM_COUNT: f64 = 10_000_000_000.0;
    const ZETAN: f64 = 26.469_028_201_783_02;

    fn new(items: u64) -> ScrambledZipf {
        let theta = 0.99;
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let n = Self::ITEM_COUNT;
        ScrambledZipf {
            items,
            zetan: Self::ZETAN,
            theta,
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - zeta2 / Self::ZETAN),
        }
    }

    fn fnv64(mut v: u64) -> u64 {
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h ^= v & 0xff;
            v >>= 8;
            h = h.wrapping_mul(1_099_511_628_211);
        }
        (h as i64).wrapping_abs() as u64
    }

    fn next(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        let z = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            (Self::ITEM_COUNT * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        Self::fnv64(z) % self.items
    }
}

/// Runs `make` requests through the engine for `secs`, keeping `depth` batches of `batch`
/// in flight; returns completions per second.
fn engine_rate(engine: &CpuEngine, secs: f64, mut make: impl FnMut() -> Request) -> f64 {
    let sink = Sink::new();
    let (batch, depth) = (256usize, 4usize);
    let mut out: Vec<Completion> = Vec::new();
    let mut outstanding = 0;
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        while outstanding < depth * batch {
            engine.submit(&sink, (0..batch as u64).map(|t| (t, make())).collect());
            outstanding += batch;
        }
        out.clear();
        let n = sink.wait(&mut out, batch, Duration::from_millis(100));
        outstanding -= n;
        done += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    // Drain what is still in flight.
    while outstanding > 0 {
        out.clear();
        outstanding -= sink.wait(&mut out, outstanding, Duration::from_secs(5));
    }
    done as f64 / secs
}

fn reference_rate(secs: f64, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..1024 {
            op();
        }
        n += 1024;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn engine(store: &Arc<Store>, window: usize, cache_buckets: usize) -> CpuEngine {
    sampled_engine(
        store,
        window,
        cache_buckets,
        EngineConfig::default().sample_every,
    )
}

fn sampled_engine(
    store: &Arc<Store>,
    window: usize,
    cache_buckets: usize,
    sample_every: u32,
) -> CpuEngine {
    CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads: 1,
            window,
            cache_buckets,
            sample_every,
            staging: staging(STAGED.load(Ordering::Relaxed)),
            ..EngineConfig::default()
        },
    )
}

/// A store of `n` items: keys `key(i)`, values `key(!i)`.
fn load_store(n: u64) -> Arc<Store> {
    eprintln!("loading {n} items ...");
    let mut sorted: Vec<([u8; 16], [u8; 16])> = (0..n).map(|i| (key(i), key(!i))).collect();
    sorted.sort_unstable();
    Arc::new(Store::bulk_load(Config::default(), sorted.iter().map(|(k, v)| (k, v))).expect("load"))
}

/// Facebook's ETC skew as the RISC-V NIC accelerator's evaluation uses it (and YCSB's
/// `hotspot` distribution with `hotspotdatafraction=0.1`, `hotspotopnfraction=0.9`): 10% of
/// the keys get 90% of the requests, uniformly within each set. The hot set is every tenth
/// item number; `key()` scatters the numbers over the key space.
fn etc_item(n: u64, rng: &mut SmallRng) -> u64 {
    let hot = (n / 10).max(1);
    if rng.gen_bool(0.9) {
        rng.gen_range(0..hot) * 10
    } else {
        let i = rng.gen_range(0..n - hot);
        // The i-th item number that is not a multiple of ten.
        i / 9 * 10 + i % 9 + 1
    }
}

/// CPU time (user + system) of this process's threads whose name starts with `prefix`,
/// from /proc/self/task/*/stat (clock ticks of 10 ms; 0 where /proc is missing).
fn thread_cpu(prefix: &str) -> Duration {
    let ticks = |stat: &str| -> u64 {
        // Fields after the parenthesised name: state is field 3; utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
    };
    let mut total = 0;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.starts_with(prefix) {
                total += ticks(&std::fs::read_to_string(t.path().join("stat")).unwrap_or_default());
            }
        }
    }
    Duration::from_millis(total * 10)
}

/// One measurement of the cache suite: GETs/s, hit share, engine-thread CPU ns per GET.
struct CachePoint {
    rate: f64,
    hits: f64,
    cpu_ns: f64,
    /// The cache manager's CPU per GET (sampling's control plane).
    mgr_ns: f64,
}

/// GETs of the pre-drawn `items` through an engine with `buckets` cache buckets (0: none):
/// 3 s of warm-up (the control plane learns the hot keys), then `secs` measured.
fn cache_point(a: &Args, store: &Arc<Store>, buckets: usize, items: &[u64]) -> CachePoint {
    let (window, secs) = (a.window, a.seconds);
    let eng = sampled_engine(store, window, buckets, a.sample_every);
    let mut i = 0usize;
    let mut next = || {
        i = (i + 1) % items.len();
        Request::get(&key(items[i]))
    };
    engine_rate(&eng, 3.0, &mut next);
    let before = ReadEngine::stats(&eng);
    let cpu0 = thread_cpu("accelkv-engine");
    let mgr0 = thread_cpu("accelkv-cache");
    let t0 = Instant::now();
    let rate = engine_rate(&eng, secs, &mut next);
    let cpu = thread_cpu("accelkv-engine") - cpu0;
    let mgr = thread_cpu("accelkv-cache") - mgr0;
    let ops = rate * t0.elapsed().as_secs_f64();
    let after = ReadEngine::stats(&eng);
    let hits = after.cache_hits - before.cache_hits;
    let total = hits + after.cache_misses - before.cache_misses;
    CachePoint {
        rate,
        hits: hits as f64 / total.max(1) as f64,
        cpu_ns: cpu.as_nanos() as f64 / ops.max(1.0),
        mgr_ns: mgr.as_nanos() as f64 / ops.max(1.0),
    }
}

/// The RISC-V NIC accelerator's experiment: GET throughput, hit ratio and engine CPU per GET
/// against the cache's size, on Zipfian and ETC popularity, each against the same engine
/// without a cache. A store takes at most four write observers, so each distribution loads
/// its own store.
fn cache_suite(a: &Args, load: &dyn Fn() -> Arc<Store>) {
    let sizes: Vec<usize> = a
        .cache_sizes
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let n = a.items;
    println!(
        "\n| popularity | cache buckets | hits | GET/s | vs no cache | engine CPU per GET | cache manager CPU per GET |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for dist in ["zipf", "etc"] {
        let store = load();
        let mut rng = SmallRng::seed_from_u64(21);
        let z = ScrambledZipf::new(n);
        let items: Vec<u64> = (0..1 << 22)
            .map(|_| match dist {
                "zipf" => z.next(&mut rng),
                _ => etc_item(n, &mut rng),
            })
            .collect();
        let name = if dist == "zipf" {
            "Zipfian 0.99 (YCSB)"
        } else {
            "ETC (10% of keys, 90% of GETs)"
        };
        let plain = cache_point(a, &store, 0, &items);
        println!(
            "| {name} | none | – | {:.0} | 1.00× | {:.0} ns | – |",
            plain.rate, plain.cpu_ns
        );
        for &b in sizes.iter().take(4) {
            let p = cache_point(a, &store, b, &items);
            println!(
                "| {name} | {b} | {:.0}% | {:.0} | {:.2}× | {:.0} ns | {:.0} ns |",
                p.hits * 100.0,
                p.rate,
                p.rate / plain.rate,
                p.cpu_ns,
                p.mgr_ns
            );
        }
    }
}

/// `--staged-levels`, for every engine this run starts ([`AUTO`]: absent).
static STAGED: AtomicU8 = AtomicU8::new(AUTO);
const AUTO: u8 = 254;

fn staging(levels: u8) -> Staging {
    match levels {
        AUTO => Staging::Auto,
        n => Staging::Levels(n),
    }
}

fn main() {
    let a = Args::parse();
    STAGED.store(a.staged_levels.unwrap_or(AUTO), Ordering::Relaxed);
    let n = a.items;
    let store = load_store(n);
    let secs = a.seconds;
    let mut rng = SmallRng::seed_from_u64(42);
    let suites: Vec<&str> = a.suites.split(',').collect();
    println!(
        "{n} items, 16-byte keys and values, one engine thread, G = {}\n",
        a.window
    );
    if suites
        .iter()
        .any(|s| ["get", "inline", "scan", "zipf"].contains(s))
    {
        println!("| workload | reference reader (ops/s) | engine (ops/s) | engine / reference |");
        println!("|---|---|---|---|");
    }
    let row = |name: &str, r: f64, e: f64| {
        println!("| {name} | {r:.0} | {e:.0} | {:.2}× |", e / r);
    };
    if suites.contains(&"get") {
        let r = reference_rate(secs, || {
            let k = key(rng.gen_range(0..n));
            std::hint::black_box(store.get(&k).expect("get"));
        });
        let eng = engine(&store, a.window, 0);
        let mut rng = SmallRng::seed_from_u64(7);
        let e = engine_rate(&eng, secs, || Request::get(&key(rng.gen_range(0..n))));
        row("GET, uniform", r, e);
    }
    if suites.contains(&"inline") {
        // What a server loop does: batches of 64 GETs on this thread (no engine thread),
        // each value copied once into a reply buffer; the reference reader copies the same
        // way, one key at a time.
        let mut out = Vec::with_capacity(1 << 16);
        let r = reference_rate(secs, || {
            let k = key(rng.gen_range(0..n));
            out.clear();
            std::hint::black_box(
                store
                    .get_with(&k, |v| out.extend_from_slice(v))
                    .expect("get"),
            );
        });
        let eng = CpuEngine::start(
            store.clone(),
            EngineConfig {
                threads: 0,
                window: a.window,
                staging: staging(STAGED.load(Ordering::Relaxed)),
                ..EngineConfig::default()
            },
        );
        let mut reader = eng.reader();
        let mut rng = SmallRng::seed_from_u64(11);
        let keys: Vec<[u8; 16]> = (0..64).map(|_| key(0)).collect();
        let mut keys = keys;
        let start = Instant::now();
        let mut done = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            for k in keys.iter_mut() {
                *k = key(rng.gen_range(0..n));
            }
            let reqs: Vec<ReadRef<'_>> = keys.iter().map(|k| ReadRef::Get(k)).collect();
            out.clear();
            reader.run(&reqs, |_, f| {
                if let Found::Value(Some(v), _) = f {
                    out.extend_from_slice(v);
                }
            });
            std::hint::black_box(&out);
            done += 64;
        }
        let e = done as f64 / start.elapsed().as_secs_f64();
        row(
            "GET, uniform, inline batches of 64 on the caller's thread",
            r,
            e,
        );
    }
    if suites.contains(&"scan") {
        for (name, len) in [("SCAN of 3–4 items", 0usize), ("SCAN of 100 items", 100)] {
            let pick = |rng: &mut SmallRng| {
                if len == 0 {
                    3 + rng.gen_range(0..2)
                } else {
                    len
                }
            };
            let r = reference_rate(secs, || {
                let k = key(rng.gen_range(0..n));
                let l = pick(&mut rng);
                let mut items = Items::default();
                store
                    .scan_with(&k, None, l, |k, v| items.push(k, v))
                    .expect("in memory");
                std::hint::black_box(items);
            });
            let eng = engine(&store, a.window, 0);
            let mut rng2 = SmallRng::seed_from_u64(8);
            let e = engine_rate(&eng, secs, || {
                let l = pick(&mut rng2);
                Request::scan(&key(rng2.gen_range(0..n)), None, l)
            });
            row(name, r, e);
        }
    }
    if suites.contains(&"zipf") {
        let z = ScrambledZipf::new(n);
        let r = reference_rate(secs, || {
            let k = key(z.next(&mut rng));
            std::hint::black_box(store.get(&k).expect("get"));
        });
        let plain = {
            let eng = engine(&store, a.window, 0);
            let mut rng = SmallRng::seed_from_u64(9);
            engine_rate(&eng, secs, || Request::get(&key(z.next(&mut rng))))
        };
        // The cache attaches to the store once; the cacheless engine above has stopped.
        let (cached, hit) = {
            let eng = engine(&store, a.window, a.cache_buckets);
            let mut rng = SmallRng::seed_from_u64(10);
            // Warm up: let the control plane learn the hot keys.
            engine_rate(&eng, 3.0, || Request::get(&key(z.next(&mut rng))));
            let before = ReadEngine::stats(&eng);
            let rate = engine_rate(&eng, secs, || Request::get(&key(z.next(&mut rng))));
            let after = ReadEngine::stats(&eng);
            let hits = after.cache_hits - before.cache_hits;
            let total = hits + after.cache_misses - before.cache_misses;
            (rate, hits as f64 / total.max(1) as f64)
        };
        row("GET, Zipfian 0.99, no cache", r, plain);
        row(
            &format!(
                "GET, Zipfian 0.99, hot cache of {} buckets ({:.0}% hits)",
                a.cache_buckets,
                hit * 100.0
            ),
            r,
            cached,
        );
        println!(
            "\nZipfian GET, engine with cache / engine without: {:.2}×",
            cached / plain
        );
    }
    if suites.contains(&"window") {
        println!("\n| G (requests in flight per engine thread) | uniform GET ops/s |");
        println!("|---|---|");
        for g in [1usize, 2, 4, 8, 16, 32, 64] {
            let eng = engine(&store, g, 0);
            let mut rng = SmallRng::seed_from_u64(11);
            let e = engine_rate(&eng, secs.min(2.0), || {
                Request::get(&key(rng.gen_range(0..n)))
            });
            println!("| {g} | {e:.0} |");
        }
    }
    if suites.contains(&"latency") {
        let eng = engine(&store, a.window, 0);
        println!("\n| offered load (GET/s, one request per submission) | p50 | p99 | p99.9 |");
        println!("|---|---|---|---|");
        for rate in [50_000.0, 100_000.0, 200_000.0] {
            let h = latency(&eng, n, rate, secs);
            println!(
                "| {:.0} | {:.1} µs | {:.1} µs | {:.1} µs |",
                rate,
                h.value_at_quantile(0.5) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                h.value_at_quantile(0.999) as f64 / 1000.0
            );
        }
    }
    if suites.contains(&"cache") {
        drop(store);
        cache_suite(&a, &|| load_store(n));
    }
}

/// Open-loop GETs at `rate` per second, one request per batch; latency from the scheduled
/// send time to completion, in nanoseconds.
fn latency(eng: &CpuEngine, n: u64, rate: f64, secs: f64) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(100, 10_000_000_000, 3).expect("histogram");
    let sink = Sink::new();
    let mut rng = SmallRng::seed_from_u64(13);
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut sent: Vec<Instant> = Vec::new();
    let mut next = start;
    let mut out = Vec::new();
    let mut received = 0;
    while start.elapsed().as_secs_f64() < secs || received < sent.len() {
        let now = Instant::now();
        if now >= next && start.elapsed().as_secs_f64() < secs {
            eng.submit(
                &sink,
                vec![(sent.len() as u64, Request::get(&key(rng.gen_range(0..n))))],
            );
            sent.push(next);
            next += interval;
            continue;
        }
        out.clear();
        sink.poll(&mut out);
        let t = Instant::now();
        for c in &out {
            let lat = t.duration_since(sent[c.tag as usize]).as_nanos() as u64;
            h.saturating_record(lat);
        }
        received += out.len();
    }
    h
}
