//! A suite: every target loaded once, then every workload under every key distribution run
//! against it in order (workload D, defined by its "latest" distribution, runs once).
//! Targets run one after another, never at the same time, so each has the machine to itself.

use crate::record::RecordShape;
use crate::runner::{load, run, Length, RunResult, Settings};
use crate::target;
use crate::workload::{Dist, Workload};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What to run.
#[derive(Clone, Debug)]
pub struct Suite {
    /// Target specifications (see [`target::parse`]).
    pub targets: Vec<String>,
    /// Workloads, in order.
    pub workloads: Vec<Workload>,
    /// Key distributions.
    pub dists: Vec<Dist>,
    /// Load and run settings.
    pub settings: Settings,
    /// Password for accelkv's network targets.
    pub password: Option<String>,
}

impl Suite {
    /// The in-process targets this build has.
    pub fn local_targets() -> Vec<String> {
        let mut t = vec!["accelkv", "accelkv-engine", "btreemap"];
        if cfg!(feature = "rocksdb") {
            t.push("rocksdb");
        }
        t.into_iter().map(String::from).collect()
    }

    /// A tiny suite that exercises every workload and distribution in seconds.
    pub fn quick(targets: Vec<String>) -> Suite {
        Suite {
            targets,
            workloads: Workload::all(),
            dists: vec![Dist::Uniform, Dist::Zipfian],
            settings: Settings {
                threads: 2,
                batch: 8,
                records: 2000,
                length: Length::Ops(2000),
                shape: RecordShape::Small,
                seed: 1,
                full_check_every: 1,
                progress: false,
            },
            password: None,
        }
    }
}

/// A target's load phase.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadResult {
    /// Target name (or the specification, if it could not be opened).
    pub target: String,
    /// Records inserted.
    pub records: u64,
    /// Inserts per second.
    pub rate: f64,
    /// Why loading failed, if it did.
    pub error: Option<String>,
}

/// Everything a suite measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SuiteResult {
    /// Load phases.
    pub loads: Vec<LoadResult>,
    /// Runs.
    pub runs: Vec<RunResult>,
}

impl SuiteResult {
    /// Whether any load or run failed (a wrong answer or an error).
    pub fn failed(&self) -> bool {
        self.loads.iter().any(|l| l.error.is_some()) || self.runs.iter().any(|r| r.error.is_some())
    }
}

/// Runs `suite`, calling `each` after every load and run (for progress output).
pub fn run_suite(suite: &Suite, mut each: impl FnMut(&str)) -> SuiteResult {
    let mut out = SuiteResult::default();
    let s = &suite.settings;
    for spec in &suite.targets {
        let t = match target::parse(spec, suite.password.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                each(&format!("{spec}: {e}"));
                out.loads.push(LoadResult {
                    target: spec.clone(),
                    records: 0,
                    rate: 0.0,
                    error: Some(e.0),
                });
                continue;
            }
        };
        let state = match load(t.as_ref(), s) {
            Ok((state, rate)) => {
                each(&format!(
                    "{}: loaded {} records at {:.0}/s",
                    t.name(),
                    s.records,
                    rate
                ));
                out.loads.push(LoadResult {
                    target: t.name(),
                    records: s.records,
                    rate,
                    error: None,
                });
                state
            }
            Err(e) => {
                each(&format!("{}: load failed: {e}", t.name()));
                out.loads.push(LoadResult {
                    target: t.name(),
                    records: 0,
                    rate: 0.0,
                    error: Some(e.0),
                });
                continue;
            }
        };
        let mut ran_latest = false;
        let mut index = 0;
        for &dist in &suite.dists {
            for &w in &suite.workloads {
                if w.dist(dist) == Dist::Latest {
                    if ran_latest {
                        continue;
                    }
                    ran_latest = true;
                }
                index += 1;
                let r = run(t.as_ref(), &state, w, dist, s, index);
                each(&line(&r));
                out.runs.push(r);
            }
        }
        drop(t);
        // Let a server's or RocksDB's background work settle before the next target.
        std::thread::sleep(Duration::from_millis(if s.records > 100_000 {
            500
        } else {
            0
        }));
    }
    out
}

fn line(r: &RunResult) -> String {
    if let Some(why) = &r.skipped {
        return format!("{} {} {}: skipped ({why})", r.target, r.workload, r.dist);
    }
    if let Some(e) = &r.error {
        return format!("{} {} {}: FAILED: {e}", r.target, r.workload, r.dist);
    }
    let p = r.all.as_ref();
    format!(
        "{} {} {}: {:.0} ops/s, p50 {:.1} us, p99 {:.1} us, p999 {:.1} us ({} ops, {} answers validated)",
        r.target,
        r.workload,
        r.dist,
        r.throughput,
        p.map_or(0.0, |l| l.p50_us),
        p.map_or(0.0, |l| l.p99_us),
        p.map_or(0.0, |l| l.p999_us),
        r.ops,
        r.validated
    )
}
