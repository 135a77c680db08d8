#!/usr/bin/env bash
# What clients see while a range splits and moves (docs/CLUSTER.md "Measured"): etcd and
# four accelkv-server --cluster nodes (--threads 1) on loopback; the first three hold the
# first range, the fourth is spare. client/examples/cluster_changes.rs loads 100,000 keys,
# then runs SET and GET threads through the Rust cluster client while it splits the range
# (CLUSTER SPLIT) and then moves the first range's replica off its leader's node to the
# spare (CLUSTER MOVE), and prints, per change, the command's time, the longest time no
# operation completed, the slowest operation and the throughput around it.
#
# Usage: scripts/bench-cluster-changes.sh [threads]     (default 4: 2 SET, 2 GET)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-4}
command -v etcd >/dev/null || {
  echo "install etcd: apt-get install -y etcd-server" >&2
  exit 1
}
# protoc for the cluster feature's build: installed, or the vendored one.
source scripts/build-env.sh
cargo build --release -q -p accelkv-server --features cluster
cargo build --release -q -p accelkv-client --example cluster_changes
bin=./target/release/accelkv-server
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  grep -h "leads\|no leader\|split off\|moved away" "$dir"/n*.log 2>/dev/null | sed 's/^/  log: /' || true
  rm -rf "$dir"
}
trap cleanup EXIT
etcd --name bench --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:22479 \
  --advertise-client-urls http://127.0.0.1:22479 --listen-peer-urls http://127.0.0.1:22480 \
  >"$dir/etcd.log" 2>&1 &
pids+=($!)
disown $!
sleep 1
start_node() { # $1: node id
  $bin --cluster etcd=http://127.0.0.1:22479 --node-id "$1" --data-dir "$dir/n$1" \
    --resp-port "1830$1" --raft-port "1840$1" --port 0 --admin-port 0 --threads 1 \
    --split-size 0 >"$dir/n$1.log" 2>&1 &
  pids+=($!)
  disown $!
}
for i in 1 2 3; do start_node "$i"; done
for i in 1 2 3; do
  until grep -q listening "$dir/n$i.log" 2>/dev/null; do sleep 0.1; done
done
start_node 4
until grep -q listening "$dir/n4.log" 2>/dev/null; do sleep 0.1; done
./target/release/examples/cluster_changes 127.0.0.1:18301,127.0.0.1:18302,127.0.0.1:18303 4 "$threads"
