//! The kernels' CUDA C source (gpu/kernels/*.cu, kept in the repository) and their run-time
//! compilation to PTX with NVRTC (loaded dynamically: nothing CUDA is needed to build).

use crate::error::GpuError;

/// The batch layout header, shared with the host side (layout.rs).
pub const BATCH_H: &str = include_str!("../kernels/akv_batch.h");
/// The kernels.
pub const LOOKUP_CU: &str = include_str!("../kernels/lookup.cu");

/// Lanes per request group, as compiled for GPUs.
pub const GROUP: u32 = 8;

/// Whether an NVRTC library can be loaded (checked without touching it otherwise: a
/// missing library must give an error, not a panic).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to open the library with the loader (libloading); no symbol is
    // called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The NVRTC version (major, minor), when the library loads.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    if !nvrtc_present() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked); nvrtcVersion writes two ints.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// Compiles the kernels to PTX for `arch` (for example `sm_90`).
pub fn compile_ptx(arch: &'static str) -> Result<String, GpuError> {
    if !nvrtc_present() {
        return Err(GpuError::NoNvrtc);
    }
    let src = format!("{BATCH_H}\n{LOOKUP_CU}");
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some(arch),
        options: vec![format!("-DAKV_GROUP={GROUP}"), "-std=c++17".into()],
        name: Some("lookup.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src, opts)
        .map(|p| p.to_src())
        .map_err(|e| GpuError::Compile(format!("{e:?}")))
}

/// The architecture name NVRTC takes for a compute capability.
pub fn arch_for(major: i32, minor: i32) -> &'static str {
    match (major, minor) {
        (7, 0) => "sm_70",
        (7, 5) => "sm_75",
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        (m, _) if m >= 10 => "sm_100",
        (m, _) if m >= 9 => "sm_90",
        _ => "sm_80",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures() {
        assert_eq!(arch_for(9, 0), "sm_90");
        assert_eq!(arch_for(8, 6), "sm_86");
        assert_eq!(arch_for(10, 3), "sm_100");
    }
}
