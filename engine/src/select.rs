//! Choosing and starting the read engine (`--engine auto|cpu|gpu`), in one place for the
//! server and the benchmarks. The CPU engine is this crate's own; an engine with memory of
//! its own (the GPU engine of `accelkv-gpu`, a crate that depends on this one) is offered by
//! the caller through [`Accelerator`], so a program that runs only the CPU engine needs
//! nothing else, and the dependency keeps pointing one way (DESIGN.md §5).

use crate::{CpuEngine, EngineConfig, ReadEngine};
use accelkv_tree::Store;
use std::sync::Arc;

/// Which read engine to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// The accelerator when one is usable, else the CPU engine.
    #[default]
    Auto,
    /// The CPU engine.
    Cpu,
    /// The CPU engine on threads of its own, reached like the GPU engine (submit, then
    /// completions): to compare with running reads on the caller's thread, and to exercise
    /// an offload engine's path without a GPU.
    CpuThreads,
    /// The GPU engine; an error when none is usable.
    Gpu,
    /// The accelerator's RTL (`accelkv-rtl`'s simulated tree-walk engine): slow and exact,
    /// for co-verification; an error in a program built without it.
    Rtl,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(EngineKind::Auto),
            "cpu" => Ok(EngineKind::Cpu),
            "cpu-threads" => Ok(EngineKind::CpuThreads),
            "gpu" => Ok(EngineKind::Gpu),
            "rtl" => Ok(EngineKind::Rtl),
            _ => Err(format!(
                "unknown engine {s:?} (expected auto, cpu, cpu-threads, gpu or rtl)"
            )),
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::Auto => "auto",
            EngineKind::Cpu => "cpu",
            EngineKind::CpuThreads => "cpu-threads",
            EngineKind::Gpu => "gpu",
            EngineKind::Rtl => "rtl",
        })
    }
}

/// A running engine with memory of its own: a [`ReadEngine`] that also describes itself.
pub trait Offload: ReadEngine {
    /// Itself as a [`ReadEngine`] (without trait upcasting, for Rust 1.85).
    fn engine(&self) -> &dyn ReadEngine;
    /// The device it runs on, in words.
    fn device(&self) -> String;
    /// Lines for INFO/STATS: name and value.
    fn info(&self) -> Vec<(&'static str, String)>;
    /// Its Prometheus samples.
    fn samples(&self) -> Vec<Sample>;
}

/// One Prometheus sample of an engine: a counter (its name ends in `_total`) or a gauge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The metric's name, `accelkv_<engine>_...`.
    pub name: &'static str,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// A counter (else a gauge).
    pub counter: bool,
    pub value: u64,
}

/// How to find and start an engine with memory of its own.
pub trait Accelerator {
    /// The device that would run it, or why none can (checked without starting anything).
    fn probe(&self) -> Result<String, String>;
    /// Starts it over `store` with `streams` submission streams.
    fn start(&self, store: Arc<Store>, streams: usize) -> Result<Box<dyn Offload>, String>;
}

/// The engine [`start`] started.
pub enum Started {
    /// The CPU engine; with `auto`, why not the accelerator.
    Cpu {
        /// The engine.
        engine: Box<CpuEngine>,
        /// Why the accelerator was not chosen (`None` when the CPU engine was asked for).
        why_not_gpu: Option<String>,
    },
    /// The accelerator's engine.
    Offload(Box<dyn Offload>),
}

