//! GPU engine benchmark (docs/BENCHMARKS.md, "GPU engine"): batched GET and SCAN of 4 items
//! over N items with 16-byte keys and values, the GPU engine against the CPU engine using
//! every core of the machine, in one process on one store. Reports requests per second,
//! bytes the kernels read from host memory (across PCIe) per request, and batch latency
//! against batch size. Every answer is checked (values derive from their keys).
//!
//! `cargo run --release -p accelkv-gpu --example gpu_bench -- --items 10000000`
//! (`--engines cpu,emulated` runs without a GPU: the emulation is a correctness aid, not a
//! performance peer.)

use accelkv_engine::{CpuEngine, EngineConfig, ReadEngine, Reply, Request, Sink};
use accelkv_gpu::{GpuConfig, GpuEngine};
use accelkv_tree::{Config, Store};
use clap::Parser;
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    /// Items in the store.
    #[arg(long, default_value_t = 10_000_000)]
    items: u64,
    /// Engines, comma separated: cpu, gpu, emulated.
    #[arg(long, default_value = "cpu,gpu")]
    engines: String,
    /// Requests per batch for the throughput runs.
    #[arg(long, default_value_t = 16384)]
    batch: usize,
    /// Submitting threads (batches in flight) for the throughput runs.
    #[arg(long, default_value_t = 8)]
    submitters: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Batch sizes of the latency sweep (one batch in flight).
    #[arg(long, default_value = "1,16,256,4096,16384")]
    latency_batches: String,
    /// GPU engine streams.
    #[arg(long, default_value_t = 4)]
    streams: usize,
    /// Device memory for the interior-node cache, MiB.
    #[arg(long, default_value_t = GpuConfig::default().cache_bytes >> 20)]
    cache_mib: usize,
}

fn key(i: u64) -> [u8; 16] {
    // Scrambled so neighbouring indices land in different leaves.
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as u128 | (u128::from(i) << 64)).to_be_bytes()
}

fn value(k: &[u8]) -> [u8; 16] {
    let mut v = [0u8; 16];
    for (i, b) in k.iter().enumerate() {
        v[15 - i] = b ^ 0x5A;
    }
    v
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Get,
    Scan4,
}

fn requests(rng: &mut SmallRng, n: usize, items: u64, kind: Kind) -> Vec<(u64, Request)> {
    (0..n as u64)
        .map(|t| {
            let k = key(rng.gen_range(0..items));
            let r = match kind {
                Kind::Get => Request::get(&k),
                Kind::Scan4 => Request::scan(&k, None, 4),
            };
            (t, r)
        })
        .collect()
}

/// Checks every answer; returns how many were wrong.
fn check(reqs: &[(u64, Request)], done: &[accelkv_engine::Completion]) -> u64 {
    let mut bad = 0;
    for c in done {
        let ok = match (&reqs[c.tag as usize].1, &c.reply) {
            (Request::Get { key }, Reply::Value(Some(v))) => v.as_slice() == value(key),
            (Request::Scan { lo, .. }, Reply::Items(items)) => {
                let v = items.to_vec();
                !v.is_empty()
                    && v[0].0 == *lo
                    && v.windows(2).all(|w| w[0].0 < w[1].0)
                    && v.iter().all(|(k, x)| x.as_slice() == value(k))
            }
            _ => false,
        };
        bad += u64::from(!ok);
    }
    bad
}

fn run_batch(
    engine: &dyn ReadEngine,
    sink: &Arc<Sink>,
    reqs: Vec<(u64, Request)>,
) -> (Vec<(u64, Request)>, Vec<accelkv_engine::Completion>) {
    let n = reqs.len();
    engine.submit(sink, reqs.clone());
    let mut done = Vec::with_capacity(n);
    while done.len() < n {
        sink.wait(&mut done, n, Duration::from_secs(60));
    }
    (reqs, done)
}

