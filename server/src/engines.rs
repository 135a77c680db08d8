//! The read engine a server runs, chosen at start by `--engine auto|cpu|gpu`: the CPU engine
//! (with the hot-key cache in front) or the GPU engine, behind one `ReadEngine`.

use crate::config::Settings;
use accelkv_engine::{CpuEngine, EngineConfig, EngineStats, ReadEngine, Request, Sink};
use accelkv_gpu::{select, GpuConfig, GpuEngine, Selection};
use accelkv_tree::Store;
use std::sync::Arc;

/// The running read engine.
pub enum Engine {
    /// The CPU engine; `why_not_gpu` says why `auto` did not pick the GPU.
    Cpu {
        engine: Box<CpuEngine>,
        why_not_gpu: Option<String>,
    },
    /// The GPU engine.
    Gpu(GpuEngine),
}

impl Engine {
    /// Starts the engine `settings.engine` asks for; `gpu` without a usable GPU is an error.
    pub fn start(store: Arc<Store>, settings: &Settings) -> Result<Engine, String> {
        let sel = select(settings.engine).map_err(|e| format!("--engine gpu: {e}"))?;
        let cpu = |store, why_not_gpu| Engine::Cpu {
            // No engine threads: each event loop runs reads inline (`Engine::reads`).
            engine: Box::new(CpuEngine::start(
                store,
                EngineConfig {
                    threads: 0,
                    window: settings.engine_window.max(1),
                    cache_buckets: settings.cache_buckets,
                    ..EngineConfig::default()
                },
            )),
            why_not_gpu,
        };
        match sel {
            Selection::Cpu { why_not_gpu } => {
                if let Some(why) = &why_not_gpu {
                    eprintln!("accelkv-server: engine auto: running the CPU engine ({why})");
                }
                Ok(cpu(store, why_not_gpu))
            }
            Selection::Gpu(info) => {
                let cfg = GpuConfig {
                    streams: settings.engine_threads.max(1),
                    ..GpuConfig::default()
                };
                match GpuEngine::start(store.clone(), cfg) {
                    Ok(g) => {
                        eprintln!("accelkv-server: engine gpu on {}", g.device());
                        Ok(Engine::Gpu(g))
                    }
                    Err(e) if settings.engine == accelkv_gpu::EngineKind::Auto => {
                        let why = format!("{} found but the GPU engine failed: {e}", info.name);
                        eprintln!("accelkv-server: engine auto: running the CPU engine ({why})");
                        Ok(cpu(store, Some(why)))
                    }
                    Err(e) => Err(format!("--engine gpu: {e}")),
                }
            }
        }
    }

    /// The engine in words, for the start-up line.
    pub fn describe(&self) -> String {
        match self {
            Engine::Cpu {
                why_not_gpu: None, ..
            } => "cpu".into(),
            Engine::Cpu {
                why_not_gpu: Some(_),
                ..
            } => "cpu (no usable GPU)".into(),
            Engine::Gpu(g) => format!("gpu on {}", g.device()),
        }
    }

    /// Extra INFO lines: why not the GPU, or the GPU's counters.
    pub fn info(&self) -> Vec<(&'static str, String)> {
        match self {
            Engine::Cpu { why_not_gpu, .. } => why_not_gpu
                .iter()
                .map(|w| ("engine_gpu_unavailable", w.replace(['\r', '\n'], " ")))
                .collect(),
            Engine::Gpu(g) => {
                let s = g.gpu_stats();
                vec![
                    ("engine_device", g.device()),
                    ("gpu_launches", s.launches.to_string()),
                    ("gpu_device_requests", s.device_requests.to_string()),
                    ("gpu_host_bytes_read", s.host_bytes_read.to_string()),
                    ("gpu_remaps_applied", s.remaps_applied.to_string()),
                    ("gpu_cached_interior_nodes", s.cached_nodes.to_string()),
                    ("gpu_fallbacks", s.fallbacks.to_string()),
                    (
                        "gpu_last_error",
                        s.last_error
                            .unwrap_or_else(|| "none".into())
                            .replace(['\r', '\n'], " "),
                    ),
                ]
            }
        }
    }

    /// The read door of one event loop: the CPU engine's interleaved walk on the loop's own
    /// thread, or submission to the GPU engine's workers.
    pub fn reads(&self) -> crate::reads::Reads {
        match self {
            Engine::Cpu { engine, .. } => crate::reads::Reads::Inline(engine.reader()),
            Engine::Gpu(_) => crate::reads::Reads::Engine(Sink::new()),
        }
    }

    /// The GPU engine's counters, when it runs.
    pub fn gpu_stats(&self) -> Option<accelkv_gpu::GpuStats> {
        match self {
            Engine::Gpu(g) => Some(g.gpu_stats()),
            Engine::Cpu { .. } => None,
        }
    }

    fn inner(&self) -> &dyn ReadEngine {
        match self {
            Engine::Cpu { engine, .. } => engine.as_ref(),
            Engine::Gpu(g) => g,
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
