#!/usr/bin/env bash
# Honeycomb's evaluation adapted to this machine (docs/EVALUATION.md, "Honeycomb"):
#  1. YCSB B, C, D and the cloud-storage scans on Masstree and on accelkv, side by side, one
#     thread each (per core: this machine has two, so Masstree's threads and ours would
#     share them), same loop, keys (16 bytes), values (16 bytes) and key choice;
#  2. scan length (Figure 13: scans only, 4 to 256 items) and key length (Figure 14: GETs,
#     16 to 128 bytes), both against Masstree;
#  3. the cost of MVCC (Figure 15: B and C with new node versions keeping no old-version
#     pointer, three runs each, interleaved);
#  4. the log-block threshold (Figure 17: B, 256 bytes to 4 KiB).
# Writes docs/bench/honeycomb-eval.md and the SVG plots beside it.
#
# Masstree: kohler/masstree-beta, cloned into a scratch folder ($MASSTREE_DIR, default
# /tmp/masstree-ycsb; from $MASSTREE_REPO, default its GitHub address), built with
# bench/masstree/ycsb.hh (accelkv's YCSB loop, compiled into Masstree's own mttest driver as
# the `ycsb` test); nothing of Masstree enters this repository.
# accelkv: bench/examples/core_ycsb.rs, the same loop on the store, with reads through the
# reference reader one at a time, or gathered into batches of 64 for the CPU engine's
# interleaved walk on the same thread (as the server's event loops run them).
#
# Usage: [RUNS=n] scripts/honeycomb-eval.sh [records] [seconds]   (default 1000000 3; with RUNS,
# every side-by-side row is the median of that many interleaved runs of each store)
# Needs g++, autoconf, make (apt-get install -y g++ autoconf make).
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-1000000}
secs=${2:-3}
runs=${RUNS:-1}
dir=${MASSTREE_DIR:-/tmp/masstree-ycsb}
repo=${MASSTREE_REPO:-https://github.com/kohler/masstree-beta}
if [ ! -x "$dir/mttest" ]; then
  rm -rf "$dir"
  git clone -q "$repo" "$dir"
  cp bench/masstree/ycsb.hh "$dir/"
  sed -i 's|#include "kvtest.hh"|#include "kvtest.hh"\n#include "ycsb.hh"|' "$dir/mttest.cc"
  sed -i 's|^MAKE_TESTRUNNER(rw1, kvtest_rw1(client));|&\nMAKE_TESTRUNNER(ycsb, kvtest_ycsb(client));|' "$dir/mttest.cc"
  (cd "$dir" && ./bootstrap.sh >/dev/null && ./configure -q --disable-assertions >/dev/null && make -s -j"$(nproc)" mttest >/dev/null)
fi
if ! cmp -s bench/masstree/ycsb.hh "$dir/ycsb.hh"; then
  cp bench/masstree/ycsb.hh "$dir/"
  (cd "$dir" && make -s mttest >/dev/null)
fi
cargo build --release -q -p accelkv-bench --example core_ycsb
core=target/release/examples/core_ycsb
out=docs/bench/honeycomb-eval.md
mt() { # mttest ycsb PARAMS... -> ops/s (mttest prints each thread's result as JSON on stderr)
  (cd "$dir" && ./mttest -j1 --no-notebook records="$records" secs="$secs" "$@" ycsb 2>&1 >/dev/null) \
    | grep -o '"ops_per_sec":[0-9.e+]*' | cut -d: -f2 | awk '{s += $1} END {printf "%.0f\n", s}'
}
ak() { # core_ycsb ARGS... -> ops/s (as the server runs the engine: hot cache of 65,536
  # buckets; its hit share goes to stderr)
  "$core" --records "$records" --secs "$secs" "$@" 2>/dev/null | awk '{print $4}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# One setting on Masstree and on accelkv's two readers: prints the table row and, with a
# series file, appends the three points at X.
# side LABEL "MTTEST PARAMS" "CORE_YCSB ARGS" [SERIES X]
side() {
  local m r e ms=() rs=() es=()
  # RUNS interleaved runs of each, the medians reported (this VM's runs vary by 10-30%).
  for _ in $(seq "$runs"); do
    ms+=("$(mt $2)")
    rs+=("$(ak $3 --reader reference)")
    es+=("$(ak $3 --reader inline)")
  done
  m=$(median "${ms[@]}")
  r=$(median "${rs[@]}")
  e=$(median "${es[@]}")
  echo "| $1 | $m | $r | $(ratio "$r" "$m") | $e | $(ratio "$e" "$m") |"
  if [ -n "${4:-}" ]; then
    printf 'Masstree %s %s\naccelkv-reference %s %s\naccelkv-engine %s %s\n' \
      "$5" "$m" "$5" "$r" "$5" "$e" >>"$4"
  fi
}
plot() { # name title x-label y-label series-file
  python3 - "$@" <<'EOF'
import json, subprocess, sys
name, title, x, y, data = sys.argv[1:6]
series = {}
for line in open(data):
    s, a, b = line.rsplit(None, 2)
    series.setdefault(s, []).append([float(a), float(b)])
spec = {"title": title, "x": x, "y": y, "logx": True, "logy": name == "honeycomb-scan-length",
        "series": [{"name": k, "points": v} for k, v in series.items()]}
open("/tmp/hc-spec.json", "w").write(json.dumps(spec))
subprocess.run(["python3", "scripts/svg_plot.py", "/tmp/hc-spec.json", f"docs/bench/{name}.svg"], check=True)
EOF
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
echo "Written by \`RUNS=$runs scripts/honeycomb-eval.sh $records $secs\` on $(date -u +%Y-%m-%d): $records records, $secs s per run,"
echo "one thread per store; $(nproc) vCPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1))."
echo
echo "### YCSB and the cloud-storage workload against Masstree"
echo
echo "| workload | keys | Masstree | accelkv, reference reader | ratio | accelkv, engine batches of 64 | ratio |"
echo "|---|---|---:|---:|---:|---:|---:|"
for mix in b c d cloud50 cloud90 cloud100; do
  dists="uniform zipfian"
  [ "$mix" = d ] && dists=latest
  for dist in $dists; do
    d=${dist/latest/zipfian}
    side "$mix | $dist" "mix=$mix dist=$d" "--mix $mix --dist $d"
  done
done
echo
echo "### Scan length (scans only, uniform start keys)"
echo
echo "| items per scan | Masstree scans/s | accelkv, reference | ratio | accelkv, engine batches | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 4 16 64 256; do
  side "$n" "mix=cloud100 dist=uniform scanlen=$n" "--mix cloud100 --dist uniform --scan-len $n" \
    "$tmp/scan" "$n"
done
echo
echo "![scans per second against scan length](honeycomb-scan-length.svg)"
echo
echo "### Key length (GETs, uniform)"
echo
echo "| key bytes | Masstree GET/s | accelkv, reference | ratio | accelkv, engine batches | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for k in 16 32 64 128; do
  side "$k" "mix=c dist=uniform keylen=$k" "--mix c --dist uniform --key-len $k" "$tmp/key" "$k"
done
echo
echo "![GETs per second against key length](honeycomb-key-length.svg)"
echo
echo "### The cost of MVCC (engine batches; three runs each, interleaved)"
echo
echo "| workload | keys | MVCC on | MVCC off | off / on (medians) |"
echo "|---|---|---|---|---:|"
for mix in b c; do
  for d in uniform zipfian; do
    on=(); off=()
    for i in 1 2 3; do
      on+=("$(ak --mix "$mix" --dist "$d" --mvcc on)")
      off+=("$(ak --mix "$mix" --dist "$d" --mvcc off)")
    done
    mon=$(printf '%s\n' "${on[@]}" | sort -n | sed -n 2p)
    moff=$(printf '%s\n' "${off[@]}" | sort -n | sed -n 2p)
    echo "| $mix | $d | ${on[*]} | ${off[*]} | $(ratio "$moff" "$mon") |"
  done
done
echo
echo "### Log-block threshold (B, uniform, engine batches; two runs each)"
echo
echo "| log-block threshold (bytes) | ops/s |"
echo "|---:|---|"
for t in 256 512 1024 2048 4096; do
  a=$(ak --mix b --dist uniform --log-threshold "$t")
  b=$(ak --mix b --dist uniform --log-threshold "$t")
  echo "| $t | $a, $b |"
  printf 'accelkv-B %s %s\n' "$t" "$(( (${a%.*} + ${b%.*}) / 2 ))" >>"$tmp/log"
done
echo
echo "![B throughput against the log-block threshold](honeycomb-log-block.svg)"
} | tee "$out"
plot honeycomb-scan-length "Scans per second against scan length (one thread)" "items per scan" "scans per second" "$tmp/scan"
plot honeycomb-key-length "GETs per second against key length (one thread)" "key bytes" "GETs per second" "$tmp/key"
plot honeycomb-log-block "YCSB B against the log-block threshold" "log-block threshold (bytes)" "operations per second" "$tmp/log"
python3 scripts/honeycomb-bars.py "$out"
echo "wrote $out and its plots"
