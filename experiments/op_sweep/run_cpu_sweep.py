#!/usr/bin/env python3
"""The CPU operator sweep (issue 30): every instance of the CPU catalog (instances.py --catalog cpu:
the op sweep's constructors and model configurations at CPU batch sizes, f32), side by side with
PyTorch eager on this machine, in interleaved rounds.

Per instance:
  * Tessel: cold compile (schedule + LLVM, empty kernel cache), every output checked against the
    reference interpreter (fp64 accumulation; graphs over 20 GFLOP on a sample), the predicted time
    and the kernel family of each group; then timed from its kernel cache (`tessel run --time N`:
    wall time of whole runs, cache warm, median of N);
  * PyTorch eager under torch.no_grad() in one worker process (its contractions are the vendor
    libraries: oneDNN for convolutions, MKL / OpenBLAS for GEMMs, whichever the build links);
    median of N calls, each timed by perf_counter around the Python call (a Python call's dispatch,
    some microseconds, is inside eager's window: eager is what users run);
  * the two sides alternate, --rounds times (Tessel first in even rounds), with the same thread
    count; the instance's ratio is the median of the rounds' ratios, so a burst of load from the
    VM's neighbours moves one round, not the result.
The torch worker runs with OMP_WAIT_POLICY=PASSIVE: its idle OpenMP threads sleep instead of
spinning on the cores while Tessel is timed. Code that failed its check is not timed.

  run_cpu_sweep.py [--tessel build/default/tessel] [--hw SPEC] [--out DIR] [--only ID ...]
                   [--classes C ...] [--shard I/N] [--rounds 3] [--threads T] [--time-budget S]
  run_cpu_sweep.py --render A/sweep.json B/sweep.json ... --out DIR    (merge; report and plots)
Writes sweep.json and sweep.csv; --render (also run at the end of a sweep) writes report.md
(per class: geomean vs eager, the fraction within 10% of eager or faster, Spearman rho of
predicted vs measured; the 20 worst instances; the kernel families), cdf.png and predicted.png.
Progress goes to stderr when it is a terminal.
"""

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import instances as catalog  # noqa: E402
from run_sweep import fmt, geomean, merge_runs, plots, read_report, run_tessel, spearman  # noqa: E402
import run_sweep  # noqa: E402  (write)

TTY = sys.stderr.isatty()


def progress(msg):
    if TTY:
        print("\r\033[K" + msg, end="", file=sys.stderr, flush=True)


def select(args):
    chosen = [i for i in catalog.cpu_instances()
              if (not args.only or i.id in args.only) and (not args.classes or i.cls in args.classes)]
    if args.only:
        missing = set(args.only) - {i.id for i in chosen}
        if missing:
            sys.exit("run_cpu_sweep.py: unknown instance ids: " + " ".join(sorted(missing)))
    if args.shard:
        k, n = (int(v) for v in args.shard.split("/"))
        chosen = [inst for j, inst in enumerate(chosen) if j % n == k]
    return chosen


# ------------------------------------------------------------------------------------------------
# The torch side: one worker process, instances sent as JSON lines on stdin.


