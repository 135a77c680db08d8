#!/usr/bin/env bash
# The YCSB suite side by side: accelkv in process (reference reader, CPU engine), a BTreeMap
# and RocksDB in process, then accelkv over TCP, UDP and RESP, Redis and memcached over
# loopback. Every server is started fresh for its own target (from the Debian packages for
# Redis and memcached) and stopped by process id. Results per record shape land in
# $OUT/<shape>/{report.md,results.json,throughput.svg}.
#
# Usage: scripts/ycsb.sh              (environment: RECORDS, DURATION, THREADS, BATCH,
#                                      SHAPES, WORKLOADS, DISTS, OUT, BASELINE)
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-1000000}
DURATION=${DURATION:-5}
THREADS=${THREADS:-2}
BATCH=${BATCH:-1}
SHAPES=${SHAPES:-"small ycsb"}
WORKLOADS=${WORKLOADS:-a,b,c,d,e,f,cloud50,cloud90,cloud100}
DISTS=${DISTS:-uniform,zipfian}
OUT=${OUT:-target/ycsb}
BASELINE=${BASELINE:-redis}
PASSWORD=bench-secret
for tool in redis-server memcached; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server memcached" >&2; exit 1; }
done
features=()
local_targets=(-t accelkv -t accelkv-engine -t btreemap)
if [ -z "${ROCKSDB_LIB_DIR:-}" ] && [ -e /usr/lib/x86_64-linux-gnu/librocksdb.so ]; then
  export ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu
fi
if [ -n "${ROCKSDB_LIB_DIR:-}" ]; then
  features=(--features rocksdb)
  local_targets+=(-t rocksdb)
else
  echo "RocksDB skipped: apt-get install -y librocksdb-dev libclang-dev" >&2
fi
cargo build --release -q -p accelkv-server -p accelkv-bench "${features[@]}"
bench=./target/release/accelkv-bench
source scripts/peers.sh
trap stop EXIT
common=(--records "$RECORDS" --duration "$DURATION" --threads "$THREADS" --batch "$BATCH"
        --workloads "$WORKLOADS" --dist "$DISTS" --password "$PASSWORD")
for shape in $SHAPES; do
  dir="$OUT/$shape"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "== $shape: in process" >&2
  $bench "${local_targets[@]}" --record "$shape" "${common[@]}" --out "$dir/local" >/dev/null
  for target in accelkv-tcp accelkv-udp accelkv-resp redis memcached; do
    echo "== $shape: $target" >&2
    case $target in
      accelkv-*) start_target "$target" --password "$PASSWORD" ;;
      *) start_target "$target" ;;
    esac
    $bench -t "$spec" --record "$shape" "${common[@]}" --out "$dir/$target" >/dev/null
    stop
  done
  $bench --merge "$dir"/*/results.json --baseline "$BASELINE" --out "$dir" \
    --title "YCSB, $shape records, $RECORDS records, $THREADS threads, batch $BATCH" >/dev/null
  echo "== $shape: $dir/report.md" >&2
done
