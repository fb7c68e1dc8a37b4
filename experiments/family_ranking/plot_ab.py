#!/usr/bin/env python3
"""The family A/B as a picture: for every op-sweep contraction of a run_ab.py run, the cost
model's predicted time of its group on the mma family's plan over the wgmma plan's (x) against
the measured speedup of the mma schedule (y: before / after time), with the policy's switch
threshold (policy/kernel_families.h, kFamilySwitchFactor). Plain SVG, no plotting package.

  plot_ab.py AB_CSV GROUP_PREDICTIONS_CSV OUT_SVG [--threshold 0.6667]

GROUP_PREDICTIONS_CSV: id, wgmma_group_predicted_ms, mma_group_predicted_ms (one row per group
that changed family; the smallest ratio of an instance is its x). Prints the instances by x and
what each threshold would have given.
"""
import argparse
import csv
import math


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ab")
    p.add_argument("groups")
    p.add_argument("out")
    p.add_argument("--threshold", type=float, default=2.0 / 3.0)
    args = p.parse_args()
    times = {}
    for r in csv.DictReader(open(args.ab)):
        times.setdefault(r["id"], {})[r["schedule"]] = float(r["median_ms"])
    ratio = {}
    for r in csv.DictReader(open(args.groups)):
        x = float(r["mma_group_predicted_ms"]) / float(r["wgmma_group_predicted_ms"])
        ratio[r["id"]] = min(x, ratio.get(r["id"], x))
    pts = sorted((ratio[i], t["before"] / t["after"], i) for i, t in times.items()
                 if i in ratio and "before" in t and "after" in t)
    for x, y, i in pts:
        print("predicted mma/wgmma %.2f  measured speedup on mma %.2f  %s" % (x, y, i))
    for th in (0.5, 0.6, args.threshold, 0.7, 0.8, 1.0):
        picked = [y for x, y, _ in pts if x < th]
        g = math.exp(sum(math.log(y) for y in picked) / len(pts)) if pts else float("nan")
        print("threshold %.3f: %2d of %d switch, geomean over all %.3f, %d slower by 5%%+"
              % (th, len(picked), len(pts), g, sum(y < 0.95 for y in picked)))
    # The picture: x linear 0.3..1.1, y log 0.35..2.5.
    w, h, pad = 520, 380, 55
    x0, x1, y0, y1 = 0.3, 1.1, 0.35, 2.5

    def px(x):
        return pad + (x - x0) / (x1 - x0) * w

    def py(y):
        return pad + h - (math.log(y) - math.log(y0)) / (math.log(y1) - math.log(y0)) * h

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
         % (w + 2 * pad, h + 2 * pad + 20),
         '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (pad, pad, w, h),
         '<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="gray"/>' % (pad, py(1), pad + w, py(1)),
         '<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d62728" stroke-dasharray="5"/>'
         % (px(args.threshold), pad, px(args.threshold), pad + h),
         '<text x="%.1f" y="%d" fill="#d62728">switch below %.2f</text>' % (px(args.threshold) + 4, pad + 14, args.threshold)]
    for v in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        s.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(v), pad + h + 14, v))
    for v in (0.5, 0.75, 1, 1.5, 2):
        s.append('<text x="%d" y="%.1f" text-anchor="end">%gx</text>' % (pad - 4, py(v) + 4, v))
    s.append('<text x="%d" y="%d" text-anchor="middle">predicted time of the group on mma.sync / on wgmma</text>'
             % (pad + w // 2, pad + h + 32))
    s.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">measured speedup on mma.sync</text>'
             % (pad + h // 2, pad + h // 2))
    s.append('<text x="%d" y="30">wgmma vs the mma family\'s plan, %d op-sweep contractions (H200, one run)</text>' % (pad, len(pts)))
    for x, y, i in pts:
        color = "#2ca02c" if y >= 1 else "#1f77b4"
        s.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" fill-opacity="0.8"><title>%s: %.2fx</title></circle>'
                 % (px(max(x0, min(x1, x))), py(max(y0, min(y1, y))), color, i, y))
    s.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
