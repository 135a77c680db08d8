#!/usr/bin/env bash
# Redis's collection types against Redis (docs/BENCHMARKS.md, "Hashes and sets", "Lists and
# sorted sets"): Redis from its Debian package and accelkv-server (default loops, and
# --threads 1), on loopback on this machine, measured in one run with the same client:
# redis-benchmark -t hset,sadd,spop,lpush,lpop,zadd,zpopmin,lrange_100 (-P 16 -c 50
# -r 100000, one client thread; its HSET, SADD, LPUSH and ZADD add random fields to one
# hash, set, list and sorted set, SPOP, LPOP and ZPOPMIN take from them; LRANGE_100 reads
# the first 100 elements), then HGETALL of a 1,000-field hash and ZRANGEBYSCORE of 100
# members (-P 1 -c 50), interleaved for ROUNDS rounds; the median of each and its ratio to
# Redis.
#
# Usage: scripts/bench-types.sh [rounds]      (default 3)
#        KEYSPACE=none scripts/bench-types.sh  (the issue's form, no -r: HSET, SADD and ZADD
#        write one field of a small, packed collection; LPUSH grows one list)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
keyspace=(-r "${KEYSPACE:-100000}")
[ "${KEYSPACE:-}" = none ] && keyspace=()
n=${N:-1000000}
for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
bin="${CARGO_TARGET_DIR:-target}"/release/accelkv-server
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
redis-server --port 16399 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!)
"$bin" --port 17707 --resp-port 17379 --admin-port 17708 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
"$bin" --threads 1 --port 17717 --resp-port 17389 --admin-port 17718 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
sleep 1
servers=(redis:16399 accelkv:17379 accelkv-threads-1:17389)

# A 1,000-field hash for HGETALL and a 100-member sorted set for ZRANGEBYSCORE on each.
for s in "${servers[@]}"; do
  port=${s#*:}
  for i in $(seq 0 999); do echo "HSET big f$i v$i"; done | redis-cli -p "$port" >/dev/null
  for i in $(seq 0 99); do echo "ZADD board $i m$i"; done | redis-cli -p "$port" >/dev/null
done

declare -A results
# The last test's requests per second (LRANGE_100 runs its LPUSH fill first).
rps() { awk -F'"' 'NR > 1 && /^"/ {v = $4} END {print v}'; }
for r in $(seq "$rounds"); do
  for s in "${servers[@]}"; do
    name=${s%:*} port=${s#*:}
    redis-cli -p "$port" DEL myhash myset mylist myzset >/dev/null
    for t in ${TESTS:-hset sadd spop lpush lpop zadd zpopmin lrange_100}; do
      v=$(redis-benchmark -p "$port" -t "$t" -n "$n" "${keyspace[@]}" -P 16 -c 50 --threads 1 --csv | rps)
      results[$name,$t]+="$v "
    done
    v=$(redis-benchmark -p "$port" -n 20000 -c 50 --threads 1 --csv HGETALL big | rps)
    results[$name,hgetall]+="$v "
    v=$(redis-benchmark -p "$port" -n 20000 -c 50 --threads 1 --csv ZRANGEBYSCORE board -inf +inf | rps)
    results[$name,zrangebyscore_100]+="$v "
  done
  echo "round $r done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| test | redis | accelkv | ratio | accelkv --threads 1 | ratio |"
echo "|---|---|---|---|---|---|"
for t in ${TESTS:-hset sadd spop lpush lpop zadd zpopmin lrange_100} hgetall zrangebyscore_100; do
  red=$(echo "${results[redis,$t]}" | median)
  akv=$(echo "${results[accelkv,$t]}" | median)
  one=$(echo "${results[accelkv-threads-1,$t]}" | median)
  printf '| %s | %.0f | %.0f | %.2f | %.0f | %.2f |\n' "$t" "$red" "$akv" "$(echo "$akv / $red" | bc -l)" \
    "$one" "$(echo "$one / $red" | bc -l)"
done
