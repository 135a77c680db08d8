#!/usr/bin/env python3
"""Draws the bar charts of docs/bench/honeycomb-eval.md (Honeycomb's Figures 10, 11 and 15):
YCSB and cloud storage against Masstree, and MVCC on against off.
Usage: honeycomb-bars.py [docs/bench/honeycomb-eval.md]   (scripts/honeycomb-eval.sh runs it)"""
import json
import subprocess
import sys

md = open(sys.argv[1] if len(sys.argv) > 1 else "docs/bench/honeycomb-eval.md").read()


def rows(heading):
    sec = md.split(heading, 1)[1].split("###", 1)[0]
    out = []
    for line in sec.splitlines():
        if line.startswith("| ") and not line.startswith("| workload"):
            out.append([x.strip() for x in line.strip().strip("|").split("|")])
    return out


def label(w, k):
    w = w.replace("cloud", "c").upper() if len(w) == 1 else w.replace("cloud", "c")
    return w if k == "latest" else f"{w}-{k[0]}"


def draw(spec, name):
    open(f"/tmp/{name}.json", "w").write(json.dumps(spec))
    subprocess.run(["python3", "scripts/svg_plot.py", f"/tmp/{name}.json",
                    f"docs/bench/{name}.svg"], check=True)


y = rows("### YCSB and the cloud-storage workload against Masstree")
draw({"title": "YCSB (u: uniform, z: Zipfian) and cloud-P against Masstree, one thread each",
      "y": "operations per second", "categories": [label(c[0], c[1]) for c in y],
      "series": [{"name": "Masstree", "values": [float(c[2]) for c in y]},
                 {"name": "accelkv, reference", "values": [float(c[3]) for c in y]},
                 {"name": "accelkv, engine", "values": [float(c[5]) for c in y]}]},
     "honeycomb-ycsb")
m = rows("### The cost of MVCC")
med = lambda s: sorted(float(x) for x in s.split())[1]
draw({"title": "MVCC on and off (medians of three runs)", "y": "operations per second",
      "categories": [label(c[0], c[1]) for c in m],
      "series": [{"name": "MVCC on", "values": [med(c[2]) for c in m]},
                 {"name": "MVCC off", "values": [med(c[3]) for c in m]}]},
     "honeycomb-mvcc")
