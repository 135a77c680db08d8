#!/usr/bin/env bash
# Cluster overhead on loopback (docs/CLUSTER.md "Measured"): one range replicated on three
# nodes (etcd + three accelkv-server --cluster processes, --threads 1 each) against one
# plain accelkv-server --threads 1, all on this machine. On 2 cores this measures what
# replication costs, not how a cluster scales.
#
#  1. redis-benchmark -c 50 -d 16 -r 100000 --threads 1 against the range's leader and the
#     plain server, interleaved for ROUNDS rounds: SET (-n 100000), GET (-n 200000) and a
#     10-item RANGE scan (-n 100000); median throughput and p99 of each, and the ratio.
#     Also GET sent to a follower, which proxies it to the leader (row GETP).
#  2. The binary protocol: the project's YCSB driver (accelkv-bench, accelkv-tcp targets)
#     against the range's leader and the plain server, 20,000 records, 16 driver threads:
#     workloads A, C and E one operation per frame, then A and C 16 operations per frame.
#  3. Failover: kill -9 of the leader, then the time until a write is acknowledged again
#     (redis-cli -c retrying every 10 ms), FAILOVERS times.
#
# Usage: scripts/bench-cluster.sh [rounds] [failovers]     (defaults 3 and 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
failovers=${2:-5}
source scripts/cluster-bench-lib.sh
need_tools etcd redis-benchmark redis-cli
source scripts/build-env.sh
cargo build --release -q -p accelkv-server --features cluster
cargo build --release -q -p accelkv-bench
bin=./target/release/accelkv-server
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # Leadership changes the nodes logged (a change under load is an election the load caused).
  grep -h "leads\|no leader" "$dir"/n*.log 2>/dev/null | sort | uniq -c | sed 's/^/  log: /' || true
  rm -rf "$dir"
}
trap cleanup EXIT
etcd --name bench --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:22379 \
  --advertise-client-urls http://127.0.0.1:22379 --listen-peer-urls http://127.0.0.1:22380 \
  >"$dir/etcd.log" 2>&1 &
pids+=($!)
disown $!
sleep 1
declare -A node_pid
start_node() { # $1: node id
  $bin --cluster etcd=http://127.0.0.1:22379 --node-id "$1" --data-dir "$dir/n$1" \
    --resp-port "1810$1" --raft-port "1820$1" --port "1830$1" --admin-port 0 --threads 1 \
    >"$dir/n$1.log" 2>&1 &
  node_pid[$1]=$!
  pids+=($!)
  disown $!
}
for i in 1 2 3; do start_node "$i"; done
$bin --threads 1 --port 18399 --resp-port 18199 --admin-port 0 --memcached-port off >/dev/null 2>&1 &
pids+=($!)
disown $!
for i in 1 2 3; do
  until grep -q listening "$dir/n$i.log" 2>/dev/null; do sleep 0.1; done
done
port=$(resp_leader)
follower=18101
[ "$port" = 18101 ] && follower=18102
echo "leader on $port, proxied reads through $follower"
redis-benchmark -p "$port" -n 20000 -c 50 -r 100000 -d 16 -t set -q >/dev/null # warm up
redis-benchmark -p 18199 -n 20000 -c 50 -r 100000 -d 16 -t set -q >/dev/null

run() { # $1 port, $2 test name: prints "rps p99"; any error reply fails the benchmark
  local common=(-p "$1" -c 50 --threads 1 --csv)
  case $2 in
    SET) redis-benchmark "${common[@]}" -n 100000 -r 100000 -d 16 -t set ;;
    GET) redis-benchmark "${common[@]}" -n 200000 -r 100000 -t get ;;
    RANGE) redis-benchmark "${common[@]}" -n 100000 RANGE key:000000050000 + LIMIT 10 ;;
  esac >"$dir/out" 2>"$dir/err"
  if grep -q . "$dir/err"; then
    echo "$2 on port $1 failed:" >&2
    head -3 "$dir/err" >&2
    exit 1
  fi
  awk -F'","' 'NR == 2 { print $2, $7 }' "$dir/out"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
declare -A rps p99
for r in $(seq "$rounds"); do
  for t in SET GET RANGE; do
    for target in plain cluster; do
      p=18199
      [ $target = cluster ] && p=$port
      read -r x y < <(run "$p" "$t")
      rps[$t-$target]+="$x "
      p99[$t-$target]+="$y "
    done
  done
  # GET sent to a follower, which proxies it to the leader (--proxy, the default).
  read -r x y < <(run "$follower" GET)
  rps[GETP-cluster]+="$x "
  p99[GETP-cluster]+="$y "
  rps[GETP-plain]=${rps[GET-plain]}
  p99[GETP-plain]=${p99[GET-plain]}
done
echo
printf '%-6s %14s %14s %8s %12s %12s\n' test "plain ops/s" "3-replica ops/s" ratio "plain p99" "cluster p99"
for t in SET GET RANGE GETP; do
  a=$(echo "${rps[$t-plain]}" | tr ' ' '\n' | grep . | median)
  b=$(echo "${rps[$t-cluster]}" | tr ' ' '\n' | grep . | median)
  pa=$(echo "${p99[$t-plain]}" | tr ' ' '\n' | grep . | median)
  pb=$(echo "${p99[$t-cluster]}" | tr ' ' '\n' | grep . | median)
  printf '%-6s %14.0f %14.0f %7.2fx %10s ms %10s ms\n' "$t" "$a" "$b" "$(echo "$b / $a" | bc -l)" "$pa" "$pb"
done

echo
# The binary protocol (the leader's binary port is 1830<node id>), one run per shape: a
# run's workload E inserts keys a later run's scans would not expect.
ycsb() { # $1 workloads, $2 operations per frame
  ./target/release/accelkv-bench -t "accelkv-tcp=127.0.0.1:1830${port: -1}" \
    -t accelkv-tcp=127.0.0.1:18399 --workloads "$1" --dist uniform --records 20000 \
    --duration 5 --threads 16 --batch "$2" --out "$dir/ycsb" 2>&1 |
    grep -E '^\| [ACE] \| uniform \| accelkv-tcp' | sed "s/^/  batch $2 /"
}
echo "binary protocol, YCSB (first rows: the 3-replica range's leader; last: the plain server)"
ycsb a,c,e 1
ycsb a,c 16

echo
for f in $(seq "$failovers"); do
  port=$(resp_leader)
  id=${port: -1}
  t0=$(date +%s%N)
  kill -9 "${node_pid[$id]}"
  until [ "$(redis-cli -c -p 1810$(( id % 3 + 1 )) SET failover "$f" 2>/dev/null)" = OK ]; do sleep 0.01; done
  t1=$(date +%s%N)
  echo "failover $f: node $id killed, a write acknowledged again after $(( (t1 - t0) / 1000000 )) ms"
  start_node "$id"
  until grep -q listening "$dir/n$id.log" 2>/dev/null; do sleep 0.1; done
  sleep 2
done
