//! Errors of the GPU engine: why no GPU can be used, or what a device call said.

use std::fmt;

/// Why the GPU engine could not start or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuError {
    /// No CUDA driver library (libcuda) could be loaded.
    NoDriver,
    /// The driver loaded but reported no usable device (or failed to initialise).
    NoDevice(String),
    /// No NVRTC library (libnvrtc) could be loaded to compile the kernels.
    NoNvrtc,
    /// NVRTC rejected the kernels; the compiler's log.
    Compile(String),
    /// A CUDA call failed.
    Cuda(String),
    /// The device page table is smaller than the store's LIDs.
    TableFull(u64),
    /// The host emulation was not built: there was no C++ compiler at build time.
    NoEmulation,
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoDriver => write!(f, "no CUDA driver library (libcuda.so) could be loaded"),
            GpuError::NoDevice(why) => write!(f, "no usable CUDA device: {why}"),
            GpuError::NoNvrtc => write!(
                f,
                "no NVRTC library (libnvrtc.so) could be loaded to compile the kernels; \
                 install it (e.g. pip install nvidia-cuda-nvrtc) and add its lib directory \
                 to LD_LIBRARY_PATH"
            ),
            GpuError::Compile(log) => write!(f, "NVRTC could not compile the kernels:\n{log}"),
            GpuError::Cuda(e) => write!(f, "CUDA error: {e}"),
            GpuError::TableFull(lid) => write!(
                f,
                "LID {lid} does not fit the device page table (raise the store's memory limit \
                 bound or restart the engine)"
            ),
            GpuError::NoEmulation => write!(
                f,
                "the GPU kernels' host emulation was not built: no C++ compiler at build \
                 time (install g++ and rebuild)"
            ),
        }
    }
}

impl std::error::Error for GpuError {}
