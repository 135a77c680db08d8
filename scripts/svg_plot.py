#!/usr/bin/env python3
"""A line chart as SVG, for docs/EVALUATION.md's figures (no plotting library needed).

Usage: svg_plot.py SPEC.json OUT.svg

SPEC: {"title": str, "x": str, "y": str, "logx": bool, "logy": bool,
       "series": [{"name": str, "points": [[x, y], ...]}, ...]}
or, for grouped bars (the seeds' bar charts):
      {"title": str, "y": str, "logy": bool, "categories": [str, ...],
       "series": [{"name": str, "values": [y, ...]}, ...]}
"""
import json
import math
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def ticks(lo, hi, log):
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return [10**e for e in range(a, b + 1)]
    raw = ((hi - lo) or 1) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if raw <= m * mag)
    t = math.floor(lo / step) * step
    out = []
    while t <= hi + step * 0.001:
        out.append(t)
        t += step
    return out


def fmt(v):
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}K"
    return f"{v:g}"


def frame(box, title, ylabel, yt, Y):
    """The chart's frame: the page, the title, both axes, the y grid with its labels and
    the y axis's name."""
    W, H, L, R, T, B = box
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{(L + R) / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<line x1="{L}" y1="{B}" x2="{R}" y2="{B}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{B}" stroke="black"/>']
    for t in yt:
        o.append(f'<line x1="{L - 4}" y1="{Y(t):.1f}" x2="{R}" y2="{Y(t):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 7}" y="{Y(t) + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    o.append(f'<text x="18" y="{(T + B) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 18 {(T + B) / 2})">{ylabel}</text>')
    return o


def finish(o, box, series):
    """The legend right of the plot, and the closed document."""
    R, T = box[3], box[4]
    for i, s in enumerate(series):
        c = COLORS[i % len(COLORS)]
        o.append(f'<rect x="{R + 15}" y="{T + 20 * i}" width="12" height="12" fill="{c}"/>')
        o.append(f'<text x="{R + 32}" y="{T + 20 * i + 11}">{s["name"]}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def bars(spec):
    box = W, H, L, R, T, B = 720, 380, 70, 550, 40, 300
    cats, series = spec["categories"], spec["series"]
    logy = spec.get("logy", False)
    ys = [v for s in series for v in s["values"] if v > 0]
    lo, hi = (min(ys), max(ys)) if logy else (0, max(ys) * 1.1)
    yt = ticks(lo, hi, logy)
    lo, hi = min(lo, yt[0]), max(hi, yt[-1])
    g = (lambda v: math.log10(v)) if logy else (lambda v: v)
    Y = lambda v: B - (B - T) * (g(max(v, lo)) - g(lo)) / ((g(hi) - g(lo)) or 1)
    slot = (R - L) / len(cats)
    bw = slot * 0.8 / len(series)
    o = frame(box, spec["title"], spec["y"], yt, Y)
    for c, name in enumerate(cats):
        x0 = L + slot * c + slot * 0.1
        o.append(f'<text x="{x0 + slot * 0.4:.1f}" y="{B + 16}" text-anchor="middle" '
                 f'font-size="10">{name}</text>')
        for i, s in enumerate(series):
            v = s["values"][c]
            color = COLORS[i % len(COLORS)]
            o.append(f'<rect x="{x0 + bw * i:.1f}" y="{Y(v):.1f}" width="{bw:.1f}" '
                     f'height="{B - Y(v):.1f}" fill="{color}"/>')
    return finish(o, box, series)


def lines(spec):
    box = W, H, L, R, T, B = 640, 360, 70, 470, 40, 300
    pts = [p for s in spec["series"] for p in s["points"]]
    logx, logy = spec.get("logx", False), spec.get("logy", False)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = (min(ys), max(ys)) if logy else (min(0, min(ys)), max(ys) * 1.1)
    xt, yt = ticks(xlo, xhi, logx), ticks(ylo, yhi, logy)
    xlo, xhi = min(xlo, xt[0]), max(xhi, xt[-1])
    ylo, yhi = min(ylo, yt[0]), max(yhi, yt[-1])
    f = (lambda v: math.log10(v)) if logx else (lambda v: v)
    g = (lambda v: math.log10(v)) if logy else (lambda v: v)
    X = lambda v: L + (R - L) * (f(v) - f(xlo)) / ((f(xhi) - f(xlo)) or 1)
    Y = lambda v: B - (B - T) * (g(v) - g(ylo)) / ((g(yhi) - g(ylo)) or 1)
    o = frame(box, spec["title"], spec["y"], yt, Y)
    for t in xt:
        o.append(f'<line x1="{X(t):.1f}" y1="{B}" x2="{X(t):.1f}" y2="{B + 4}" stroke="black"/>')
        o.append(f'<text x="{X(t):.1f}" y="{B + 17}" text-anchor="middle">{fmt(t)}</text>')
    o.append(f'<text x="{(L + R) / 2}" y="{B + 35}" text-anchor="middle">{spec["x"]}</text>')
    for i, s in enumerate(spec["series"]):
        c = COLORS[i % len(COLORS)]
        p = sorted(s["points"])
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (c, " ".join(f"{X(a):.1f},{Y(b):.1f}" for a, b in p)))
        for a, b in p:
            o.append(f'<circle cx="{X(a):.1f}" cy="{Y(b):.1f}" r="3" fill="{c}"/>')
    return finish(o, box, spec["series"])


def main():
    spec = json.load(open(sys.argv[1]))
    svg = bars(spec) if "categories" in spec else lines(spec)
    open(sys.argv[2], "w").write(svg)


if __name__ == "__main__":
    main()
