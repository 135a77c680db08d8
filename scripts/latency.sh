#!/usr/bin/env bash
# Latency at 50% of accelkv's peak (docs/BENCHMARKS.md, "Serving path"): accelkv-server
# (default loops) and Redis (Debian package) on loopback; accelkv's peak is measured first
# with redis-benchmark -P 1 -c 50 --threads 1 (GET and SET separately), then the open-loop
# client (bench/examples/open_loop.rs: 50 connections, one request per connection at a time
# on a fixed schedule, latency from the scheduled send time) offers half of that peak to
# each server in turn, for ROUNDS rounds.
#
# Usage: scripts/latency.sh [rounds]     (default 2; SECS=5 seconds per measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
secs=${SECS:-5}
for tool in redis-server redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server -p accelkv-bench --example open_loop
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
redis-server --port 16399 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!)
./target/release/accelkv-server --port 17707 --resp-port 17379 --admin-port 17708 >/dev/null 2>&1 &
pids+=($!)
sleep 1
peak() { # port test
  redis-benchmark -p "$1" -t "$2" -n 500000 -r 1000000 -d 16 -c 50 -P 1 --threads 1 -q |
    tr '\r' '\n' | awk '/per second/ {print $2}' | tail -1
}
for port in 16399 17379; do # the keys the GETs read
  redis-benchmark -p "$port" -t set -n 1000000 -r 1000000 -d 16 -c 50 -P 16 -q >/dev/null
done
echo "## Latency at 50% of accelkv's peak (open loop, 50 connections, $secs s per row; cores: $(nproc))"
echo
echo "| server | command | offered req/s | achieved req/s | p50 µs | p99 µs | p99.9 µs | max µs |"
echo "|---|---|---|---|---|---|---|---|"
for cmd in get set; do
  p=$(peak 17379 "$cmd")
  rate=$(awk -v p="$p" 'BEGIN {printf "%.0f", p / 2}')
  echo "accelkv peak $cmd: $p req/s; offering $rate" >&2
  for r in $(seq "$rounds"); do
    for t in redis:16399 accelkv:17379; do
      ./target/release/examples/open_loop --addr "127.0.0.1:${t#*:}" --rate "$rate" \
        --secs "$secs" --cmd "$cmd" --label "${t%%:*}"
    done
  done
done
