#!/usr/bin/env bash
# What keyspace notifications cost (docs/BENCHMARKS.md, "Keyspace notifications"): Redis
# from its Debian package and accelkv-server, on loopback, in one run with the same client.
# Each server runs `redis-benchmark -t set,get -n N -r 100000 -d 16 -P 16 -c 50 --threads 1`
# with notify-keyspace-events off, then `KEA` with one `redis-cli PSUBSCRIBE '__key*'`
# taking every event (its output counted afterwards: two messages per SET), ROUNDS rounds
# interleaved; the median requests per second and the ratio to Redis in the same mode.
#
# Usage: scripts/bench-keyspace-events.sh [rounds]     (default 3; N=200000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
n=${N:-200000}
for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
bin="${CARGO_TARGET_DIR:-target}"/release/accelkv-server
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT
redis-server --port 16402 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
pids+=($!)
"$bin" --port 0 --resp-port 17402 --admin-port 0 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
sleep 1
servers=(redis:16402 accelkv:17402)
declare -A results
csv() { awk -F'"' -v t="$1" '$2 == t {print $4}'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for mode in off KEA; do
  for s in "${servers[@]}"; do
    name=${s%:*} port=${s#*:}
    redis-cli -p "$port" CONFIG SET notify-keyspace-events "${mode/off/}" >/dev/null
    if [ "$mode" = KEA ]; then
      redis-cli -p "$port" PSUBSCRIBE '__key*' >"$out/$name.events" &
      pids+=($!)
    fi
  done
  sleep 0.5
  for r in $(seq "$rounds"); do
    for s in "${servers[@]}"; do
      name=${s%:*} port=${s#*:}
      res=$(redis-benchmark -p "$port" -t set,get -n "$n" -r 100000 -d 16 -P 16 -c 50 --threads 1 --csv)
      results[$name.$mode.SET]+="$(echo "$res" | csv SET) "
      results[$name.$mode.GET]+="$(echo "$res" | csv GET) "
    done
    echo "$mode round $r done" >&2
  done
done
sleep 2
echo "| server | notify-keyspace-events | SET requests/s | GET requests/s | SET against Redis | GET against Redis |"
echo "|---|---|---:|---:|---:|---:|"
for mode in off KEA; do
  rs=$(echo "${results[redis.$mode.SET]}" | median)
  rg=$(echo "${results[redis.$mode.GET]}" | median)
  for s in "${servers[@]}"; do
    name=${s%:*}
    ms=$(echo "${results[$name.$mode.SET]}" | median)
    mg=$(echo "${results[$name.$mode.GET]}" | median)
    printf '| %s | %s | %s | %s | %.2f | %.2f |\n' "$name" "$mode" "$ms" "$mg" \
      "$(echo "$ms / $rs" | bc -l)" "$(echo "$mg / $rg" | bc -l)"
  done
done
for s in "${servers[@]}"; do
  name=${s%:*}
  # redis-cli prints four lines per pmessage (and three for the subscription).
  echo "$name's subscriber got $(( ($(grep -c '' "$out/$name.events") - 3) / 4 )) events (2 per SET: $((2 * n * rounds)))"
done
