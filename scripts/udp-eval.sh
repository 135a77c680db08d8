#!/usr/bin/env bash
# Algo-Logic's evaluation adapted to this machine (docs/EVALUATION.md, "Algo-Logic"): the
# latency and throughput of GETs over UDP sockets, one request per datagram against batches,
# next to a raw UDP echo (the floor of a round trip through the kernel's sockets), with the
# server's CPU time per GET (the energy proxy: this machine has no RAPL counters), and a
# latency–throughput curve from more requests in flight. Redis and memcached over the same
# loopback, 16 pipelined requests, are the socket peers (net_bench).
#
# Usage: scripts/udp-eval.sh [seconds]   (default 3)
# Writes docs/bench/udp-eval.md and docs/bench/udp-{latency-throughput,batching,latency-cdf}.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
cargo build --release -q -p accelkv-server -p accelkv-client --example udp_load --example net_bench
port=17907
target/release/accelkv-server --port $port --resp-port 17909 --admin-port 17908 \
  --memcached-port off >/dev/null 2>&1 &
pid=$!
pids=($pid)
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
sleep 1
u() { target/release/examples/udp_load --server 127.0.0.1:$port "$@"; }
out=docs/bench/udp-eval.md
{
  echo "Written by \`scripts/udp-eval.sh $secs\` on $(date -u +%Y-%m-%d), $(nproc) vCPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1))."
  echo
  echo "| client | threads | datagrams in flight per socket | GETs per datagram | GET/s | p50 round trip | p99 | p99.9 | server CPU per GET | lost or failed |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  u --load 100000 --secs 0.2 >/dev/null
  target/release/examples/udp_load --echo --secs "$secs" --cdf /tmp/udp-cdf-echo
  for b in 1 16 64; do
    u --no-load --secs "$secs" --batch "$b" --server-pid "$pid" --cdf "/tmp/udp-cdf-$b"
  done
  for w in 1 2 4 8 16; do
    u --no-load --secs "$secs" --threads 2 --window "$w" --batch 16 --server-pid "$pid"
  done
  for w in 4 16; do u --no-load --secs "$secs" --threads 2 --window "$w" --batch 1 --server-pid "$pid"; done
} | tee "$out.tmp"
if command -v redis-server >/dev/null && command -v memcached >/dev/null; then
  redis-server --port 17999 --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
  pids+=($!)
  memcached -l 127.0.0.1 -p 17998 -U 0 -u root >/dev/null &
  pids+=($!)
  sleep 1
  {
    echo
    echo "Socket peers and accelkv's TCP frames from one client thread (\`net_bench\`, 100,000 operations per row):"
    echo
    target/release/examples/net_bench --accelkv 127.0.0.1:$port --redis 127.0.0.1:17999 \
      --memcached 127.0.0.1:17998
  } | tee -a "$out.tmp"
fi
mv "$out.tmp" "$out"
# The latency–throughput curve (the two-thread, 16-GET rows), throughput against GETs per
# datagram (KV-Direct's batching figure) and the round trips' distribution (Algo-Logic's
# Figure 9).
python3 - "$out" <<'EOF'
import json, subprocess, sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("| accelkv UDP GET |")]
def draw(spec, name):
    open(f"/tmp/{name}.json", "w").write(json.dumps(spec))
    subprocess.run(["python3", "scripts/svg_plot.py", f"/tmp/{name}.json",
                    f"docs/bench/{name}.svg"], check=True)
two = [[float(r[4]), float(r[5].split()[0])] for r in rows
       if r[1].strip() == "2" and r[3].strip() == "16"]
draw({"title": "UDP GETs, 2 sockets x 16 per datagram: p50 round trip against load",
      "x": "GETs per second", "y": "p50 round trip (µs)",
      "series": [{"name": "accelkv", "points": two}]}, "udp-latency-throughput")
one = [[float(r[3]), float(r[4])] for r in rows if r[1].strip() == "1" and r[2].strip() == "1"]
draw({"title": "GETs per second against GETs per datagram (one socket)", "logx": True,
      "logy": True, "x": "GETs per datagram", "y": "GETs per second",
      "series": [{"name": "accelkv UDP", "points": one}]}, "udp-batching")
series = []
for name, f in (("UDP echo", "echo"), ("1 GET per datagram", "1"), ("64 GETs per datagram", "64")):
    pts = [[float(a), float(b) * 100] for a, b in (l.split() for l in open(f"/tmp/udp-cdf-{f}"))]
    series.append({"name": name, "points": pts})
draw({"title": "Round trips answered within a time (one socket, one datagram in flight)",
      "logx": True, "x": "round trip (µs)", "y": "% of datagrams", "series": series}, "udp-latency-cdf")
EOF
echo "wrote $out and docs/bench/udp-*.svg"
