#!/usr/bin/env bash
# The RISC-V NIC accelerator's experiment adapted to this machine (docs/EVALUATION.md, "The
# hot-key cache"): GETs through the CPU engine with and without the hot-key cache, against
# the cache's size, on Facebook's ETC skew (10% of keys get 90% of GETs) and YCSB's Zipfian;
# hit ratio, GET/s, the engine thread's CPU per GET and the cache manager's. Two store sizes:
# 1 M items (the ETC hot set, 100 K keys, fits the larger caches) and 10 M (it does not).
#
# Usage: scripts/cache-eval.sh [seconds]   (default 3)
# Writes docs/bench/hot-cache.md and docs/bench/hot-cache.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
cargo build --release -q -p accelkv-engine --example engine_bench
out=docs/bench/hot-cache.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "Written by \`scripts/cache-eval.sh $secs\` on $(date -u +%Y-%m-%d); one engine thread, windows of 16, 16-byte"
  echo "keys and values, 3 s of warm-up per row; $(nproc) vCPUs shared by the engine thread, the client and the"
  echo "cache manager."
  for n in 1000000 10000000; do
    echo
    echo "#### $n items"
    target/release/examples/engine_bench --items "$n" --suites cache --seconds "$secs" \
      --cache-sizes 16384,65536,131072,262144 2>/dev/null | grep '^|' | tee "$tmp/$n"
  done
} | tee "$out"
python3 - "$tmp" <<'EOF'
import json, subprocess, sys
series = {}
for n, label in (("1000000", "1M"), ("10000000", "10M")):
    for line in open(f"{sys.argv[1]}/{n}"):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) < 5 or not c[1].isdigit():
            continue
        dist = "ETC" if c[0].startswith("ETC") else "Zipfian"
        series.setdefault(f"{dist}, {label}", []).append([int(c[1]), float(c[4].rstrip("×"))])
spec = {"title": "Hot-key cache: GET throughput against no cache", "x": "cache buckets",
        "y": "GET/s with cache / without", "logx": True,
        "series": [{"name": k, "points": v} for k, v in series.items()]}
open("/tmp/cache-spec.json", "w").write(json.dumps(spec))
subprocess.run(["python3", "scripts/svg_plot.py", "/tmp/cache-spec.json", "docs/bench/hot-cache.svg"], check=True)
EOF
echo "wrote $out and docs/bench/hot-cache.svg"
