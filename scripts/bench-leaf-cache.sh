#!/bin/bash
# Data larger than memory (issue 18): YCSB A, B, C, E against RocksDB with the same cache
# size (and LMDB), unconstrained and each in a memory cgroup, then YCSB C against the leaf
# cache's budget. Results: docs/BENCHMARKS.md, "Data
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
# Each target alone in a memory cgroup (v1) of $MEMCG_MIB (default 192) MiB: process memory
# and page cache together, so misses reach the disk. Needs root and the memory controller.
CG=/sys/fs/cgroup/memory/accelkv-bench
if mkdir -p "$CG" 2>/dev/null && echo $((${MEMCG_MIB:-192} << 20)) > "$CG/memory.limit_in_bytes"; then
    for t in 'accelkv-durable=none,budget=32' 'rocksdb=none,cache=32' 'lmdb=none'; do
        sync; echo 3 > /proc/sys/vm/drop_caches || true
        n=${t%%=*}
        (echo $BASHPID > "$CG/cgroup.procs"; exec "$BENCH" -t "$t" --workloads a,b,c,e \
            --dist uniform,zipfian "${COMMON[@]}" --out "$OUT/memcg-$n") > "$OUT/memcg-$n.log" 2>&1
        grep -E 'ops/s' "$OUT/memcg-$n.log"
    done
else
    echo "no writable memory cgroup: the memory-limited table is skipped"
fi
for b in 16 32 64 128 256; do
    "$BENCH" -t "accelkv-durable=none,budget=$b" --workloads c --dist uniform,zipfian \
        "${COMMON[@]}" --out "$OUT/sweep-$b" > "$OUT/sweep-$b.log" 2>&1
    grep -E '^\| C \| (uniform|zipfian) \| accelkv|leaf cache' "$OUT/sweep-$b.log"
done
python3 scripts/plot-hit-ratio.py "$OUT" docs/bench/leaf-cache-hit-ratio.svg
