"""accelkv's RESP session with redis-py (tests/clients/README.md): the same script as every
client of the matrix, over RESP2 and RESP3 (and with the hiredis parser when installed).

    python3 tests/clients/python/session.py PORT PASSWORD
"""
import sys
import time

import redis


def client(port, protocol, parser, password=None):
    pool = redis.ConnectionPool(
        host="127.0.0.1",
        port=port,
        protocol=protocol,
        parser_class=parser,
        password=password,
    )
    return redis.Redis(connection_pool=pool)


def session(port, password, protocol, parser):
    # Without AUTH: refused.
    anon = client(port, protocol, parser)
    try:
        anon.get("k")
        raise AssertionError("a command without AUTH was served")
    except redis.AuthenticationError:
        pass
    except redis.ResponseError as e:
        assert "NOAUTH" in str(e), e
    r = client(port, protocol, parser, password)
    assert r.ping()
    # Binary values, every byte.
    blob = bytes(range(256)) * 4
    assert r.set(b"bin\x00key", blob)
    assert r.get(b"bin\x00key") == blob
    assert r.get("missing") is None
    # A pipeline of 1000.
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set(f"p:{i:04}", i)
    assert all(p.execute())
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.get(f"p:{i:04}")
    assert p.execute() == [str(i).encode() for i in range(1000)]
    # SCAN over 10,000 keys against the set written.
    written = {f"s:{i:05}".encode() for i in range(10_000)}
    keys = sorted(written)
    for at in range(0, len(keys), 1000):
        r.mset({k: b"v" for k in keys[at : at + 1000]})
    assert set(r.scan_iter(match="s:*", count=500)) == written
    # Counters, MGET, DEL.
    assert r.incr("n") == 1 and r.incrby("n", 41) == 42
    assert r.mget(["n", "missing"]) == [b"42", None]
    assert r.delete("n", "missing") == 1
    # MULTI/EXEC: redis-py's default pipeline is a transaction.
    p = r.pipeline()
    p.set("tx:a", 1).incr("tx:a").get("tx:a")
    assert p.execute() == [True, 2, b"2"]
    # WATCH: a change by another connection makes EXEC fail.
    other = client(port, protocol, parser, password)
    with r.pipeline() as p:
        p.watch("tx:a")
        assert p.get("tx:a") == b"2"
        other.set("tx:a", "changed")
        p.multi()
        p.set("tx:a", "mine")
        try:
            p.execute()
            raise AssertionError("EXEC ran although a watched key changed")
        except redis.WatchError:
            pass
    assert r.get("tx:a") == b"changed"
    # Without a conflict, the optimistic transaction commits.
    with r.pipeline() as p:
        p.watch("tx:a")
        p.multi()
        p.set("tx:a", "mine")
        assert p.execute() == [True]
    assert r.get("tx:a") == b"mine"
    # Expiry: EXPIRE, then TTL, then the key observed gone; SET EX and PERSIST.
    r.set("ttl:a", "v")
    assert r.expire("ttl:a", 100) is True and 99 <= r.ttl("ttl:a") <= 100
    assert r.pexpire("ttl:a", 300) is True and 0 < r.pttl("ttl:a") <= 300
    assert r.set("ttl:b", "v", ex=100) is True and r.persist("ttl:b") is True
    assert r.ttl("ttl:b") == -1 and r.ttl("ttl:missing") == -2
    time.sleep(0.4)
    assert r.get("ttl:a") is None and r.exists("ttl:a") == 0 and r.ttl("ttl:a") == -2
    assert r.getex("ttl:b", px=200) == b"v" and 0 < r.pttl("ttl:b") <= 200
    r.delete("ttl:b")
    # CLIENT LIST as redis-py parses it; CLIENT KILL of another connection.
    r.client_setname("py-main")
    other.client_setname("py-other")
    names = {c["name"]: c for c in r.client_list()}
    assert {"py-main", "py-other"} <= set(names), names
    killed = names["py-other"]["id"]
    assert r.client_kill_filter(_id=killed) == 1
    for _ in range(100):
        if all(c["id"] != killed for c in r.client_list()):
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the killed connection is still listed")
    # Wrong arguments: Redis's error.
    try:
        r.execute_command("GET", "a", "b")
        raise AssertionError("GET with two keys was accepted")
    except redis.ResponseError as e:
        assert "wrong number of arguments for 'get' command" in str(e), e
    # Hashes and sets: a mapping, counters, a pipeline and a transaction, WRONGTYPE.
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2"}
    assert r.hincrby("h", "a", 5) == 6 and r.hincrbyfloat("h", "f", 1.5) == 1.5
    assert r.hmget("h", "a", "zz") == [b"6", None] and r.hlen("h") == 3
    assert r.hdel("h", "b", "zz") == 1 and sorted(r.hkeys("h")) == [b"a", b"f"]
    assert r.sadd("s", "x", "y", "z") == 3 and r.smembers("s") == {b"x", b"y", b"z"}
    assert r.sismember("s", "y") and r.smismember("s", ["x", "q"]) == [True, False]
    assert r.srem("s", "x") == 1 and r.scard("s") == 2
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.hset("ph", f"f{i}", i)
        p.sadd("ps", i)
    p.hlen("ph")
    p.scard("ps")
    assert p.execute()[-2:] == [100, 100]
    p = r.pipeline()
    p.hset("th", "k", "v").sadd("ts", "m").hgetall("th").smembers("ts")
    assert p.execute() == [1, 1, {b"k": b"v"}, {b"m"}]
    assert r.type("th") == b"hash" and r.type("ts") == b"set"
    assert sorted(k for k, _ in r.hscan_iter("ph", count=7)) == sorted(f"f{i}".encode() for i in range(100))
    try:
        r.get("h")
        raise AssertionError("GET of a hash was accepted")
    except redis.ResponseError as e:
        assert str(e).startswith("WRONGTYPE"), e
    r.delete("h", "s", "ph", "ps", "th", "ts")
    lists_and_sorted_sets(r, lambda: client(port, protocol, parser, password))
    pubsub(r, client(port, protocol, parser, password))
    keyspace_events(r, client(port, protocol, parser, password))
    monitor(r, client(port, protocol, parser, password))
    consumer_group(r, client(port, protocol, parser, password))
    # The ordered RANGE through the generic command call.
    got = r.execute_command("RANGE", "p:0010", "p:0013")
    assert got == [b"p:0010", b"10", b"p:0011", b"11", b"p:0012", b"12"], got
    r.flushall()
    assert r.dbsize() == 0


