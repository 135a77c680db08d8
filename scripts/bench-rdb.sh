#!/usr/bin/env bash
# `redis-cli --rdb` against Redis and accelkv side by side (docs/BENCHMARKS.md, "An RDB file
# through SYNC"): each server filled with KEYS string keys by DEBUG POPULATE (16-byte
# values), then the whole transfer timed, ROUNDS rounds interleaved, the median of each and
# the ratio. Redis is its Debian package, with `repl-diskless-sync-delay 0` (its default
# waits 5 s for more replicas before a transfer starts, which this measure leaves out); its
# fork writes the file to the socket while accelkv builds it at one snapshot in memory first.
# Both files are checked to load into a fresh redis-server with every key.
#
# Usage: scripts/bench-rdb.sh [rounds]     (default 3; KEYS=1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
keys=${KEYS:-1000000}
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
bin="${CARGO_TARGET_DIR:-target}"/release/accelkv-server
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
redis-server --port 17500 --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --enable-debug-command yes --repl-diskless-sync-delay 0 >/dev/null &
pids+=($!)
"$bin" --port 0 --resp-port 17501 --admin-port 0 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
for port in 17500 17501; do
  for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" DEBUG POPULATE "$keys" key 16 >/dev/null
done
declare -A times
for _ in $(seq "$rounds"); do
  for port in 17500 17501; do
    s=$(date +%s%N)
    redis-cli -p "$port" --rdb "$dir/$port.rdb" >/dev/null 2>&1
    e=$(date +%s%N)
    times[$port]+="$(( (e - s) / 1000000 )) "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
r=$(echo "${times[17500]}" | median)
a=$(echo "${times[17501]}" | median)
for port in 17500 17501; do
  redis-server --port 17502 --bind 127.0.0.1 --save '' --dir "$dir" --dbfilename "$port.rdb" >/dev/null &
  p=$!
  for _ in $(seq 300); do [ "$(redis-cli -p 17502 PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  loaded=$(redis-cli -p 17502 DBSIZE)
  redis-cli -p 17502 SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$p" 2>/dev/null || true
  [ "$loaded" = "$keys" ] || { echo "the file from port $port loaded $loaded keys of $keys" >&2; exit 1; }
done
echo "| keys | Redis ms | accelkv ms | Redis / accelkv (speed-up) | file bytes (Redis, accelkv) |"
echo "|---:|---:|---:|---:|---|"
echo "| $keys | $r | $a | $(awk -v r="$r" -v a="$a" 'BEGIN {printf "%.2f", r / a}') | $(stat -c %s "$dir/17500.rdb"), $(stat -c %s "$dir/17501.rdb") |"
