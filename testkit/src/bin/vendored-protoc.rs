//! Prints the path of the protoc binary that the protoc-bin-vendored crate ships for this
//! platform, so a machine without protoc can build the cluster feature (etcd-client compiles
//! etcd's protobuf files): `PROTOC=$(cargo run -q -p accelkv-testkit --features
//! vendored-protoc --bin vendored-protoc)`. scripts/test.sh does this when no protoc is
//! installed.

fn main() {
    match protoc_bin_vendored::protoc_bin_path() {
        Ok(path) => println!("{}", path.display()),
        Err(e) => {
            eprintln!("no vendored protoc for this platform: {e}; install protoc (apt-get install protobuf-compiler)");
            std::process::exit(1);
        }
    }
}
