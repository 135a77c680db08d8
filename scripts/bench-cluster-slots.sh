#!/usr/bin/env bash
# Slot mode against Redis Cluster on loopback (docs/CLUSTER.md "Slot mode", docs/BENCHMARKS.md
# "Slot mode against Redis Cluster"): `redis-benchmark --cluster -t set,get -P 16` against
#   - three accelkv-server --cluster --slots redis nodes (--threads 1 each; etcd), every
#     range replicated on all three with Raft, and
#   - Redis Cluster of three primaries (redis-server --cluster-enabled yes, no replicas,
#     no persistence: its default, in memory),
# interleaved for ROUNDS rounds, all on this machine; the median of each and the ratio.
# redis-benchmark finds the primaries with CLUSTER NODES and sends each key to its slot's.
# accelkv's one range is first split at slots 5461 and 10923, so, as in Redis Cluster, each
# node is primary of a third of the slots. Needs python3 with redis-py (its key_slot).
#
# Usage: scripts/bench-cluster-slots.sh [rounds] [requests]     (defaults 3 and 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
n=${2:-200000}
source scripts/cluster-bench-lib.sh
need_tools etcd redis-benchmark redis-cli redis-server python3
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
etcd --name bench --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:22379 \
  --advertise-client-urls http://127.0.0.1:22379 --listen-peer-urls http://127.0.0.1:22380 \
  >"$dir/etcd.log" 2>&1 &
pids+=($!)
disown $!
sleep 1
declare -A node_pid
for i in 1 2 3; do
  $bin --cluster etcd=http://127.0.0.1:22379 --node-id "$i" --data-dir "$dir/n$i" --slots redis \
    --resp-port "1810$i" --raft-port "1820$i" --port "1830$i" --admin-port 0 --threads 1 \
    >"$dir/n$i.log" 2>&1 &
  node_pid[$i]=$!
  pids+=($!)
  disown $!
done
for i in 1 2 3; do
  mkdir -p "$dir/r$i"
  (cd "$dir/r$i" && exec redis-server --port "1900$i" --cluster-enabled yes --save '' \
    --appendonly no --cluster-config-file nodes.conf) >"$dir/r$i.log" 2>&1 &
  pids+=($!)
  disown $!
done
for i in 1 2 3; do
  until grep -q listening "$dir/n$i.log" 2>/dev/null; do sleep 0.1; done
  until redis-cli -p "1900$i" PING >/dev/null 2>&1; do sleep 0.1; done
done
redis-cli --cluster create 127.0.0.1:19001 127.0.0.1:19002 127.0.0.1:19003 \
  --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1
until redis-cli -p 19001 CLUSTER INFO | grep -q cluster_state:ok; do sleep 0.1; done
leader=$(resp_leader)
# Three runs of slots as Redis Cluster's, each range led by another node (slot mode hands
# a range split off to the replica leading fewest): split at keys of slots 5461 and 10923.
for key in $(python3 -c '
from redis.crc import key_slot
for s in (5461, 10923):
    i = 0
    while key_slot(b"k%d" % i) != s:
        i += 1
    print("k%d" % i)'); do
  redis-cli -p "$leader" CLUSTER SPLIT "$key" >/dev/null
done
sleep 1
leader=$(resp_leader)
echo "accelkv slot mode: $(redis-cli -p "$leader" CLUSTER NODES | awk '{print $2, $3, $9, $10, $11}' | tr '\n' ';')"
echo "Redis Cluster:     $(redis-cli -p 19001 CLUSTER NODES | awk '{print $2, $3, $9}' | tr '\n' ';')"
redis-benchmark --cluster -p "$leader" -n 20000 -c 50 -r 100000 -d 16 -t set -q >/dev/null # warm up
redis-benchmark --cluster -p 19001 -n 20000 -c 50 -r 100000 -d 16 -t set -q >/dev/null

run() { # $1 port, $2 test: prints requests per second; any error reply fails the benchmark
  redis-benchmark --cluster -p "$1" -c 50 -P 16 --threads 2 -n "$n" -r 100000 -d 16 -t "$2" \
    --csv >"$dir/out" 2>"$dir/err" || true
  if grep -qi "error" "$dir/err"; then
    echo "$2 on port $1 failed:" >&2
    head -5 "$dir/err" >&2
    exit 1
  fi
  awk -F'","' '/^"(SET|GET)"/ { print $2 }' "$dir/out"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
declare -A got
for r in $(seq "$rounds"); do
  for t in set get; do
    got[a$t]+="$(run "$leader" "$t") "
    got[r$t]+="$(run 19001 "$t") "
  done
done
printf '%-4s %14s %14s %7s\n' test accelkv redis-cluster ratio
for t in set get; do
  a=$(tr ' ' '\n' <<<"${got[a$t]}" | grep . | median)
  r=$(tr ' ' '\n' <<<"${got[r$t]}" | grep . | median)
  printf '%-4s %14s %14s %7s\n' "$t" "$a" "$r" "$(awk -v a="$a" -v b="$r" 'BEGIN { printf "%.2f", a / b }')"
  echo "  rounds: accelkv ${got[a$t]}| redis ${got[r$t]}"
done
