#!/usr/bin/env bash
# Starts accelkv-server, Redis and memcached (Debian packages) on loopback, runs the network
# benchmarks against all three from one client thread, then redis-benchmark against Redis
# and accelkv's RESP endpoint, and stops every server it started (by process id).
# Usage: scripts/bench-servers.sh [ops]     (results: paste into docs/BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-100000}
for tool in redis-server redis-benchmark memcached; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server memcached" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server -p accelkv-client --example net_bench
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
./target/release/accelkv-server --port 17707 --resp-port 17379 --admin-port 17708 >/dev/null &
pids+=($!)
redis-server --port 16399 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!)
memcached -l 127.0.0.1 -p 11299 -U 0 -u root >/dev/null &
pids+=($!)
sleep 1
echo "## net_bench ($ops operations per row)"
./target/release/examples/net_bench --ops "$ops" \
  --accelkv 127.0.0.1:17707 --redis 127.0.0.1:16399 --memcached 127.0.0.1:11299
for target in "Redis 16399" "accelkv-RESP 17379"; do
  set -- $target
  echo "## redis-benchmark -t get,set -n 500000 -P 16 -c 50 against $1"
  redis-benchmark -p "$2" -t get,set -n 500000 -P 16 -c 50 -q | tr '\r' '\n' | grep 'requests per second'
done
