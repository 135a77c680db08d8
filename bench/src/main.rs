//! `accelkv-bench`: runs YCSB workloads against accelkv and its peers and writes a markdown
//! report, JSON and an SVG plot. `accelkv-bench --help` lists every option;
//! `scripts/ycsb.sh` starts Redis, memcached and accelkv-server and runs the full suite.

use accelkv_bench::record::RecordShape;
use accelkv_bench::report;
use accelkv_bench::runner::Length;
use accelkv_bench::suite::{run_suite, Suite, SuiteResult};
use accelkv_bench::workload::{Dist, Workload};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// YCSB A–F and Honeycomb's cloud-storage workload against accelkv and its peers.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Targets, run one after another: accelkv[=OPTIONS], accelkv-engine[=auto|cpu|gpu][,OPTIONS],
    /// btreemap, rocksdb (in this process), accelkv-tcp=ADDR, accelkv-udp=ADDR,
    /// accelkv-resp=ADDR, redis=ADDR, memcached=ADDR. OPTIONS (comma-separated): mvcc=off
    /// (a benchmark mode: scans are not linearizable), log=<bytes> (log-block threshold),
    /// cache=<buckets> (hot-key cache). Default: every in-process target.
    #[arg(long = "target", short = 't')]
    targets: Vec<String>,
    /// Read engine of the `accelkv-engine` target when it names none: auto (the GPU engine
    /// when an NVIDIA GPU, its driver and NVRTC are present, else the CPU engine), cpu or
    /// gpu. Reports name the engine that ran (accelkv-engine for the CPU engine,
    /// accelkv-gpu for the GPU engine).
    #[arg(long, default_value = "cpu")]
    engine: String,
    /// Workloads: a, b, c, d, e, f, cloud<read %> (50..100), comma separated.
    #[arg(long, default_value = "a,b,c,d,e,f,cloud50,cloud90,cloud100")]
    workloads: String,
    /// Key distributions of the runs: uniform, zipfian, etc (10% of keys get 90% of the
    /// operations); workload D always uses latest.
    #[arg(long, default_value = "uniform,zipfian")]
    dist: String,
    /// Records loaded into each target.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Operations per run (instead of --duration).
    #[arg(long, conflicts_with = "duration")]
    ops: Option<u64>,
    /// Seconds per run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Driver threads, one connection each.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Operations per batch: 1 is YCSB's one at a time; more uses each system's batching
    /// (accelkv frames and engine batches, Redis and memcached pipelines).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Record shape: small (16-byte keys and values), medium (16-byte keys, 100-byte
    /// values) or ycsb (user<N> keys, 10 x 100-byte fields as one value).
    #[arg(long, default_value = "small")]
    record: String,
    /// Target whose throughput the others are divided by in the report.
    #[arg(long)]
    baseline: Option<String>,
    /// Folder for report.md, results.json and throughput.svg.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Password of the accelkv network targets.
    #[arg(long, env = "ACCELKV_PASSWORD")]
    password: Option<String>,
    /// Seed of the generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Compare every value's bytes in full on one read in this many (length, key tag and
    /// version are checked on all).
    #[arg(long, default_value_t = 16)]
    full_check_every: u64,
    /// Tiny scale (2,000 records, 2,000 operations per run) to check the driver and targets.
    #[arg(long)]
    quick: bool,
    /// Run nothing: merge these results.json files (of earlier runs, one target each, say)
    /// into one report, JSON and plot.
    #[arg(long, num_args = 1.., value_name = "RESULTS_JSON")]
    merge: Vec<PathBuf>,
    /// Title of the plot.
    #[arg(long)]
    title: Option<String>,
}

fn merged(files: &[PathBuf]) -> Result<SuiteResult, String> {
    let mut all = SuiteResult::default();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let r: SuiteResult =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        all.loads.extend(r.loads);
        all.runs.extend(r.runs);
    }
    Ok(all)
}

fn parse_list<T>(s: &str, what: &str, f: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| f(x.trim()).ok_or_else(|| format!("unknown {what} '{x}'")))
        .collect()
}

fn suite(a: &Args) -> Result<Suite, String> {
    let engine: accelkv_engine::EngineKind = a.engine.parse()?;
    let targets = if a.targets.is_empty() {
        Suite::local_targets()
    } else {
        a.targets.clone()
    }
    .into_iter()
    .map(|t| match t.as_str() {
        "accelkv-engine" => format!("accelkv-engine={engine}"),
        _ => t,
    })
    .collect();
    let mut s = Suite::quick(targets);
    s.workloads = parse_list(&a.workloads, "workload", Workload::parse)?;
    s.dists = parse_list(&a.dist, "distribution", Dist::parse)?;
    s.password = a.password.clone();
    s.settings.shape = RecordShape::parse(&a.record)
        .ok_or_else(|| format!("unknown record shape '{}' (small or ycsb)", a.record))?;
    s.settings.seed = a.seed;
    s.settings.batch = a.batch.max(1);
    s.settings.threads = a.threads.max(1);
    if !a.quick {
        s.settings.records = a.records.max(1);
        s.settings.length = match a.ops {
            Some(n) => Length::Ops(n),
            None => Length::Time(Duration::from_secs_f64(a.duration.max(0.1))),
        };
        s.settings.full_check_every = a.full_check_every.max(1);
        s.settings.progress = true;
    }
    Ok(s)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let suite = match suite(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("accelkv-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let result = if args.merge.is_empty() {
        run_suite(&suite, |line| eprintln!("{line}"))
    } else {
        match merged(&args.merge) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("accelkv-bench: --merge: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let md = report::markdown(&result, args.baseline.as_deref());
    println!("{md}");
    if let Some(dir) = &args.out {
        let title = args.title.clone().unwrap_or_else(|| {
            format!(
                "YCSB, {}, {} threads, batch {}",
                suite.settings.shape.name(),
                suite.settings.threads,
                suite.settings.batch
            )
        });
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join("report.md"), &md))
            .and_then(|()| std::fs::write(dir.join("results.json"), report::json(&result)));
        if let Err(e) = written {
            eprintln!("accelkv-bench: cannot write to {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        if let Err(e) = report::plot(&result, &title, &dir.join("throughput.svg")) {
            eprintln!("accelkv-bench: plot: {e}");
        }
        eprintln!(
            "wrote {}/report.md, results.json, throughput.svg",
            dir.display()
        );
    }
    if result.failed() {
        eprintln!("accelkv-bench: a target failed or returned a wrong answer (see above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
