//! The driver: a load phase that inserts the records, and run phases in which each thread
//! runs YCSB's closed loop (one batch of operations at a time) against its own connection,
//! records latencies in HdrHistograms, and validates what it reads: a read must find its
//! record with a value carrying its key and a version the driver wrote; a scan must start at
//! its key and return records in key order, each valid. A wrong answer fails the run.

use crate::generator::InsertCounter;
use crate::record::{check_value, make_value, RecordShape, Versions};
use crate::target::{Conn, Op, Outcome, Target, TargetError};
use crate::workload::{Dist, Kind, OpChooser, Workload};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// How long a run lasts.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    /// This many operations in all.
    Ops(u64),
    /// This long.
    Time(Duration),
}

/// Settings of one target's load and runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Driver threads (one connection each).
    pub threads: usize,
    /// Operations per batch (1: YCSB's one at a time).
    pub batch: usize,
    /// Records loaded.
    pub records: u64,
    /// Length of each run.
    pub length: Length,
    /// Record shape.
    pub shape: RecordShape,
    /// Seed of the threads' generators.
    pub seed: u64,
    /// Check every value's filler bytes on one read in this many (length, key tag and
    /// version are checked on every one).
    pub full_check_every: u64,
    /// Show progress bars.
    pub progress: bool,
}

/// Latency summary of one kind of operation, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// Operations.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let us = |q| h.value_at_quantile(q) as f64 / 1000.0;
        Latency {
            count: h.len(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
        }
    }
}

/// One run's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// Target name.
    pub target: String,
    /// Workload name.
    pub workload: String,
    /// Key distribution.
    pub dist: String,
    /// Record shape.
    pub shape: String,
    /// Driver threads.
    pub threads: usize,
    /// Operations per batch.
    pub batch: usize,
    /// Records present when the run started.
    pub records: u64,
    /// Operations completed.
    pub ops: u64,
    /// Seconds the run took.
    pub secs: f64,
    /// Operations per second.
    pub throughput: f64,
    /// Latency of all operations.
    pub all: Option<Latency>,
    /// Latency per kind of operation.
    pub per_kind: BTreeMap<String, Latency>,
    /// Reads and scans whose answers were validated.
    pub validated: u64,
    /// Why the run failed (a wrong answer or an error), if it did.
    pub error: Option<String>,
    /// Why the run was skipped (the target cannot run the workload), if it was.
    pub skipped: Option<String>,
    /// Bytes written to the block devices per operation during the run (whole devices, see
    /// [`device_write_bytes`]; in-process targets with a device only).
    #[serde(default)]
    pub device_bytes_per_op: Option<f64>,
}

/// State kept across the runs of one target: inserted records and issued versions.
pub struct TargetState {
    inserts: Arc<InsertCounter>,
    version: Arc<AtomicU64>,
    /// Where the version counter started: microseconds since the Unix epoch at load, so a
    /// value left in a server by an earlier run has a smaller version and is caught.
    base: u64,
}

