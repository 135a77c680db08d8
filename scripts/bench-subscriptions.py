#!/usr/bin/env python3
"""Memory of pub/sub subscriptions against Redis (docs/BENCHMARKS.md, "Pub/sub"): each
server gets CONNS connections first (their memory measured apart), then each connection
subscribes to CHANNELS / CONNS channels of its own (`ch:<n>`, 10,000 in all by default)
and PATTERNS patterns; the server's resident memory (VmRSS of its process) is read before
and after, and the bytes per subscription reported. Then one PUBLISH to every channel
checks that every subscription is live (each answers 1).

Usage: scripts/bench-subscriptions.py      (CHANNELS=10000 CONNS=100 PATTERNS=0)
       VALKEY_SERVER=/path/to/valkey-server scripts/bench-subscriptions.py   (Valkey too)
Needs redis-server on PATH and redis-py (apt-get install -y redis-server python3-redis).
"""
import os
import socket
import subprocess
import sys
import time

import redis

CHANNELS = int(os.environ.get("CHANNELS", "10000"))
CONNS = int(os.environ.get("CONNS", "100"))
PATTERNS = int(os.environ.get("PATTERNS", "0"))
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                   "release", "accelkv-server")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} never listened")


def measure(name, pid, port):
    time.sleep(0.5)
    base = rss_kib(pid)
    conns = []
    for _ in range(CONNS):
        p = redis.Redis(port=port).pubsub()
        p.subscribe("warmup")  # opens the connection; unsubscribed below
        p.get_message(timeout=1)
        conns.append(p)
    for p in conns:
        p.unsubscribe("warmup")
        p.get_message(timeout=1)
    time.sleep(0.5)
    connected = rss_kib(pid)
    per = CHANNELS // CONNS
    for i, p in enumerate(conns):
        names = [f"ch:{i * per + j}" for j in range(per)]
        p.subscribe(*names)
        if PATTERNS:
            p.psubscribe(*[f"pat:{i}:{j}:*" for j in range(PATTERNS)])
    # Every confirmation read: the subscriptions are in place on the server.
    for p in conns:
        want = per + PATTERNS
        while want:
            m = p.get_message(timeout=5)
            if m is None:
                raise RuntimeError(f"{name}: confirmations missing")
            if m["type"] in ("subscribe", "psubscribe"):
                want -= 1
    time.sleep(0.5)
    subscribed = rss_kib(pid)
    pub = redis.Redis(port=port)
    got = {pub.publish(f"ch:{i}", "x") for i in range(per * CONNS)}
    subs = per * CONNS + PATTERNS * CONNS
    for p in conns:
        p.close()
    return base, connected, subscribed, subs, got


def main():
    rows = []
    procs = []
    try:
        r = subprocess.Popen(["redis-server", "--port", "16401", "--save", "", "--appendonly", "no",
                              "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL)
        procs.append(r)
        a = subprocess.Popen([BIN, "--port", "0", "--resp-port", "17401", "--admin-port", "0",
                              "--memcached-port", "off"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        procs.append(a)
        servers = [("Redis", r, 16401), ("accelkv", a, 17401)]
        if os.environ.get("VALKEY_SERVER"):
            v = subprocess.Popen([os.environ["VALKEY_SERVER"], "--port", "16601", "--save", "",
                                  "--appendonly", "no", "--bind", "127.0.0.1"],
                                 stdout=subprocess.DEVNULL)
            procs.append(v)
            servers.append(("Valkey", v, 16601))
        for (name, p, port) in servers:
            wait_port(port)
            rows.append((name,) + measure(name, p.pid, port))
    finally:
        for p in procs:
            p.kill()
    print(f"| server | RSS at start | with {CONNS} connections | with {rows[0][4]:,} subscriptions "
          "| bytes per subscription | PUBLISH answers |")
    print("|---|---:|---:|---:|---:|---|")
    for name, base, conn, sub, n, got in rows:
        per = (sub - conn) * 1024 / n
        print(f"| {name} | {base:,} KiB | {conn:,} KiB | {sub:,} KiB | {per:,.0f} | "
              f"{sorted(got)} |")


if __name__ == "__main__":
    sys.exit(main())