fn throughput(engine: &dyn ReadEngine, a: &Args, kind: Kind, wrong: &AtomicU64) -> f64 {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..a.submitters {
            let (stop, ops) = (&stop, &ops);
            s.spawn(move || {
                let sink = Sink::new();
                let mut rng = SmallRng::seed_from_u64(t as u64 + 7);
                while !stop.load(Ordering::Relaxed) {
                    let reqs = requests(&mut rng, a.batch, a.items, kind);
                    let (reqs, done) = run_batch(engine, &sink, reqs);
                    wrong.fetch_add(check(&reqs, &done), Ordering::Relaxed);
                    ops.fetch_add(done.len() as u64, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(a.seconds));
        stop.store(true, Ordering::Relaxed);
    });
    ops.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn latency(
    engine: &dyn ReadEngine,
    a: &Args,
    batch: usize,
    kind: Kind,
    wrong: &AtomicU64,
) -> (u64, u64) {
    let mut h = Histogram::<u64>::new(3).expect("histogram");
    let sink = Sink::new();
    let mut rng = SmallRng::seed_from_u64(99);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < a.seconds / 2.0 {
        let reqs = requests(&mut rng, batch, a.items, kind);
        let t = Instant::now();
        let (reqs, done) = run_batch(engine, &sink, reqs);
        h.record(t.elapsed().as_micros() as u64).expect("record");
        wrong.fetch_add(check(&reqs, &done), Ordering::Relaxed);
    }
    (h.value_at_quantile(0.5), h.value_at_quantile(0.99))
}

fn main() {
    let a = Args::parse();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    eprintln!("loading {} items (16-byte keys and values)...", a.items);
    let t = Instant::now();
    let mut idx: Vec<[u8; 16]> = (0..a.items).map(key).collect();
    idx.sort_unstable();
    let store = Arc::new(
        Store::bulk_load(Config::default(), idx.iter().map(|k| (*k, value(k)))).expect("bulk load"),
    );
    drop(idx);
    eprintln!("loaded in {:.1} s", t.elapsed().as_secs_f64());
    let wrong = AtomicU64::new(0);
    println!("| engine | GET/s | SCAN4/s | host bytes/GET | host bytes/SCAN4 |");
    println!("|---|---:|---:|---:|---:|");
    let mut lat = Vec::new();
    for name in a.engines.split(',').map(str::trim) {
        let gpu = |emulated: bool| {
            let cfg = GpuConfig {
                streams: a.streams,
                max_batch: a.batch.max(1),
                cache_bytes: a.cache_mib << 20,
            };
            if emulated {
                GpuEngine::start_emulated(store.clone(), cfg)
            } else {
                GpuEngine::start(store.clone(), cfg)
            }
        };
        let (cpu, gpu) = match name {
            "cpu" => (
                Some(CpuEngine::start(
                    store.clone(),
                    EngineConfig {
                        threads: cores,
                        ..EngineConfig::default()
                    },
                )),
                None,
            ),
            "gpu" | "emulated" => match gpu(name == "emulated") {
                Ok(e) => {
                    eprintln!("{name}: {}", e.device());
                    (None, Some(e))
                }
                Err(e) => {
                    eprintln!("{name}: not run: {e}");
                    continue;
                }
            },
            other => {
                eprintln!("unknown engine {other}");
                std::process::exit(2);
            }
        };
        let engine: &dyn ReadEngine = match (&cpu, &gpu) {
            (Some(c), _) => c,
            (None, Some(g)) => g,
            (None, None) => unreachable!("one engine was started"),
        };
        let stats = || gpu.as_ref().map(GpuEngine::gpu_stats);
        let before = stats();
        let gets = throughput(engine, &a, Kind::Get, &wrong);
        let mid = stats();
        let scans = throughput(engine, &a, Kind::Scan4, &wrong);
        let after = stats();
        let per =
            |x: &Option<accelkv_gpu::GpuStats>, y: &Option<accelkv_gpu::GpuStats>| match (x, y) {
                (Some(x), Some(y)) if y.device_requests > x.device_requests => format!(
                    "{:.0}",
                    (y.host_bytes_read - x.host_bytes_read) as f64
                        / (y.device_requests - x.device_requests) as f64
                ),
                _ => "-".into(),
            };
        println!(
            "| {name} | {gets:.0} | {scans:.0} | {} | {} |",
            per(&before, &mid),
            per(&mid, &after)
        );
        for b in a
            .latency_batches
            .split(',')
            .filter_map(|x| x.trim().parse::<usize>().ok())
        {
            let (g50, g99) = latency(engine, &a, b, Kind::Get, &wrong);
            let (s50, s99) = latency(engine, &a, b, Kind::Scan4, &wrong);
            lat.push(format!("| {name} | {b} | {g50} | {g99} | {s50} | {s99} |"));
        }
        if let Some(s) = after {
            eprintln!("{name}: {s:?}");
            // Interior nodes the device cache holds against those that found it full: what
            // share of the tree's interior levels a lookup reads from device memory.
            let all = s.cached_nodes + s.uncached_nodes;
            println!(
                "\n{name}: interior-node cache ({} MiB) holds {} of {} interior nodes ({:.1}%); \
                 {} kernel launches, {} requests answered by the host instead",
                a.cache_mib,
                s.cached_nodes,
                all,
                100.0 * s.cached_nodes as f64 / all.max(1) as f64,
                s.launches,
                s.fallbacks
            );
        }
    }
    println!("\n| engine | batch | GET p50 µs | GET p99 µs | SCAN4 p50 µs | SCAN4 p99 µs |");
    println!("|---|---:|---:|---:|---:|---:|");
    for l in lat {
        println!("{l}");
    }
    let w = wrong.load(Ordering::Relaxed);
    if w > 0 {
        eprintln!("{w} wrong answers");
        std::process::exit(1);
    }
}
