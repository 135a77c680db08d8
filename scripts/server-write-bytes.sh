#!/usr/bin/env bash
# Bytes written per acknowledged update through the server with its default flags (issue
# 57): `accelkv-server --data-dir DIR` (sync policy `sync`, default memory limit), loaded
# with redis-benchmark SETs, then /proc/PID/io read: `wchar` (bytes the process handed to
# write()) and `write_bytes` (what the process sent to the block layer, counted in whole
# pages as they were dirtied), each per SET, next to INFO's durability counters. Needs
# redis-benchmark (apt-get install -y redis-tools).
#
# Usage: scripts/server-write-bytes.sh [SETS]   (environment: PRELOAD (SETs before the
#        measured ones, default 0), KEYS (key space, default 500000), VALUE (bytes, 16),
#        FLAGS (extra server flags), BIN, PORT)
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${1:-300000}
PRELOAD=${PRELOAD:-0}
KEYS=${KEYS:-500000}
VALUE=${VALUE:-16}
PORT=${PORT:-17479}
BIN=${BIN:-target/release/accelkv-server}
[ -x "$BIN" ] || cargo build --release -p accelkv-server
DIR=$(mktemp -d /var/tmp/accelkv-wbytes.XXXXXX)
# shellcheck disable=SC2086
"$BIN" --data-dir "$DIR" --resp-port "$PORT" --port 0 --admin-port 0 ${FLAGS:-} >"$DIR.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; [ -n "${KEEP_LOG:-}" ] && cat "$DIR.log"; rm -rf "$DIR" "$DIR.log"' EXIT
for _ in $(seq 600); do [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
load() {
  redis-benchmark -p "$PORT" -t set -P 16 -c 50 -r "$KEYS" -d "$VALUE" -n "$1" -q >/dev/null
}
[ "$PRELOAD" -gt 0 ] && load "$PRELOAD"
io() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$PID/io"; }
w0=$(io wchar); b0=$(io write_bytes)
t0=$(date +%s.%N)
load "$SETS"
t1=$(date +%s.%N)
w1=$(io wchar); b1=$(io write_bytes)
info=$(redis-cli -p "$PORT" info persistence | tr -d '\r')
get() { echo "$info" | awk -F: -v k="$1" '$1 == k {print $2}'; }
awk -v s="$SETS" -v w=$((w1 - w0)) -v b=$((b1 - b0)) -v t0="$t0" -v t1="$t1" 'BEGIN {
  printf "SETs: %d in %.2f s (%.0f/s)\nwchar per SET: %.0f bytes\nwrite_bytes per SET: %.0f bytes (%.2fx wchar)\n",
    s, t1 - t0, s / (t1 - t0), w / s, b / s, (w > 0 ? b / w : 0) }'
for k in durable_bytes_written durable_commits durable_leaf_pages_written durable_delta_pages_written \
         durable_ext_pages_written durable_syncs durable_write_backs; do
  echo "$k: $(get $k)"
done
