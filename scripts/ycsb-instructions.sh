#!/usr/bin/env bash
# Instructions per operation under `valgrind --tool=callgrind` (repeatable whatever else the
# machine runs), for docs/EVALUATION.md and docs/BENCHMARKS.md:
#  1. tree/examples/ops_instr: a put (200,000 scrambled 16-byte keys loaded) and a GET
#     (each read 5 times), the store's public API, nothing else;
#  2. the YCSB loop of honeycomb-eval.sh on Masstree and on accelkv's two readers (the
#     reference reader, and the CPU engine's inline batches as the server's loops run them),
#     each as the difference of two runs that differ only in their number of operations
#     (the load cancels): the loop's own key formatting and Zipfian draw are in both sides'
#     numbers, and are the same code on both (bench/masstree/ycsb.hh). The hot cache is off
#     here: its control plane runs on a wall-clock timer, which callgrind's slowdown
#     starves, so its counts would not repeat (cache-eval.sh measures it by throughput).
#
# Usage: scripts/ycsb-instructions.sh [records] [ops]   (default 100000 200000)
# Needs valgrind, and Masstree built as honeycomb-eval.sh builds it ($MASSTREE_DIR, default
# /tmp/masstree-ycsb; skipped when absent).
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-100000}
ops=${2:-200000}
dir=${MASSTREE_DIR:-/tmp/masstree-ycsb}
cargo build --release -q -p accelkv-tree --example ops_instr
cargo build --release -q -p accelkv-bench --example core_ycsb
count() { # command... -> instructions callgrind collected
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 \
    | sed -n 's/.*Collected : *//p' | tr -d ,
}
per_op() { # n command-with-OPS... -> (run with 2n - run with n) / n
  local n=$1
  shift
  local a b
  a=$(count "${@//OPS/$n}")
  b=$(count "${@//OPS/$((2 * n))}")
  echo $(((b - a) / n))
}
put=$(count target/release/examples/ops_instr put)
get=$(count target/release/examples/ops_instr get)
echo "| ops_instr | instructions per operation |"
echo "|---|---:|"
echo "| put (load of 200,000 keys) | $((put / 200000)) |"
echo "| GET | $(((get - put) / 1000000)) |"
echo
echo "| workload ($records records) | Masstree | accelkv, reference reader | accelkv, engine (inline batches) |"
echo "|---|---:|---:|---:|"
for mix in "c zipfian" "c uniform" "b zipfian" "d zipfian"; do
  set -- $mix
  m="–"
  if [ -x "$dir/mttest" ]; then
    m=$(cd "$dir" && per_op "$ops" ./mttest -j1 --no-notebook ops=OPS records="$records" mix="$1" dist="$2" ycsb)
  fi
  r=$(per_op "$ops" target/release/examples/core_ycsb --ops OPS --records "$records" --mix "$1" --dist "$2" --reader reference)
  e=$(per_op "$ops" target/release/examples/core_ycsb --ops OPS --records "$records" --mix "$1" --dist "$2" --reader inline --cache-buckets 0)
  echo "| $1 $2 | $m | $r | $e |"
done
