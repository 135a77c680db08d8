#!/usr/bin/env bash
# Single commands against Redis (docs/BENCHMARKS.md, "HyperLogLog and geo"): Redis from its
# Debian package and accelkv-server (default loops, and --threads 1), on loopback on this
# machine, each driven by the same redis-benchmark (-c 50, one client thread, -P 16 for the
# writes and the cheap reads), interleaved for ROUNDS rounds; the median of each and its
# ratio to Redis. Each test is a name, its pipeline depth and its command:
#   pfadd       PFADD of a random element (-r 1,000,000) to one HLL (dense after a few
#               thousand elements, as in Redis)
#   pfcount     PFCOUNT of that HLL (its cached cardinality)
#   pfcount_3   PFCOUNT of three HLLs (their union, computed each time)
#   pfmerge     PFMERGE of two HLLs into a third
#   geosearch   GEOSEARCH of a 10,000-member grid (0.01° apart) within 5.6 km, ASC: 100
#               members with their distances
#   geoadd      GEOADD of a random member at a fixed position (-r 1,000,000)
# Valkey joins the run when VALKEY_SERVER names a valkey-server (it is not packaged for this
# machine's Debian 12: built from its public repository in a scratch folder, never vendored).
#
# Usage: scripts/bench-commands.sh [rounds]     (default 3; TESTS="pfadd pfcount" picks)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
n=${N:-500000}
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
servers=(redis:16399 accelkv:17379 accelkv-threads-1:17389)
if [ -n "${VALKEY_SERVER:-}" ]; then
  "$VALKEY_SERVER" --port 16499 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
  pids+=($!)
  servers+=(valkey:16499)
fi
sleep 1

# Name, pipeline depth, command (redis-benchmark's __rand_int__ with -r).
declare -A depth cmd
depth[pfadd]=16; cmd[pfadd]="PFADD hll __rand_int__"
depth[pfcount]=16; cmd[pfcount]="PFCOUNT hll"
depth[pfcount_3]=1; cmd[pfcount_3]="PFCOUNT hll hll2 hll3"
depth[pfmerge]=1; cmd[pfmerge]="PFMERGE hllm hll2 hll3"
depth[geosearch]=1; cmd[geosearch]="GEOSEARCH grid FROMLONLAT 13.5 38.5 BYRADIUS 5.6 km ASC WITHDIST"
depth[geoadd]=16; cmd[geoadd]="GEOADD places 13.361389 38.115556 __rand_int__"
tests=${TESTS:-pfadd pfcount pfcount_3 pfmerge geoadd geosearch}

# What the reads read: three HLLs of 100,000 elements each (dense), on every server.
for s in "${servers[@]}"; do
  port=${s#*:}
  redis-cli -p "$port" DEL hll hll2 hll3 hllm >/dev/null
  for k in hll hll2 hll3; do
    awk -v k="$k" 'BEGIN { for (i = 0; i < 1000; i++) { printf "PFADD %s", k; for (j = 0; j < 100; j++) printf " %s-%d", k, i * 100 + j; print "" } }' \
      | redis-cli -p "$port" >/dev/null
  done
done

# And a 10,000-member geo grid; the search must find 100 on every server.
for s in "${servers[@]}"; do
  port=${s#*:}
  redis-cli -p "$port" DEL grid places >/dev/null
  awk 'BEGIN { for (i = 0; i < 100; i++) { printf "GEOADD grid"; for (j = 0; j < 100; j++) printf " %.2f %.2f g%d-%d", 13 + j / 100, 38 + i / 100, i, j; print "" } }' \
    | redis-cli -p "$port" >/dev/null
  found=$(redis-cli -p "$port" GEOSEARCH grid FROMLONLAT 13.5 38.5 BYRADIUS 5.6 km ASC | wc -l)
  echo "${s%:*}: GEOSEARCH finds $found members" >&2
done

declare -A results
rps() { awk -F'"' 'NR > 1 && /^"/ {v = $4} END {print v}'; }
for r in $(seq "$rounds"); do
  for s in "${servers[@]}"; do
    name=${s%:*} port=${s#*:}
    for t in $tests; do
      # shellcheck disable=SC2086
      # Unpipelined tests run a tenth of the requests.
      reqs=$n; [ "${depth[$t]}" = 1 ] && reqs=$((n / 10))
      v=$(redis-benchmark -p "$port" -n "$reqs" -r 1000000 -P "${depth[$t]}" -c 50 --threads 1 --csv ${cmd[$t]} | rps)
      results[$name,$t]+="$v "
    done
  done
  echo "round $r done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
vk=${VALKEY_SERVER:+ valkey | accelkv vs valkey |}
echo "| test | redis | accelkv | ratio | accelkv --threads 1 | ratio |${vk}"
echo "|---|---|---|---|---|---|${VALKEY_SERVER:+---|---|}"
for t in $tests; do
  red=$(echo "${results[redis,$t]}" | median)
  akv=$(echo "${results[accelkv,$t]}" | median)
  one=$(echo "${results[accelkv-threads-1,$t]}" | median)
  row=$(printf '| %s | %.0f | %.0f | %.2f | %.0f | %.2f |' "$t" "$red" "$akv" "$(echo "$akv / $red" | bc -l)" \
    "$one" "$(echo "$one / $red" | bc -l)")
  if [ -n "${VALKEY_SERVER:-}" ]; then
    val=$(echo "${results[valkey,$t]}" | median)
    row+=$(printf ' %.0f | %.2f |' "$val" "$(echo "$akv / $val" | bc -l)")
  fi
  echo "$row"
done