def torch_worker(threads):
    import torch
    torch.set_num_threads(threads)
    by_id = {i.id: i for i in catalog.cpu_instances()}
    cases = {}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["id"] not in cases:
                cases.clear()  # one instance's tensors at a time
                cases[req["id"]] = by_id[req["id"]].torch_case(torch, "cpu")
            fn, tensors = cases[req["id"]]
            with torch.no_grad():
                t0 = time.perf_counter()
                fn(tensors)
                first = time.perf_counter() - t0
                repeats = req["repeats"] or max(5, min(50, int(req["seconds"] / max(first, 1e-6))))
                for _ in range(min(3, repeats)):
                    fn(tensors)
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    fn(tensors)
                    times.append(time.perf_counter() - t0)
            reply = {"ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times), "repeats": repeats}
        except Exception as e:  # noqa: BLE001 (reported in the row)
            reply = {"error": repr(e)[:300]}
        print(json.dumps(reply), flush=True)


class TorchSide:
    def __init__(self, threads):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", MKL_NUM_THREADS=str(threads))
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--torch-worker",
                                      "--threads", str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)

    def time(self, iid, seconds, repeats=0):
        self.proc.stdin.write(json.dumps({"id": iid, "seconds": seconds, "repeats": repeats}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"error": "the torch worker exited"}

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def torch_meta():
    code = ("import json, torch; print(json.dumps({'version': torch.__version__, "
            "'mkldnn': torch.backends.mkldnn.is_available(), 'mkl': torch.backends.mkl.is_available(), "
            "'blas': [l.strip() for l in torch.__config__.show().splitlines() if 'BLAS' in l]}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-300:]}


# ------------------------------------------------------------------------------------------------
# The Tessel side.


def tessel_cmd(args, model, cache, report):
    return [args.tessel, "run", model, "--device", "cpu", "--hw", args.hw, "--cache", cache, "--report", report,
            "--threads", str(args.threads)]


def tessel_check(args, inst, work):
    model = os.path.join(work, "models", inst.id + ".json")
    cache = os.path.join(work, "cache", inst.id)
    shutil.rmtree(cache, ignore_errors=True)
    report = os.path.join(work, "reports", inst.id + ".check.json")
    t0 = time.time()
    status, text = run_tessel(tessel_cmd(args, model, cache, report) + ["--check"], args.tessel_timeout)
    rep = read_report(report)
    outs = rep.get("outputs", [])
    row = {"tessel_status": status, "tessel_check_wall_s": time.time() - t0,
           "tessel_correct": status == 0 and bool(outs) and all(o.get("ok") for o in outs),
           "rel_l2_error": max((o.get("rel_l2_error", 0) for o in outs), default=None),
           "check_mode": rep.get("check_mode"), "kernels": rep.get("kernels"),
           "families": rep.get("kernel_templates"),
           "tessel_predicted_ms": 1e3 * rep["predicted_s"] if rep.get("predicted_s") is not None else None,
           "compile_cold_s": rep.get("compile_s")}
    if status != 0:
        row["tessel_log"] = text[-1500:]
    return row


def tessel_time(args, inst, work, repeats):
    model = os.path.join(work, "models", inst.id + ".json")
    cache = os.path.join(work, "cache", inst.id)
    report = os.path.join(work, "reports", inst.id + ".time.json")
    status, text = run_tessel(tessel_cmd(args, model, cache, report) + ["--time", str(repeats)], args.tessel_timeout)
    rep = read_report(report)
    if status == 0 and rep.get("median_s"):
        return {"ms": 1e3 * rep["median_s"], "min_ms": 1e3 * min(rep.get("times_s") or [rep["median_s"]])}
    return {"error": text[-500:]}


# ------------------------------------------------------------------------------------------------


def measure(args):
    if not args.hw:
        os.makedirs(args.out, exist_ok=True)
        args.hw = os.path.join(args.out, "host-probe.json")
        subprocess.run([args.tessel, "hw", "probe", "--device", "cpu", "-o", args.hw], check=True,
                       capture_output=True)
    work = args.work
    for d in ("models", "cache", "reports"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    chosen = select(args)
    random.Random(0).shuffle(chosen)  # a run cut off by --time-budget leaves a random subset untimed
    deadline = time.time() + args.time_budget
    torch_side = None if args.no_torch else TorchSide(args.threads)
    rows = []
    for n, inst in enumerate(chosen):
        progress("[%d/%d] %s" % (n + 1, len(chosen), inst.id))
        with open(os.path.join(work, "models", inst.id + ".json"), "w") as f:
            f.write(catalog.gm.render(inst.build().document()) + "\n")
        row = {"id": inst.id, "class": inst.cls, "family": inst.family, "dtype": inst.dtype,
               "description": inst.description, "flops": inst.flops, "min_bytes": inst.min_bytes}
        row.update(tessel_check(args, inst, work))
        rows.append(row)
        if not row["tessel_correct"] or time.time() > deadline:
            continue
        # Repeats per side from a first timing: about --seconds of timed runs per round, 5 to 50.
        first = tessel_time(args, inst, work, 3)
        if "error" in first:
            row["tessel_time_log"] = first["error"]
            continue
        repeats = max(5, min(50, int(args.seconds / max(first["ms"] / 1e3, 1e-6))))
        rounds = []
        for r in range(args.rounds):
            sides = ["tessel", "torch"] if r % 2 == 0 else ["torch", "tessel"]
            got = {}
            for side in sides:
                if side == "tessel":
                    got[side] = tessel_time(args, inst, work, repeats)
                elif torch_side:
                    got[side] = torch_side.time(inst.id, args.seconds)
            rounds.append(got)
        t = [g["tessel"]["ms"] for g in rounds if "ms" in g["tessel"]]
        e = [g["torch"]["ms"] for g in rounds if "ms" in g.get("torch", {})]
        errors = [g[s]["error"] for g in rounds for s in g if "error" in g[s]]
        if errors:
            row["time_errors"] = errors[:2]
        row["tessel_repeats"] = repeats
        row["tessel_rounds_ms"] = t
        row["eager_rounds_ms"] = e
        if t:
            row["tessel_ms"] = statistics.median(t)
        if e:
            row["eager_ms"] = statistics.median(e)
        ratios = [g["torch"]["ms"] / g["tessel"]["ms"] for g in rounds
                  if "ms" in g["tessel"] and "ms" in g.get("torch", {})]
        finish_row(row, ratios)
        write(args.out, meta(args), rows)
    if torch_side:
        torch_side.close()
    progress("")
    write(args.out, meta(args), rows)
    args.render = [os.path.join(args.out, "sweep.json")]
    render(args)


def finish_row(row, ratios):
    if ratios:
        row["speedup_vs_eager"] = statistics.median(ratios)
        row["speedup_vs_best"] = row["speedup_vs_eager"]  # eager is the one baseline (plots read this key)
        row["ratio_spread"] = max(ratios) / min(ratios)
    if row.get("tessel_ms"):
        if row.get("tessel_predicted_ms"):
            row["predicted_over_measured"] = row["tessel_predicted_ms"] / row["tessel_ms"]
        row["tessel_gflops"] = row["flops"] / row["tessel_ms"] / 1e6


_META = {}


def meta(args):
    if not _META:
        _META.update({"machine": "%s, %d CPUs available" % (cpu_name(), len(os.sched_getaffinity(0))),
                      "date": time.strftime("%Y-%m-%d", time.gmtime()), "threads": args.threads,
                      "rounds": args.rounds, "hw_spec": args.hw, "tessel": args.tessel,
                      "torch": None if args.no_torch else torch_meta(), "python": platform.python_version(),
                      "timing": "wall time, cache warm; each side the median of N runs per round, %d interleaved "
                                "rounds, the instance's ratio the median of the rounds' ratios" % args.rounds})
    return dict(_META)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


COLUMNS = ["id", "class", "family", "dtype", "tessel_correct", "check_mode", "tessel_ms", "eager_ms",
           "speedup_vs_eager", "ratio_spread", "tessel_predicted_ms", "predicted_over_measured", "tessel_gflops",
           "kernels", "families", "compile_cold_s", "rel_l2_error", "tessel_repeats", "flops", "min_bytes",
           "description"]


def write(out, meta_, rows):
    run_sweep.write(out, meta_, rows, COLUMNS)


def render(args):
    meta_, rows = merge_runs(args.render, catalog.cpu_instances())
    write(args.out, meta_, rows)
    classes = sorted({r["class"] for r in rows})
    torch_v = (meta_.get("torch") or {}).get("version", "none")
    lines = ["# CPU op sweep: %s, %s, %d threads" % (meta_["machine"], meta_["date"], meta_["threads"]), "",
             "Timing: %s. Baseline: PyTorch %s eager. Ratios are eager time / Tessel time (> 1: Tessel faster)."
             % (meta_["timing"], torch_v), ""]
    correct = [r for r in rows if r.get("tessel_correct")]
    timed = [r for r in correct if r.get("speedup_vs_eager")]
    lines.append("%d instances; %d correct against the interpreter; %d timed against eager." % (
        len(rows), len(correct), len(timed)))
    lines += ["", "| class | n | correct | timed | geomean vs eager | within 10% of eager or faster | worst | "
              "Spearman rho (predicted, measured) | predicted / measured, geomean |", "|---|---|---|---|---|---|---|---|---|"]

    def summary(name, rs):
        ok = [r for r in rs if r.get("tessel_correct")]
        t = [r for r in ok if r.get("speedup_vs_eager")]
        within = sum(1 for r in t if r["speedup_vs_eager"] >= 1 / 1.1)
        pm = [r for r in ok if r.get("tessel_ms") and r.get("tessel_predicted_ms")]
        rho = spearman([r["tessel_predicted_ms"] for r in pm], [r["tessel_ms"] for r in pm])
        return "| %s | %d | %d | %d | %s | %s | %s | %s | %s |" % (
            name, len(rs), len(ok), len(t), fmt(geomean([r["speedup_vs_eager"] for r in t]), "%.2f"),
            "%d/%d (%.0f%%)" % (within, len(t), 100.0 * within / len(t)) if t else "-",
            fmt(min((r["speedup_vs_eager"] for r in t), default=None), "%.2f"), fmt(rho, "%.2f"),
            fmt(geomean([r["predicted_over_measured"] for r in pm if r.get("predicted_over_measured")]), "%.2f"))
    for c in classes:
        lines.append(summary(c, [r for r in rows if r["class"] == c]))
    lines.append(summary("**all**", rows))
    lines += ["", "## The 20 worst instances (eager time / Tessel time)", "",
              "| instance | Tessel ms | eager ms | eager / Tessel | round spread | Tessel GFLOP/s | kernels (families) |",
              "|---|---|---|---|---|---|---|"]
    for r in sorted(timed, key=lambda r: r["speedup_vs_eager"])[:20]:
        lines.append("| %s | %.4f | %.4f | %.2f | %.2f | %.1f | %s |" % (
            r["id"], r["tessel_ms"], r["eager_ms"], r["speedup_vs_eager"], r.get("ratio_spread", 1),
            r.get("tessel_gflops", 0), " ".join(r.get("families") or [])))
    bad = [r for r in rows if not r.get("tessel_correct")]
    if bad:
        lines += ["", "## Not correct or not compiled (%d)" % len(bad), ""]
        for r in bad:
            last = (r.get("tessel_log") or "").strip().splitlines()[-1:]
            lines.append("- %s: status %s %s" % (r["id"], r.get("tessel_status"), " ".join(last)))
    fam = {}
    for r in correct:
        for t in r.get("families") or []:
            fam[t] = fam.get(t, 0) + 1
    lines += ["", "Kernel families over correct instances: " +
              ", ".join("%s %d" % kv for kv in sorted(fam.items(), key=lambda kv: -kv[1]))]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plots(args.out, rows, classes, "%s, %s" % (meta_["machine"], meta_["date"]), meta_["machine"],
          "PyTorch eager time (interleaved rounds)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    p.add_argument("--hw", help="CPU spec to schedule for (default: `tessel hw probe --device cpu`, saved in OUT)")
    p.add_argument("--out", default=os.path.join(ROOT, "experiments", "op_sweep", "runs",
                                                 "cpu-" + time.strftime("%Y-%m-%d", time.gmtime()) + "-op-sweep"))
    p.add_argument("--work", default="/tmp/tessel-cpu-sweep")
    p.add_argument("--only", nargs="+")
    p.add_argument("--classes", nargs="+")
    p.add_argument("--shard", help="I/N: every N-th instance from the I-th (0-based)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=0.3, help="timed seconds per side per round (5 to 50 runs)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--tessel-timeout", type=int, default=300)
    p.add_argument("--time-budget", type=float, default=1e9, help="seconds: time no instance after this")
    p.add_argument("--no-torch", action="store_true", help="Tessel only (compile, check, time)")
    p.add_argument("--render", nargs="+", metavar="SWEEP_JSON")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker:
        torch_worker(args.threads)
    elif args.render:
        render(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