def pubsub(r, other):
    """Pub/sub with redis-py's PubSub object: a channel and a pattern, messages in publish
    order, PUBSUB's counts, and the subscriptions gone when it closes."""
    ps = other.pubsub()
    ps.subscribe("news")
    ps.psubscribe("n*")
    confirm = [ps.get_message(timeout=5) for _ in range(2)]
    assert [c["type"] for c in confirm] == ["subscribe", "psubscribe"], confirm
    assert r.pubsub_numsub("news") == [(b"news", 1)]
    assert r.pubsub_numpat() == 1
    assert r.pubsub_channels() == [b"news"]
    for i in range(50):
        assert r.publish("news", f"m{i}") == 2
    got = []
    while len(got) < 100:
        m = ps.get_message(timeout=5)
        assert m is not None, f"only {len(got)} messages arrived"
        got.append((m["type"], m["data"]))
    want = []
    for i in range(50):
        want += [("message", f"m{i}".encode()), ("pmessage", f"m{i}".encode())]
    assert got == want, got[:6]
    ps.unsubscribe("news")
    ps.punsubscribe()
    ps.close()
    deadline = time.time() + 10
    while r.pubsub_numsub("news") != [(b"news", 0)] or r.pubsub_numpat() != 0:
        assert time.time() < deadline, "the subscriptions outlived the connection"
        time.sleep(0.01)
    assert r.publish("news", "nobody") == 0


def keyspace_events(r, other):
    """Client-side cache invalidation on keyspace notifications: a pattern subscription to
    the cached keys' channels, then the writes that must invalidate them (a SET, an
    HSET, an EXPIRE, a DEL, a SET with PX and its expiry), each arriving as its event."""
    r.config_set("notify-keyspace-events", "Kgx$h")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "g$hxK"}
    ps = other.pubsub()
    ps.psubscribe("__keyspace@0__:cache:*")
    assert ps.get_message(timeout=5)["type"] == "psubscribe"
    r.set("cache:a", "1")
    r.hset("cache:h", mapping={"f": "v"})
    r.expire("cache:a", 100)
    r.delete("cache:a", "cache:h")
    r.set("uncached", "1")
    r.set("cache:gone", "1", px=50)
    got = []
    while len(got) < 7:
        m = ps.get_message(timeout=5)
        assert m is not None, f"only {got} arrived"
        got.append((m["channel"], m["data"]))
    want = [
        (b"__keyspace@0__:cache:a", b"set"),
        (b"__keyspace@0__:cache:h", b"hset"),
        (b"__keyspace@0__:cache:a", b"expire"),
        (b"__keyspace@0__:cache:a", b"del"),
        (b"__keyspace@0__:cache:h", b"del"),
        (b"__keyspace@0__:cache:gone", b"set"),
        (b"__keyspace@0__:cache:gone", b"expire"),
    ]
    assert got == want, got
    # The sweep removes the expired key within a few of its 100 ms ticks.
    m = ps.get_message(timeout=5)
    while m is not None and m["type"] != "pmessage":
        m = ps.get_message(timeout=5)
    assert m is not None and (m["channel"], m["data"]) == (b"__keyspace@0__:cache:gone", b"expired"), m
    ps.close()
    r.config_set("notify-keyspace-events", "")


