#!/usr/bin/env python3
"""Real models before and after the view clean-ups (tilegraph/normalize_views.h): Tessel's GPU
time per case from the last earlier run of each case ("before": ../h200-2026-11-26c for the CNNs and
vision transformers, ../../../notebook/h200-2026-11-26 for bert_base and gpt2), from run 2 here (the view clean-ups,
fixed-offset operands, vector kernels with a reshaping sink: real_models_views/), and from runs 3-4
(the committed build, which adds copies folded into the vector kernels and the wgmma block width
by waves: real_models_final_vit/, real_models_final_lm/), with torch.compile's time of the same
run as the Tessel time it is compared with. Writes comparison.csv and comparison.png here.

  python3 compare.py     (matplotlib for the plot)
"""
import csv
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "..")


def load(*parts):
    return {r["id"]: r for r in csv.DictReader(open(os.path.join(*parts)))}


before = load(RESULTS, "2026-11-26", "real_models", "real_models.csv")
before.update(load(RESULTS, "2026-11-26c", "real_models_padded", "real_models.csv"))
views = load(HERE, "real_models_views", "real_models.csv")
final = load(HERE, "real_models_final_vit", "real_models.csv")
final.update(load(HERE, "real_models_final_lm", "real_models.csv"))

rows = []
for case in ["resnet50_b1", "resnet50_b8", "mobilenet_v2_b1", "mobilenet_v2_b8", "efficientnet_b0_b1", "efficientnet_b0_b8",
             "convnext_tiny_b1", "convnext_tiny_b8", "vit_b_16_b1", "vit_b_16_b8", "deit_small_b1", "deit_small_b8",
             "bert_base_b1_s128", "bert_base_b8_s128", "gpt2_b1_s128", "gpt2_b4_s128"]:
    b = before[case]
    last = final.get(case) or views[case]
    rows.append({
        "id": case,
        "tessel_before_ms": float(b["tessel_ms"]),
        "tessel_views_ms": float(views[case]["tessel_ms"]) if case in views else "",
        "tessel_after_ms": float(last["tessel_ms"]),
        "after_from": "final" if case in final else "views",
        "compile_before_ms": float(b["compile_ms"]),
        "compile_after_ms": float(last["compile_ms"]),
        "speedup": float(b["tessel_ms"]) / float(last["tessel_ms"]),
        "compile_over_tessel_before": float(b["compile_over_tessel"]),
        "compile_over_tessel_after": float(last["compile_over_tessel"]),
        "kernels_before": b["kernels"],
        "kernels_after": last["kernels"],
        "correct": last["tessel_correct"],
    })
with open(os.path.join(HERE, "comparison.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


print("case                  before ms   views ms   after ms  speedup  compile/T before  after")
for r in rows:
    views_ms = "%10.3f" % r["tessel_views_ms"] if r["tessel_views_ms"] != "" else "%10s" % "-"
    print("%-20s %10.3f %s %10.3f%s %7.2f %17.3f %6.3f" % (
        r["id"], r["tessel_before_ms"], views_ms, r["tessel_after_ms"], "*" if r["after_from"] == "views" else " ",
        r["speedup"], r["compile_over_tessel_before"], r["compile_over_tessel_after"]))
print("(* the CNNs' after is run 2, not re-timed with the committed build)")
for name, keep in [("all 16", lambda r: True), ("the 8 transformer cases", lambda r: "vit" in r["id"] or "deit" in r["id"]
                                                   or "bert" in r["id"] or "gpt2" in r["id"])]:
    sel = [r for r in rows if keep(r)]
    print("%s: geomean speedup %.2f; torch.compile / Tessel %.3f -> %.3f" % (
        name, geo([r["speedup"] for r in sel]), geo([r["compile_over_tessel_before"] for r in sel]),
        geo([r["compile_over_tessel_after"] for r in sel])))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    raise SystemExit("no matplotlib: comparison.png not written")
fig, ax = plt.subplots(figsize=(11, 4.5))
x = range(len(rows))
ax.bar([i - 0.27 for i in x], [r["tessel_before_ms"] for r in rows], 0.27, label="Tessel before")
ax.bar([i for i in x], [r["tessel_after_ms"] for r in rows], 0.27, label="Tessel after (view clean-ups)")
ax.bar([i + 0.27 for i in x], [r["compile_after_ms"] for r in rows], 0.27, label="torch.compile")
ax.set_yscale("log")
ax.set_ylabel("GPU time per inference, ms (log)")
ax.set_xticks(list(x))
ax.set_xticklabels([r["id"] for r in rows], rotation=40, ha="right", fontsize=8)
ax.set_title("Real models, fp16, NVIDIA H200: before and after the view clean-ups")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(HERE, "comparison.png"), dpi=120)
