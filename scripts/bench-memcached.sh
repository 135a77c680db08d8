#!/usr/bin/env bash
# The memcached-port benchmark (docs/BENCHMARKS.md, "memcached port"): memcached 1.6 from
# Debian with one worker thread (-t 1) next to accelkv-server with one event loop
# (--threads 1) serving the memcached text protocol, both on loopback, driven in one run by
# the same client: memaslap (memcaslap, Debian's libmemcached-tools) with one thread and 50
# connections, 16-byte keys and 32-byte values, for 5 s after its own warm-up.
#
#   GET      every command a get of one key
#   GET x16  every command a get of 16 keys (memaslap's -d 16; throughput counts keys)
#   SET      every command a set
#
# Reported per server: the client's operations per second, and operations per second of the
# server's own CPU time (utime + stime of every thread, from /proc/PID/stat, over the whole
# run, warm-up included): on a 2-core machine the client takes one core, so the second
# figure is the per-core comparison. Median of ROUNDS rounds, interleaved.
#
# Usage: scripts/bench-memcached.sh [rounds]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
for tool in memcached memcaslap; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y memcached libmemcached-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
memcached -l 127.0.0.1 -p 11298 -U 0 -t 1 -u root >/dev/null &
pids+=($!); mc_pid=$!
"${CARGO_TARGET_DIR:-target}"/release/accelkv-server --threads 1 --port 0 --resp-port 0 --admin-port 0 \
  --memcached-port 11297 >/dev/null 2>&1 &
pids+=($!); akv_pid=$!
sleep 1
cfg_dir=$(mktemp -d)
for kind in get set; do
  get=$([ "$kind" = get ] && echo 1.0 || echo 0.0)
  set=$([ "$kind" = set ] && echo 1.0 || echo 0.0)
  printf 'key\n16 16 1\nvalue\n32 32 1\ncmd\n0 %s\n1 %s\n' "$set" "$get" >"$cfg_dir/$kind.cfg"
done

cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
declare -A results
run() { # name port pid test
  local name=$1 port=$2 pid=$3 test=$4 args before after out ops tps hz
  case "$test" in
    GET) args=(-F "$cfg_dir/get.cfg") ;;
    GETx16) args=(-F "$cfg_dir/get.cfg" -d 16) ;;
    SET) args=(-F "$cfg_dir/set.cfg") ;;
  esac
  before=$(cpu_ticks "$pid")
  out=$(memcaslap -s "127.0.0.1:$port" -T 1 -c 50 -t 5s "${args[@]}" 2>&1)
  after=$(cpu_ticks "$pid")
  ops=$(echo "$out" | awk '/^Run time/ {print $5}')
  tps=$(echo "$out" | awk '/^Run time/ {print $7}')
  hz=$(getconf CLK_TCK)
  results["$name $test"]+="$tps/$(awk -v o="$ops" -v t=$((after - before)) -v hz="$hz" 'BEGIN {printf "%.0f", o / (t / hz)}') "
}

for r in $(seq "$rounds"); do
  for test in GET GETx16 SET; do
    run memcached 11298 "$mc_pid" "$test"
    run accelkv 11297 "$akv_pid" "$test"
  done
  echo "round $r done" >&2
done
rm -rf "$cfg_dir"

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
field() { echo "$1" | tr ' ' '\n' | grep -v '^$' | cut -d/ -f"$2" | tr '\n' ' '; }
echo "## memaslap -T 1 -c 50, 16-byte keys, 32-byte values, 5 s (median of $rounds rounds; cores: $(nproc))"
echo
echo "| test | memcached -t 1 ops/s | accelkv --threads 1 ops/s | ratio | memcached ops per server CPU-s | accelkv ops per server CPU-s | ratio per core |"
echo "|---|---|---|---|---|---|---|"
for test in GET GETx16 SET; do
  mt=$(field "${results[memcached $test]}" 1 | median)
  mc=$(field "${results[memcached $test]}" 2 | median)
  at=$(field "${results[accelkv $test]}" 1 | median)
  ac=$(field "${results[accelkv $test]}" 2 | median)
  awk -v t="$test" -v mt="$mt" -v mc="$mc" -v at="$at" -v ac="$ac" \
    'BEGIN {printf "| %s | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx |\n", t, mt, at, at / mt, mc, ac, ac / mc}'
done
