#!/usr/bin/python3
"""The CPU benchmark suite (../../../shared/BENCHMARKS.md, "CPU suite"), measured in one run on this machine.

For every CPU workload of experiments/workloads (fp32), side by side on the same machine:
  * Tessel: `tessel run W.json --device cpu --hw SPEC --check --time N --report R`: scheduled,
    compiled (LLVM ORC JIT), checked against the reference interpreter, and only then timed
    (median of N runs after min(N, 10) warm-up runs); a workload whose check fails has no time;
  * PyTorch eager (Debian's python3-torch 1.13, torch.set_num_threads(cores));
  * the vendor library: OpenBLAS sgemm (numpy.matmul) and oneDNN's inner product for gemm; oneDNN's
    convolution (BN folded, + ReLU) for conv_bn_relu; the better of the two is "vendor";
  * Halide 14 on the same pipeline (halide/pipelines.py), scheduled by each of Debian's
    autoschedulers (Adams2019, Mullapudi2016, Li2018); the fastest is "halide".
Every baseline runs in a process of its own (baselines.py), one after another, on the same shapes
with fresh random inputs; times are wall-clock medians after warm-up. The roofline floor uses the
ceilings `tessel hw probe` measures at the start of the run.

Writes OUT/suite.json (machine, versions, every time of every run), OUT/suite.csv (one row per
workload), OUT/times.csv (one row per timed run), OUT/speedup.png (speedup of Tessel over PyTorch
eager, Halide and the vendor library per workload) and prints the table on stdout. Progress goes to
stderr when it is a terminal (never with --quiet). Models and Tessel's reports go to --work.

  experiments/cpu_suite/run_suite.py [--out DIR] [--only ID ...] [--repeats N] [--tessel PATH]
  experiments/cpu_suite/run_suite.py --render A/suite.json [B/suite.json ...] --out DIR
"""

import argparse
import csv
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEBIAN_PYTHON = "/usr/bin/python3"  # where experiments/cpu_suite/setup's packages live

# The suite's targets (BENCHMARKS.md, the CPU suite's goals): speedup of Tessel over a baseline.
FUSED = ("bert_ffn1", "layernorm", "softmax", "eltwise_chain", "conv_bn_relu", "bert_layer")
TARGETS = {"gemm": [("vendor", 0.8)], "layernorm": [("eager", 1.5)], "softmax": [("eager", 1.5)],
           "eltwise_chain": [("eager", 1.5)], "bert_layer": [("eager", 1.2)]}
for _w in FUSED:
    TARGETS.setdefault(_w, []).append(("halide", 1.0))
AUTOSCHEDULERS = ("Adams2019", "Mullapudi2016", "Li2018")


def _reexec_under_debian_python():
    """Run under Debian's python3 when this interpreter lacks the suite's packages (a pyenv shim)."""
    if sys.executable != DEBIAN_PYTHON and os.path.exists(DEBIAN_PYTHON) and \
            importlib.util.find_spec("matplotlib") is None and not os.environ.get("TESSEL_CPU_SUITE_REEXEC"):
        os.environ["TESSEL_CPU_SUITE_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)


class Log:
    def __init__(self, enabled):
        self.enabled = enabled
        self.start = time.time()

    def __call__(self, *args):
        if self.enabled:
            print("[%6.1fs]" % (time.time() - self.start), *args, file=sys.stderr, flush=True)


def lscpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    fields = {}
    for line in out.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


def machine_info(threads):
    cpu = lscpu()
    info = {"cpu_model": cpu.get("Model name", platform.processor()), "cores": cpu.get("Core(s) per socket"),
            "sockets": cpu.get("Socket(s)"), "logical_cpus": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0)), "threads_used": threads,
            "l3": cpu.get("L3 cache"), "hypervisor": cpu.get("Hypervisor vendor"),
            "flags_avx": [f for f in cpu.get("Flags", "").split() if f.startswith(("avx", "fma"))],
            "kernel": platform.release(), "hostname": platform.node(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "loadavg_start": os.getloadavg()}
    return info