fn bar(show: bool, len: u64, msg: String) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg:32} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// Inserts `settings.records` records (key numbers 0..records) with `threads` connections,
/// batches of 64; returns the state for the runs and the load rate.
pub fn load(target: &dyn Target, s: &Settings) -> Result<(TargetState, f64), TargetError> {
    let next = AtomicU64::new(0);
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64);
    let version = Arc::new(AtomicU64::new(base));
    let pb = bar(s.progress, s.records, format!("load {}", target.name()));
    let start = Instant::now();
    let failed: Mutex<Option<TargetError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..s.threads.max(1) {
            let (next, version, pb, failed) = (&next, &version, &pb, &failed);
            scope.spawn(move || {
                let run = || -> Result<(), TargetError> {
                    let mut conn = target.connect()?;
                    let mut out = Vec::new();
                    loop {
                        let from = next.fetch_add(64, Ordering::Relaxed);
                        if from >= s.records {
                            return Ok(());
                        }
                        let to = (from + 64).min(s.records);
                        let ops: Vec<Op> = (from..to)
                            .map(|n| write_op(s.shape, n, version, true))
                            .collect();
                        out.clear();
                        conn.execute(&ops, &mut out)?;
                        if out.iter().any(|o| *o != Outcome::Written) {
                            return Err(TargetError("a load insert was not acknowledged".into()));
                        }
                        pb.inc(to - from);
                    }
                };
                if let Err(e) = run() {
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
            });
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let rate = s.records as f64 / start.elapsed().as_secs_f64();
    Ok((
        TargetState {
            inserts: Arc::new(InsertCounter::new(s.records)),
            version,
            base,
        },
        rate,
    ))
}

fn write_op(shape: RecordShape, keynum: u64, version: &AtomicU64, insert: bool) -> Op {
    let mut key = Vec::new();
    shape.key(keynum, &mut key);
    let v = version.fetch_add(1, Ordering::Relaxed) + 1;
    let mut value = Vec::new();
    make_value(&key, v, shape.value_len(), &mut value);
    if insert {
        Op::Insert(key, value)
    } else {
        Op::Update(key, value)
    }
}

/// Per-thread tallies.
struct Tally {
    hists: BTreeMap<Kind, Histogram<u64>>,
    all: Histogram<u64>,
    ops: u64,
    validated: u64,
    /// When this thread started and finished its loop.
    span: Option<(Instant, Instant)>,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(100, 60_000_000_000, 3).expect("valid histogram bounds")
}

impl Tally {
    fn new() -> Tally {
        Tally {
            hists: BTreeMap::new(),
            all: hist(),
            ops: 0,
            validated: 0,
            span: None,
        }
    }

    fn record(&mut self, kind: Kind, ns: u64) {
        let ns = ns.clamp(100, 60_000_000_000);
        self.hists
            .entry(kind)
            .or_insert_with(hist)
            .saturating_record(ns);
        self.all.saturating_record(ns);
        self.ops += 1;
    }
}

/// One planned YCSB operation of a batch; the i-th is the i-th first-phase operation (a
/// read-modify-write's write goes to the second phase).
struct Planned {
    kind: Kind,
    keynum: u64,
}

/// Runs `workload` under `dist` against `target` (loaded, with `state`).
/// Bytes written to the machine's block devices so far (sectors written in
/// /sys/block/*/stat, loop, ram and zram devices left out; `ACCELKV_BENCH_DEVICE=vda` picks
/// one). Device-wide: it counts file-system journal and metadata writes too, and every
/// process's writes, so the bench should be the only writer.
pub fn device_write_bytes() -> Option<u64> {
    let only = std::env::var("ACCELKV_BENCH_DEVICE").ok();
    let mut total = None;
    for e in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let skip = match &only {
            Some(d) => *d != name,
            None => ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)),
        };
        if skip {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
        total = Some(total.unwrap_or(0) + sectors * 512);
    }
    total
}