/// Starts the engine `kind` asks for over `store`: the CPU engine with `cpu` (for
/// `CpuThreads`, with `streams` threads of its own), or the one `accel` offers (`None`:
/// this program has none) with `streams` streams. `Gpu` without a
/// usable accelerator is an error; `Auto` falls back to the CPU engine and says why. For
/// `Rtl`, `accel` is the RTL engine (`accelkv_rtl::Rtl`), never chosen by `Auto`.
pub fn start(
    store: Arc<Store>,
    kind: EngineKind,
    cpu: EngineConfig,
    streams: usize,
    accel: Option<&dyn Accelerator>,
) -> Result<Started, String> {
    let cpu_engine = |store, why_not_gpu| Started::Cpu {
        engine: Box::new(CpuEngine::start(store, cpu.clone())),
        why_not_gpu,
    };
    match kind {
        EngineKind::Cpu => return Ok(cpu_engine(store, None)),
        EngineKind::CpuThreads => {
            let cfg = EngineConfig {
                threads: streams.max(1),
                ..cpu
            };
            return Ok(Started::Cpu {
                engine: Box::new(CpuEngine::start(store, cfg)),
                why_not_gpu: None,
            });
        }
        EngineKind::Rtl => {
            let Some(rtl) = accel else {
                return Err(
                    "this program was built without the RTL engine (build accelkv-server \
                            with `--features rtl`, which needs Verilator)"
                        .into(),
                );
            };
            return rtl.start(store, streams.max(1)).map(Started::Offload);
        }
        EngineKind::Auto | EngineKind::Gpu => {}
    }
    if store.raw().evicts() {
        // The GPU engine reads the page table and leaves itself; a leaf that lives only in
        // the page file needs a read the CPU engine makes (issue 18 leaves this for later).
        let why = "leaves may live only in the page file (a memory budget over --data-dir): \
                   the GPU engine needs every leaf in memory"
            .to_string();
        return match kind {
            EngineKind::Gpu => Err(why),
            _ => Ok(cpu_engine(store, Some(why))),
        };
    }
    let (accel, probed) = match accel {
        None => (
            None,
            Err("this program was built without a GPU engine".to_string()),
        ),
        Some(a) => (Some(a), a.probe()),
    };
    let (accel, device) = match (accel, probed, kind) {
        (Some(a), Ok(d), _) => (a, d),
        (_, Err(e), EngineKind::Gpu) => return Err(e),
        (_, Err(e), _) => return Ok(cpu_engine(store, Some(e))),
        (None, Ok(_), _) => return Ok(cpu_engine(store, None)),
    };
    match accel.start(store.clone(), streams.max(1)) {
        Ok(e) => Ok(Started::Offload(e)),
        Err(e) if kind == EngineKind::Auto => Ok(cpu_engine(
            store,
            Some(format!("{device} found but the GPU engine failed: {e}")),
        )),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EngineStats, Request, Sink};
    use accelkv_tree::Config;

    struct Fake {
        probe: Result<String, String>,
        starts: bool,
    }

    struct FakeEngine;

    impl ReadEngine for FakeEngine {
        fn submit(&self, _: &Arc<Sink>, _: Vec<(u64, Request)>) {}
        fn name(&self) -> &'static str {
            "fake"
        }
        fn stats(&self) -> EngineStats {
            EngineStats::default()
        }
    }

    impl Offload for FakeEngine {
        fn engine(&self) -> &dyn ReadEngine {
            self
        }
        fn device(&self) -> String {
            "fake device".into()
        }
        fn info(&self) -> Vec<(&'static str, String)> {
            Vec::new()
        }
        fn samples(&self) -> Vec<Sample> {
            Vec::new()
        }
    }

    impl Accelerator for Fake {
        fn probe(&self) -> Result<String, String> {
            self.probe.clone()
        }
        fn start(&self, _: Arc<Store>, _: usize) -> Result<Box<dyn Offload>, String> {
            if self.starts {
                Ok(Box::new(FakeEngine))
            } else {
                Err("out of device memory".into())
            }
        }
    }

    fn store() -> Arc<Store> {
        Arc::new(Store::new(Config::default()).unwrap())
    }

    fn cfg() -> EngineConfig {
        EngineConfig {
            threads: 0,
            ..EngineConfig::default()
        }
    }

    fn why(s: Result<Started, String>) -> Result<Option<String>, String> {
        s.map(|s| match s {
            Started::Cpu { why_not_gpu, .. } => why_not_gpu,
            Started::Offload(e) => Some(format!("offload {}", e.device())),
        })
    }

    #[test]
    fn engine_kinds_parse() {
        assert_eq!("auto".parse(), Ok(EngineKind::Auto));
        assert_eq!("gpu".parse(), Ok(EngineKind::Gpu));
        assert!("fpga"
            .parse::<EngineKind>()
            .unwrap_err()
            .contains("auto, cpu, cpu-threads, gpu or rtl"));
        assert_eq!("rtl".parse(), Ok(EngineKind::Rtl));
        assert_eq!(EngineKind::Rtl.to_string(), "rtl");
        assert_eq!("cpu-threads".parse(), Ok(EngineKind::CpuThreads));
        assert_eq!(EngineKind::Cpu.to_string(), "cpu");
    }

    #[test]
    fn every_choice_and_its_reason() {
        let none = Fake {
            probe: Err("no CUDA driver".into()),
            starts: true,
        };
        let broken = Fake {
            probe: Ok("H100".into()),
            starts: false,
        };
        let good = Fake {
            probe: Ok("H100".into()),
            starts: true,
        };
        let run = |kind, a: Option<&dyn Accelerator>| why(start(store(), kind, cfg(), 1, a));
        assert_eq!(run(EngineKind::Cpu, Some(&good)), Ok(None));
        assert_eq!(
            run(EngineKind::Auto, None),
            Ok(Some("this program was built without a GPU engine".into()))
        );
        assert_eq!(
            run(EngineKind::Auto, Some(&none)),
            Ok(Some("no CUDA driver".into()))
        );
        assert_eq!(
            run(EngineKind::Gpu, Some(&none)),
            Err("no CUDA driver".into())
        );
        assert_eq!(
            run(EngineKind::Auto, Some(&broken)),
            Ok(Some(
                "H100 found but the GPU engine failed: out of device memory".into()
            ))
        );
        assert_eq!(
            run(EngineKind::Gpu, Some(&broken)),
            Err("out of device memory".into())
        );
        assert_eq!(
            run(EngineKind::Auto, Some(&good)),
            Ok(Some("offload fake device".into()))
        );
        assert!(run(EngineKind::Rtl, None)
            .unwrap_err()
            .contains("built without the RTL engine"));
        assert_eq!(
            run(EngineKind::Rtl, Some(&good)),
            Ok(Some("offload fake device".into()))
        );
    }
}
