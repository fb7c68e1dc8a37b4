#!/usr/bin/env python3
"""The GPU benchmark suite (../../../shared/BENCHMARKS.md, issue 5), measured in one run on one GPU.

For every workload of experiments/workloads (fp16 data, fp32 accumulation), side by side:
  * Tessel: `tessel run W.json --device cuda --check --time N --report`: compiled (schedule +
    NVRTC) with an empty cache (cold), checked against the interpreter before it is timed, then
    compiled again from the cache (cached compile time);
  * PyTorch eager, torch.compile (default) and, where BENCHMARKS.md lists it,
    torch.compile(mode="max-autotune-no-cudagraphs"); the vendor library (cuBLAS through
    torch.matmul for GEMMs, SDPA's flash kernel for attention, and SDPA as PyTorch dispatches it
    and cuDNN's attention, which may be faster);
  * the roofline floor: max(FLOPs / tensor-core peak, minimum bytes / DRAM bandwidth), with the
    ceilings measured on this device in this run (`tessel hw probe --device cuda`).
Both sides are GPU time, measured the one way ../timing/README.md describes: Tessel's `--time`
replays a CUDA graph of the whole compiled model between events, and every PyTorch callable is
captured in a CUDA graph whose replays are timed the same way (gpu_timing.GpuTimer; a callable that
cannot be captured is timed as a back-to-back loop and marked). Medians after warm-up, on fresh
random inputs, L2 warm unless --cold-l2 (then a buffer of twice the L2 is overwritten before every
timed run, on both sides).

Writes OUT/suite.json (everything), OUT/suite.csv (one row per workload), OUT/speedup.png (speedup
over torch.compile per workload, the floor marked) when matplotlib is present, and prints a table.
Models, the compile cache and per-workload reports go to --work (default /tmp/tessel-gpu-suite).

  experiments/gpu_suite/run_suite.py [--tessel dist/tessel/bin/tessel] [--out DIR] [--only ID ...]
  experiments/gpu_suite/run_suite.py --render A/suite.json B/suite.json --out DIR
      (one table, CSV and plot from runs that each measured part of the suite on the same GPU)
"""

import argparse
import csv
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "workloads"))
sys.path.insert(0, os.path.join(ROOT, "experiments", "timing"))
import workloads  # noqa: E402
from gpu_timing import GpuTimer  # noqa: E402


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def torch_baselines(w, args):
    """Times of the PyTorch baselines for workload w, in ms (None where not applicable)."""
    import torch
    fn, tensors = workloads.torch_case(w, torch, "cuda", "f16")
    out = {}
    timer = GpuTimer(torch, cold_l2=args.cold_l2, warmup=5, repeats=args.repeats)

    def cuda_time(torch, call, warmup, repeats, key):
        r = timer.time(call)
        if r["method"] != "graph":  # not capturable: timed as a loop, and the table says so
            out[key + "_method"] = r["method"]
        return r["ms"]
    with torch.no_grad():
        out["eager_ms"] = cuda_time(torch, lambda: fn(tensors), 5, args.repeats, "eager")
        if not args.no_compile:
            torch._dynamo.reset()
            t0 = time.time()
            compiled = torch.compile(fn)
            compiled(tensors)
            out["torch_compile_s"] = time.time() - t0
            out["compile_ms"] = cuda_time(torch, lambda: compiled(tensors), 5, args.repeats, "compile")
            if "max_autotune" in w.baselines and not args.no_autotune:
                torch._dynamo.reset()
                tuned = torch.compile(fn, mode="max-autotune-no-cudagraphs")
                tuned(tensors)
                out["max_autotune_ms"] = cuda_time(torch, lambda: tuned(tensors), 5, args.repeats, "max_autotune")
        if "cublas" in w.baselines:
            out["vendor"] = "cuBLAS"
            out["vendor_ms"] = cuda_time(torch, lambda: torch.matmul(tensors["x"], tensors["w"]), 5, args.repeats, "vendor")
        if "sdpa" in w.baselines:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            q, k, v = tensors["q"], tensors["k"], tensors["v"]
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                out["vendor"] = "SDPA (flash)"
                out["vendor_ms"] = cuda_time(
                    torch, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), 5, args.repeats, "vendor")
            # BENCHMARKS.md names SDPA's flash kernel; PyTorch's own dispatch may pick a faster one
            # (cuDNN's fused attention on Hopper), so that is timed too, and cuDNN's by name.
            out["sdpa_default_ms"] = cuda_time(
                torch, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), 5, args.repeats, "sdpa_default")
            try:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    out["sdpa_cudnn_ms"] = cuda_time(
                        torch, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), 5, args.repeats, "sdpa_cudnn")
            except RuntimeError as e:  # no cuDNN attention for this build, shape or device
                out["sdpa_cudnn_error"] = str(e)[:300]
    del tensors
    torch.cuda.empty_cache()
    return out


