#!/usr/bin/env bash
# Splits by load on loopback (docs/CLUSTER.md "Measured", "Splits by load"): etcd and three
# accelkv-server --cluster --threads 1 nodes on this machine, driven by redis-benchmark
# -c 50 --threads 1 (SET of 16-byte values and GET, uniform over 100,000 keys).
#
#  1. What more ranges on the same three nodes do: SET and GET with the key space in one
#     range, then after three `CLUSTER SPLIT`s (four ranges, each split range led by the
#     node that led its parent, so all four on one leader), in a fresh cluster each round.
#  2. A split by load as it happens: a fresh cluster with --split-load LOAD, 50 clients
#     sending 100,000 SETs then 600,000 GETs; when the map's range count changed (CLUSTER
#     INFO polled every 50 ms), the splits the nodes logged, each phase's rate and its error
#     replies (redis-benchmark is a plain client: it retries nothing).
#
# Rounds 0 skips part 1.
#
# Usage: scripts/bench-cluster-load.sh [rounds] [load]     (defaults 3 and 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
load=${2:-20000}
source scripts/cluster-bench-lib.sh
need_tools etcd redis-benchmark redis-cli
source scripts/build-env.sh
cargo build --release -q -p accelkv-server --features cluster
bin=./target/release/accelkv-server
dir=$(mktemp -d)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  pids=()
  sleep 0.5
}
trap 'stop_all; rm -rf "$dir"' EXIT

start_cluster() { # $@: extra flags for every node
  rm -rf "$dir/c"
  mkdir -p "$dir/c"
  etcd --name bench --data-dir "$dir/c/etcd" --listen-client-urls http://127.0.0.1:22379 \
    --advertise-client-urls http://127.0.0.1:22379 --listen-peer-urls http://127.0.0.1:22380 \
    >"$dir/c/etcd.log" 2>&1 &
  pids+=($!)
  disown $!
  sleep 1
  for i in 1 2 3; do
    $bin --cluster etcd=http://127.0.0.1:22379 --node-id "$i" --data-dir "$dir/c/n$i" \
      --resp-port "1810$i" --raft-port "1820$i" --port "1830$i" --admin-port 0 --threads 1 \
      --split-size 0 "$@" >"$dir/c/n$i.log" 2>&1 &
    pids+=($!)
    disown $!
  done
  for i in 1 2 3; do
    until grep -q listening "$dir/c/n$i.log" 2>/dev/null; do sleep 0.1; done
  done
}
run() { # $1 port, $2 test: prints ops/s; any error reply fails the benchmark
  local common=(-p "$1" -c 50 --threads 1 --csv -r 100000)
  case $2 in
    SET) redis-benchmark "${common[@]}" -n 100000 -d 16 -t set ;;
    GET) redis-benchmark "${common[@]}" -n 200000 -t get ;;
  esac >"$dir/out" 2>"$dir/err"
  if grep -q . "$dir/err"; then
    echo "$2 on port $1 failed:" >&2
    head -3 "$dir/err" >&2
    exit 1
  fi
  awk -F'","' 'NR == 2 { print $2 }' "$dir/out"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
declare -A rps
for r in $(seq "$rounds"); do
  start_cluster
  port=$(resp_leader)
  redis-benchmark -p "$port" -n 100000 -c 50 -r 100000 -d 16 -t set -q >/dev/null # load
  for t in SET GET; do rps[$t-1]+="$(run "$port" "$t") "; done
  for at in 025000 050000 075000; do
    # (-TRYAGAIN while the previous split is still being recorded)
    until redis-cli -p "$port" CLUSTER SPLIT "key:000000$at" | grep -qE '^[0-9]+$'; do sleep 0.1; done
  done
  sleep 1
  ranges=$(redis-cli -p "$port" CLUSTER INFO | tr -d '\r' | awk -F: '$1 == "cluster_ranges" { print $2 }')
  port=$(resp_leader)
  for t in SET GET; do rps[$t-4]+="$(run "$port" "$t") "; done
  echo "round $r: ${ranges} ranges after the splits"
  stop_all
done
if [ "$rounds" -gt 0 ]; then
  echo
  printf '%-4s %16s %16s %8s\n' test "1 range ops/s" "4 ranges ops/s" ratio
  for t in SET GET; do
    a=$(echo "${rps[$t-1]}" | tr ' ' '\n' | grep . | median)
    b=$(echo "${rps[$t-4]}" | tr ' ' '\n' | grep . | median)
    printf '%-4s %16.0f %16.0f %7.2fx\n' "$t" "$a" "$b" "$(echo "$b / $a" | bc -l)"
  done
fi
echo
echo "a split by load: --split-load $load; 100,000 SETs, then 600,000 GETs"
start_cluster --split-load "$load"
port=$(resp_leader)
t0=$(date +%s%N)
( # when the map's range count changes, in ms from the start of the load
  last=1
  while sleep 0.05; do
    n=$(redis-cli -p 18101 CLUSTER INFO 2>/dev/null | tr -d '\r' | awk -F: '$1 == "cluster_ranges" { print $2 }')
    if [ -n "$n" ] && [ "$n" != "$last" ]; then
      echo "  $(( ($(date +%s%N) - t0) / 1000000 )) ms: $n ranges"
      last=$n
    fi
  done
) &
watcher=$!
for t in set get; do
  n=100000
  [ $t = get ] && n=600000
  t1=$(date +%s%N)
  if ! redis-benchmark -p "$port" -c 50 --threads 1 --csv -r 100000 -d 16 -n $n -t $t >"$dir/out" 2>"$dir/err"; then
    echo "  ${t^^} failed after $(( ($(date +%s%N) - t0) / 1000000 )) ms:" >&2
    head -5 "$dir/err" "$dir/out" >&2
    tail -n 5 "$dir"/c/n*.log >&2
    exit 1
  fi
  t2=$(date +%s%N)
  echo "  ${t^^} from $(( (t1 - t0) / 1000000 )) ms to $(( (t2 - t0) / 1000000 )) ms: $(awk -F'","' 'NR == 2 { print $2 }' "$dir/out") ops/s, error replies: $(grep -c . "$dir/err" || true)"
done
kill "$watcher" 2>/dev/null || true
grep -h "over --split-load" "$dir"/c/n*.log | sed 's/^/  /'
redis-cli -p "$port" CLUSTER INFO | tr -d '\r' | grep -E 'cluster_ranges:|commands_led' | sed 's/^/  /'
