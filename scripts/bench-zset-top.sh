#!/usr/bin/env bash
# The top of a large sorted set (docs/BENCHMARKS.md, "The top of a large sorted set"): a
# 100,000-member set loaded into Redis (Debian's) and accelkv-server --threads 1 (this
# tree's release build, and BEFORE=path/to/an/older/accelkv-server beside it when given),
# then redis-benchmark -c 10 of ZREVRANGE 0 9, ZRANGE -10 -1, ZREVRANGEBYSCORE +inf -inf
# LIMIT 0 10, ZRANGE 0 9 and ZPOPMAX, one server after the other; requests per second.
#
# Usage: scripts/bench-zset-top.sh [requests]      (default 20000; 200 for BEFORE)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
for tool in redis-server redis-benchmark redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "install $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
cargo build --release -q -p accelkv-server
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
python3 - "$dir/load.txt" <<'PY'
import random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for c in range(0, 100000, 1000):
        args = ["ZADD", "big"]
        for i in range(c, c + 1000):
            args += [str(random.randint(0, 1000000)), "member:%07d" % i]
        f.write("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args))
PY
servers=(redis accelkv)
redis-server --port 18103 --save '' --appendonly no --bind 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
"${CARGO_TARGET_DIR:-target}"/release/accelkv-server --threads 1 --port 0 --resp-port 18102 \
  --admin-port 0 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
declare -A port=([redis]=18103 [accelkv]=18102 [before]=18101)
if [ -n "${BEFORE:-}" ]; then
  "$BEFORE" --threads 1 --port 0 --resp-port 18101 --admin-port 0 --memcached-port off >/dev/null 2>&1 &
  pids+=($!)
  servers+=(before)
fi
sleep 1
for s in "${servers[@]}"; do redis-cli -p "${port[$s]}" --pipe <"$dir/load.txt" >/dev/null; done
rps() { # port, requests, command...
  redis-benchmark -p "$1" -n "$2" -c 10 -q "${@:3}" 2>/dev/null | tr '\r' '\n' \
    | awk -F'[:,]' '/requests per second/ {gsub(/[^0-9.]/, "", $2); v = $2} END {print v}'
}
head="| command |"
rule="|---|"
for s in "${servers[@]}"; do head+=" $s |"; rule+="---:|"; done
echo "$head"
echo "$rule"
for cmd in "ZREVRANGE big 0 9" "ZRANGE big -10 -1" "ZREVRANGEBYSCORE big +inf -inf LIMIT 0 10" "ZRANGE big 0 9" "ZPOPMAX big"; do
  line="| \`$cmd\` |"
  for s in "${servers[@]}"; do
    k=$n
    [ "$s" = before ] && k=200
    [ "$cmd" = "ZPOPMAX big" ] && k=$((k < 5000 ? k : 5000))
    # shellcheck disable=SC2086
    line+=" $(rps "${port[$s]}" "$k" $cmd) |"
  done
  echo "$line"
done
