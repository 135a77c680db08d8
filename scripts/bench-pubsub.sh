#!/usr/bin/env bash
# PUBLISH against Redis (docs/BENCHMARKS.md, "Pub/sub"): Redis from its Debian package and
# accelkv-server (default loops, and --threads 1), on loopback on this machine, in one run
# with the same client. Each server gets SUBS subscribers (`redis-cli SUBSCRIBE news`, their
# output counted afterwards: every message must have reached every subscriber), then
# `redis-benchmark -n N -P 16 -c 50 --threads 1 PUBLISH news <16 bytes>`, ROUNDS rounds
# interleaved; the median requests per second and its ratio to Redis.
#
# Usage: scripts/bench-pubsub.sh [rounds]     (default 3; SUBS=1, N=200000)
#        VALKEY_SERVER=/path/to/valkey-server scripts/bench-pubsub.sh   (Valkey in the run too:
#        built from its public repository in a scratch folder, never vendored)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
subs=${SUBS:-1}
n=${N:-200000}
for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
bin="${CARGO_TARGET_DIR:-target}"/release/accelkv-server
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT
redis-server --port 16399 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!)
"$bin" --port 17707 --resp-port 17379 --admin-port 17708 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
"$bin" --threads 1 --port 17717 --resp-port 17389 --admin-port 17718 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
servers=(redis:16399 accelkv:17379 accelkv-threads-1:17389)
if [ -n "${VALKEY_SERVER:-}" ]; then
  "$VALKEY_SERVER" --port 16499 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
  pids+=($!)
  servers+=(valkey:16499)
fi
sleep 1
for s in "${servers[@]}"; do
  name=${s%:*} port=${s#*:}
  for i in $(seq "$subs"); do
    redis-cli -p "$port" SUBSCRIBE news >"$out/$name.$i" &
    pids+=($!)
  done
done
sleep 1

declare -A results
rps() { awk -F'"' 'NR > 1 && /^"/ {v = $4} END {print v}'; }
for r in $(seq "$rounds"); do
  for s in "${servers[@]}"; do
    name=${s%:*} port=${s#*:}
    v=$(redis-benchmark -p "$port" -n "$n" -P 16 -c 50 --threads 1 --csv PUBLISH news 0123456789abcdef | rps)
    results[$name]+="$v "
  done
  echo "round $r done" >&2
done
sleep 2
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
base=$(echo "${results[redis]}" | median)
echo "| server | PUBLISH requests/s (median of $rounds) | against Redis | messages each subscriber got |"
echo "|---|---|---|---|"
for s in "${servers[@]}"; do
  name=${s%:*}
  m=$(echo "${results[$name]}" | median)
  # redis-cli prints three lines per message (and three for the subscription).
  got=$(for i in $(seq "$subs"); do echo $(( $(grep -c '' "$out/$name.$i") / 3 - 1 )); done | sort -u | tr '\n' ' ')
  printf '| %s | %s | %.2f | %s (of %s) |\n' "$name" "$m" "$(echo "$m / $base" | bc -l)" "$got" $((n * rounds))
done
