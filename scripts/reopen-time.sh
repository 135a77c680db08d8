#!/usr/bin/env bash
# Reopen time through the server (issue 57): `accelkv-server --data-dir DIR` with its
# defaults, loaded with N 16-byte SETs over N keys (redis-benchmark), closed with SHUTDOWN
# (a clean close, whose time is reported: the next start reads the index) or killed with -9 (the next start scans
# the page file); then the time from starting the server to the first GET answered (not
# -LOADING), and the recovery line of INFO. Needs redis-benchmark and redis-cli.
#
# Usage: scripts/reopen-time.sh [N...]   (environment: BIN, PORT, FLAGS)
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-17483}
BIN=${BIN:-target/release/accelkv-server}
[ -x "$BIN" ] || cargo build --release -p accelkv-server
start() {
  # shellcheck disable=SC2086
  "$BIN" --data-dir "$1" --resp-port "$PORT" --port 0 --admin-port 0 ${FLAGS:-} >>"$1.log" 2>&1 &
  PID=$!
}
# Starts the server on $1 and sets T to the seconds until a GET was answered.
first_get() {
  local t0 t1
  t0=$(date +%s.%N)
  start "$1"
  until [ "$(redis-cli -p "$PORT" get key:000000000001 2>/dev/null | head -c 7)" != "LOADING" ] &&
        redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; do sleep 0.005; done
  t1=$(date +%s.%N)
  T=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}
for n in "${@:-300000 3000000}"; do
  DIR=$(mktemp -d /var/tmp/accelkv-reopen.XXXXXX)
  start "$DIR"
  until redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; do sleep 0.05; done
  redis-benchmark -p "$PORT" -t set -P 16 -c 50 -r "$n" -n "$((n * 2))" -d 16 -q >/dev/null
  keys=$(redis-cli -p "$PORT" dbsize)
  t0=$(date +%s.%N)
  redis-cli -p "$PORT" shutdown >/dev/null 2>&1 || true
  wait "$PID" 2>/dev/null || true
  close=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  first_get "$DIR"; clean=$T
  rec=$(redis-cli -p "$PORT" info persistence | tr -d '\r' | sed -n 's/^recovery://p')
  kill -9 "$PID"; wait "$PID" 2>/dev/null || true
  first_get "$DIR"; crash=$T
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill -9 "$PID"
  wait "$PID" 2>/dev/null || true
  echo "$keys keys: SHUTDOWN took $close s; first GET after a clean close $clean s, after kill -9 $crash s"
  echo "  clean-close recovery: $rec"
  rm -rf "$DIR" "$DIR.log"
done
