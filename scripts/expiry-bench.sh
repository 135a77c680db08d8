#!/usr/bin/env bash
# Expiry side by side with Redis (docs/BENCHMARKS.md, "Expiry"): for each server, SET with
# PX (redis-benchmark's custom command: pipelined, random keys), then how long until every
# key is reclaimed by the server's own active expiry (DBSIZE reaches 0 with no reads).
# Usage: scripts/expiry-bench.sh [keys] (default 1,000,000); needs a release build,
# redis-server and redis-benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
TTL_MS=5000
BIN=target/release/accelkv-server
[ -x "$BIN" ] || cargo build --release -p accelkv-server
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run() {
  local name=$1 port=$2
  local set_rate
  set_rate=$(redis-benchmark -p "$port" -n "$N" -r 1000000000 -c 20 -P 32 --threads 1 -q \
    SET 'key:__rand_int__' v PX "$TTL_MS" | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1)
  local loaded=$(redis-cli -p "$port" DBSIZE)
  local start=$(date +%s.%N)
  while [ "$(redis-cli -p "$port" DBSIZE)" != "0" ]; do sleep 0.05; done
  local end=$(date +%s.%N)
  echo "$name: SET PX $set_rate; $loaded keys reclaimed $(python3 -c "print(round($end - $start - $TTL_MS/1000, 2))") s after their deadline (at most)"
}
A=$(free_port); R=$(free_port)
$BIN --port 0 --resp-port "$A" --admin-port 0 >/dev/null &
APID=$!
redis-server --port "$R" --save '' --appendonly no >/dev/null &
RPID=$!
trap 'kill $APID $RPID 2>/dev/null' EXIT
sleep 1
run accelkv "$A"
run redis "$R"
