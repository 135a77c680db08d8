#!/usr/bin/env bash
# The serving-path benchmark (docs/BENCHMARKS.md, "Serving path"): Redis and memcached from
# their Debian packages and accelkv-server (default loops, and --threads 1), all on loopback
# on this machine, measured in one run with the same client.
#
#  1. redis-benchmark -t set,get -r 1000000 -d 16 -c 50 --threads 1, with -P 16 (2,000,000
#     requests) and -P 1 (500,000 requests), against Redis, Valkey (when VALKEY_SERVER names
#     a valkey-server binary: built from its public repository in a scratch folder, never
#     vendored), accelkv (default) and accelkv --threads 1, interleaved for ROUNDS rounds;
#     the median of each and its ratio to Redis and to the best RESP peer, with the server's
#     context switches per request (from /proc/PID/task/*/status).
#  2. net_bench: accelkv's binary protocol (TCP and UDP, 1/16/64 operations per frame) next
#     to Redis and memcached pipelines, from one client thread.
#  3. scripts/bench-memcached.sh: memcached -t 1 against accelkv's memcached port with one
#     event loop, memaslap with 50 connections (GET, GET of 16 keys, SET).
#
# Usage: scripts/bench-servers.sh [rounds]      (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
for tool in redis-server redis-benchmark memcached; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools memcached" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server -p accelkv-client --example net_bench
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
redis-server --port 16399 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!); redis_pid=$!
peers=(redis)
if [ -n "${VALKEY_SERVER:-}" ]; then
  "$VALKEY_SERVER" --port 16499 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
  pids+=($!); valkey_pid=$!
  peers+=(valkey)
fi
memcached -l 127.0.0.1 -p 11299 -U 0 -u root >/dev/null &
pids+=($!)
"${CARGO_TARGET_DIR:-target}"/release/accelkv-server --port 17707 --resp-port 17379 --admin-port 17708 --memcached-port off >/dev/null 2>&1 &
pids+=($!); akv_pid=$!
"${CARGO_TARGET_DIR:-target}"/release/accelkv-server --threads 1 --port 17717 --resp-port 17389 --admin-port 17718 --memcached-port off >/dev/null 2>&1 &
pids+=($!); akv1_pid=$!
sleep 1

ctx() { # total context switches of every thread of process $1
  cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'
}

declare -A results
run() { # name port pid P n
  local name=$1 port=$2 pid=$3 p=$4 n=$5 before after out
  before=$(ctx "$pid")
  out=$(redis-benchmark -p "$port" -t set,get -n "$n" -r 1000000 -d 16 -c 50 -P "$p" --threads 1 -q | tr '\r' '\n' | grep 'per second')
  after=$(ctx "$pid")
  local set get
  set=$(echo "$out" | awk '/^SET/ {print $2}')
  get=$(echo "$out" | awk '/^GET/ {print $2}')
  results["$name P$p"]+="$set/$get/$(awk -v c=$((after - before)) -v n=$((2 * n)) 'BEGIN {printf "%.2f", c / n}') "
}

for r in $(seq "$rounds"); do
  for p in 16 1; do
    n=$([ "$p" = 16 ] && echo 2000000 || echo 500000)
    run redis 16399 "$redis_pid" "$p" "$n"
    if [ -n "${VALKEY_SERVER:-}" ]; then run valkey 16499 "$valkey_pid" "$p" "$n"; fi
    run accelkv 17379 "$akv_pid" "$p" "$n"
    run accelkv-threads-1 17389 "$akv1_pid" "$p" "$n"
  done
  echo "round $r done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
field() { echo "$1" | tr ' ' '\n' | grep -v '^$' | cut -d/ -f"$2" | tr '\n' ' '; }
echo "## redis-benchmark -t set,get -r 1000000 -d 16 -c 50 --threads 1 (median of $rounds rounds; cores: $(nproc))"
echo
echo "| server | pipeline | SET req/s | GET req/s | SET vs Redis | GET vs Redis | SET vs best peer | GET vs best peer | context switches / request |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in 16 1; do
  rs=$(field "${results[redis P$p]}" 1 | median)
  rg=$(field "${results[redis P$p]}" 2 | median)
  # The best RESP peer per column (Redis or Valkey).
  bs=0; bg=0
  for peer in "${peers[@]}"; do
    ps=$(field "${results[$peer P$p]}" 1 | median); pg=$(field "${results[$peer P$p]}" 2 | median)
    bs=$(awk -v a="$bs" -v b="$ps" 'BEGIN {print (b > a) ? b : a}')
    bg=$(awk -v a="$bg" -v b="$pg" 'BEGIN {print (b > a) ? b : a}')
  done
  for name in "${peers[@]}" accelkv accelkv-threads-1; do
    s=$(field "${results[$name P$p]}" 1 | median)
    g=$(field "${results[$name P$p]}" 2 | median)
    c=$(field "${results[$name P$p]}" 3 | median)
    awk -v n="$name" -v p="$p" -v s="$s" -v g="$g" -v rs="$rs" -v rg="$rg" -v bs="$bs" -v bg="$bg" -v c="$c" \
      'BEGIN {printf "| %s | -P %s | %.0f | %.0f | %.2fx | %.2fx | %.2fx | %.2fx | %s |\n", n, p, s, g, s / rs, g / rg, s / bs, g / bg, c}'
  done
done
echo
echo "## net_bench (one client thread)"
"${CARGO_TARGET_DIR:-target}"/release/examples/net_bench --ops 100000 \
  --accelkv 127.0.0.1:17707 --redis 127.0.0.1:16399 --memcached 127.0.0.1:11299
echo
# Its own servers (ports 11297, 11298); the ones above are stopped first.
cleanup
pids=()
scripts/bench-memcached.sh "$rounds"
