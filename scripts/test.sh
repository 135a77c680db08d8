#!/usr/bin/env bash
# The README's test command: the workspace's tests with the cluster feature, then the crates
# that own node bytes, reclamation and recovery (node, tree, engine, gpu, durable) again with
# the checking features (engine poisoning, tree failpoints, colliding fingerprints); then the
# tests that skipped because a tool is missing, and why (accelkv-testkit's list), so a skip
# never passes for a pass. Arguments go to both `cargo test` runs (after `--`: to the test
# binaries). With ACCELKV_REQUIRE_TOOLS=1 (.ci/run) a missing tool fails its test instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
export ACCELKV_SKIP_LIST="${ACCELKV_SKIP_LIST:-$PWD/target/skipped-tests.txt}"
: >"$ACCELKV_SKIP_LIST"
status=0
# protoc for the cluster feature, vendored where none is installed.
source scripts/build-env.sh
# server/tests/e2e.rs drives the `accelkv` CLI too; `cargo test` alone does not build it.
cargo build -p accelkv-client --bin accelkv
# --no-fail-fast: every test binary runs, so one run shows every failure.
cargo test --no-fail-fast --workspace --features accelkv-server/cluster "$@" \
  && cargo test --no-fail-fast -p accelkv-node -p accelkv-tree -p accelkv-engine -p accelkv-gpu -p accelkv-durable \
    --features accelkv-engine/poison,accelkv-tree/failpoints,accelkv-node/collide-fingerprints "$@" \
  || status=$?
if [ -s "$ACCELKV_SKIP_LIST" ]; then
  echo "== $(sort -u "$ACCELKV_SKIP_LIST" | wc -l) test(s) skipped, a tool missing (install it, or see README, Prerequisites):"
  sort -u "$ACCELKV_SKIP_LIST" | sed 's/^/   /'
else
  echo "== no test skipped"
fi
exit "$status"
