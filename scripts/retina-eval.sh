#!/usr/bin/env bash
# Retina's Figure 6.1 and 6.3 adapted to this machine (docs/EVALUATION.md, "Retina"): YCSB A,
# B and C on accelkv with a data directory and on RocksDB 7.8, side by side, 1 KiB records
# (`user<N>` keys, 10 x 100-byte fields), acknowledged after fdatasync (`sync`), against the
# number of client threads. Retina ran 16 threads over 5 M records on a computational SSD;
# this machine has 2 vCPUs and a virtual disk, so 200 K records and 1 to 16 threads.
#
# Usage: scripts/retina-eval.sh [seconds per run]   (default 4)
# Needs librocksdb-dev (docs/BENCHMARKS.md). Writes docs/bench/retina-threads.md, its plot and
# docs/bench/retina-ycsb.svg (the most threads, as a bar chart).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-4}
records=${RECORDS:-200000}
if [ -z "${ROCKSDB_LIB_DIR:-}" ] && [ -e /usr/lib/x86_64-linux-gnu/librocksdb.so ]; then
  export ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu
fi
[ -n "${ROCKSDB_LIB_DIR:-}" ] || { echo "needs librocksdb-dev (see docs/BENCHMARKS.md)" >&2; exit 1; }
cargo build --release -q -p accelkv-bench --features rocksdb
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=docs/bench/retina-threads.md
{
  echo "Written by \`scripts/retina-eval.sh $secs\` on $(date -u +%Y-%m-%d): $records records of 1 KiB, uniform keys,"
  echo "\`sync\` (every write acknowledged after fdatasync), $secs s per run; $(nproc) vCPUs."
  echo
  echo "| threads | workload | accelkv-durable(sync) ops/s | rocksdb(sync) ops/s | ratio |"
  echo "|---:|---|---:|---:|---:|"
  for t in 1 2 4 8 16; do
    ./target/release/accelkv-bench -t accelkv-durable=sync -t rocksdb=sync --workloads a,b,c \
      --dist uniform --record ycsb --records "$records" --duration "$secs" --threads "$t" \
      --out "$tmp/t$t" >/dev/null 2>&1
    python3 - "$tmp/t$t/results.json" "$t" "$tmp/points" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
t = sys.argv[2]
by = {(r["workload"], r["target"]): r["throughput"] for r in runs}
with open(sys.argv[3], "a") as pts:
    for w in ("A", "B", "C"):
        a, r = by.get((w, "accelkv-durable(sync)"), 0), by.get((w, "rocksdb(sync)"), 0)
        print(f"| {t} | {w} | {a:,.0f} | {r:,.0f} | {a / r if r else 0:.2f}× |")
        pts.write(f"accelkv-{w} {t} {a}\nRocksDB-{w} {t} {r}\n")
EOF
  done
} | tee "$out"
python3 - "$tmp/points" <<'EOF'
import json, subprocess, sys
series = {}
for line in open(sys.argv[1]):
    s, a, b = line.split()
    series.setdefault(s, []).append([float(a), float(b)])
spec = {"title": "YCSB, 1 KiB records, sync: throughput against client threads",
        "x": "client threads", "y": "operations per second", "logx": True, "logy": True,
        "series": [{"name": k, "points": v} for k, v in sorted(series.items())]}
open("/tmp/retina-spec.json", "w").write(json.dumps(spec))
subprocess.run(["python3", "scripts/svg_plot.py", "/tmp/retina-spec.json",
                "docs/bench/retina-threads.svg"], check=True)
# Figure 6.3: A, B, C at the most threads, accelkv against RocksDB.
most = max(p[0] for v in series.values() for p in v)
at = lambda s: next((p[1] for p in series.get(s, []) if p[0] == most), 0)
bars = {"title": f"YCSB, 1 KiB records, sync, {most:.0f} threads", "y": "operations per second",
        "logy": True, "categories": ["A", "B", "C"],
        "series": [{"name": "accelkv", "values": [at(f"accelkv-{w}") for w in "ABC"]},
                   {"name": "RocksDB", "values": [at(f"RocksDB-{w}") for w in "ABC"]}]}
open("/tmp/retina-bars.json", "w").write(json.dumps(bars))
subprocess.run(["python3", "scripts/svg_plot.py", "/tmp/retina-bars.json",
                "docs/bench/retina-ycsb.svg"], check=True)
EOF
echo "wrote $out and docs/bench/retina-threads.svg, retina-ycsb.svg"