def versions(python):
    code = ("import json, numpy, torch, halide, re;"
            "m = re.search(r'MKL-DNN (v[0-9.]+)', torch.__config__.show());"
            "print(json.dumps({'python': __import__('platform').python_version(), 'numpy': numpy.__version__,"
            " 'torch': torch.__version__, 'onednn': m.group(1) if m else None, 'halide': '14 (Debian python3-halide "
            "' + __import__('subprocess').run(['dpkg-query','-W','-f=${Version}','python3-halide'],"
            " capture_output=True, text=True).stdout + ')'}))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
        return json.loads(out)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        return {"error": str(e)[:300]}


def run_tessel(args, model, report, log_path):
    cmd = [args.tessel, "run", model, "--device", "cpu", "--hw", args.hw, "--check", "--time", str(args.repeats),
           "--threads", str(args.threads), "--cache", os.path.join(args.work, "cache"), "--report", report]
    if args.policy:
        cmd += ["--policy", args.policy]
    if os.path.exists(report):
        os.remove(report)
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        status, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        status, text = "timeout", ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
                                   else (e.stdout or "")) + "\ntimed out after %d s" % args.timeout
    with open(log_path, "w") as f:
        f.write(" ".join(cmd) + "\n" + text)
    result = {"command": " ".join(cmd), "status": status, "wall_s": time.time() - t0}
    if status != 0:
        result["log"] = text[-3000:]
    if os.path.exists(report):
        with open(report) as f:
            result["report"] = json.load(f)
    return result


def run_baseline(args, kind, wid, autoscheduler=None):
    cmd = [args.python, os.path.join(HERE, "baselines.py"), kind, wid, "--repeats", str(args.repeats),
           "--warmup", str(min(10, args.repeats)), "--threads", str(args.threads),
           "--max-seconds", str(args.max_seconds)]
    if autoscheduler:
        cmd += ["--autoscheduler", autoscheduler]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               HL_NUM_THREADS=str(args.threads))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % args.timeout, "command": " ".join(cmd)}
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": "exit status %d: %s" % (proc.returncode, proc.stderr[-1500:]), "command": " ".join(cmd)}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError:
        return {"error": "no JSON result: " + proc.stdout[-500:], "command": " ".join(cmd)}


def sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ms(seconds):
    return None if seconds is None else 1e3 * seconds