def tessel_run(w, path, args, cache, report, check):
    cmd = [args.tessel, "run", path, "--device", "cuda", "--hw", args.hw, "--cache", cache, "--report", report]
    if check:
        cmd += ["--check", "--time", str(args.repeats)]
        if args.cold_l2:
            cmd.append("--cold-l2")
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    result = {"status": proc.returncode, "wall_s": wall, "log": (proc.stdout + proc.stderr)[-4000:]}
    if os.path.exists(report):
        with open(report) as f:
            result.update(json.load(f))
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--hw", default=os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json"),
                   help="spec to schedule for (default: the shipped H100 SXM spec)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-suite-out"))
    p.add_argument("--only", nargs="+")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (quick runs)")
    p.add_argument("--no-autotune", action="store_true", help="skip torch.compile max-autotune")
    p.add_argument("--cold-l2", action="store_true",
                   help="flush the L2 (twice its size overwritten) before every timed run, on both sides")
    p.add_argument("--no-torch", action="store_true", help="Tessel only")
    p.add_argument("--work", default="/tmp/tessel-gpu-suite", help="models, cache and per-workload reports")
    p.add_argument("--render", nargs="+", metavar="SUITE_JSON",
                   help="only render these runs' results together (a later run's row replaces an earlier one's)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.render:
        runs = []
        for path in args.render:
            with open(path) as f:
                runs.append(json.load(f))
        # A later run's row replaces an earlier run's row of the same workload (a partial rerun
        # on top of a full run); rows in the suite's order, workloads outside it last.
        latest = {}
        for run in runs:
            for r in run["workloads"]:
                latest.pop(r["id"], None)
                latest[r["id"]] = r
        order = {w.id: i for i, w in enumerate(workloads.gpu_suite())}
        rows = sorted(latest.values(), key=lambda r: order.get(r["id"], len(order)))
        first = runs[0]
        args.cold_l2 = first.get("l2") == "cold"
        args.repeats = first.get("repeats", args.repeats)
        report(args, rows, first["gpu"], first["date"], first["dram_gbps"] * 1e9, first["tensor_peak_tflops_f16"] * 1e12)
        return
    models = os.path.join(args.work, "models")
    os.makedirs(models, exist_ok=True)

    # Device ceilings, measured now.
    probe = os.path.join(args.out, "gpu-probe.json")
    subprocess.run([args.tessel, "hw", "probe", "--device", "cuda", "-o", probe], check=True,
                   stdout=subprocess.DEVNULL)
    with open(probe) as f:
        spec = json.load(f)
    dram = next(l for l in spec["memory_levels"] if l["name"] == "dram")["bandwidth_gbps"] * 1e9
    tensor_peak = spec["compute"]["tensor_peak_tflops"]["f16"] * 1e12
    gpu_name = spec.get("description") or spec["name"]

    rows = []
    for w in workloads.gpu_suite():
        if args.only and w.id not in args.only:
            continue
        log("== %s: %s" % (w.id, w.description))
        path = os.path.join(models, w.id + ".json")
        with open(path, "w") as f:
            f.write(workloads.gm.render(w.build("f16").document()) + "\n")
        row = {"id": w.id, "description": w.description, "flops": w.flops, "min_bytes": w.min_bytes("f16")}
        row["floor_ms"] = 1e3 * max(w.flops / tensor_peak, row["min_bytes"] / dram)
        cache = os.path.join(args.work, "cache", w.id)
        shutil.rmtree(cache, ignore_errors=True)
        cold = tessel_run(w, path, args, cache, os.path.join(args.work, w.id + ".tessel.json"), True)
        warm = tessel_run(w, path, args, cache, os.path.join(args.work, w.id + ".cached.json"), False)
        row["tessel_status"] = cold["status"]
        row["tessel_correct"] = cold["status"] == 0 and bool(cold.get("outputs")) and all(o["ok"] for o in cold["outputs"])
        row["tessel_ms"] = 1e3 * cold["median_s"] if cold.get("median_s") else None
        row["tessel_timing"] = cold.get("timing", {}).get("method")
        row["check_mode"] = cold.get("check_mode")
        row["kernel_templates"] = cold.get("kernel_templates")
        row["tessel_predicted_ms"] = 1e3 * cold["predicted_s"] if "predicted_s" in cold else None
        row["kernels"] = cold.get("kernels")
        # Compile time = schedule + code generation + NVRTC (or cache lookups); building the
        # executable also materializes the seeded random weights and uploads them, reported apart.
        def compiler_s(rep):
            return rep.get("schedule_s", 0) + rep.get("codegen_s", 0) + rep.get("toolchain_s", 0) if "compile_s" in rep else None
        row["compile_cold_s"] = compiler_s(cold)
        row["compile_cached_s"] = compiler_s(warm)
        row["schedule_s"] = cold.get("schedule_s")
        row["nvrtc_cold_s"] = cold.get("toolchain_s")
        row["executable_build_s"] = cold.get("compile_s")
        row["rel_l2_error"] = max((o["rel_l2_error"] for o in cold.get("outputs", [])), default=None)
        if cold["status"] != 0:
            row["tessel_log"] = cold["log"]
            log(cold["log"])
        if not args.no_torch:
            try:
                row.update(torch_baselines(w, args))
            except Exception as e:  # a baseline that fails is reported, not fatal
                row["torch_error"] = repr(e)[:500]
                log("  torch baseline failed:", e)
        if row.get("tessel_ms") and row.get("compile_ms"):
            row["speedup_vs_compile"] = row["compile_ms"] / row["tessel_ms"]
        if row.get("tessel_ms"):
            row["vs_floor"] = row["tessel_ms"] / row["floor_ms"]
        rows.append(row)
        # Written after every workload, so a run cut off by a time limit keeps what it measured.
        report(args, rows, gpu_name, time.strftime("%Y-%m-%d", time.gmtime()), dram, tensor_peak, quiet=True)
        log("  " + ", ".join("%s=%s" % (k, ("%.4g" % v) if isinstance(v, float) else v)
                             for k, v in row.items() if k not in ("description", "tessel_log")))

    report(args, rows, gpu_name, time.strftime("%Y-%m-%d", time.gmtime()), dram, tensor_peak)


def report(args, rows, gpu_name, date, dram, tensor_peak, quiet=False):
    """suite.json, suite.csv, speedup.png in args.out and the table on stdout."""
    speedups = [r["speedup_vs_compile"] for r in rows if r.get("speedup_vs_compile") and r["tessel_correct"]]
    summary = {"gpu": gpu_name, "date": date, "dram_gbps": dram / 1e9, "l2": "cold" if args.cold_l2 else "warm",
               "repeats": args.repeats,
               "timing": "GPU time on both sides: CUDA-graph replays between events, median of %d (experiments/timing)" % args.repeats,
               "tensor_peak_tflops_f16": tensor_peak / 1e12, "workloads": rows,
               "correct": sum(1 for r in rows if r["tessel_correct"]), "total": len(rows),
               "geomean_speedup_vs_compile": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None}
    with open(os.path.join(args.out, "suite.json"), "w") as f:
        json.dump(summary, f, indent=1)
    columns = ["id", "tessel_correct", "tessel_ms", "eager_ms", "compile_ms", "max_autotune_ms", "vendor", "vendor_ms",
               "sdpa_default_ms", "sdpa_cudnn_ms", "floor_ms", "speedup_vs_compile", "vs_floor", "tessel_predicted_ms", "kernels", "compile_cold_s",
               "compile_cached_s", "schedule_s", "nvrtc_cold_s", "executable_build_s", "rel_l2_error", "torch_compile_s"]
    with open(os.path.join(args.out, "suite.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, columns, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rows)
    if quiet:
        return

    def fmt(v, spec="%.3f"):
        return "-" if v is None else (spec % v if isinstance(v, float) else str(v))
    print("%s, %s; %s; L2 %s" % (gpu_name, summary["date"], summary["timing"], summary["l2"]))
    print("%-14s %7s %9s %9s %9s %9s %9s %8s %7s %9s %9s" % ("workload", "correct", "tessel", "eager", "compile", "vendor",
                                                             "floor", "speedup", "floor x", "cold s", "cached s"))
    for r in rows:
        print("%-14s %7s %9s %9s %9s %9s %9s %8s %7s %9s %9s" % (
            r["id"], "yes" if r["tessel_correct"] else "NO", fmt(r.get("tessel_ms")), fmt(r.get("eager_ms")),
            fmt(r.get("compile_ms")), fmt(r.get("vendor_ms")), fmt(r["floor_ms"]), fmt(r.get("speedup_vs_compile"), "%.2f"),
            fmt(r.get("vs_floor"), "%.2f"), fmt(r.get("compile_cold_s"), "%.2f"), fmt(r.get("compile_cached_s"), "%.3f")))
    print("correct %d of %d; geomean speedup over torch.compile: %s" % (
        summary["correct"], summary["total"], fmt(summary["geomean_speedup_vs_compile"], "%.2f")))
    for r in rows:
        if r.get("sdpa_default_ms") or r.get("sdpa_cudnn_ms"):
            print("%s: SDPA with PyTorch's own dispatch %s ms, cuDNN attention %s ms (vendor column: the flash kernel)" % (
                r["id"], fmt(r.get("sdpa_default_ms")), fmt(r.get("sdpa_cudnn_ms"))))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        shown = [r for r in rows if r.get("compile_ms")]
        fig, ax = plt.subplots(figsize=(11, 4.5))
        xs = range(len(shown))
        ax.bar(xs, [r.get("speedup_vs_compile") or 0 for r in shown], color="#3b7dd8", label="Tessel")
        ax.scatter(xs, [r["compile_ms"] / r["floor_ms"] for r in shown], marker="_", s=400, color="black",
                   label="roofline floor (max attainable)")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(list(xs), [r["id"] for r in shown], rotation=35, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("speedup over torch.compile")
        ax.set_title("Tessel on %s (%s), fp16" % (gpu_name, summary["date"]))
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "speedup.png"), dpi=120)
    except ImportError:
        log("matplotlib not available: no plot (suite.csv has the numbers)")


if __name__ == "__main__":
    main()
