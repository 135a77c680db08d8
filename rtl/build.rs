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

    /// Verilates `top` (from `sources`) into OUT_DIR/<top> and returns that directory.
    fn verilate(out: &std::path::Path, top: &str, sources: &[&str]) -> PathBuf {
        verilate_as(out, top, top, &[], sources)
    }

    /// Verilates `top` as model `V<name>` (with `params`, `-G` overrides) into
    /// OUT_DIR/<name> and returns that directory.
    fn verilate_as(
        out: &std::path::Path,
        top: &str,
        name: &str,
        params: &[&str],
        sources: &[&str],
    ) -> PathBuf {
        let obj = out.join(name);
        let status = Command::new("verilator")
            .args(["--cc", "--build", "-O3", "-Wall", "--top-module", top])
            .args(["--prefix", &format!("V{name}")])
            .args(params)
            .arg("--Mdir")
            .arg(&obj)
            .args(["-MAKEFLAGS", "-s"])
            .args(["-CFLAGS", "-fPIC -O2"])
            .args(sources)
            .status()
            .expect("the `sim` feature needs Verilator (apt-get install -y verilator)");
        assert!(status.success(), "verilator failed on {name}");
        obj
    }

    pub fn build() {
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
        let ksu = verilate(&out, "ksu", &["sv/ksu.sv"]);
        // the configuration synth/ksu.sh places and routes: keys up to 64 bytes
        let ksu64 = verilate_as(&out, "ksu", "ksu64", &["-GKEY_BYTES=64"], &["sv/ksu.sv"]);
        let walk = verilate(&out, "walk", &["sv/walk.sv", "sv/ksu.sv"]);
        let parser = verilate(&out, "frame_parser", &["sv/frame_parser.sv"]);
        let root = verilator_root();
        // The models (all of Verilator's generated C++ of each in one unit), Verilator's
        // runtime and the C ABIs, always optimised: a debug build simulates as fast as a
        // release one.
        let mut b = cc::Build::new();
        for dir in [&ksu, &ksu64, &walk, &parser] {
            // Verilator's C++ for the model: every file but the `__ALL` one that includes
            // the rest (written only for small models)
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.ends_with(".cpp") && !n.ends_with("__ALL.cpp")
                })
                .collect();
            files.sort();
            b.files(files);
        }
        b.cpp(true)
            .std("c++17")
            .opt_level(2)
            .file(root.join("include/verilated.cpp"))
            .file(root.join("include/verilated_threads.cpp"))
            .file("csrc/ksu_ffi.cpp")
            .file("csrc/walk_ffi.cpp")
            .file("csrc/parser_ffi.cpp")
            .include(&ksu)
            .include(&ksu64)
            .include(&walk)
            .include(&parser)
            .include(root.join("include"))
            .include(root.join("include/vltstd"))
            .warnings(false)
            .compile("rtl_sim");
        println!("cargo:rustc-link-lib=dylib=stdc++");
        println!("cargo:rustc-link-lib=dylib=pthread");
    }
}