def monitor(r, other):
    """redis-py's Monitor reads the lines MONITOR sends: the command, its arguments (with
    spaces and quotes) and the client's address."""
    with other.monitor() as m:
        r.set("mon key", 'say "hi"')
        r.get("mon key")
        seen = [m.next_command() for _ in range(2)]
    assert [c["command"] for c in seen] == ['SET mon key say "hi"', "GET mon key"], seen
    assert all(c["client_type"] == "tcp" and c["db"] == 0 for c in seen), seen
    r.delete("mon key")


def consumer_group(r, dead):
    """A stream consumer group as a job queue: a worker reads with XREADGROUP and dies
    (its connection closed) with two jobs pending; another acknowledges one of its own and,
    once the dead worker's jobs have been idle long enough, takes them over with XAUTOCLAIM;
    XPENDING and XINFO follow every step."""
    r.delete("jobs:s")
    assert r.xgroup_create("jobs:s", "workers", id="0", mkstream=True)
    ids = [r.xadd("jobs:s", {"n": str(i)}) for i in range(3)]
    got = dead.xreadgroup("workers", "w1", {"jobs:s": ">"}, count=2)
    # RESP2: [[stream, entries]]; RESP3: {stream: [entries]}.
    entries = got[b"jobs:s"][0] if isinstance(got, dict) else got[0][1]
    assert [e[0] for e in entries] == ids[:2], got
    dead.close()
    got = r.xreadgroup("workers", "w2", {"jobs:s": ">"}, block=100)
    entries = got[b"jobs:s"][0] if isinstance(got, dict) else got[0][1]
    assert [e[0] for e in entries] == ids[2:], got
    assert r.xack("jobs:s", "workers", ids[2]) == 1
    summary = r.xpending("jobs:s", "workers")
    assert summary["pending"] == 2 and summary["min"] == ids[0], summary
    assert [c["name"] for c in summary["consumers"]] == [b"w1"], summary
    time.sleep(0.05)
    claimed = r.xautoclaim("jobs:s", "workers", "w2", min_idle_time=40, start_id="0-0")
    assert [e[0] for e in claimed[1]] == ids[:2], claimed
    rows = r.xpending_range("jobs:s", "workers", "-", "+", 10)
    assert [(row["message_id"], row["consumer"], row["times_delivered"]) for row in rows] == [
        (ids[0], b"w2", 2),
        (ids[1], b"w2", 2),
    ], rows
    groups = r.xinfo_groups("jobs:s")
    assert groups[0]["name"] == b"workers" and groups[0]["pending"] == 2, groups
    assert groups[0]["last-delivered-id"] == ids[2] and groups[0]["lag"] == 0, groups
    assert {c["name"] for c in r.xinfo_consumers("jobs:s", "workers")} == {b"w1", b"w2"}
    assert r.xack("jobs:s", "workers", *ids[:2]) == 2
    assert r.xinfo_stream("jobs:s")["groups"] == 1
    r.delete("jobs:s")


