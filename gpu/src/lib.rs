//! accelkv's GPU read engine (DESIGN.md §6; Honeycomb §4–5 with an NVIDIA GPU in the FPGA's
//! place): a back end of the `ReadEngine` trait that runs batched GET, SCAN and SCAN_FLOOR
//! as CUDA kernels over the same node bytes the CPU reads.
//!
//! * The arena's chunks are registered as pinned, device-mapped host memory: kernels read
//!   leaves zero-copy across PCIe, fetching only the shortcut block, the chosen segment and
//!   the log block of each node (cuda.rs).
//! * Interior nodes are cached in device memory keyed by LID; the device keeps a copy of the
//!   page table; both follow the tree's stream of page-table changes before each batch
//!   (mirror.rs, engine.rs).
//! * Kernels are CUDA C in `gpu/kernels/`, compiled at run time by NVRTC (kernels.rs). No
//!   CUDA is needed to build: the driver and NVRTC are loaded dynamically (cudarc), after a
//!   check that they exist, so a machine without them gets an error, not a panic.
//! * The same kernel source also compiles as C++ for a host emulation (emu.rs), which the
//!   tests run against the reference reader on machines without a GPU.
//!
//! Choosing an engine at run time is the engine crate's (`accelkv_engine::start`); this
//! crate offers the GPU engine to it as [`Gpu`], an `Accelerator` whose probe finds a
//! driver, a device and NVRTC, or says why not.

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod cuda;
#[cfg(not(akv_no_host_emu))]
mod emu;
mod engine;
mod error;
mod exec;
pub mod kernels;
mod layout;
mod mirror;
mod probe;

#[cfg(not(akv_no_host_emu))]
pub use emu::HostExec;

/// Whether the host emulation of the kernels was built (build.rs: it needs a C++ compiler).
pub const HOST_EMULATION: bool = cfg!(not(akv_no_host_emu));
pub use engine::{GpuConfig, GpuEngine, GpuStats};
pub use error::GpuError;
pub use probe::{driver_present, probe, DeviceInfo};

use accelkv_engine::{Accelerator, Offload, Sample};
use accelkv_tree::Store;
use std::sync::Arc;

/// The GPU engine as an [`accelkv_engine::Accelerator`]: what `accelkv_engine::start`
/// (`--engine auto|gpu`) probes and starts.
#[derive(Clone, Copy, Debug)]
pub struct Gpu {
    /// Device memory for the interior-node cache (`GpuConfig::cache_bytes`).
    pub cache_bytes: usize,
}

impl Default for Gpu {
    fn default() -> Gpu {
        Gpu {
            cache_bytes: GpuConfig::default().cache_bytes,
        }
    }
}

/// The first usable device, with NVRTC present to compile the kernels.
pub fn usable_device() -> Result<DeviceInfo, GpuError> {
    let info = probe()?;
    if !kernels::nvrtc_present() {
        return Err(GpuError::NoNvrtc);
    }
    Ok(info)
}

impl Accelerator for Gpu {
    fn probe(&self) -> Result<String, String> {
        usable_device().map(|d| d.name).map_err(|e| e.to_string())
    }

    fn start(&self, store: Arc<Store>, streams: usize) -> Result<Box<dyn Offload>, String> {
        let cfg = GpuConfig {
            streams,
            cache_bytes: self.cache_bytes,
            ..GpuConfig::default()
        };
        GpuEngine::start(store, cfg)
            .map(|g| Box::new(g) as Box<dyn Offload>)
            .map_err(|e| e.to_string())
    }
}

impl Offload for GpuEngine {
    fn engine(&self) -> &dyn accelkv_engine::ReadEngine {
        self
    }

    fn device(&self) -> String {
        GpuEngine::device(self)
    }

    fn info(&self) -> Vec<(&'static str, String)> {
        let s = self.gpu_stats();
        vec![
            ("engine_device", GpuEngine::device(self)),
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

    fn samples(&self) -> Vec<Sample> {
        let s = self.gpu_stats();
        let sample = |name, help, counter, value| Sample {
            name,
            help,
            counter,
            value,
        };
        vec![
            sample(
                "accelkv_gpu_launches_total",
                "Kernel launches of the GPU engine.",
                true,
                s.launches,
            ),
            sample(
                "accelkv_gpu_device_requests_total",
                "Read requests the GPU engine ran on the device.",
                true,
                s.device_requests,
            ),
            sample(
                "accelkv_gpu_host_bytes_read_total",
                "Bytes the GPU kernels read from host memory.",
                true,
                s.host_bytes_read,
            ),
            sample(
                "accelkv_gpu_remaps_applied_total",
                "Node remaps (writes' new node versions) applied to the device's copy.",
                true,
                s.remaps_applied,
            ),
            sample(
                "accelkv_gpu_fallbacks_total",
                "Requests the GPU engine handed back to the CPU reader.",
                true,
                s.fallbacks,
            ),
            sample(
                "accelkv_gpu_cached_interior_nodes",
                "Interior nodes held in device memory.",
                false,
                s.cached_nodes,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accelkv_engine::{start, EngineConfig, EngineKind, Started};
    use accelkv_tree::Config;

    /// On a machine without a driver (CI, this project's development machines) `auto` falls
    /// back to the CPU and says why, and `gpu` is a clear error; with a GPU, both pick it.
    #[test]
    fn auto_falls_back_without_a_gpu() {
        let store = || Arc::new(Store::new(Config::default()).unwrap());
        let cfg = || EngineConfig {
            threads: 0,
            ..EngineConfig::default()
        };
        let auto = start(store(), EngineKind::Auto, cfg(), 1, Some(&Gpu::default())).unwrap();
        match (auto, usable_device()) {
            (Started::Cpu { why_not_gpu, .. }, Err(e)) => {
                assert_eq!(why_not_gpu, Some(e.to_string()));
                let gpu = start(store(), EngineKind::Gpu, cfg(), 1, Some(&Gpu::default()));
                assert_eq!(gpu.err(), Some(e.to_string()));
            }
            (Started::Offload(g), Ok(info)) => assert!(g.device().contains(&info.name)),
            (Started::Cpu { why_not_gpu, .. }, Ok(_)) => {
                panic!("a usable GPU, yet the CPU engine: {why_not_gpu:?}")
            }
            (Started::Offload(_), Err(e)) => panic!("no usable GPU ({e}), yet the GPU engine"),
        }
    }
}
