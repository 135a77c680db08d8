#!/usr/bin/env python3
"""Big values against Redis, one run (docs/BENCHMARKS.md, "Big values"): for each server,
one SET of an N MiB value and one GET of it on a fresh server, with the server's peak
resident memory (VmHWM) before and after each, and the seconds each took.

Usage: scripts/bench-big-values.py [MiB ...]        (default 64 192 500)
       ACCELKV=path/to/accelkv-server scripts/bench-big-values.py   (another build)
Needs redis-server (apt-get install -y redis-server); build accelkv first
(cargo build --release -p accelkv-server).
"""
import os
import shutil
import socket
import subprocess
import sys
import time

ACCELKV = os.environ.get("ACCELKV", "target/release/accelkv-server")
PORT = 17460


def servers():
    yield "accelkv", [ACCELKV, "--resp-port", str(PORT), "--port", "0", "--admin-port", "0",
                      "--memcached-port", "0", "--threads", "1", "--max-value", "512MiB"]
    if shutil.which("redis-server"):
        yield "redis", ["redis-server", "--port", str(PORT), "--save", "", "--appendonly", "no",
                        "--proto-max-bulk-len", "512mb"]


def peak_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def connect():
    for _ in range(200):
        try:
            return socket.create_connection(("127.0.0.1", PORT))
        except OSError:
            time.sleep(0.05)
    sys.exit(f"port {PORT} did not open")


def read_reply(s, want=None):
    if want is None:
        data = bytearray()
        while not data.endswith(b"\r\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                sys.exit("connection closed")
            data += chunk
        return bytes(data)
    data = bytearray(want)
    view, got = memoryview(data), 0
    while got < want:
        n = s.recv_into(view[got:], want - got)
        if n == 0:
            sys.exit("connection closed")
        got += n
    return data


def run(name, argv, mib):
    n = mib << 20
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        s = connect()
        s.sendall(b"*3\r\n$3\r\nSET\r\n$4\r\nwarm\r\n$2\r\nup\r\n")
        read_reply(s)
        base = peak_kib(p.pid)
        value = bytes(range(256)) * (n // 256)
        t = time.time()
        s.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % n + value + b"\r\n")
        assert read_reply(s) == b"+OK\r\n"
        set_s, set_peak = time.time() - t, peak_kib(p.pid)
        del value
        t = time.time()
        s.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
        got = read_reply(s, n + len(b"$%d\r\n" % n) + 2)
        get_s, get_peak = time.time() - t, peak_kib(p.pid)
        assert len(got) == n + len(b"$%d\r\n" % n) + 2
        print(f"| {name} | {mib} | {(set_peak - base) >> 10} | {set_s:.2f} | "
              f"{(get_peak - base) >> 10} | {get_s:.2f} |")
    finally:
        p.kill()
        p.wait()


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [64, 192, 500]
    print("| server | value (MiB) | peak growth after SET (MiB) | SET (s) "
          "| peak growth after GET (MiB) | GET (s) |")
    print("|---|---|---|---|---|---|")
    for mib in sizes:
        for name, argv in servers():
            run(name, argv, mib)


if __name__ == "__main__":
    main()
