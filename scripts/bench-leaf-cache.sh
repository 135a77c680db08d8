#!/bin/bash
# Data larger than memory (issue 18): YCSB A, B, C, E against RocksDB with the same cache
# size, then YCSB C against the leaf cache's budget. Results: docs/BENCHMARKS.md, "Data
# larger than memory". Needs librocksdb-dev (apt-get install -y librocksdb-dev); LMDB is built
# from source by the heed crate.
set -euo pipefail
cd "$(dirname "$0")/.."
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-/usr/lib/x86_64-linux-gnu}
cargo build --release -p accelkv-bench --features rocksdb,lmdb
BENCH=./target/release/accelkv-bench
OUT=${OUT:-target/bench-leaf-cache}
mkdir -p "$OUT"
COMMON=(--records 1000000 --record medium --duration 5 --threads 2)
"$BENCH" -t 'accelkv-durable=none,budget=32' -t 'rocksdb=none,cache=32' -t 'lmdb=none' \
    --workloads a,b,c,e --dist uniform,zipfian "${COMMON[@]}" \
    --baseline 'rocksdb(none)' --out "$OUT/budget"
"$BENCH" -t 'accelkv-durable=none' -t 'rocksdb=none' -t 'lmdb=none' \
    --workloads a,b,c,e --dist uniform,zipfian "${COMMON[@]}" \
    --baseline 'rocksdb(none)' --out "$OUT/in-memory"
for b in 16 32 64 128 256; do
    "$BENCH" -t "accelkv-durable=none,budget=$b" --workloads c --dist uniform,zipfian \
        "${COMMON[@]}" --out "$OUT/sweep-$b" > "$OUT/sweep-$b.log" 2>&1
    grep -E '^\| C \| (uniform|zipfian) \| accelkv|leaf cache' "$OUT/sweep-$b.log"
done
python3 scripts/plot-hit-ratio.py "$OUT" docs/bench/leaf-cache-hit-ratio.svg
