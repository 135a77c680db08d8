#!/usr/bin/env bash
# The GPU engine's evaluation (docs/EVALUATION.md, "Honeycomb on a GPU"), in one command on a
# machine with an NVIDIA GPU, its driver and NVRTC (README, "The GPU engine"):
#
#  1. the GPU tests, the kernels on the device (`cargo test -p accelkv-gpu -- --include-ignored`);
#  2. gpu_bench at 10M and 100M items (keys in host memory; 100M needs about 20 GiB): GET
#     and SCAN-4 per second against the CPU engine on every core, host (PCIe) bytes per
#     request, the interior-node cache's share of the interior nodes, latency per batch size;
#  3. throughput against batch size at 10M items (1,024 .. 65,536 requests per launch);
#  4. the interior-node cache's size (16, 64, 256 MiB) at 100M items.
#
# Writes docs/bench/gpu-evaluation.md (every table and the machine) and replaces the section
# between the GPU-EVALUATION markers of docs/EVALUATION.md with it.
#
# Usage: scripts/gpu-evaluation.sh [--quick]   (--quick: 1M items only, to check the script)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=${1:-}
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this needs an NVIDIA GPU" >&2; exit 1; }
out=docs/bench/gpu-evaluation.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench=target/release/examples/gpu_bench
cargo build --release -q -p accelkv-gpu --example gpu_bench

items_main=(10000000 100000000)
batches=(1024 4096 16384 65536)
caches=(16 64 256)
if [ "$quick" = "--quick" ]; then
  items_main=(1000000); batches=(1024 16384); caches=(16 256)
fi

{
  echo "<!-- GPU-EVALUATION: written by scripts/gpu-evaluation.sh on $(date -u +%Y-%m-%d) -->"
  echo
  echo "Machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1);"
  echo "$(nproc) CPU cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(free -g | awk '/Mem:/ {print $2}') GiB memory."
  echo
  echo "### Tests on the device"
  echo
  if cargo test -q -p accelkv-gpu -- --include-ignored >"$tmp/tests.txt" 2>&1; then
    echo "\`cargo test -p accelkv-gpu -- --include-ignored\`: passed ($(grep -c '^test result: ok' "$tmp/tests.txt") test binaries)."
  else
    echo "\`cargo test -p accelkv-gpu -- --include-ignored\`: **failed**:"
    echo; echo '```'; grep -E 'FAILED|panicked|test result' "$tmp/tests.txt" | head -20; echo '```'
  fi
  for n in "${items_main[@]}"; do
    echo
    echo "### $n items: GPU engine against the CPU engine on every core"
    echo
    echo "\`$bench --items $n --engines cpu,gpu\`"
    echo
    "$bench" --items "$n" --engines cpu,gpu 2>"$tmp/err.txt" || echo "(exit $?: $(tail -1 "$tmp/err.txt"))"
  done
  echo
  echo "### Throughput against batch size (${items_main[0]} items, GPU engine)"
  echo
  echo "| requests per launch | GET/s | SCAN4/s | host bytes/GET | host bytes/SCAN4 |"
  echo "|---:|---:|---:|---:|---:|"
  for b in "${batches[@]}"; do
    row=$("$bench" --items "${items_main[0]}" --engines gpu --batch "$b" --latency-batches 1 2>/dev/null \
      | awk -F'|' '/^\| gpu \|/ {print; exit}')
    echo "| $b |$(echo "$row" | cut -d'|' -f3-)"
  done
  last=${items_main[${#items_main[@]}-1]}
  echo
  echo "### Interior-node cache size ($last items, GPU engine)"
  echo
  for c in "${caches[@]}"; do
    "$bench" --items "$last" --engines gpu --cache-mib "$c" --latency-batches 1 2>/dev/null \
      | grep -E '^\| gpu \||interior-node cache' | sed "s/^| gpu |/| gpu, $c MiB cache |/"
    echo
  done
} >"$out"

# Replace the section between the markers in docs/EVALUATION.md.
python3 - "$out" <<'EOF'
import re, sys
doc = "docs/EVALUATION.md"
body = open(sys.argv[1]).read()
text = open(doc).read()
start, end = "<!-- GPU-EVALUATION-START -->", "<!-- GPU-EVALUATION-END -->"
if start not in text or end not in text:
    sys.exit("docs/EVALUATION.md has no GPU-EVALUATION markers")
head, rest = text.split(start, 1)
_, tail = rest.split(end, 1)
open(doc, "w").write(head + start + "\n" + body + "\n" + end + tail)
EOF
echo "wrote $out and its section of docs/EVALUATION.md"
