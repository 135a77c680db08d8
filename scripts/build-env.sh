# Sourced by scripts/test.sh and .ci/run: what the build needs that a machine with only Rust
# (and its C linker) lacks.
#
# The cluster feature's build compiles etcd's protobuf files (etcd-client), which needs
# protoc. Where none is installed and PROTOC is unset, use the one the protoc-bin-vendored
# crate ships (accelkv-testkit's `vendored-protoc` binary prints its path).
if [ -z "${PROTOC:-}" ] && ! command -v protoc >/dev/null 2>&1; then
  if PROTOC="$(cargo run -q -p accelkv-testkit --features vendored-protoc --bin vendored-protoc)"; then
    export PROTOC
    echo "== no protoc installed: using the vendored one ($PROTOC)"
  else
    unset PROTOC
    echo "no protoc: install it (apt-get install protobuf-compiler) to build the cluster feature" >&2
  fi
fi
# The GPU kernels' host emulation needs a C++ compiler; without one it is not built and its
# tests skip (gpu/build.rs), so nothing is needed here.
