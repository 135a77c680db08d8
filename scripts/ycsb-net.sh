#!/usr/bin/env bash
# YCSB A-F over loopback against accelkv (binary TCP and RESP), Redis and memcached (Debian
# packages), each server started fresh for its target and stopped by process id, with the
# server's context switches per operation (all its threads, from /proc/PID/task/*/status,
# over the whole target's load and runs, divided by records loaded plus operations run).
# docs/BENCHMARKS.md, "Serving path".
#
# Usage: scripts/ycsb-net.sh            (environment: RECORDS, DURATION, BATCH, DISTS, OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-200000}
DURATION=${DURATION:-3}
BATCH=${BATCH:-1}
DISTS=${DISTS:-uniform}
OUT=${OUT:-target/ycsb-net-b$BATCH}
for tool in redis-server memcached python3; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server memcached python3" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server -p accelkv-bench
bench=./target/release/accelkv-bench
pid=""
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi; }
trap stop EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not open" >&2; exit 1; }
ctx() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
rm -rf "$OUT"; mkdir -p "$OUT"
echo "| target | context switches / operation (server, A-F) |" >"$OUT/ctx.md"
echo "|---|---|" >>"$OUT/ctx.md"
for target in accelkv-tcp accelkv-resp redis memcached; do
  echo "== $target" >&2
  case $target in
    accelkv-*)
      ./target/release/accelkv-server --port 17707 --resp-port 17379 --admin-port 17708 >/dev/null 2>&1 &
      pid=$!; wait_port 17707; wait_port 17379
      [ "$target" = accelkv-resp ] && spec="$target=127.0.0.1:17379" || spec="$target=127.0.0.1:17707" ;;
    redis)
      redis-server --port 16399 --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
      pid=$!; wait_port 16399; spec="redis=127.0.0.1:16399" ;;
    memcached)
      memcached -l 127.0.0.1 -p 11299 -U 0 -m 8192 -u root >/dev/null &
      pid=$!; wait_port 11299; spec="memcached=127.0.0.1:11299" ;;
  esac
  before=$(ctx "$pid")
  $bench -t "$spec" --records "$RECORDS" --duration "$DURATION" --batch "$BATCH" \
    --workloads a,b,c,d,e,f --dist "$DISTS" --out "$OUT/$target" >/dev/null
  after=$(ctx "$pid")
  stop
  python3 - "$OUT/$target/results.json" "$before" "$after" "$target" >>"$OUT/ctx.md" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ops = sum(r["ops"] for r in d["runs"] if not r.get("error"))
loaded = sum(l.get("records", 0) for l in d.get("loads", []))
print(f"| {sys.argv[4]} | {(int(sys.argv[3]) - int(sys.argv[2])) / max(ops + loaded, 1):.2f} |")
EOF
done
$bench --merge "$OUT"/accelkv-tcp/results.json "$OUT"/accelkv-resp/results.json \
  "$OUT"/redis/results.json "$OUT"/memcached/results.json --baseline redis --out "$OUT" \
  --title "YCSB over loopback, $RECORDS records, batch $BATCH" >/dev/null
cat "$OUT/report.md" "$OUT/ctx.md"
