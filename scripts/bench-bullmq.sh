#!/usr/bin/env bash
# BullMQ's job throughput against accelkv and Redis in one run (docs/BENCHMARKS.md, "BullMQ"):
# tests/clients/node/bullmq/bench.mjs adds JOBS jobs in bulks of 500, then one worker
# (concurrency 16) processes them; each server is a fresh process with one event loop
# thread per core it may use, no persistence. Prints each server's adds/s and processed/s.
#
# Usage: [JOBS=20000] [ROUNDS=3] scripts/bench-bullmq.sh   (needs node and `npm ci` in
# tests/clients/node/bullmq; builds the server in release)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-20000}
ROUNDS=${ROUNDS:-3}
cargo build --release -q -p accelkv-server
bin="${CARGO_TARGET_DIR:-target}"/release/accelkv-server
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
redis-server --port 16399 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!)
"$bin" --port 0 --resp-port 17399 --admin-port 0 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
sleep 1
for round in $(seq "$ROUNDS"); do
  for target in redis:16399 accelkv:17399; do
    line=$(cd tests/clients/node/bullmq && JOBS=$JOBS ACCELKV_RESP_ADDR=127.0.0.1:${target#*:} node bench.mjs)
    echo "round $round ${target%%:*} $line"
  done
done
