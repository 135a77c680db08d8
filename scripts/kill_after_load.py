#!/usr/bin/env python3
"""Issue 15's scenario, as a new user would run it: the server with a data directory, one
RESP client pipelining 1,000 SETs at a time (keys k:00000000..., 10 bytes) and waiting for
every reply, then idle, then kill -9 and a restart; counts what came back. Prints one row
of the table in docs/BENCHMARKS.md ("Durability promises, measured").

    python3 scripts/kill_after_load.py --sync none --items 600000 --value 1024 [--idle 3]
        [--memory-limit-mib 64] [--node-size 8192] [--server target/release/accelkv-server]

The kill after an idle period shows the page writer's lag (with --idle 0 it is a kill
right after the last reply); every key is then read back with MGET and each value checked
whole. For kills at random moments and the prefix check, see server/tests/crash_torture.rs.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def start(server, args, data_dir):
    cmd = [server, "--data-dir", data_dir, "--port", "0", "--resp-port", "0",
           "--admin-port", "0", "--engine", "cpu"] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    at = line.index("resp ") + len("resp ")
    host, port = line[at:].split()[0].rsplit(":", 1)
    return p, (host, int(port))


def replies(sock, buf, n):
    """Reads n simple/integer/error replies; returns them and the rest of the buffer."""
    out = []
    while len(out) < n:
        while b"\r\n" in buf and len(out) < n:
            line, buf = buf.split(b"\r\n", 1)
            out.append(line)
        if len(out) < n:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
    return out, buf


def bulk_array(sock, buf):
    """Reads one array of bulk strings (MGET's reply)."""
    def need(k):
        nonlocal buf
        while len(buf) < k:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk

    def line():
        nonlocal buf
        while b"\r\n" not in buf:
            need(len(buf) + 1)
        l, buf = buf.split(b"\r\n", 1)
        return l

    head = line()
    assert head.startswith(b"*"), head
    items = []
    for _ in range(int(head[1:])):
        h = line()
        n = int(h[1:])
        if n < 0:
            items.append(None)
            continue
        need(n + 2)
        items.append(buf[:n])
        buf = buf[n + 2:]
    return items, buf


def value_for(i, size):
    tag = b"%d:" % i
    return (tag * (size // len(tag) + 1))[:size]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sync", default="none")
    ap.add_argument("--items", type=int, default=600000)
    ap.add_argument("--value", type=int, default=1024)
    ap.add_argument("--idle", type=float, default=3.0)
    ap.add_argument("--memory-limit-mib", type=int)
    ap.add_argument("--node-size", type=int)
    ap.add_argument("--server", default="target/release/accelkv-server")
    a = ap.parse_args()
    extra = ["--sync", a.sync]
    if a.memory_limit_mib:
        extra += ["--memory-limit", f"{a.memory_limit_mib}MiB"]
    if a.node_size:
        extra += ["--node-size", str(a.node_size)]
    data = tempfile.mkdtemp(prefix="accelkv-kill-after-load-")
    try:
        p, addr = start(a.server, extra, data)
        s = socket.create_connection(addr)
        buf = b""
        acked = refused = 0
        t0 = time.time()
        for b in range(0, a.items, 1000):
            m = min(a.items, b + 1000) - b
            cmd = b"".join(
                b"*3\r\n$3\r\nSET\r\n$10\r\nk:%08d\r\n$%d\r\n%s\r\n" % (i, a.value, value_for(i, a.value))
                for i in range(b, b + m))
            s.sendall(cmd)
            out, buf = replies(s, buf, m)
            acked += sum(1 for r in out if r == b"+OK")
            refused += sum(1 for r in out if r.startswith(b"-"))
        load_s = time.time() - t0
        s.sendall(b"*1\r\n$4\r\nINFO\r\n")
        time.sleep(0.05)
        info = s.recv(1 << 20).decode(errors="replace")
        lag = [l for l in info.split("\r\n") if l.startswith(("durable_lag_versions", "durable_write_stalls"))]
        time.sleep(a.idle)
        p.send_signal(signal.SIGKILL)
        p.wait()
        p, addr = start(a.server, extra, data)
        s = socket.create_connection(addr)
        buf = b""
        present = torn = 0
        for b in range(0, a.items, 1000):
            keys = [b"k:%08d" % i for i in range(b, min(a.items, b + 1000))]
            cmd = b"*%d\r\n$4\r\nMGET\r\n" % (len(keys) + 1) + b"".join(
                b"$10\r\n%s\r\n" % k for k in keys)
            s.sendall(cmd)
            items, buf = bulk_array(s, buf)
            for i, v in zip(range(b, b + len(keys)), items):
                if v is not None:
                    present += 1
                    if v != value_for(i, a.value):
                        torn += 1
        s.sendall(b"*1\r\n$4\r\nINFO\r\n")
        time.sleep(0.05)
        rec = [l for l in s.recv(1 << 20).decode(errors="replace").split("\r\n") if l.startswith("recovery:")]
        p.send_signal(signal.SIGTERM)
        p.wait()
        mode = f"`{a.sync}`" + (f", `--memory-limit-mib {a.memory_limit_mib}`" if a.memory_limit_mib else "") \
            + (f", idle {a.idle:g}" if a.idle != 3.0 else "")
        print(f"| {mode} | {a.items:,} | {a.value} B | {acked:,} ({refused:,} refused) | "
              f"{load_s:.1f} s | {present:,} | {acked - min(present, acked):,} | {torn} | "
              f"{'; '.join(lag)} | {rec[0][9:] if rec else '?'} |")
        return 0 if present >= acked and torn == 0 else 1
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
