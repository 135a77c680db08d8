//! Finding a GPU: whether the CUDA driver and NVRTC libraries load, and what device is there.
//! Every check loads libraries with the loader before any CUDA call, so a machine without
//! them gets an answer (for `--engine auto`: "use the CPU engine"), never a panic.

use crate::error::GpuError;

/// A usable device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name, as the driver reports it.
    pub name: String,
    /// Compute capability.
    pub capability: (i32, i32),
    /// Device memory in bytes.
    pub memory: usize,
    /// Whether it can map pinned host memory (required).
    pub can_map_host_memory: bool,
}

/// Whether the CUDA driver library loads.
pub fn driver_present() -> bool {
    // SAFETY: only opens the library with the loader; no CUDA call.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// The first CUDA device, or why there is none usable for the engine.
pub fn probe() -> Result<DeviceInfo, GpuError> {
    if !driver_present() {
        return Err(GpuError::NoDriver);
    }
    cudarc::driver::result::init().map_err(|e| GpuError::NoDevice(format!("cuInit: {e:?}")))?;
    let n = cudarc::driver::CudaContext::device_count()
        .map_err(|e| GpuError::NoDevice(format!("{e:?}")))?;
    if n < 1 {
        return Err(GpuError::NoDevice("the driver reports 0 devices".into()));
    }
    let ctx =
        cudarc::driver::CudaContext::new(0).map_err(|e| GpuError::NoDevice(format!("{e:?}")))?;
    let attr = |a| ctx.attribute(a).unwrap_or(0);
    use cudarc::driver::sys::CUdevice_attribute as A;
    let info = DeviceInfo {
        name: ctx.name().unwrap_or_else(|_| "unknown".into()),
        capability: ctx.compute_capability().unwrap_or((0, 0)),
        memory: ctx.total_mem().unwrap_or(0),
        can_map_host_memory: attr(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0,
    };
    if !info.can_map_host_memory {
        return Err(GpuError::NoDevice(format!(
            "{} cannot map host memory",
            info.name
        )));
    }
    if info.capability.0 < 7 {
        return Err(GpuError::NoDevice(format!(
            "{} has compute capability {}.{}; the kernels need 7.0 or newer",
            info.name, info.capability.0, info.capability.1
        )));
    }
    Ok(info)
}
