//! With the `sim` feature: verilates the RTL (sv/) into C++ with Verilator and compiles it,
//! with the C ABI in csrc/, into the crate. Without it, nothing to build.

fn main() {
    println!("cargo:rerun-if-changed=sv");
    println!("cargo:rerun-if-changed=csrc");
    #[cfg(feature = "sim")]
    sim::build();
}

#[cfg(feature = "sim")]
mod sim {
    use std::path::PathBuf;
    use std::process::Command;

    fn verilator_root() -> PathBuf {
        if let Ok(r) = std::env::var("VERILATOR_ROOT") {
            return PathBuf::from(r);
        }
        let out = Command::new("verilator")
            .arg("--getenv")
            .arg("VERILATOR_ROOT")
            .output()
            .expect("the `sim` feature needs Verilator (apt-get install -y verilator)");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }

    pub fn build() {
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
        let obj = out.join("ksu");
        let status = Command::new("verilator")
            .args(["--cc", "--build", "-O3", "-Wall", "--top-module", "ksu"])
            .arg("--Mdir")
            .arg(&obj)
            .args(["-MAKEFLAGS", "-s"])
            .args(["-CFLAGS", "-fPIC -O2"])
            .arg("sv/ksu.sv")
            .status()
            .expect("the `sim` feature needs Verilator (apt-get install -y verilator)");
        assert!(status.success(), "verilator failed on sv/ksu.sv");
        let root = verilator_root();
        // The model (all of Verilator's generated C++ in one unit), Verilator's runtime and
        // the C ABI, always optimised: a debug build simulates as fast as a release one.
        cc::Build::new()
            .cpp(true)
            .std("c++17")
            .opt_level(2)
            .file(obj.join("Vksu__ALL.cpp"))
            .file(root.join("include/verilated.cpp"))
            .file(root.join("include/verilated_threads.cpp"))
            .file("csrc/ksu_ffi.cpp")
            .include(&obj)
            .include(root.join("include"))
            .include(root.join("include/vltstd"))
            .warnings(false)
            .compile("ksu_sim");
        println!("cargo:rustc-link-lib=dylib=stdc++");
        println!("cargo:rustc-link-lib=dylib=pthread");
    }
}
