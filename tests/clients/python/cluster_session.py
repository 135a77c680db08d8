"""redis-py's RedisCluster against accelkv answering as a Redis Cluster: one server in
emulated cluster mode (`--cluster-mode emulated`), or a cluster in slot mode (`--slots
redis`, docs/CLUSTER.md). It discovers the nodes from CLUSTER SLOTS, then strings, a hash, a
sorted set, a list with a blocking pop woken by another connection's push, a pipeline and
a transaction over one hash tag, and a multi-key command over two slots refused.

    python3 tests/clients/python/cluster_session.py PORT

ACCELKV_CLUSTER_HOST (default 127.0.0.1) is the node's address, ACCELKV_CLUSTER_NODES
(default 1) the number of nodes it should find. With ACCELKV_CLUSTER_PAUSE set, after the
session it prints "paused", waits for a line on stdin (the test splits a range and kills
the leader meanwhile) and runs the session again with the same client, checking that what
the first wrote is still there.
"""
import os
import sys
import threading
import time

from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    RedisClusterException,
    ResponseError,
    TimeoutError,
    TryAgainError,
)


def main(port):
    host = os.environ.get("ACCELKV_CLUSTER_HOST", "127.0.0.1")
    want_nodes = int(os.environ.get("ACCELKV_CLUSTER_NODES", "1"))
    # Retries as redis-py documents them for a failover: a broken connection makes the
    # client read the topology again and retry, with a backoff, up to 20 times (accelkv
    # elects a range's new leader in about a second).
    retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), 20)
    rc = RedisCluster(host=host, port=port, decode_responses=True, retry=retry)
    nodes = rc.get_nodes()
    assert len(nodes) == want_nodes and any(n.port == port for n in nodes), nodes
    session(rc, host, port)
    if os.environ.get("ACCELKV_CLUSTER_PAUSE"):
        print("paused", flush=True)
        sys.stdin.readline()
        # Until a new leader is elected (about a second) the slots' primary in every
        # node's CLUSTER SLOTS is the killed node, and redis-py's own retries, which read
        # the topology again at once, end in ConnectionError: the application retries.
        # Each range split off elects its own leader, so this waits until every key reads.
        deadline = time.time() + 20
        while True:
            try:
                got = [rc.get(f"k{i}") for i in range(200)]
                break
            except (ConnectionError, TimeoutError, ClusterDownError, TryAgainError):
                assert time.time() < deadline, "the cluster did not come back in 20 s"
                time.sleep(0.2)
        # The first session's writes survived the split and the leader's kill -9.
        assert got == [str(i) for i in range(200)]
        assert rc.hgetall("h") == {"a": "11", "b": "2"}
        session(rc, host, port, again=True)
    print("redis-py RedisCluster: ok")


def session(rc, host, port, again=False):
    assert rc.cluster_info()["cluster_state"] == "ok"
    assert rc.keyslot("foo") == 12182
    assert rc.cluster_keyslot("{user1}.a") == rc.keyslot("user1")

    # strings, across slots (each key routed alone)
    for i in range(200):
        rc.set(f"k{i}", str(i))
    assert [rc.get(f"k{i}") for i in range(200)] == [str(i) for i in range(200)]
    assert rc.mget_nonatomic([f"k{i}" for i in range(50)]) == [str(i) for i in range(50)]
    assert rc.incrby("counter", 5) == (10 if again else 5)

    # a hash, a sorted set
    rc.delete("h")
    rc.hset("h", mapping={"a": "1", "b": "2"})
    assert rc.hgetall("h") == {"a": "1", "b": "2"}
    assert rc.hincrby("h", "a", 10) == 11
    rc.zadd("z", {"x": 1.5, "y": 0.5})
    assert rc.zrange("z", 0, -1, withscores=True) == [("y", 0.5), ("x", 1.5)]

    # a list with a blocking pop, woken by another connection's push
    other = RedisCluster(host=host, port=port, decode_responses=True)
    got = {}

    def pop():
        got["v"] = rc.blpop(["{q}jobs"], timeout=5)

    t = threading.Thread(target=pop)
    t.start()
    time.sleep(0.2)
    other.rpush("{q}jobs", "job1")
    t.join()
    assert got["v"] == ("{q}jobs", "job1"), got

    # a pipeline and a transaction over one hash tag
    p = rc.pipeline()
    for i in range(100):
        p.set(f"{{tag}}p{i}", i)
    p.get("{tag}p7")
    assert p.execute()[-1] == "7"
    tx = rc.pipeline(transaction=True)
    tx.set("{tag}a", "1")
    tx.incr("{tag}n")
    tx.get("{tag}a")
    res = tx.execute()
    n = 2 if again else 1
    assert res[0] in (True, "OK") and res[1:] == [n, "1"], res
    assert rc.mget("{tag}a", "{tag}n") == ["1", str(n)]

    # keys of two slots in one command: refused (by the client, or by the server)
    try:
        rc.execute_command("MSET", "a", "1", "b", "2")
        raise AssertionError("MSET over two slots was accepted")
    except (RedisClusterException, ResponseError) as e:
        assert "slot" in str(e).lower(), e


if __name__ == "__main__":
    main(int(sys.argv[1]))
