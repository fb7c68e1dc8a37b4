#!/usr/bin/env python3
"""Bar chart (SVG, no dependencies) of an A/B CSV written from a call's ab.txt: per workload, the
speedup (time before / time after, mean of the interleaved rounds).

    python3 experiments/conv_as_gemm/plot_ab.py RUN/call3_ab/ab.csv RUN/call3_ab/ab.svg
"""
import csv
import sys


def main():
    src, dst = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(src)))
    label_w, bar_w, row_h, top = 330, 360, 18, 40
    lo, hi = 0.9, 1.4
    height = top + row_h * len(rows) + 40
    x = lambda v: label_w + (v - lo) / (hi - lo) * bar_w
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (label_w + bar_w + 50, height),
           '<text x="10" y="16" font-size="12">1x1 convolutions as matrix products: speedup over the box-tiled implicit GEMM</text>',
           '<text x="10" y="30" font-size="10">H200, f16, GPU time (CUDA-graph replays between events, L2 warm), two interleaved rounds</text>']
    for i, r in enumerate(rows):
        y = top + i * row_h
        v = float(r["speedup"])
        name = r["workload"].replace("conv.", "").replace(".b32", "").replace(".f16", "")
        color = "#c44" if r["workload"] == "resnet_block" else "#48a"
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (label_w - 6, y + 12, name))
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>' % (x(lo), y + 2, x(v) - x(lo), row_h - 4, color))
        out.append('<text x="%.1f" y="%d" font-size="10">%.2f</text>' % (x(v) + 3, y + 12, v))
    base = top + row_h * len(rows)
    for t in (0.9, 1.0, 1.1, 1.2, 1.3, 1.4):
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="%s"/>' % (x(t), top, x(t), base, "#000" if t == 1.0 else "#ccc", 1 if t == 1.0 else 0.5))
        out.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="10">%.1fx</text>' % (x(t), base + 14, t))
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
