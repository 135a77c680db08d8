#!/usr/bin/env bash
# Instructions per request through each server's whole serving path (docs/BENCHMARKS.md,
# "Instructions per request"): each server runs under `valgrind --tool=callgrind` (every
# thread, user space only: system calls are not counted); it is loaded with 200,000 SETs,
# then the counters are zeroed (`callgrind_control -z`) around `redis-benchmark -t get`,
# `-t set` and `-t incr` (-n 200000 -r 100000 -d 16 -P 16 -c 50, one client thread), each
# dumped after it (`callgrind_control -d`). Repeatable whatever else the machine runs. (In
# accelkv a pipeline's GETs and plain SETs run as batches; INCR goes through the command
# table's dispatcher one command at a time.)
#
# Servers: accelkv-server from this tree (--threads 1, in memory), Redis from its Debian
# package (--save '' --appendonly no), and Valkey when VALKEY_SERVER names a valkey-server
# binary (built from its public repository in a scratch folder; never vendored).
#
# Usage: scripts/instr-per-request.sh [requests]      (default 200000)
#        PEERS=no scripts/instr-per-request.sh          (accelkv only)
#        KEYSPACE=none TESTS="hset sadd zadd" scripts/instr-per-request.sh  (no -r: small collections)
#        TESTS="hset sadd spop" scripts/instr-per-request.sh   (other redis-benchmark tests;
#        default "get set incr")
#        ACL_USER=yes scripts/instr-per-request.sh   (the measured runs log in as an ACL user
#        whose rules the gate checks: `~key:* ~counter:* +@all -@dangerous`, on every server)
#        TESTS="pfadd pfcount geoadd geosearch xadd" scripts/instr-per-request.sh  (commands
#        of their own, below: PFADD of a random element to one HLL, PFCOUNT of it, GEOADD of
#        a random member, GEOSEARCH of 99 members of a 10,000-member grid, XADD of an entry
#        to one stream, XREADGROUP of one new entry each from a stream of as many)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
read -r -a tests <<<"${TESTS:-get set incr}"
# KEYSPACE=none: the measured tests without -r (HSET, SADD and ZADD then write one field
# of a one-field collection again and again: a small, packed one).
keyspace=(-r "${KEYSPACE:-100000}")
[ "${KEYSPACE:-}" = none ] && keyspace=()
for tool in valgrind callgrind_control callgrind_annotate redis-server redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y valgrind redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
out=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not open" >&2; exit 1; }

# Total instructions (Ir) of the newest dump of the callgrind run with base name $1.
dumped() {
  local f
  f=$(ls -t "$1".* 2>/dev/null | head -n 1)
  callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}'
}

# Tests that are commands of their own rather than redis-benchmark's -t tests.
declare -A custom
custom[pfadd]="PFADD hll __rand_int__"
custom[pfcount]="PFCOUNT hll"
custom[geoadd]="GEOADD places 13.361389 38.115556 __rand_int__"
custom[geosearch]="GEOSEARCH grid FROMLONLAT 13.5 38.5 BYRADIUS 5.6 km ASC WITHDIST"
custom[xadd]="XADD stream * f __rand_int__"
custom[xreadgroup]="XREADGROUP GROUP g c COUNT 1 STREAMS readstream >"

measure() { # name port cmd...
  local name=$1 port=$2
  shift 2
  local base="$out/$name"
  valgrind --tool=callgrind --callgrind-out-file="$base" "$@" >/dev/null 2>&1 &
  pid=$!
  wait_port "$port"
  redis-benchmark -p "$port" -t set -n "$n" -r 100000 -d 16 -P 16 -c 50 --threads 1 -q >/dev/null
  # GEOSEARCH's grid, only when measured (its subkeys give the background reclaim walk
  # work that the counters would include): 100 x 100 members 0.01 degrees apart.
  if [[ " ${tests[*]} " == *" geosearch "* ]]; then
    awk 'BEGIN { for (i = 0; i < 100; i++) { printf "GEOADD grid"; for (j = 0; j < 100; j++) printf " %.2f %.2f g%d-%d", 13 + j / 100, 38 + i / 100, i, j; print "" } }' \
      | redis-cli -p "$port" >/dev/null
  fi
  # XREADGROUP's stream: as many entries as requests, each delivered once (`>`), in a group.
  if [[ " ${tests[*]} " == *" xreadgroup "* ]]; then
    redis-cli -p "$port" XGROUP CREATE readstream g 0 MKSTREAM >/dev/null
    redis-benchmark -p "$port" -n "$n" -P 16 -c 50 --threads 1 -q XADD readstream '*' f v >/dev/null
  fi
  local as=()
  if [ "${ACL_USER:-no}" = yes ]; then
    redis-cli -p "$port" ACL SETUSER bench on '>bench' '~key:*' '~counter:*' '~hll' '~places' '~grid' '~stream' '~readstream' +@all -@dangerous >/dev/null
    as=(--user bench -a bench)
  fi
  local row="| $name |"
  for t in "${tests[@]}"; do
    callgrind_control -z "$pid" >/dev/null 2>&1
    if [ -n "${custom[$t]:-}" ]; then
      # Split into words, never globbed (XADD's `*`).
      read -r -a words <<<"${custom[$t]}"
      redis-benchmark -p "$port" "${as[@]}" -n "$n" -r 1000000 -P 16 -c 50 --threads 1 -q "${words[@]}" >/dev/null
    else
      redis-benchmark -p "$port" "${as[@]}" -t "$t" -n "$n" "${keyspace[@]}" -d 16 -P 16 -c 50 --threads 1 -q >/dev/null
    fi
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 1
    row+=" $(( $(dumped "$base") / n )) |"
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
  echo "$row"
}

head="| server |"
rule="|---|"
for t in "${tests[@]}"; do
  head+=" ${t^^} instructions/request |"
  rule+="---|"
done
echo "$head"
echo "$rule"
measure accelkv 17379 "${CARGO_TARGET_DIR:-target}"/release/accelkv-server --threads 1 --port 17707 \
  --resp-port 17379 --admin-port 17708 --memcached-port off
[ "${PEERS:-yes}" = no ] && exit 0
measure redis 16399 redis-server --port 16399 --bind 127.0.0.1 --save '' --appendonly no
if [ -n "${VALKEY_SERVER:-}" ]; then
  measure valkey 16499 "$VALKEY_SERVER" --port 16499 --bind 127.0.0.1 --save '' --appendonly no
fi