def lists_and_sorted_sets(r, connect):
    """Lists and sorted sets: pushes and pops, ranges, scores, a pipeline, a transaction,
    and a blocking pop on one connection woken by a push from another."""
    assert r.rpush("l", "a", "b", "c") == 3 and r.lpush("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.lpop("l") == b"z" and r.rpop("l", 2) == [b"c", b"b"] and r.llen("l") == 1
    assert r.lmove("l", "l2", "LEFT", "RIGHT") == b"a" and r.exists("l") == 0
    assert r.zadd("z", {"a": 1, "b": 2.5, "c": -1}) == 3
    # RESP2 answers pairs as tuples, RESP3 as lists.
    pairs = [tuple(p) for p in r.zrange("z", 0, -1, withscores=True)]
    assert pairs == [(b"c", -1.0), (b"a", 1.0), (b"b", 2.5)], pairs
    assert r.zscore("z", "b") == 2.5 and r.zincrby("z", 2, "a") == 3.0
    assert r.zrangebyscore("z", 0, "+inf") == [b"b", b"a"] and r.zrank("z", "a") == 2
    popped = r.zpopmin("z")
    assert popped in ([(b"c", -1.0)], [b"c", -1.0]) and r.zcard("z") == 2, popped
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.rpush("pl", i)
        p.zadd("pz", {f"m{i}": i})
    p.llen("pl")
    p.zcard("pz")
    assert p.execute()[-2:] == [100, 100]
    p = r.pipeline()
    p.rpush("tl", "x").zadd("tz", {"m": 1}).lrange("tl", 0, -1).zrange("tz", 0, -1)
    assert p.execute() == [1, 1, [b"x"], [b"m"]]
    assert r.type("tl") == b"list" and r.type("tz") == b"zset"
    # A blocking pop parks its connection until another connection pushes.
    import threading

    got = []
    waiter = connect()
    t = threading.Thread(target=lambda: got.append(waiter.blpop(["jobs"], timeout=10)))
    t.start()
    deadline = time.time() + 10
    while r.info("clients")["blocked_clients"] != 1:
        assert time.time() < deadline, "BLPOP never parked"
        time.sleep(0.01)
    r.rpush("jobs", "job-1")
    t.join(10)
    assert [tuple(g) for g in got] == [(b"jobs", b"job-1")], got
    assert r.blpop(["nothing"], timeout=0.1) is None
    r.delete("l2", "z", "pl", "pz", "tl", "tz")
    # A script registered once and run by its SHA-1 (EVALSHA, EVAL on NOSCRIPT).
    incr = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    assert incr(keys=["sc"], args=[5]) == 5 and incr(keys=["sc"], args=[2]) == 7
    assert r.eval("return {KEYS[1], ARGV[1]}", 1, "k", "v") == [b"k", b"v"]
    r.delete("sc")


def users(r, port, protocol, parser):
    """ACL users with redis-py's ACL helpers: a user made, logged in with its name, refused
    what its rules leave out (NoPermissionError), seen in ACL LOG, removed."""
    r.acl_deluser("app")
    assert r.acl_setuser(
        "app",
        enabled=True,
        passwords=["+app-secret"],
        keys=["app:*"],
        channels=["app:*"],
        commands=["+@read", "+@write", "-@dangerous", "+ping"],
    )
    assert "app" in [u.decode() if isinstance(u, bytes) else u for u in r.acl_users()]
    user = r.acl_getuser("app")
    assert "on" in user["flags"] and user["keys"] and user["channels"], user
    pool = redis.ConnectionPool(
        host="127.0.0.1", port=port, protocol=protocol, parser_class=parser,
        username="app", password="app-secret",
    )
    app = redis.Redis(connection_pool=pool)
    assert app.ping()
    assert app.set("app:1", "v") and app.get("app:1") == b"v"
    for refused in (lambda: app.get("other"), lambda: app.flushall(), lambda: app.publish("news", "x")):
        try:
            refused()
            raise AssertionError("a command the rules leave out was served")
        except redis.exceptions.NoPermissionError:
            pass
    log = r.acl_log(count=3)
    assert any(e["username"] == "app" for e in log), log
    assert r.acl_dryrun("app", "get", "other") != b"OK"
    try:
        redis.Redis(host="127.0.0.1", port=port, username="app", password="wrong").ping()
        raise AssertionError("a wrong password logged in")
    except redis.AuthenticationError:
        pass
    assert r.acl_deluser("app") == 1
    r.acl_log_reset()
    r.delete("app:1")


def main():
    port, password = int(sys.argv[1]), sys.argv[2]
    from redis._parsers import _RESP2Parser, _RESP3Parser

    runs = [("RESP2", 2, _RESP2Parser), ("RESP3", 3, _RESP3Parser)]
    from redis.utils import HIREDIS_AVAILABLE

    if HIREDIS_AVAILABLE:
        from redis._parsers import _HiredisParser

        runs += [("RESP2 + hiredis", 2, _HiredisParser), ("RESP3 + hiredis", 3, _HiredisParser)]
    else:
        print("hiredis (a version redis-py accepts) not installed: its parser runs are skipped")
    for name, protocol, parser in runs:
        session(port, password, protocol, parser)
        users(client(port, protocol, parser, password), port, protocol, parser)
        print(f"redis-py {redis.__version__} {name}: ok")


if __name__ == "__main__":
    main()
