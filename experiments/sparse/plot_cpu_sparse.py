#!/usr/bin/env python3
"""cpu_sparse.py's results as a picture: measured speedup of the block-sparse micro-kernel over
the dense one (y, log) against the density of the blocks the kernel walks (x, log), one colour
per shape, with the ideal 1 / density and break-even (1x) lines; a ring marks a point where the
cost model picked the slower kernel. Plain SVG, no plotting package.

  plot_cpu_sparse.py CPU_SPARSE_CSV OUT_SVG
"""
import csv
import math
import sys

W, H, L, R, T, B = 640, 420, 60, 170, 20, 50
X0, X1, Y0, Y1 = 0.03, 1.0, 0.5, 30.0
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def sx(x):
    return L + (math.log(x) - math.log(X0)) / (math.log(X1) - math.log(X0)) * (W - L - R)


def sy(y):
    return H - B - (math.log(y) - math.log(Y0)) / (math.log(Y1) - math.log(Y0)) * (H - T - B)


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    for v in (0.05, 0.1, 0.2, 0.5, 1.0):
        out.append(f'<line x1="{sx(v):.1f}" y1="{T}" x2="{sx(v):.1f}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{sx(v):.1f}" y="{H - B + 14}" text-anchor="middle">{v:g}</text>')
    for v in (0.5, 1, 2, 5, 10, 20):
        out.append(f'<line x1="{L}" y1="{sy(v):.1f}" x2="{W - R}" y2="{sy(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{L - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:g}x</text>')
    out.append(f'<line x1="{L}" y1="{sy(1):.1f}" x2="{W - R}" y2="{sy(1):.1f}" stroke="#888"/>')
    # ideal: 1 / density
    xa, xb = max(X0, 1 / Y1), X1
    out.append(f'<line x1="{sx(xa):.1f}" y1="{sy(1 / xa):.1f}" x2="{sx(xb):.1f}" y2="{sy(1 / xb):.1f}" stroke="#888" stroke-dasharray="4,3"/>')
    out.append(f'<text x="{sx(0.06):.1f}" y="{sy(1 / 0.06) - 6:.1f}" fill="#666">1 / density</text>')
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    for i, shape in enumerate(shapes):
        c = COLOURS[i % len(COLOURS)]
        for r in rows:
            if r["shape"] != shape:
                continue
            x, y = float(r["kernel_density"]), float(r["speedup"])
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{c}"/>')
            if r["pick_right"] != "True":
                out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="8" fill="none" stroke="black"/>')
        ex = next(r for r in rows if r["shape"] == shape)
        out.append(f'<circle cx="{W - R + 16}" cy="{T + 16 + 18 * i}" r="4" fill="{c}"/>')
        out.append(f'<text x="{W - R + 26}" y="{T + 20 + 18 * i}">{shape} ({ex["M"]}x{ex["K"]}x{ex["N"]})</text>')
    n = len(shapes)
    out.append(f'<circle cx="{W - R + 16}" cy="{T + 16 + 18 * n}" r="8" fill="none" stroke="black"/>')
    out.append(f'<text x="{W - R + 26}" y="{T + 20 + 18 * n}">model picked the slower</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">density of the blocks the kernel walks</text>')
    out.append(f'<text x="14" y="{(T + H - B) / 2}" transform="rotate(-90 14 {(T + H - B) / 2})" text-anchor="middle">'
               'block-sparse over dense (measured)</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
