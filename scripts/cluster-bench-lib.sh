# Shared by the cluster benchmark scripts (scripts/bench-cluster*.sh); sourced, not run.

# Exits with how to install them unless every tool named is on the PATH.
need_tools() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "install $tool: apt-get install -y etcd-server redis-tools" >&2
      exit 1
    }
  done
}

# Prints the RESP port (of 1810<id> for ids 1-3) of the node that takes a write itself:
# the connection names itself as another node's proxy, so a follower redirects it rather
# than proxying it. Skips nodes whose pid is not alive when node_pid[id] is set.
resp_leader() {
  while true; do
    for i in 1 2 3; do
      if [ -n "${node_pid[$i]:-}" ]; then
        kill -0 "${node_pid[$i]}" 2>/dev/null || continue
      fi
      r=$(printf 'CLIENT SETNAME accelkv-proxy-bench\nSET probe 1\n' | redis-cli -p "1810$i" 2>&1 | tail -n 1 || true)
      if [ "$r" = OK ]; then
        echo "1810$i"
        return
      fi
    done
    sleep 0.05
  done
}
