"""accelkv's memcached port with pymemcache (tests/clients/README.md): set/get, gets and a
CAS conflict between two clients, incr/decr, append/prepend, touch and expiry, delete,
flush_all, noreply, and a multi-get of 100 keys, with the flags each item was stored with.

    python3 tests/clients/python/memcached_session.py PORT
"""
import sys
import time

from pymemcache.client.base import Client


def main(port):
    addr = ("127.0.0.1", port)
    c = Client(addr, default_noreply=False)
    other = Client(addr, default_noreply=False)

    # set/get with flags, binary bytes
    value = bytes(range(256))
    assert c.set("bin", value, flags=7) is True
    head = c.raw_command(b"get bin", b"END\r\n").split(b"\r\n", 1)[0]
    assert head == b"VALUE bin 7 256", head
    assert c.get("bin") == value
    assert c.get("missing") is None

    # gets / cas: the second writer with a stale unique loses
    c.set("k", b"one")
    v, cas = c.gets("k")
    assert v == b"one"
    v2, cas2 = other.gets("k")
    assert cas2 == cas
    assert other.cas("k", b"two", cas2) is True
    assert c.cas("k", b"three", cas) is False, "a stale CAS must fail"
    assert c.get("k") == b"two"
    assert c.cas("nope", b"x", cas) is None, "cas of a missing key is NOT_FOUND"

    # add / replace
    assert c.add("k", b"x") is False
    assert c.replace("absent", b"x") is False
    assert c.add("fresh", b"x") is True

    # incr/decr: 64-bit unsigned, wrapping on incr, stopping at 0 on decr
    c.set("n", b"10")
    assert c.incr("n", 5) == 15
    assert c.decr("n", 100) == 0
    c.set("big", str(2**64 - 1).encode())
    assert c.incr("big", 2) == 1
    assert c.incr("absent", 1) is None

    # append / prepend keep the flags
    c.set("s", b"mid", flags=3)
    assert c.append("s", b"-end") is True
    assert c.prepend("s", b"start-") is True
    assert c.get("s") == b"start-mid-end"
    assert c.raw_command(b"get s", b"END\r\n").startswith(b"VALUE s 3 13")

    # touch and expiry
    c.set("short", b"x", expire=1)
    c.set("long", b"y", expire=100)
    assert c.touch("long", 1) is True
    assert c.touch("absent", 10) is False
    time.sleep(2.2)
    assert c.get("short") is None
    assert c.get("long") is None

    # delete
    c.set("d", b"x")
    assert c.delete("d") is True
    assert c.delete("d") is False

    # noreply: no answer comes back, the write happens
    c.set("quiet", b"q", noreply=True)
    c.delete("fresh", noreply=True)
    assert c.get("quiet") == b"q"
    assert c.get("fresh") is None

    # multi-get of 100 keys
    items = {f"key{i}": f"value{i}".encode() for i in range(100)}
    assert c.set_many(items) == []
    got = c.get_many(list(items))
    assert got == items, (len(got), len(items))
    got = c.get_many(list(items) + ["absent1", "absent2"])
    assert got == items

    stats = c.stats()
    assert b"curr_items" in stats or "curr_items" in stats, stats
    assert c.version()

    # flush_all: everything gone
    assert c.flush_all() is True
    assert c.get_many(["key1", "k", "s"]) == {}
    print("pymemcache session ok")


if __name__ == "__main__":
    main(int(sys.argv[1]))