def measure_workload(w, args, log, peak_flops, dram):
    import workloads
    path = os.path.join(args.work, "models", w.id + ".json")
    with open(path, "w") as f:
        f.write(workloads.gm.render(w.build("f32").document()) + "\n")
    row = {"id": w.id, "description": w.description, "flops": w.flops, "min_bytes": w.min_bytes("f32")}
    if peak_flops and dram:
        row["floor_ms"] = 1e3 * max(w.flops / peak_flops, row["min_bytes"] / dram)
    raw = {}

    log("%s: Tessel (compile, check against the interpreter, time %d runs)" % (w.id, args.repeats))
    row["loadavg_1min"] = {"tessel": os.getloadavg()[0]}
    t = run_tessel(args, path, os.path.join(args.work, w.id + ".report.json"),
                   os.path.join(args.work, w.id + ".tessel.log"))
    rep = t.get("report", {})
    row["tessel_status"] = t["status"]
    row["tessel_correct"] = t["status"] == 0 and bool(rep.get("checked")) and bool(rep.get("outputs")) and \
        all(o["ok"] for o in rep["outputs"])
    row["rel_l2_error"] = max((o["rel_l2_error"] for o in rep.get("outputs", [])), default=None)
    if rep.get("median_s") is not None:
        if row["tessel_correct"]:
            row["tessel_ms"] = ms(rep["median_s"])
            row["tessel_min_ms"] = ms(min(rep["times_s"]))
            raw["tessel"] = rep["times_s"]
        else:
            row["tessel_ms_unchecked"] = ms(rep["median_s"])  # wrong output: not reported as a time
    row["tessel_compile_s"] = (rep.get("schedule_s", 0) + rep["compile_s"]) if "compile_s" in rep else None
    row["tessel_predicted_ms"] = ms(rep.get("predicted_s"))
    row["kernels"] = rep.get("kernels")
    row["policy"] = rep.get("policy")
    row["tessel_command"] = t["command"]
    if t["status"] != 0:
        row["tessel_log"] = t.get("log")
        last = (t.get("log") or "").strip().splitlines()
        log("  Tessel FAILED (status %s): %s" % (t["status"], last[-1] if last else ""))
    else:
        log("  Tessel %.3f ms, correct: %s (compile %.2f s)" % (row.get("tessel_ms") or float("nan"),
                                                            row["tessel_correct"], row["tessel_compile_s"] or 0))

    import baselines
    jobs = []
    if not args.no_torch:
        jobs += [(k, None) for k in ("eager", "openblas", "onednn") if baselines.applicable(k, w.id)]
    if not args.no_halide:
        jobs += [("halide", a) for a in args.autoschedulers]
    details = {}
    for kind, autoscheduler in jobs:
        name = kind if not autoscheduler else "halide_" + autoscheduler.lower()
        log("%s: %s" % (w.id, name))
        row["loadavg_1min"][name] = os.getloadavg()[0]
        r = run_baseline(args, kind, w.id, autoscheduler)
        details[name] = r
        if "error" in r:
            log("  %s FAILED: %s" % (name, (r["error"].strip().splitlines() or [""])[-1]))
            continue
        row[name + "_ms"] = ms(r["median_s"])
        row[name + "_min_ms"] = ms(r["min_s"])
        raw[name] = r["times_s"]
        extra = ""
        if "rel_l2_error_vs_eager" in r:
            extra = ", rel. L2 error vs eager %.1e" % r["rel_l2_error_vs_eager"]
        log("  %s %.3f ms (%d runs)%s" % (name, row[name + "_ms"], len(r["times_s"]), extra))

    # A Halide result counts only when it computes the same thing as PyTorch (fp32 tolerance).
    halide = [(row[k + "_ms"], k) for k, r in details.items() if k.startswith("halide_") and k + "_ms" in row and
              r.get("rel_l2_error_vs_eager", 1) < 1e-4]
    if halide:
        row["halide_ms"], best = min(halide)
        row["halide_autoscheduler"] = details[best]["autoscheduler"]
    vendors = [(row[k + "_ms"], k) for k in ("openblas", "onednn") if row.get(k + "_ms")]
    if vendors:
        row["vendor_ms"], best = min(vendors)
        row["vendor"] = {"openblas": "OpenBLAS", "onednn": "oneDNN"}[best]
    for base in ("eager", "vendor", "halide"):
        if row.get("tessel_ms") and row.get(base + "_ms"):
            row["x_" + base] = row[base + "_ms"] / row["tessel_ms"]
    goals = []
    for base, goal in TARGETS.get(w.id, []):
        got = row.get("x_" + base)
        goals.append({"vs": base, "target": goal, "speedup": got, "met": None if got is None else got >= goal})
    row["targets"] = goals
    if row.get("tessel_ms") and row.get("floor_ms"):
        row["tessel_vs_floor"] = row["tessel_ms"] / row["floor_ms"]
    return row, raw, details


