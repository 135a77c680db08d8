#!/usr/bin/env bash
# Durable YCSB A, B, C side by side in one process: accelkv with a data directory against
# RocksDB with the same sync policy (sync: acknowledged after fdatasync; none: never synced),
# with 16-byte values (small) and 1 KB values (ycsb). Reports device bytes per operation
# from /sys/block (the machine should be otherwise idle). Results in
# $OUT/<policy>-<shape>/{report.md,results.json,throughput.svg}.
#
# Usage: scripts/durable-ycsb.sh   (environment: RECORDS_SMALL, RECORDS_YCSB, DURATION,
#                                   THREADS, POLICIES, SHAPES, DISTS, OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS_SMALL=${RECORDS_SMALL:-1000000}
RECORDS_YCSB=${RECORDS_YCSB:-200000}
DURATION=${DURATION:-8}
THREADS=${THREADS:-8}
POLICIES=${POLICIES:-"sync none"}
SHAPES=${SHAPES:-"small ycsb"}
DISTS=${DISTS:-zipfian,uniform}
OUT=${OUT:-target/durable-ycsb}
if [ -z "${ROCKSDB_LIB_DIR:-}" ] && [ -e /usr/lib/x86_64-linux-gnu/librocksdb.so ]; then
  export ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu
fi
[ -n "${ROCKSDB_LIB_DIR:-}" ] || { echo "needs librocksdb-dev (see docs/BENCHMARKS.md)" >&2; exit 1; }
cargo build --release -p accelkv-bench --features rocksdb
for policy in $POLICIES; do
  for shape in $SHAPES; do
    records=$RECORDS_SMALL
    [ "$shape" = ycsb ] && records=$RECORDS_YCSB
    ./target/release/accelkv-bench -t "accelkv-durable=$policy" -t "rocksdb=$policy" \
      --baseline "rocksdb($policy)" --workloads a,b,c --dist "$DISTS" --record "$shape" \
      --records "$records" --duration "$DURATION" --threads "$THREADS" \
      --title "durable YCSB, $shape records, sync policy $policy, $THREADS threads" \
      --out "$OUT/$policy-$shape"
  done
done
