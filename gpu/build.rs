//! Compiles the host emulation of the GPU kernels (gpu/kernels/host_emu.cpp, which includes
//! lookup.cu) with the system C++ compiler. No CUDA is needed to build: the GPU path compiles
//! the same kernels at run time with NVRTC.

fn main() {
    println!("cargo:rerun-if-changed=kernels/host_emu.cpp");
    println!("cargo:rerun-if-changed=kernels/lookup.cu");
    println!("cargo:rerun-if-changed=kernels/akv_batch.h");
    cc::Build::new()
        .cpp(true)
        .file("kernels/host_emu.cpp")
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(2)
        .compile("akv_host_emu");
}
