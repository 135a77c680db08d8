"""redis-py's RedisCluster against one accelkv server in emulated cluster mode
(`--cluster-mode emulated`, docs/CLUSTER.md): it discovers the one node owning every slot
from CLUSTER SLOTS, then strings, a hash, a sorted set, a list with a blocking pop woken by
another connection's push, a pipeline and a transaction over one hash tag, and a
multi-key command over two slots refused.

    python3 tests/clients/python/cluster_session.py PORT
"""
import sys
import threading
import time

from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, ResponseError


def main(port):
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    nodes = rc.get_nodes()
    assert len(nodes) == 1 and nodes[0].port == port, nodes
    assert rc.cluster_info()["cluster_state"] == "ok"
    assert rc.keyslot("foo") == 12182
    assert rc.cluster_keyslot("{user1}.a") == rc.keyslot("user1")

    # strings, across slots (each key routed alone)
    for i in range(200):
        rc.set(f"k{i}", str(i))
    assert [rc.get(f"k{i}") for i in range(200)] == [str(i) for i in range(200)]
    assert rc.mget_nonatomic([f"k{i}" for i in range(50)]) == [str(i) for i in range(50)]
    assert rc.incrby("counter", 5) == 5

    # a hash, a sorted set
    rc.hset("h", mapping={"a": "1", "b": "2"})
    assert rc.hgetall("h") == {"a": "1", "b": "2"}
    assert rc.hincrby("h", "a", 10) == 11
    rc.zadd("z", {"x": 1.5, "y": 0.5})
    assert rc.zrange("z", 0, -1, withscores=True) == [("y", 0.5), ("x", 1.5)]

    # a list with a blocking pop, woken by another connection's push
    other = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
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
    assert res[0] in (True, "OK") and res[1:] == [1, "1"], res
    assert rc.mget("{tag}a", "{tag}n") == ["1", "1"]

    # keys of two slots in one command: refused (by the client, or by the server)
    try:
        rc.execute_command("MSET", "a", "1", "b", "2")
        raise AssertionError("MSET over two slots was accepted")
    except (RedisClusterException, ResponseError) as e:
        assert "slot" in str(e).lower(), e
    print("redis-py RedisCluster: ok")


if __name__ == "__main__":
    main(int(sys.argv[1]))
