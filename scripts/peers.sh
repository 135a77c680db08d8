# Sourced by the benchmark scripts: starts one network target on loopback (accelkv-server
# from this tree, Redis and memcached from their Debian packages) and stops it by process
# id. After `start_target TARGET [accelkv-server flags...]`, $pid is the server's process
# and $spec the `accelkv-bench -t` argument that reaches it.
pid=""
spec=""
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not open" >&2; exit 1; }
start_target() {
  local target=$1
  shift
  case $target in
    accelkv-*)
      ./target/release/accelkv-server --port 17707 --resp-port 17379 --admin-port 17708 "$@" >/dev/null 2>&1 &
      pid=$!; wait_port 17707; wait_port 17379
      case $target in
        accelkv-resp) spec="$target=127.0.0.1:17379" ;;
        *) spec="$target=127.0.0.1:17707" ;;
      esac ;;
    redis)
      redis-server --port 16399 --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
      pid=$!; wait_port 16399; spec="redis=127.0.0.1:16399" ;;
    memcached)
      memcached -l 127.0.0.1 -p 11299 -U 0 -m 8192 -u root >/dev/null &
      pid=$!; wait_port 11299; spec="memcached=127.0.0.1:11299" ;;
    *) echo "unknown target $target" >&2; exit 1 ;;
  esac
}
