//! The kernels compile to PTX for sm_90 (H100/H200) with NVRTC. NVRTC is loaded at run time;
//! CI installs it from PyPI (`nvidia-cuda-nvrtc`) and sets ACCELKV_REQUIRE_NVRTC=1, so there
//! a missing library fails the test (as ACCELKV_REQUIRE_TOOLS does). Elsewhere the test is
//! skipped and listed.

use accelkv_gpu::kernels::{compile_ptx, nvrtc_present, nvrtc_version};
use accelkv_gpu::GpuError;

#[test]
fn kernels_compile_to_ptx_for_sm_90() {
    if !nvrtc_present() {
        assert!(
            std::env::var_os("ACCELKV_REQUIRE_NVRTC").is_none(),
            "ACCELKV_REQUIRE_NVRTC is set but no libnvrtc loads (LD_LIBRARY_PATH?)"
        );
        // A missing library is an error value, never a panic.
        assert_eq!(compile_ptx("sm_90"), Err(GpuError::NoNvrtc));
        accelkv_testkit::skip(
            "no NVRTC library loads (.ci/run installs nvidia-cuda-nvrtc from PyPI)",
        );
        return;
    }
    let (major, minor) = nvrtc_version().expect("version of a loaded NVRTC");
    let ptx = compile_ptx("sm_90").unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains(".target sm_90"), "PTX for another target");
    for entry in ["akv_lookup", "akv_apply"] {
        assert!(
            ptx.contains(&format!(".entry {entry}(")),
            "PTX lacks the {entry} kernel"
        );
    }
    eprintln!(
        "NVRTC {major}.{minor}: {} bytes of PTX for sm_90",
        ptx.len()
    );
}
