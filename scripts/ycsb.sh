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
pid=""
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi; }
trap stop EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not open" >&2; exit 1; }
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
      accelkv-*)
        ./target/release/accelkv-server --port 17707 --resp-port 17379 --admin-port 17708 \
          --password "$PASSWORD" >/dev/null &
        pid=$!; wait_port 17707; wait_port 17379
        case $target in
          accelkv-resp) spec="$target=127.0.0.1:17379" ;;
          *) spec="$target=127.0.0.1:17707" ;;
        esac ;;
      redis)
        redis-server --port 16399 --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
        pid=$!; wait_port 16399; spec="redis=127.0.0.1:16399" ;;
      memcached)
        memcached -l 127.0.0.1 -p 11299 -U 0 -m 8192 -u root >/dev/null &
        pid=$!; wait_port 11299; spec="memcached=127.0.0.1:11299" ;;
    esac
    $bench -t "$spec" --record "$shape" "${common[@]}" --out "$dir/$target" >/dev/null
    stop
  done
  $bench --merge "$dir"/*/results.json --baseline "$BASELINE" --out "$dir" \
    --title "YCSB, $shape records, $RECORDS records, $THREADS threads, batch $BATCH" >/dev/null
  echo "== $shape: $dir/report.md" >&2
done
