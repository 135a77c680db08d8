#!/usr/bin/env bash
# Starts a three-node accelkv cluster on loopback for trying it out (docs/CLUSTER.md): an
# etcd (Debian's etcd-server) for the range map and membership, and three accelkv-server
# nodes, each a replica of the one range the first map holds. Ctrl-C stops everything.
#
#   RESP:  127.0.0.1:7101, 7102, 7103 (any node: a follower proxies to the range's leader)
#   Raft:  127.0.0.1:7201, 7202, 7203      etcd: http://127.0.0.1:2379
#
# Usage: scripts/cluster-local.sh [data dir]     (default: target/cluster-local; kept, so a
#        second start recovers every node from its Raft log and snapshots)
#        SLOTS=redis scripts/cluster-local.sh DIR   places keys by Redis Cluster's hash slot,
#        so cluster-aware clients connect (redis-cli -c, RedisCluster, ClusterClient); a
#        data dir keeps the mode it was made with
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/cluster-local}
command -v etcd >/dev/null || {
  echo "etcd is needed: apt-get install -y etcd-server" >&2
  exit 1
}
# protoc for the cluster feature's build: installed, or the vendored one.
source scripts/build-env.sh
cargo build --release -q -p accelkv-server --features cluster
mkdir -p "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
etcd --name accelkv-local --data-dir "$dir/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 >"$dir/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/2379) 2>/dev/null && break
  sleep 0.1
done
for i in 1 2 3; do
  ./target/release/accelkv-server --cluster etcd=http://127.0.0.1:2379 --node-id "$i" \
    --data-dir "$dir/node$i" --resp-port "710$i" --raft-port "720$i" \
    --port "770$i" --admin-port "780$i" --threads 1 --slots "${SLOTS:-native}" \
    ${EXTRA_FLAGS:-} >"$dir/node$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 100); do
    grep -q listening "$dir/node$i.log" 2>/dev/null && break
    sleep 0.1
  done
  grep listening "$dir/node$i.log" || { cat "$dir/node$i.log" >&2; exit 1; }
done
echo
echo "cluster up: try  redis-cli -p 7101 SET greeting hello  and  redis-cli -p 7103 GET greeting"
[ "${SLOTS:-native}" = redis ] && echo "slot mode: redis-cli -c -p 7101 CLUSTER SLOTS; any Redis Cluster client starting from 127.0.0.1:7101"
echo "binary protocol on ports 7701-7703 (a range's leader serves it; others answer MOVED)"
echo "logs in $dir; Ctrl-C stops the cluster"
wait
