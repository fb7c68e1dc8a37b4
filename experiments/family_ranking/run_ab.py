#!/usr/bin/env python3
"""Schedules of one op-sweep instance side by side on the GPU: each named schedule of an instance
(SCHEDULES/<id>.<name>.json: `before` from an earlier commit, or a variant edited by hand) and the schedule the current
binary makes (`after`), each checked against the reference interpreter, then all timed in
interleaved rounds as the sweep times Tessel (`tessel run --time N`: CUDA-graph replays between
events, L2 warm), on one GPU. The cost model's prediction of each schedule (replayed schedules
are priced again) is recorded beside its time, with the family of every kernel.

  run_ab.py --tessel dist/tessel/bin/tessel --schedules DIR --out OUT [--ids ID ...] [--rounds R]

Without --ids: every op-sweep id with a schedule in DIR. Writes OUT/ab.csv (id, schedule, families,
median ms, rounds, predicted ms, time over the fastest) and prints each instance's line and the
geomean of before / after time. Tessel schedules for the shipped H100 SXM spec
(as the op sweep does), on whatever GPU runs it. Needs a GPU; Python 3 standard library only.
"""
import argparse
import concurrent.futures as cf
import csv
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "op_sweep"))
import instances as catalog  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "experiments", "wgmma_variants"))
# (One model writer, check and timing for both A/B scripts.)
from run_variants import check, model_and_schedule, time_rounds  # noqa: E402


def families(path):
    with open(path) as f:
        return " ".join(g.get("kernel", {}).get("family", "?") for g in json.load(f)["groups"])


def stored_names(args, iid):
    return sorted(f[len(iid) + 1:-5] for f in os.listdir(args.schedules) if f.startswith(iid + ".") and f.endswith(".json")
                  and "." not in f[len(iid) + 1:-5])


def prepare(args, iid):
    """The model, the current binary's schedule, and a check and a prediction of each schedule."""
    work, model, after, error = model_and_schedule(args, iid, "after.json")
    if error:
        return {"id": iid, "error": error}
    paths = {n: os.path.join(args.schedules, "%s.%s.json" % (iid, n)) for n in stored_names(args, iid)}
    paths["after"] = after
    row = {"id": iid, "model": model, "schedules": {}}
    for name, path in paths.items():
        v = {"schedule": path, "families": families(path), "cache": os.path.join(work, "cache-" + name)}
        check(args, model, v, os.path.join(work, name + ".check.json"))
        row["schedules"][name] = v
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--schedules", default=os.path.join(HERE, "schedules"))
    p.add_argument("--out", required=True)
    p.add_argument("--ids", nargs="+")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    args = p.parse_args()
    known = {i.id for i in catalog.instances()}
    ids = [i for i in (args.ids or sorted(known)) if i in known and stored_names(args, i)]
    os.makedirs(args.out, exist_ok=True)
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(lambda i: prepare(args, i), ids))
    out, ratios = [], []
    for row in rows:
        if row.get("error"):
            print("%-48s skipped: %s" % (row["id"], row["error"][:200]), flush=True)
            continue
        ok, times, medians = time_rounds(args, row, row["schedules"])
        if not medians:
            continue
        best = min(medians.values())
        for n, v in ok:
            if n in medians:
                out.append({"id": row["id"], "schedule": n, "families": v["families"], "median_ms": "%.5f" % medians[n],
                            "rounds_ms": " ".join("%.5f" % t for t in times[n]),
                            "predicted_ms": "%.5f" % v["predicted_ms"] if v["predicted_ms"] else "",
                            "over_fastest": "%.4f" % (medians[n] / best)})
        if "after" in medians and "before" in medians:
            ratios.append(medians["before"] / medians["after"])
        print("%-48s %s" % (row["id"], "  ".join("%s %.4f (%s)" % (n, medians[n], row["schedules"][n]["families"])
                                                    for n in medians)), flush=True)
    with open(os.path.join(args.out, "ab.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "schedule", "families", "median_ms", "rounds_ms", "predicted_ms", "over_fastest"])
        w.writeheader()
        w.writerows(out)
    if ratios:
        print("before / after time: geomean %.3f over %d instances, after faster on %d, slower by 5%%+ on %d"
              % (math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios), sum(r > 1 for r in ratios),
                 sum(r < 0.95 for r in ratios)))


if __name__ == "__main__":
    main()
