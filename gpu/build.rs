//! Compiles the host emulation of the GPU kernels (gpu/kernels/host_emu.cpp, which includes
//! lookup.cu) with the system C++ compiler. No CUDA is needed to build: the GPU path compiles
//! the same kernels at run time with NVRTC.
//!
//! The emulation only serves tests and the benchmark's `gpu-emulated` engine, so a machine
//! without a C++ compiler still builds: the crate is then compiled with `akv_no_host_emu`,
//! `GpuEngine::start_emulated` answers `GpuError::NoEmulation`, and the tests that need the
//! emulation skip and say so (accelkv-testkit).

fn main() {
    println!("cargo:rerun-if-changed=kernels/host_emu.cpp");
    println!("cargo:rerun-if-changed=kernels/lookup.cu");
    println!("cargo:rerun-if-changed=kernels/akv_batch.h");
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rustc-check-cfg=cfg(akv_no_host_emu)");
    let built = cc::Build::new()
        .cpp(true)
        .file("kernels/host_emu.cpp")
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(2)
        .cargo_warnings(false)
        .try_compile("akv_host_emu");
    if let Err(e) = built {
        println!(
            "cargo:warning=no C++ compiler: the GPU kernels' host emulation is not built \
             (its tests will skip; install g++ to run them): {e}"
        );
        println!("cargo:rustc-cfg=akv_no_host_emu");
    }
}
