#!/usr/bin/env bash
# Moving in from a running Redis (docs/REPLICATION.md): a redis-server loaded with N keys
# (strings, and hashes through HSET) takes a write load (redis-benchmark, pipelined)
# while accelkv, started with its defaults, follows it with REPLICAOF. Prints the time to
# the link up (the snapshot sent and loaded), the lag (primary offset minus the replica's,
# in bytes) sampled during the load, the time to catch up once the load stops, and both
# servers' DBSIZE. Needs redis-server, redis-cli and redis-benchmark.
#
# Usage: scripts/migrate-from-redis.sh [N] [LOAD_SECONDS]   (environment: BIN, FLAGS)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
SECS=${2:-10}
BIN=${BIN:-target/release/accelkv-server}
[ -x "$BIN" ] || cargo build --release -p accelkv-server
RP=16479; AP=17479
DIR=$(mktemp -d /tmp/accelkv-migrate.XXXXXX)
cleanup() { redis-cli -p $RP shutdown nosave >/dev/null 2>&1 || true; kill "$APID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
redis-server --port $RP --dir "$DIR" --save "" --repl-diskless-sync-delay 0 --daemonize yes --logfile "$DIR/redis.log"
until redis-cli -p $RP ping 2>/dev/null | grep -q PONG; do sleep 0.05; done
redis-benchmark -p $RP -t set -P 32 -c 20 -r "$N" -n "$N" -d 16 -q >/dev/null
redis-benchmark -p $RP -t hset -P 32 -c 20 -r "$((N / 10))" -n "$((N / 2))" -q >/dev/null
echo "primary: $(redis-cli -p $RP dbsize) keys, $(redis-cli -p $RP info memory | tr -d '\r' | sed -n 's/^used_memory_human://p')"
# shellcheck disable=SC2086
"$BIN" --resp-port $AP --port 0 --admin-port 0 --memcached-port 0 ${FLAGS:-} >"$DIR/accelkv.log" 2>&1 &
APID=$!
until redis-cli -p $AP ping 2>/dev/null | grep -q PONG; do sleep 0.05; done
redis-benchmark -p $RP -t set,hset -P 16 -c 8 -r "$N" -n 100000000 -d 16 -q >/dev/null 2>&1 &
LOAD=$!
sleep 1
t0=$(date +%s.%N)
redis-cli -p $AP replicaof 127.0.0.1 $RP >/dev/null
until [ "$(redis-cli -p $AP role | sed -n 4p)" = connected ]; do sleep 0.02; done
t1=$(date +%s.%N)
echo "link up (snapshot sent and loaded) after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s"
off() { redis-cli -p "$1" info replication | tr -d '\r' | sed -n "s/^$2://p"; }
max=0; sum=0; n=0
end=$(( $(date +%s) + SECS ))
while [ "$(date +%s)" -lt "$end" ]; do
  lag=$(( $(off $RP master_repl_offset) - $(off $AP slave_repl_offset) ))
  [ "$lag" -gt "$max" ] && max=$lag
  sum=$((sum + lag)); n=$((n + 1))
  sleep 0.2
done
before=$(off $RP master_repl_offset)
kill $LOAD; wait $LOAD 2>/dev/null || true
t2=$(date +%s.%N)
target=$(off $RP master_repl_offset)
until [ "$(off $AP slave_repl_offset)" -ge "$target" ]; do sleep 0.02; done
t3=$(date +%s.%N)
echo "under load for ${SECS} s: lag mean $((sum / n)) bytes, max $max bytes; stream $(( (before) / 1048576 )) MiB in all"
echo "caught up $(awk -v a="$t2" -v b="$t3" 'BEGIN{printf "%.2f", b-a}') s after the load stopped"
echo "DBSIZE: primary $(redis-cli -p $RP dbsize), accelkv $(redis-cli -p $AP dbsize)"
redis-cli -p $AP info replication | tr -d '\r' | grep -E "^accelkv_"
