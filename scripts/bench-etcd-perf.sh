#!/usr/bin/env bash
# The peer for replicated writes (docs/BENCHMARKS.md "Replicated writes"): etcd's own
# benchmark, `etcdctl check perf`, against a three-member etcd cluster on loopback (each
# member fsyncs its Raft log, as each accelkv replica does), then the same machine's
# three-replica accelkv range (scripts/bench-cluster.sh's layout) under redis-benchmark SET
# with 50 connections, with and without a 16-command pipeline, beside one plain server.
# `check perf` offers fixed rates (l: 8,000 puts/s from 500 clients; xl: 15,000 from 1,000)
# for 60 s and reports what the cluster sustained, its latencies and PASS or FAIL.
#
# Usage: scripts/bench-etcd-perf.sh [load]     (default xl; s, m, l or xl)
set -euo pipefail
cd "$(dirname "$0")/.."
load=${1:-xl}
source scripts/cluster-bench-lib.sh
need_tools etcd etcdctl redis-benchmark redis-cli
source scripts/build-env.sh
cargo build --release -q -p accelkv-server --features cluster
bin=./target/release/accelkv-server
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
peers="e1=http://127.0.0.1:23801,e2=http://127.0.0.1:23802,e3=http://127.0.0.1:23803"
for i in 1 2 3; do
  etcd --name "e$i" --data-dir "$dir/e$i" --initial-cluster "$peers" \
    --initial-advertise-peer-urls "http://127.0.0.1:2380$i" --listen-peer-urls "http://127.0.0.1:2380$i" \
    --listen-client-urls "http://127.0.0.1:2379$i" --advertise-client-urls "http://127.0.0.1:2379$i" \
    --initial-cluster-state new >"$dir/e$i.log" 2>&1 &
  pids+=($!)
  disown $!
done
eps=http://127.0.0.1:23791,http://127.0.0.1:23792,http://127.0.0.1:23793
until etcdctl --endpoints "$eps" endpoint health >/dev/null 2>&1; do sleep 0.2; done
echo "== etcd 3.4, three members: etcdctl check perf --load=$load"
etcdctl --endpoints "$eps" check perf --load="$load" 2>&1 | tr '\r' '\n' | grep -E "^(PASS|FAIL)" || true
for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
pids=()

# accelkv: etcd for the map, three nodes, one range; one plain server beside them.
etcd --name bench --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:22379 \
  --advertise-client-urls http://127.0.0.1:22379 --listen-peer-urls http://127.0.0.1:22380 \
  >"$dir/etcd.log" 2>&1 &
pids+=($!)
disown $!
until etcdctl --endpoints http://127.0.0.1:22379 endpoint health >/dev/null 2>&1; do sleep 0.2; done
declare -A node_pid
for i in 1 2 3; do
  $bin --cluster etcd=http://127.0.0.1:22379 --node-id "$i" --data-dir "$dir/n$i" \
    --resp-port "1810$i" --raft-port "1820$i" --port "1830$i" --admin-port 0 --threads 1 \
    >"$dir/n$i.log" 2>&1 &
  node_pid[$i]=$!
  pids+=($!)
  disown $!
done
$bin --threads 1 --port 18399 --resp-port 18199 --admin-port 0 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
disown $!
for i in 1 2 3; do
  for _ in $(seq 600); do grep -q listening "$dir/n$i.log" 2>/dev/null && break; sleep 0.1; done
  grep -q listening "$dir/n$i.log" || { echo "node $i did not start:" >&2; cat "$dir/n$i.log" >&2; exit 1; }
done
leader=$(resp_leader)
rate() { # $1 port, $2 pipeline depth: SETs per second
  redis-benchmark -p "$1" -c 50 -P "$2" -n "$3" -r 100000 -d 16 -t set --csv 2>/dev/null \
    | awk -F'","' '/^"SET"/ { print $2 }'
}
printf '%-24s %12s %12s %7s\n' "accelkv SET, -c 50" "3 replicas" "one server" ratio
for depth in 1 16; do
  n=$((depth == 1 ? 100000 : 400000))
  a=$(rate "$leader" "$depth" "$n")
  b=$(rate 18199 "$depth" "$((n * 4))")
  printf '%-24s %12s %12s %7s\n' "-P $depth" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
done
