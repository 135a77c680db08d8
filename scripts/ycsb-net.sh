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
source scripts/peers.sh
trap stop EXIT
ctx() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
rm -rf "$OUT"; mkdir -p "$OUT"
echo "| target | context switches / operation (server, A-F) |" >"$OUT/ctx.md"
echo "|---|---|" >>"$OUT/ctx.md"
for target in accelkv-tcp accelkv-resp redis memcached; do
  echo "== $target" >&2
  start_target "$target"
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
