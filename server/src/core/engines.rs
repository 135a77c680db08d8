//! The read engine a server runs, chosen at start by `--engine auto|cpu|cpu-threads|gpu|rtl`:
//! the CPU engine (with the hot-key cache in front), the GPU engine, or (built with the `rtl`
//! feature) the simulated RTL tree-walk engine, behind one `ReadEngine`.

use crate::config::Settings;
use crate::core::reads::{Reads, Ring};
use accelkv_engine::{
    CpuEngine, EngineConfig, EngineKind, EngineStats, Offload, ReadEngine, Request, Sink, Started,
};
use accelkv_tree::Store;
use std::sync::Arc;

/// The running read engine.
pub enum Engine {
    /// The CPU engine; `why_not_gpu` says why `auto` did not pick the GPU; `threads`: it
    /// runs on threads of its own (`--engine cpu-threads`), reached like the GPU engine.
    Cpu {
        engine: Box<CpuEngine>,
        why_not_gpu: Option<String>,
        threads: bool,
    },
    /// An engine with memory of its own: the GPU engine, or the RTL engine.
    Offload(Box<dyn Offload>),
}

impl Engine {
    /// Starts the engine `settings.engine` asks for (chosen by `accelkv_engine::start`, the
    /// GPU offered as `accelkv_gpu::Gpu`, the RTL engine with the `rtl` feature); `gpu`
    /// without a usable GPU is an error, as is `rtl` in a server built without it.
    pub fn start(store: Arc<Store>, settings: &Settings) -> Result<Engine, String> {
        let cpu = EngineConfig {
            // No engine threads: each event loop runs reads inline (`Engine::reads`).
            threads: 0,
            window: settings.engine_window.max(1),
            cache_buckets: settings.cache_buckets,
            load_threads: settings.load_threads,
            ..EngineConfig::default()
        };
        let gpu = accelkv_gpu::Gpu {
            cache_bytes: settings.gpu_cache,
        };
        let accel: Option<&dyn accelkv_engine::Accelerator> = match settings.engine {
            EngineKind::Rtl => rtl(),
            _ => Some(&gpu),
        };
        let started = accelkv_engine::start(
            store,
            settings.engine,
            cpu,
            settings.engine_threads.max(1),
            accel,
        )
        .map_err(|e| format!("--engine {}: {e}", settings.engine))?;
        Ok(match started {
            Started::Cpu {
                engine,
                why_not_gpu,
            } => {
                if let (Some(why), EngineKind::Auto) = (&why_not_gpu, settings.engine) {
                    tracing::info!("engine auto: running the CPU engine ({why})");
                }
                Engine::Cpu {
                    engine,
                    why_not_gpu,
                    threads: settings.engine == EngineKind::CpuThreads,
                }
            }
            Started::Offload(g) => {
                tracing::info!("engine {} on {}", g.name(), g.device());
                Engine::Offload(g)
            }
        })
    }

    /// The engine in words, for the start-up line.
    pub fn describe(&self) -> String {
        match self {
            Engine::Cpu { threads: true, .. } => "cpu on threads of its own".into(),
            Engine::Cpu {
                why_not_gpu: None, ..
            } => "cpu".into(),
            Engine::Cpu {
                why_not_gpu: Some(_),
                ..
            } => "cpu (no usable GPU)".into(),
            Engine::Offload(g) => format!("{} on {}", g.name(), g.device()),
        }
    }

    /// Extra INFO lines: why not the GPU, or the GPU's counters.
    pub fn info(&self) -> Vec<(&'static str, String)> {
        match self {
            Engine::Cpu { why_not_gpu, .. } => why_not_gpu
                .iter()
                .map(|w| ("engine_gpu_unavailable", w.replace(['\r', '\n'], " ")))
                .collect(),
            Engine::Offload(g) => g.info(),
        }
    }

    /// The read door of one event loop: the CPU engine's interleaved walk on the loop's own
    /// thread, or submission to an engine's workers (the GPU engine's, or the CPU engine's
    /// own threads), whose completions call `wake`.
    pub fn reads(&self, wake: impl Fn() + Send + Sync + 'static) -> Reads {
        match self {
            Engine::Cpu {
                engine,
                threads: false,
                ..
            } => Reads::inline(engine.reader(), engine.loader().cloned(), wake),
            _ => Reads::ring(Ring::new(wake)),
        }
    }

    /// Reads that waited for a leaf in the page file without blocking their loop: leaves
    /// the loader threads read back, and waits they completed (zeros without a budget).
    pub fn deferred_reads(&self) -> (u64, u64) {
        match self {
            Engine::Cpu { engine, .. } => engine.loader().map_or((0, 0), |l| l.counts()),
            Engine::Offload(_) => (0, 0),
        }
    }

    /// The offload engine's Prometheus samples, when it runs.
    pub fn offload_samples(&self) -> Vec<accelkv_engine::Sample> {
        match self {
            Engine::Offload(g) => g.samples(),
            Engine::Cpu { .. } => Vec::new(),
        }
    }

    fn inner(&self) -> &dyn ReadEngine {
        match self {
            Engine::Cpu { engine, .. } => engine.as_ref(),
            Engine::Offload(g) => g.engine(),
        }
    }
}

impl ReadEngine for Engine {
    fn submit(&self, sink: &Arc<Sink>, batch: Vec<(u64, Request)>) {
        self.inner().submit(sink, batch)
    }

    fn name(&self) -> &'static str {
        self.inner().name()
    }

    fn stats(&self) -> EngineStats {
        self.inner().stats()
    }
}

/// The RTL engine, in a server built with the `rtl` feature.
#[cfg(feature = "rtl")]
fn rtl() -> Option<&'static dyn accelkv_engine::Accelerator> {
    Some(&accelkv_rtl::Rtl)
}

/// No RTL engine: the server was built without the `rtl` feature.
#[cfg(not(feature = "rtl"))]
fn rtl() -> Option<&'static dyn accelkv_engine::Accelerator> {
    None
}
