#!/usr/bin/env bash
# TLS next to plain TCP, and accelkv next to Redis (docs/BENCHMARKS.md, "TLS"): Redis from
# its Debian package (--tls-port, --tls-auth-clients yes) and accelkv-server (--tls-port,
# --tls-ca), both with one thread of serving (Redis's, and --threads 1), on loopback on this
# machine, with certificates made here by openssl (a CA, the server's, a client's).
# redis-benchmark -t set,get -n 400000 -r 100000 -d 16 -c 50 --threads 1, -P 16 and -P 1,
# plain and --tls, interleaved for ROUNDS rounds; the median of each, the TLS/plain ratio for
# each server and accelkv/Redis for each mode.
#
# Usage: scripts/bench-tls.sh [rounds]      (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
for tool in redis-server redis-benchmark openssl; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools openssl" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 2 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
leaf() { # name, extensions
  openssl req "${ec[@]}" -keyout "$dir/$1.key" -out "$dir/$1.csr" -subj "/CN=$1" 2>/dev/null
  printf '%s\n' "$2" >"$dir/$1.ext"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -out "$dir/$1.pem" -days 2 -extfile "$dir/$1.ext" 2>/dev/null
}
leaf server "subjectAltName=DNS:localhost,IP:127.0.0.1"
leaf client "extendedKeyUsage=clientAuth"
redis-server --port 16399 --tls-port 16398 --tls-cert-file "$dir/server.pem" \
  --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.pem" --save '' \
  --appendonly no --bind 127.0.0.1 >"$dir/redis.log" 2>&1 &
pids+=($!)
"${CARGO_TARGET_DIR:-target}"/release/accelkv-server --threads 1 --port 0 --resp-port 17379 \
  --tls-port 17378 --admin-port 0 --memcached-port off --tls-cert "$dir/server.pem" \
  --tls-key "$dir/server.key" --tls-ca "$dir/ca.pem" >/dev/null 2>&1 &
pids+=($!)
for p in 16399 16398 17379 17378; do
  for i in $(seq 101); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break
    [ "$i" = 101 ] && { echo "nothing listens on $p (a port in use?)" >&2; cat "$dir/redis.log" >&2; exit 1; }
    sleep 0.1
  done
done
tls=(--tls --cacert "$dir/ca.pem" --cert "$dir/client.pem" --key "$dir/client.key")
# requests per second of one run: server port, pipeline, test, extra flags
rps() {
  local port=$1 p=$2 t=$3
  shift 3
  timeout 300 redis-benchmark -p "$port" -t "$t" -n 400000 -r 100000 -d 16 -c 50 -P "$p" --threads 1 -q "$@" 2>/dev/null \
    | tr '\r' '\n' | awk -F'[:,]' '/requests per second/ {gsub(/[^0-9.]/, "", $2); print $2; exit}'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A runs
for r in $(seq "$rounds"); do
  for p in 16 1; do
    for t in get set; do
      runs[redis-plain-$p-$t]+="$(rps 16399 "$p" "$t") "
      runs[redis-tls-$p-$t]+="$(rps 16398 "$p" "$t" "${tls[@]}") "
      runs[accelkv-plain-$p-$t]+="$(rps 17379 "$p" "$t") "
      runs[accelkv-tls-$p-$t]+="$(rps 17378 "$p" "$t" "${tls[@]}") "
    done
  done
  echo "round $r done" >&2
done
m() { tr ' ' '\n' <<<"${runs[$1]}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "| test | pipeline | Redis plain | Redis TLS | accelkv plain | accelkv TLS | TLS/plain Redis | TLS/plain accelkv | accelkv/Redis plain | accelkv/Redis TLS |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for p in 16 1; do
  for t in get set; do
    rp=$(m "redis-plain-$p-$t"); rt=$(m "redis-tls-$p-$t")
    ap=$(m "accelkv-plain-$p-$t"); at=$(m "accelkv-tls-$p-$t")
    echo "| ${t^^} | $p | $rp | $rt | $ap | $at | $(ratio "$rt" "$rp") | $(ratio "$at" "$ap") | $(ratio "$ap" "$rp") | $(ratio "$at" "$rt") |"
  done
done
