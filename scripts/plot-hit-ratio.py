#!/usr/bin/env python3
"""Draws docs/bench/leaf-cache-hit-ratio.svg from the budget sweep of bench-leaf-cache.sh.

Reads `OUT/sweep-<MiB>/results.json` (YCSB C uniform and zipfian throughput) and the
`leaf cache: ... (hit ratio X)` line each sweep run printed (`OUT/sweep-<MiB>.log`).
Usage: plot-hit-ratio.py OUT SVG
"""
import json
import re
import sys

out, svg = sys.argv[1], sys.argv[2]
budgets = [16, 32, 64, 128, 256]
points = []
for b in budgets:
    log = open(f"{out}/sweep-{b}.log").read()
    m = re.search(r"hit ratio ([0-9.]+)", log)
    ratio = float(m.group(1)) if m else 1.0  # no load at all: everything resident
    tput = {}
    for line in log.splitlines():
        m = re.match(r"\| C \| (uniform|zipfian) \| accelkv[^|]*\| (\d+) ", line)
        if m:
            tput[m.group(1)] = int(m.group(2))
    points.append((b, ratio, tput.get("uniform", 0), tput.get("zipfian", 0)))

W, H, L, R, T, B = 560, 320, 60, 540, 30, 270
x = lambda i: L + (R - L) * i / (len(points) - 1)
y = lambda r: B - (B - T) * r
parts = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
    '<rect width="100%" height="100%" fill="white"/>',
    f'<text x="{W/2}" y="18" text-anchor="middle">Leaf cache hit ratio vs budget (1 M records, ~200 MB of leaves)</text>',
]
for r in [0, 0.25, 0.5, 0.75, 1.0]:
    parts.append(f'<line x1="{L}" y1="{y(r)}" x2="{R}" y2="{y(r)}" stroke="#ddd"/>')
    parts.append(f'<text x="{L-8}" y="{y(r)+4}" text-anchor="end">{r:.2f}</text>')
for i, p in enumerate(points):
    parts.append(f'<text x="{x(i)}" y="{B+18}" text-anchor="middle">{p[0]} MiB</text>')
parts.append(f'<text x="{W/2}" y="{H-10}" text-anchor="middle">memory budget (--memory-limit)</text>')
parts.append(f'<text x="15" y="{(T+B)/2}" transform="rotate(-90 15 {(T+B)/2})" text-anchor="middle">hit ratio</text>')
path = " L".join(f"{x(i):.1f},{y(p[1]):.1f}" for i, p in enumerate(points))
parts.append(f'<path d="M{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
for i, (b, r, u, z) in enumerate(points):
    label = f"{r:.2f} · C {u // 1000}K/{z // 1000}K"
    last = i == len(points) - 1
    tx, ty, anchor = (x(i) - 10, y(r) + 20, "end") if last else (x(i), y(r) - 10, "middle")
    parts.append(f'<circle cx="{x(i):.1f}" cy="{y(r):.1f}" r="4" fill="#1f77b4"/>')
    parts.append(f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}" font-size="10">{label}</text>')
parts.append(f'<line x1="{L}" y1="{B}" x2="{R}" y2="{B}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{B}" stroke="black"/>')
parts.append("</svg>")
open(svg, "w").write("\n".join(parts) + "\n")