pub fn run(
    target: &dyn Target,
    state: &TargetState,
    workload: Workload,
    dist: Dist,
    s: &Settings,
    run_index: u64,
) -> RunResult {
    let records = state.inserts.last().wrapping_add(1);
    let mut result = RunResult {
        target: target.name(),
        workload: workload.name(),
        dist: workload.dist(dist).name().into(),
        shape: s.shape.name().into(),
        threads: s.threads,
        batch: s.batch,
        records,
        ops: 0,
        secs: 0.0,
        throughput: 0.0,
        all: None,
        per_kind: BTreeMap::new(),
        validated: 0,
        error: None,
        skipped: None,
        device_bytes_per_op: None,
    };
    if workload.scans() && !target.supports_scan() {
        result.skipped = Some(format!("{} does not scan", target.name()));
        return result;
    }
    let expected_ops = match s.length {
        Length::Ops(n) => n,
        Length::Time(_) => 0,
    };
    let remaining = AtomicU64::new(expected_ops);
    let stop = AtomicBool::new(false);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let tallies: Mutex<Vec<Tally>> = Mutex::new(Vec::new());
    let threads = s.threads.max(1);
    let barrier = Barrier::new(threads + 1);
    let (pb_len, label) = match s.length {
        Length::Ops(n) => (
            n,
            format!("{} {} {}", result.target, result.workload, result.dist),
        ),
        Length::Time(d) => (
            d.as_secs().max(1),
            format!("{} {} {} (s)", result.target, result.workload, result.dist),
        ),
    };
    let pb = bar(s.progress, pb_len, label);
    let io_before = target.uses_device().then(device_write_bytes).flatten();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (remaining, stop, failed, tallies, barrier, pb) =
                (&remaining, &stop, &failed, &tallies, &barrier, &pb);
            scope.spawn(move || {
                let mut tally = Tally::new();
                let conn = target.connect();
                barrier.wait();
                let began = Instant::now();
                let outcome = match conn {
                    Ok(mut conn) => thread_loop(
                        conn.as_mut(),
                        state,
                        workload,
                        dist,
                        s,
                        (records, expected_ops),
                        s.seed ^ (run_index << 32) ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9),
                        remaining,
                        stop,
                        pb,
                        &mut tally,
                    ),
                    Err(e) => Err(e.0),
                };
                tally.span = Some((began, Instant::now()));
                if let Err(e) = outcome {
                    stop.store(true, Ordering::Relaxed);
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
                tallies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(tally);
            });
        }
        barrier.wait();
        let start = Instant::now();
        if let Length::Time(d) = s.length {
            while start.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                pb.set_position(start.elapsed().as_secs());
            }
            stop.store(true, Ordering::Relaxed);
        }
    });
    pb.finish_and_clear();
    let mut all = hist();
    let mut kinds: BTreeMap<Kind, Histogram<u64>> = BTreeMap::new();
    let tallies = tallies.into_inner().unwrap_or_else(|e| e.into_inner());
    // The run lasts from the first thread's start to the last thread's end.
    let first = tallies.iter().filter_map(|t| t.span).map(|s| s.0).min();
    let last = tallies.iter().filter_map(|t| t.span).map(|s| s.1).max();
    let elapsed = match (first, last) {
        (Some(a), Some(b)) => b - a,
        _ => Duration::ZERO,
    };
    for t in tallies {
        result.ops += t.ops;
        result.validated += t.validated;
        all.add(&t.all).expect("same bounds");
        for (k, h) in t.hists {
            kinds
                .entry(k)
                .or_insert_with(hist)
                .add(&h)
                .expect("same bounds");
        }
    }
    for (k, h) in kinds {
        result
            .per_kind
            .insert(k.name().to_string(), Latency::of(&h));
    }
    result.secs = elapsed.as_secs_f64();
    result.throughput = result.ops as f64 / result.secs.max(1e-9);
    if let (Some(a), Some(b)) = (io_before, device_write_bytes()) {
        result.device_bytes_per_op = Some(b.saturating_sub(a) as f64 / result.ops.max(1) as f64);
    }
    if !all.is_empty() {
        result.all = Some(Latency::of(&all));
    }
    result.error = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    result
}

#[allow(clippy::too_many_arguments)]
fn thread_loop(
    conn: &mut dyn Conn,
    state: &TargetState,
    workload: Workload,
    dist: Dist,
    s: &Settings,
    (records, expected_ops): (u64, u64),
    seed: u64,
    remaining: &AtomicU64,
    stop: &AtomicBool,
    pb: &ProgressBar,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut chooser = OpChooser::new(workload, dist, records, expected_ops);
    let mut planned: Vec<Planned> = Vec::with_capacity(s.batch);
    let mut first: Vec<Op> = Vec::with_capacity(s.batch);
    let mut second: Vec<Op> = Vec::new();
    let mut out = Vec::with_capacity(s.batch);
    let mut out2 = Vec::new();
    let mut key = Vec::new();
    let by_ops = matches!(s.length, Length::Ops(_));
    let mut checks = 1u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let n = if by_ops {
            let want = s.batch.max(1) as u64;
            let got = remaining
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                    Some(r.saturating_sub(want))
                })
                .unwrap_or(0)
                .min(want);
            if got == 0 {
                return Ok(());
            }
            got as usize
        } else {
            s.batch.max(1)
        };
        planned.clear();
        first.clear();
        second.clear();
        for _ in 0..n {
            let kind = chooser.kind(&mut rng);
            let keynum = match kind {
                Kind::Insert => state.inserts.next(),
                _ => chooser.keynum(&mut rng, &state.inserts),
            };
            planned.push(Planned { kind, keynum });
            match kind {
                Kind::Read | Kind::Rmw => {
                    s.shape.key(keynum, &mut key);
                    first.push(Op::Read(key.clone()));
                    if kind == Kind::Rmw {
                        second.push(write_op(s.shape, keynum, &state.version, false));
                    }
                }
                Kind::Update => first.push(write_op(s.shape, keynum, &state.version, false)),
                Kind::Insert => first.push(write_op(s.shape, keynum, &state.version, true)),
                Kind::Scan => {
                    s.shape.key(keynum, &mut key);
                    first.push(Op::Scan(key.clone(), chooser.scan_len(&mut rng)));
                }
            }
        }
        out.clear();
        out2.clear();
        let t0 = Instant::now();
        conn.execute(&first, &mut out).map_err(|e| e.0)?;
        let t1 = Instant::now();
        if !second.is_empty() {
            conn.execute(&second, &mut out2).map_err(|e| e.0)?;
        }
        let t2 = Instant::now();
        if out.len() != first.len() || out2.len() != second.len() {
            return Err(format!(
                "{} outcomes for {} operations",
                out.len() + out2.len(),
                first.len() + second.len()
            ));
        }
        let versions = Versions {
            after: state.base,
            upto: state.version.load(Ordering::Relaxed),
        };
        for (p, (op, outcome)) in planned.iter().zip(first.iter().zip(&out)) {
            let ns = match p.kind {
                Kind::Rmw => (t2 - t0).as_nanos() as u64,
                _ => (t1 - t0).as_nanos() as u64,
            };
            tally.record(p.kind, ns);
            // Every `full_check_every`-th answer is compared byte for byte.
            checks = checks.saturating_sub(1);
            let full = checks == 0;
            if full {
                checks = s.full_check_every.max(1);
            }
            match (op, outcome) {
                (Op::Read(k), Outcome::Value(v)) => {
                    let Some(v) = v else {
                        return Err(format!(
                            "read of existing key {} found nothing",
                            String::from_utf8_lossy(k)
                        ));
                    };
                    check_value(k, v, s.shape.value_len(), versions, full).map_err(|e| {
                        format!("wrong value for key {}: {e:?}", String::from_utf8_lossy(k))
                    })?;
                    tally.validated += 1;
                }
                (Op::Scan(k, count), Outcome::Items(items)) => {
                    check_scan(k, *count, items, s.shape.value_len(), versions, full)?;
                    tally.validated += 1;
                }
                (Op::Update(..) | Op::Insert(..), Outcome::Written) => {
                    if p.kind == Kind::Insert {
                        state.inserts.acknowledge(p.keynum);
                    }
                }
                (op, o) => return Err(format!("operation {op:?} answered with {o:?}")),
            }
        }
        if out2.iter().any(|o| *o != Outcome::Written) {
            return Err("a read-modify-write's write was not acknowledged".into());
        }
        if by_ops {
            pb.inc(n as u64);
        }
    }
}

