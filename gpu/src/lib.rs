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
//! Choosing an engine at run time: [`select`] with [`EngineKind::Auto`] picks the GPU when a
//! driver, a device and NVRTC are present, else the CPU engine, and says why.

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod cuda;
mod emu;
mod engine;
mod error;
mod exec;
pub mod kernels;
mod layout;
mod mirror;
mod probe;

pub use emu::HostExec;
pub use engine::{GpuConfig, GpuEngine, GpuStats};
pub use error::GpuError;
pub use probe::{driver_present, probe, DeviceInfo};

/// Which read engine to run (`--engine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// The GPU when one is usable, else the CPU engine.
    #[default]
    Auto,
    /// The CPU engine.
    Cpu,
    /// The GPU engine; an error when no GPU is usable.
    Gpu,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(EngineKind::Auto),
            "cpu" => Ok(EngineKind::Cpu),
            "gpu" => Ok(EngineKind::Gpu),
            _ => Err(format!("unknown engine {s:?} (expected auto, cpu or gpu)")),
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::Auto => "auto",
            EngineKind::Cpu => "cpu",
            EngineKind::Gpu => "gpu",
        })
    }
}

/// What [`select`] chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Run the CPU engine; with `auto`, why not the GPU.
    Cpu {
        /// Why the GPU was not chosen (`None` when the CPU engine was asked for).
        why_not_gpu: Option<String>,
    },
    /// Run the GPU engine on this device.
    Gpu(DeviceInfo),
}

/// Decides which engine runs, without panicking on a machine with no CUDA at all.
pub fn select(kind: EngineKind) -> Result<Selection, GpuError> {
    let gpu = || -> Result<DeviceInfo, GpuError> {
        let info = probe()?;
        if !kernels::nvrtc_present() {
            return Err(GpuError::NoNvrtc);
        }
        Ok(info)
    };
    match kind {
        EngineKind::Cpu => Ok(Selection::Cpu { why_not_gpu: None }),
        EngineKind::Gpu => gpu().map(Selection::Gpu),
        EngineKind::Auto => Ok(match gpu() {
            Ok(info) => Selection::Gpu(info),
            Err(e) => Selection::Cpu {
                why_not_gpu: Some(e.to_string()),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_kinds_parse() {
        assert_eq!("auto".parse(), Ok(EngineKind::Auto));
        assert_eq!("gpu".parse(), Ok(EngineKind::Gpu));
        assert!("fpga"
            .parse::<EngineKind>()
            .unwrap_err()
            .contains("auto, cpu or gpu"));
        assert_eq!(EngineKind::Cpu.to_string(), "cpu");
    }

    #[test]
    fn cpu_is_always_available() {
        assert_eq!(
            select(EngineKind::Cpu),
            Ok(Selection::Cpu { why_not_gpu: None })
        );
    }

    /// On a machine without a driver (CI, this project's development machines) `auto` falls
    /// back to the CPU and says why, and `gpu` is a clear error; with a GPU, both pick it.
    #[test]
    fn auto_falls_back_without_a_gpu() {
        match (select(EngineKind::Auto), probe()) {
            (
                Ok(Selection::Cpu {
                    why_not_gpu: Some(why),
                }),
                Err(e),
            ) => {
                assert_eq!(why, e.to_string());
                assert!(matches!(select(EngineKind::Gpu), Err(x) if x == e));
            }
            (
                Ok(Selection::Cpu {
                    why_not_gpu: Some(why),
                }),
                Ok(_),
            ) => {
                assert!(why.contains("NVRTC"), "{why}");
            }
            (Ok(Selection::Gpu(info)), Ok(probed)) => assert_eq!(info, probed),
            other => panic!("unexpected {other:?}"),
        }
    }
}