def main():
    _reexec_under_debian_python()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    p.add_argument("--hw", help="hardware spec for Tessel (default: `tessel hw probe --device cpu` at the start)")
    p.add_argument("--policy", help="Tessel scheduling policy (default: tessel's, welder)")
    p.add_argument("--out", default=os.path.join(ROOT, "experiments", "cpu_suite", "runs", "cpu-" + time.strftime("%Y-%m-%d", time.gmtime())))
    p.add_argument("--work", default="/tmp/tessel-cpu-suite", help="models, Tessel reports and logs")
    p.add_argument("--only", nargs="+", metavar="ID")
    p.add_argument("--repeats", type=int, default=30, help="timed runs per implementation (after warm-up)")
    p.add_argument("--max-seconds", type=float, default=10.0,
                   help="baselines: fewer timed runs (>= 3) where `repeats` of them would take longer than this")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="threads for every implementation")
    p.add_argument("--autoschedulers", nargs="+", default=list(AUTOSCHEDULERS), choices=AUTOSCHEDULERS)
    p.add_argument("--no-halide", action="store_true")
    p.add_argument("--no-torch", action="store_true", help="no PyTorch, OpenBLAS or oneDNN baselines")
    p.add_argument("--timeout", type=int, default=900, help="seconds allowed to one implementation of one workload")
    p.add_argument("--python", default=None, help="interpreter for the baselines (default: Debian's python3)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--render", nargs="+", metavar="SUITE_JSON", help="only render these runs' results together")
    args = p.parse_args()
    log = Log(sys.stderr.isatty() and not args.quiet)
    os.makedirs(args.out, exist_ok=True)
    if args.render:
        runs = []
        for path in args.render:
            with open(path) as f:
                runs.append(json.load(f))
        summary = dict(runs[0])
        summary["workloads"] = [r for run in runs for r in run["workloads"]]
        summary["times"] = [t for run in runs for t in run.get("times", [])]
        summary["rendered_from"] = args.render
        write_results(args, summary)
        return

    sys.path.insert(0, os.path.join(ROOT, "experiments", "workloads"))
    sys.path.insert(0, HERE)
    import workloads
    known = [w.id for w in workloads.cpu_suite()]
    for wid in args.only or []:
        if wid not in known:
            sys.exit("run_suite.py: unknown workload %r (the CPU suite: %s)" % (wid, " ".join(known)))
    args.python = args.python or (DEBIAN_PYTHON if os.path.exists(DEBIAN_PYTHON) else sys.executable)
    if not os.access(args.tessel, os.X_OK):
        sys.exit("run_suite.py: no tessel binary at %s (build it, or pass --tessel)" % args.tessel)
    os.makedirs(os.path.join(args.work, "models"), exist_ok=True)
    shutil.rmtree(os.path.join(args.work, "cache"), ignore_errors=True)
    started = time.time()
    summary = {"suite": "cpu", "machine": machine_info(args.threads), "versions": versions(args.python)}
    tessel_sha = sha256(args.tessel)
    summary["versions"]["tessel_binary"] = {"path": os.path.abspath(args.tessel), "sha256": tessel_sha}
    tv = subprocess.run([args.tessel, "version"], capture_output=True, text=True)
    summary["versions"]["tessel"] = tv.stdout.strip()
    try:
        summary["versions"]["tessel_commit"] = subprocess.run(
            ["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass

    if not args.hw:
        args.hw = os.path.join(args.out, "cpu-probe.json")
        log("probing this machine: tessel hw probe --device cpu -o %s" % args.hw)
        subprocess.run([args.tessel, "hw", "probe", "--device", "cpu", "-o", args.hw], check=True,
                       stdout=subprocess.DEVNULL)
    with open(args.hw) as f:
        spec = json.load(f)
    peak = spec.get("compute", {}).get("simt_peak_tflops", {}).get("f32", 0) * 1e12
    dram = next((lv["bandwidth_gbps"] for lv in spec.get("memory_levels", []) if lv["name"] == "dram"), 0) * 1e9
    summary["hw_spec"] = {"path": args.hw, "name": spec.get("name"), "description": spec.get("description"),
                          "f32_peak_gflops": peak / 1e9, "dram_gbps": dram / 1e9}
    summary["settings"] = {"repeats": args.repeats, "tessel_warmup": min(args.repeats, 10),
                           "baseline_warmup": min(10, args.repeats), "max_seconds": args.max_seconds,
                           "threads": args.threads, "policy": args.policy or "welder (tessel's default)",
                           "autoschedulers": args.autoschedulers}

    rows, times, baseline_details = [], [], {}
    for w in workloads.cpu_suite():
        if args.only and w.id not in args.only:
            continue
        row, raw, details = measure_workload(w, args, log, peak, dram)
        rows.append(row)
        baseline_details[w.id] = details
        for impl, samples in raw.items():
            times += [{"id": w.id, "impl": impl, "run": i, "seconds": s} for i, s in enumerate(samples)]
    summary["machine"]["loadavg_end"] = os.getloadavg()
    if sha256(args.tessel) != tessel_sha:
        summary["warnings"] = ["the tessel binary changed during the run (rebuilt?): rerun"]
        print("run_suite.py: warning: %s changed during the run" % args.tessel, file=sys.stderr)
    summary["suite_wall_s"] = time.time() - started
    summary["workloads"] = rows
    summary["baselines"] = baseline_details
    summary["times"] = times
    write_results(args, summary)
    log("done in %.0f s; results in %s" % (summary["suite_wall_s"], args.out))


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def write_results(args, summary):
    """suite.json, suite.csv, times.csv, speedup.png in args.out and the table on stdout."""
    rows = summary["workloads"]
    summary["correct"] = sum(1 for r in rows if r.get("tessel_correct"))
    summary["total"] = len(rows)
    for base in ("eager", "vendor", "halide"):
        summary["geomean_x_" + base] = geomean([r.get("x_" + base) for r in rows])
    with open(os.path.join(args.out, "suite.json"), "w") as f:
        json.dump(summary, f, indent=1)
    columns = ["id", "description", "tessel_correct", "rel_l2_error", "tessel_ms", "eager_ms", "vendor", "vendor_ms",
               "openblas_ms", "onednn_ms", "halide_autoscheduler", "halide_ms", "halide_adams2019_ms",
               "halide_mullapudi2016_ms", "halide_li2018_ms", "x_eager", "x_vendor", "x_halide", "floor_ms",
               "tessel_vs_floor", "tessel_predicted_ms", "tessel_compile_s", "kernels", "policy", "flops", "min_bytes",
               "tessel_ms_unchecked", "tessel_status"]
    with open(os.path.join(args.out, "suite.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, columns, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rows)
    with open(os.path.join(args.out, "times.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, ["id", "impl", "run", "seconds"])
        wr.writeheader()
        wr.writerows(summary.get("times", []))

    def fmt(v, spec="%.3f"):
        return "-" if v is None else (spec % v if isinstance(v, float) else str(v))
    m = summary["machine"]
    print("%s, %s of %s CPUs used, %s; load average %s at the start" % (
        m["cpu_model"], m["threads_used"], m["usable_cpus"], m["date"],
        " ".join("%.1f" % x for x in m["loadavg_start"])))
    print("times in ms (medians); x_* = baseline time / Tessel time (> 1: Tessel is faster)")
    head = "%-14s %7s %9s %9s %9s %-8s %9s %-13s %7s %7s %7s  %s"
    print(head % ("workload", "correct", "tessel", "eager", "vendor", "", "halide", "(autosched)", "x_eager",
                  "x_vendor", "x_halide", "targets"))
    for r in rows:
        goals = "; ".join("%s>=%.1f %s" % (g["vs"], g["target"], "-" if g["met"] is None else ("yes" if g["met"] else "NO"))
                          for g in r.get("targets", []))
        print(head % (r["id"], "yes" if r.get("tessel_correct") else "NO", fmt(r.get("tessel_ms")),
                      fmt(r.get("eager_ms")), fmt(r.get("vendor_ms")), r.get("vendor") or "", fmt(r.get("halide_ms")),
                      r.get("halide_autoscheduler") or "", fmt(r.get("x_eager"), "%.2f"), fmt(r.get("x_vendor"), "%.2f"),
                      fmt(r.get("x_halide"), "%.2f"), goals))
    print("correct %d of %d; geomean speedup over eager %s, over vendor %s, over Halide %s" % (
        summary["correct"], summary["total"], fmt(summary["geomean_x_eager"], "%.2f"),
        fmt(summary["geomean_x_vendor"], "%.2f"), fmt(summary["geomean_x_halide"], "%.2f")))
    if "suite_wall_s" in summary:
        print("suite wall time %.0f s; load average %s at the end" % (
            summary["suite_wall_s"], " ".join("%.1f" % x for x in m.get("loadavg_end", []))))
    for warning in summary.get("warnings", []):
        print("WARNING:", warning)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("matplotlib not available: no plot (suite.csv has the numbers)", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(11, 4.8))
    series = [("x_eager", "over PyTorch eager", "#3b7dd8"), ("x_halide", "over Halide (best autoscheduler)", "#e07b39"),
              ("x_vendor", "over OpenBLAS / oneDNN", "#5aa05a")]
    width = 0.8 / len(series)
    for s, (key, label, color) in enumerate(series):
        xs = [i + (s - 1) * width for i in range(len(rows))]
        vals = [r.get(key) or 0 for r in rows]
        ax.bar(xs, vals, width, label=label, color=color)
        for x, v in zip(xs, vals):
            if v:
                ax.annotate("%.2f" % v, (x, v), ha="center", va="bottom", fontsize=7)
        for x, r in zip(xs, rows):
            for g in r.get("targets", []):
                if "x_" + g["vs"] == key:
                    ax.plot([x - width / 2, x + width / 2], [g["target"]] * 2, color="black", lw=1.5)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks(list(range(len(rows))), [r["id"] + ("" if r.get("tessel_correct") else "\n(wrong)") for r in rows],
                  rotation=30, ha="right")
    ax.set_yscale("log")
    ticks = matplotlib.ticker.FuncFormatter(lambda v, _: "%gx" % v)
    ax.yaxis.set_major_formatter(ticks)
    ax.yaxis.set_minor_formatter(ticks)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_ylabel("speedup of Tessel (baseline time / Tessel time)")
    ax.set_title("Tessel CPU suite, fp32, %s (%s threads), %s; black ticks: targets" % (
        m["cpu_model"], m["threads_used"], m["date"][:10]))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "speedup.png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