fn check_scan(
    start: &[u8],
    count: usize,
    items: &[(Vec<u8>, Vec<u8>)],
    len: usize,
    versions: Versions,
    full: bool,
) -> Result<(), String> {
    let shown = || String::from_utf8_lossy(start).into_owned();
    match items.first() {
        None => {
            return Err(format!(
                "scan from existing key {} returned nothing",
                shown()
            ))
        }
        Some((k, _)) if k.as_slice() != start => {
            return Err(format!(
                "scan from existing key {} started at {}",
                shown(),
                String::from_utf8_lossy(k)
            ))
        }
        Some(_) => {}
    }
    if items.len() > count {
        return Err(format!("scan of {count} returned {}", items.len()));
    }
    for w in items.windows(2) {
        if w[0].0 >= w[1].0 {
            return Err(format!("scan from {} out of key order", shown()));
        }
    }
    for (k, v) in items {
        check_value(k, v, len, versions, full).map_err(|e| {
            format!(
                "scan from {} returned a wrong value for {}: {e:?}",
                shown(),
                String::from_utf8_lossy(k)
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_checks_catch_wrong_answers() {
        let mut items = Vec::new();
        for k in [b"user1", b"user2", b"user3"] {
            let mut v = Vec::new();
            make_value(k, 1, 16, &mut v);
            items.push((k.to_vec(), v));
        }
        let v1 = Versions { after: 0, upto: 1 };
        assert!(check_scan(b"user1", 3, &items, 16, v1, true).is_ok());
        assert!(
            check_scan(b"user0", 3, &items, 16, v1, true).is_err(),
            "wrong start"
        );
        assert!(
            check_scan(b"user1", 2, &items, 16, v1, true).is_err(),
            "too many"
        );
        assert!(check_scan(b"user1", 3, &[], 16, v1, true).is_err(), "empty");
        let mut swapped = items.clone();
        swapped.swap(1, 2);
        assert!(
            check_scan(b"user1", 3, &swapped, 16, v1, true).is_err(),
            "order"
        );
        let mut wrong = items.clone();
        wrong[2].1 = items[1].1.clone();
        assert!(
            check_scan(b"user1", 3, &wrong, 16, v1, true).is_err(),
            "value"
        );
    }
}
