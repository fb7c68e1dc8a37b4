#!/usr/bin/env python3
"""The GPU operator sweep (../../../shared/BENCHMARKS.md, "Operator sweep"; issue 21): every
instance of instances.py, side by side in one run on one GPU, timed with the one method of
../timing/ (GPU time on both sides: CUDA-graph replays between events, L2 warm unless --cold-l2).

Per instance:
  * Tessel: cold compile (schedule + codegen + NVRTC, empty kernel cache), every output checked
    against the reference interpreter (fp64 accumulation; graphs over 20 GFLOP on a sample of at
    least 4096 output elements, tilegraph/sampled_reference.h), then timed from the kernel cache
    (`tessel run --time N`: a CUDA graph of the whole model replayed between events); the
    predicted time and the code template (kernel family) each kernel was emitted with;
  * PyTorch eager (cuBLAS / cuDNN for contractions: the vendor call), torch.compile (default),
    SDPA for attention, optionally torch.compile(mode="max-autotune-no-cudagraphs") for the GEMM
    and conv classes (--max-autotune);
  * the roofline floor, max(FLOPs / tensor-core peak, minimum bytes / DRAM bandwidth), with both
    ceilings measured on this GPU in this run (`tessel hw probe --device cuda`).

Two phases keep the GPU to one timed thing at a time while the CPU-heavy work runs in parallel:
  A. (parallel, --jobs) Tessel compiles and checks every instance (no timing); worker processes
     run torch.compile once per instance to fill Inductor's on-disk caches (with its autotune
     cache off, so no kernel configuration is chosen under contention);
  B. (parallel preparation, serialized timing) Tessel processes (--jobs) load each instance from
     its kernel cache and torch worker processes (--torch-workers) compile it again from
     Inductor's cache, all at once; every timed section -- Tessel's `--time` (`--time-lock`), the
     eager, torch.compile, max-autotune and SDPA timings, and Inductor's benchmarking of kernel
     configurations -- holds one file lock, so the GPU times one thing at a time. What runs
     outside the lock on the GPU is brief: making input tensors, uploading Tessel's weights, the
     first call of a compiled function; a replay it overlaps moves no median of 30.
Code that failed its check is not timed. The order is a seeded shuffle, so a run cut off by
--time-budget leaves a random subset untimed, not whole families.

  run_sweep.py [--tessel dist/tessel/bin/tessel] [--out DIR] [--shard I/N] [--only ID ...] [--classes C ...]
  run_sweep.py --render A/sweep.json B/sweep.json ... --out DIR    (merge shards; report and plots)
Writes sweep.json (everything), sweep.csv, and with --render also report.md (headlines, worst
instances), cdf.png (Tessel time / best baseline, per class) and predicted.png (predicted vs
measured, log-log, per class).
"""

import argparse
import concurrent.futures
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "experiments", "timing"))
import instances as catalog  # noqa: E402


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def select(args):
    chosen = [i for i in catalog.instances()
              if (not args.only or i.id in args.only) and (not args.classes or i.cls in args.classes)]
    if args.shard:
        k, n = (int(v) for v in args.shard.split("/"))
        chosen = [inst for j, inst in enumerate(chosen) if j % n == k]
    if args.skip_timed:  # instances an earlier run already timed (merge the runs with --render)
        done = set()
        for path in args.skip_timed:
            with open(path) as f:
                done |= {r["id"] for r in json.load(f)["instances"] if r.get("tessel_ms") or r.get("timed")}
        chosen = [inst for inst in chosen if inst.id not in done]
    return chosen


def tessel_cmd(args, inst, model, cache, report):
    cmd = [args.tessel, "run", model, "--device", args.device, "--cache", cache, "--report", report]
    return cmd + (["--hw", args.hw] if args.hw else [])


def read_report(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def run_tessel(cmd, timeout):
    """Runs a tessel command: (exit status or "timeout", stdout + stderr)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        return "timeout", "timed out after %d s" % timeout


def phase_a_tessel(args, inst, work):
    """Cold compile + check, no timing. Returns the row's Tessel fields."""
    model = os.path.join(work, "models", inst.id + ".json")
    cache = os.path.join(work, "cache", inst.id)
    shutil.rmtree(cache, ignore_errors=True)
    report = os.path.join(work, "reports", inst.id + ".check.json")
    cmd = tessel_cmd(args, inst, model, cache, report) + ["--check", "--threads", str(args.interp_threads)]
    t0 = time.time()
    status, text = run_tessel(cmd, args.tessel_timeout)
    rep = read_report(report)
    row = {"tessel_status": status, "tessel_check_wall_s": time.time() - t0}
    outs = rep.get("outputs", [])
    row["tessel_correct"] = status == 0 and bool(outs) and all(o.get("ok") for o in outs)
    row["rel_l2_error"] = max((o.get("rel_l2_error", 0) for o in outs), default=None)
    row["check_mode"] = rep.get("check_mode")
    row["kernels"] = rep.get("kernels")
    row["tessel_predicted_ms"] = 1e3 * rep["predicted_s"] if rep.get("predicted_s") is not None else None
    if "schedule_s" in rep:
        row["compile_cold_s"] = rep.get("schedule_s", 0) + rep.get("codegen_s", 0) + rep.get("toolchain_s", 0)
        row["schedule_s"] = rep.get("schedule_s")
    row["families"] = rep.get("kernel_templates")
    m = re.search(r"ran in ([0-9.]+) ms \(first run", text)
    if m:
        row["tessel_first_run_ms"] = float(m.group(1))
    if status != 0:
        row["tessel_log"] = text[-1500:]
    return row


def phase_a_torch(args, ids):
    """Worker process: torch.compile each instance once (fills Inductor's caches)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--warm-compile"] + ids
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")  # several workers share the cores
    if args.max_autotune:
        cmd.append("--max-autotune")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.warm_timeout)
        return proc.stdout + proc.stderr[-2000:]
    except subprocess.TimeoutExpired:
        return "warm-compile worker timed out"


def warm_compile(ids, max_autotune):
    import torch
    import torch._inductor.config as inductor_config
    inductor_config.autotune_local_cache = False  # no configuration chosen while the GPU is shared
    by_id = {i.id: i for i in catalog.instances()}
    for iid in ids:
        inst = by_id[iid]
        try:
            with torch.no_grad():
                fn, tensors = inst.torch_case(torch, "cuda")
                torch._dynamo.reset()
                torch.compile(fn)(tensors)
                if max_autotune and inst.cls in ("gemm", "conv"):
                    torch._dynamo.reset()
                    torch.compile(fn, mode="max-autotune-no-cudagraphs")(tensors)
            print("warm", iid, flush=True)
        except Exception as e:  # reported by phase B, which compiles again
            print("warm-failed", iid, repr(e)[:200], flush=True)
        torch.cuda.empty_cache()


def tessel_time(args, inst, row, work, lock, deadline):
    """Thread: Tessel timed from its kernel cache (its timed section holds `lock`); fills row."""
    if not row.get("tessel_correct") or time.time() > deadline:
        return
    model = os.path.join(work, "models", inst.id + ".json")
    cache = os.path.join(work, "cache", inst.id)
    report = os.path.join(work, "reports", inst.id + ".time.json")
    # Fewer replays for slow code (a generic kernel at hundreds of ms): about --time-per-instance
    # seconds of timed runs, at least 3 (the first run, with its transfers, over-estimates).
    first_s = row.get("tessel_first_run_ms", 0) / 1e3
    repeats = args.repeats if first_s <= 0 else max(3, min(args.repeats, int(args.time_per_instance / first_s)))
    row["tessel_repeats"] = repeats
    cmd = tessel_cmd(args, inst, model, cache, report) + ["--time", str(repeats), "--time-lock", lock]
    if args.cold_l2:
        cmd.append("--cold-l2")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.tessel_timeout)
        rep = read_report(report)
        if proc.returncode == 0 and rep.get("median_s"):
            row["tessel_ms"] = 1e3 * rep["median_s"]
            row["tessel_timing"] = rep.get("timing", {}).get("method")
            row["compile_cached_s"] = rep.get("schedule_s", 0) + rep.get("codegen_s", 0) + rep.get("toolchain_s", 0)
        else:
            row["tessel_time_log"] = (proc.stdout + proc.stderr)[-1000:]
    except subprocess.TimeoutExpired:
        row["tessel_time_log"] = "timed out"


class GpuLock:
    """The sweep's one GPU lock (fcntl.flock on a file shared with `tessel run --time-lock`);
    re-entrant within a process."""

    def __init__(self, path):
        import fcntl
        self.fcntl, self.path, self.fd, self.depth = fcntl, path, None, 0

    def __enter__(self):
        if self.depth == 0:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            self.fcntl.flock(self.fd, self.fcntl.LOCK_EX)
        self.depth += 1
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        if self.depth == 0:
            os.close(self.fd)  # releases the lock


def lock_inductor_benchmarks(lock):
    """Inductor picks among a kernel's configurations by timing them on the GPU at its first call;
    those timings hold the GPU lock too. Returns False when this PyTorch has no such hook (the
    worker then holds the lock for the whole first call)."""
    try:
        from torch._inductor.runtime import triton_heuristics as th
    except ImportError:
        return False
    cls = getattr(th, "CachingAutotuner", None)
    if cls is None or not hasattr(cls, "benchmark_all_configs"):
        return False
    original = cls.benchmark_all_configs

    def locked(self, *a, **k):
        with lock:
            return original(self, *a, **k)
    cls.benchmark_all_configs = locked
    return True


def torch_time_worker(ids, lock_path, deadline, cold_l2, repeats, max_autotune, no_compile):
    """Worker process (--time-torch): the PyTorch baselines of `ids`, one JSON line per instance."""
    import torch
    from gpu_timing import GpuTimer
    lock = GpuLock(lock_path)
    hooked = lock_inductor_benchmarks(lock)
    timer = GpuTimer(torch, cold_l2=cold_l2, warmup=5, repeats=repeats)
    by_id = {i.id: i for i in catalog.instances()}
    for iid in ids:
        if time.time() > deadline:
            print("skipped " + iid, flush=True)
            continue
        inst, row = by_id[iid], {"id": iid}
        try:
            with torch.no_grad():
                fn, tensors = inst.torch_case(torch, "cuda")
                compiled = None
                if not no_compile:
                    torch._dynamo.reset()
                    t0 = time.time()
                    compiled = torch.compile(fn)
                    if hooked:
                        compiled(tensors)
                    else:
                        with lock:
                            compiled(tensors)
                    row["torch_compile_s"] = time.time() - t0
                case = inst.sdpa_case(torch, "cuda") if inst.vendor == "sdpa" else None
                with lock:
                    r = timer.time(lambda: fn(tensors))
                    row["eager_ms"], row["eager_method"] = r["ms"], r["method"]
                    if inst.vendor in ("cublas", "cudnn"):
                        row["vendor"], row["vendor_ms"] = inst.vendor, r["ms"]
                    if compiled is not None:
                        r = timer.time(lambda: compiled(tensors))
                        row["compile_ms"], row["compile_method"] = r["ms"], r["method"]
                    if max_autotune and inst.cls in ("gemm", "conv"):
                        torch._dynamo.reset()
                        tuned = torch.compile(fn, mode="max-autotune-no-cudagraphs")
                        tuned(tensors)
                        r = timer.time(lambda: tuned(tensors))
                        row["autotune_ms"], row["autotune_method"] = r["ms"], r["method"]
                    if case:
                        sfn, stensors = case
                        r = timer.time(lambda: sfn(stensors))
                        row["vendor"], row["vendor_ms"], row["vendor_method"] = "sdpa", r["ms"], r["method"]
            del tensors
        except Exception as e:  # a baseline that fails is reported, not fatal
            row["torch_error"] = repr(e)[:400]
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        print("result " + json.dumps(row), flush=True)


def finish_row(row):
    base = [row.get(k) for k in ("eager_ms", "compile_ms", "vendor_ms", "autotune_ms") if row.get(k)]
    if base:
        row["best_baseline_ms"] = min(base)
    if row.get("tessel_ms"):
        row["vs_floor"] = row["tessel_ms"] / row["floor_ms"]
        if row.get("best_baseline_ms"):
            row["speedup_vs_best"] = row["best_baseline_ms"] / row["tessel_ms"]
        if row.get("compile_ms"):
            row["speedup_vs_compile"] = row["compile_ms"] / row["tessel_ms"]
        if row.get("tessel_predicted_ms"):
            row["predicted_over_measured"] = row["tessel_predicted_ms"] / row["tessel_ms"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--hw", help="spec to schedule for (default: the shipped H100 SXM spec for cuda, the probe for cpu)")
    p.add_argument("--device", default="cuda", help="cuda (the sweep); cpu for a dry run of the pipeline with --no-torch")
    p.add_argument("--out", default=os.environ.get("OUT", "op-sweep-out"))
    p.add_argument("--work", default="/tmp/tessel-op-sweep")
    p.add_argument("--shard", help="I/N: every N-th instance from the I-th (0-based)")
    p.add_argument("--only", nargs="+")
    p.add_argument("--classes", nargs="+")
    p.add_argument("--skip-timed", nargs="+", metavar="SWEEP_JSON", help="leave out instances these runs timed")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--time-per-instance", type=float, default=0.5,
                   help="seconds of Tessel's timed runs to aim for (fewer replays of slow code)")
    p.add_argument("--jobs", type=int, default=max(2, (os.cpu_count() or 4) // 2))
    p.add_argument("--interp-threads", type=int, default=2, help="interpreter threads per Tessel check")
    p.add_argument("--torch-workers", type=int, default=6, help="torch.compile warm-up processes in phase A")
    p.add_argument("--tessel-timeout", type=int, default=300)
    p.add_argument("--warm-timeout", type=int, default=400)
    p.add_argument("--time-budget", type=float, default=1e9, help="seconds: start no instance's phase B after this")
    p.add_argument("--cold-l2", action="store_true")
    p.add_argument("--max-autotune", action="store_true", help="also torch.compile max-autotune-no-cudagraphs (gemm, conv)")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--render", nargs="+", metavar="SWEEP_JSON")
    p.add_argument("--warm-compile", nargs="+", metavar="ID", help=argparse.SUPPRESS)
    p.add_argument("--time-torch", nargs="+", metavar="ID", help=argparse.SUPPRESS)
    p.add_argument("--lock", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.warm_compile:
        warm_compile(args.warm_compile, args.max_autotune)
        return
    if args.time_torch:
        torch_time_worker(args.time_torch, args.lock, args.deadline, args.cold_l2, args.repeats,
                          args.max_autotune, args.no_compile)
        return
    if args.hw is None and args.device == "cuda":
        args.hw = os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json")
    os.makedirs(args.out, exist_ok=True)
    if args.render:
        render(args)
        return
    start = time.time()
    work = args.work
    for d in ("models", "cache", "reports"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    chosen = select(args)
    log("op sweep: %d instances" % len(chosen))
    probe = os.path.join(args.out, "gpu-probe.json")
    subprocess.run([args.tessel, "hw", "probe", "--device", args.device, "-o", probe], check=True, stdout=subprocess.DEVNULL)
    with open(probe) as f:
        spec = json.load(f)
    dram = next(l for l in spec["memory_levels"] if l["name"] == "dram")["bandwidth_gbps"] * 1e9
    peaks = spec["compute"].get("tensor_peak_tflops") or spec["compute"]["simt_peak_tflops"]
    rows = {}
    for inst in chosen:
        with open(os.path.join(work, "models", inst.id + ".json"), "w") as f:
            f.write(catalog.gm.render(inst.build().document()) + "\n")
        peak = (peaks.get(inst.dtype) or max(peaks.values())) * 1e12
        rows[inst.id] = {"id": inst.id, "class": inst.cls, "family": inst.family, "dtype": inst.dtype,
                         "description": inst.description, "flops": inst.flops, "min_bytes": inst.min_bytes,
                         "floor_ms": 1e3 * max(inst.flops / peak, inst.min_bytes / dram)}

    # Phase A: Tessel compiles and checks, torch.compile warms its caches, in parallel.
    env_cache = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(work, "inductor"))
    log("phase A: %d Tessel jobs, %d torch.compile workers (Inductor cache %s)" % (args.jobs, args.torch_workers, env_cache))
    with concurrent.futures.ThreadPoolExecutor(args.jobs + args.torch_workers) as pool:
        # The largest first (weights to materialize, graphs to interpret), so they do not trail.
        biggest_first = sorted(chosen, key=lambda i: -(i.min_bytes + i.flops / 100))
        tessel_jobs = {pool.submit(phase_a_tessel, args, inst, work): inst for inst in biggest_first}
        torch_jobs = []
        if not (args.no_torch or args.no_compile):
            ids = [inst.id for inst in chosen]
            for w in range(args.torch_workers):
                part = ids[w::args.torch_workers]
                if part:
                    torch_jobs.append(pool.submit(phase_a_torch, args, part))
        done = 0
        for fut in concurrent.futures.as_completed(tessel_jobs):
            inst = tessel_jobs[fut]
            rows[inst.id].update(fut.result())
            done += 1
            if done % 20 == 0 or done == len(chosen):
                log("  checked %d/%d (%.0f s)" % (done, len(chosen), time.time() - start))
        for fut in torch_jobs:
            out = fut.result()
            failed = [l for l in out.splitlines() if l.startswith("warm-failed")]
            for l in failed[:5]:
                log("  " + l)
    log("phase A done in %.0f s: %d of %d correct" % (time.time() - start, sum(1 for r in rows.values() if r.get("tessel_correct")), len(rows)))

    # Phase B: parallel preparation, timings one at a time under the GPU lock.
    if args.no_torch:
        gpu_name = spec.get("description") or spec["name"]
    else:
        gpu_name = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0))"],
                                  capture_output=True, text=True).stdout.strip()
    meta = {"gpu": gpu_name, "date": time.strftime("%Y-%m-%d", time.gmtime()), "dram_gbps": dram / 1e9,
            "tensor_peak_tflops": peaks, "l2": "cold" if args.cold_l2 else "warm",
            "timing": "GPU time: CUDA-graph replays between events, queued behind a spin, median of %d "
                      "(experiments/timing); timed sections serialized by one lock" % args.repeats,
            "torch": torch_version(args), "shard": args.shard, "argv": sys.argv[1:]}
    import random
    order = list(chosen)
    random.Random(0).shuffle(order)
    lock = os.path.join(work, "gpu.lock")
    deadline = start + args.time_budget
    sides = {inst.id: 0 for inst in order}  # sides reported (Tessel, PyTorch)
    need = 1 if args.no_torch else 2
    progress = {"timed": 0}
    mutex = threading.Lock()

    def side_done(iid):
        with mutex:
            sides[iid] += 1
            if sides[iid] < need:
                return
            done_row(iid)

    def done_row(iid):
        row = rows[iid]
        finish_row(row)
        if row.get("tessel_ms") or row.get("eager_ms") or row.get("torch_error"):
            row["timed"] = True
            progress["timed"] += 1
            log("[%d/%d] %-48s tessel %s compile %s best %s %s" % (
                progress["timed"], len(chosen), iid, fmt(row.get("tessel_ms")), fmt(row.get("compile_ms")),
                fmt(row.get("best_baseline_ms")), "" if row.get("tessel_correct") else "NOT CORRECT"))
            if progress["timed"] % 20 == 0:
                write(args.out, meta, list(rows.values()))

    def tessel_side(inst):
        tessel_time(args, inst, rows[inst.id], work, lock, deadline)
        side_done(inst.id)

    def torch_side(part):
        cmd = [sys.executable, os.path.abspath(__file__), "--time-torch"] + [i.id for i in part] + [
            "--lock", lock, "--deadline", repr(deadline), "--repeats", str(args.repeats)]
        cmd += [f for f, on in (("--cold-l2", args.cold_l2), ("--max-autotune", args.max_autotune),
                                ("--no-compile", args.no_compile)) if on]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = set()
        for line in proc.stdout:
            if line.startswith("result "):
                r = json.loads(line[len("result "):])
                iid = r.pop("id")
                rows[iid].update(r)
                if r.get("torch_error"):
                    log("  torch baseline failed:", iid, r["torch_error"][:200])
                seen.add(iid)
                side_done(iid)
            elif line.startswith("skipped "):
                seen.add(line.split()[1])
                side_done(line.split()[1])
        err = proc.stderr.read()
        proc.wait()
        for inst in part:  # a worker that died: its remaining instances say so
            if inst.id not in seen:
                rows[inst.id]["torch_error"] = "time worker exited %s: %s" % (proc.returncode, err[-300:])
                side_done(inst.id)

    workers = 0 if args.no_torch else max(1, args.torch_workers)
    with concurrent.futures.ThreadPoolExecutor(args.jobs + workers) as pool:
        futures = [pool.submit(torch_side, order[w::workers]) for w in range(workers)]
        futures += [pool.submit(tessel_side, inst) for inst in order]
        for fut in futures:
            fut.result()
    untimed = sum(1 for r in rows.values() if not r.get("timed"))
    if untimed:
        meta["untimed"] = untimed
        log("time budget reached: %d of %d instances timed" % (len(chosen) - untimed, len(chosen)))
    write(args.out, meta, list(rows.values()))
    log("done in %.0f s" % (time.time() - start))


def torch_version(args):
    if args.no_torch:
        return None
    return subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True).stdout.strip()


def fmt(v, spec="%.4f"):
    return "-" if v is None else (spec % v if isinstance(v, float) else str(v))


COLUMNS = ["id", "class", "family", "dtype", "tessel_correct", "check_mode", "tessel_ms", "eager_ms", "compile_ms",
           "autotune_ms", "vendor", "vendor_ms", "best_baseline_ms", "floor_ms", "speedup_vs_best",
           "speedup_vs_compile", "vs_floor", "tessel_predicted_ms", "predicted_over_measured", "kernels", "families",
           "compile_cold_s", "compile_cached_s", "schedule_s", "rel_l2_error", "torch_compile_s", "eager_method",
           "compile_method", "flops", "min_bytes", "description"]


def write(out, meta, rows, columns=COLUMNS):
    """sweep.json (everything) and sweep.csv (`columns`); shared with run_cpu_sweep.py."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump(dict(meta, instances=rows), f, indent=1)
    with open(os.path.join(out, "sweep.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r, families=" ".join(r.get("families") or [])))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (vx * vy) if vx and vy else None


def merge_runs(paths, instances):
    """The runs' metadata (the first run's) and rows, a later run's row replacing an earlier one's,
    in the order of `instances`; shared with run_cpu_sweep.py."""
    latest, meta = {}, None
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        meta = meta or {k: v for k, v in run.items() if k != "instances"}
        for r in run["instances"]:
            latest.pop(r["id"], None)
            latest[r["id"]] = r
    order = {inst.id: n for n, inst in enumerate(instances)}
    meta["merged_from"] = paths
    return meta, sorted(latest.values(), key=lambda r: order.get(r["id"], len(order)))


def render(args):
    """Merges runs (a later run's row replaces an earlier one's), writes the tables and plots."""
    meta, rows = merge_runs(args.render, catalog.instances())
    write(args.out, meta, rows)
    classes = sorted({r["class"] for r in rows})
    lines = ["# Op sweep: %s, %s, L2 %s" % (meta["gpu"], meta["date"], meta["l2"]), "",
             "Timing: %s. Ratios are baseline time / Tessel time (> 1: Tessel faster)." % meta["timing"], ""]
    correct = [r for r in rows if r.get("tessel_correct")]
    timed = [r for r in correct if r.get("speedup_vs_best")]
    lines.append("%d instances; %d correct against the interpreter; %d timed against a baseline (the others were "
                 "compiled and checked, then cut off by the run's time budget)." % (len(rows), len(correct), len(timed)))
    lines.append("")
    lines.append("| class | n | correct | geomean vs torch.compile | geomean vs best | within 10% of best or faster | Spearman rho (predicted, measured) |")
    lines.append("|---|---|---|---|---|---|---|")

    def summary(name, rs):
        ok = [r for r in rs if r.get("tessel_correct")]
        t = [r for r in ok if r.get("speedup_vs_best")]
        within = sum(1 for r in t if r["speedup_vs_best"] >= 1 / 1.1)
        pm = [r for r in ok if r.get("tessel_ms") and r.get("tessel_predicted_ms")]
        rho = spearman([r["tessel_predicted_ms"] for r in pm], [r["tessel_ms"] for r in pm])
        return "| %s | %d | %d | %s | %s | %s | %s |" % (
            name, len(rs), len(ok), fmt(geomean([r.get("speedup_vs_compile") for r in t]), "%.2f"),
            fmt(geomean([r["speedup_vs_best"] for r in t]), "%.2f"),
            "%d/%d (%.0f%%)" % (within, len(t), 100.0 * within / len(t)) if t else "-", fmt(rho, "%.2f"))
    for c in classes:
        lines.append(summary(c, [r for r in rows if r["class"] == c]))
    for dt in sorted({r["dtype"] for r in rows}):
        lines.append(summary("all %s" % dt, [r for r in rows if r["dtype"] == dt]))
    lines.append(summary("**all**", rows))
    lines += ["", "## The 20 worst instances (Tessel time / best baseline)", "",
              "| instance | Tessel ms | best ms (which) | Tessel / best | x floor | kernels (templates) |", "|---|---|---|---|---|---|"]
    for r in sorted(timed, key=lambda r: r["speedup_vs_best"])[:20]:
        which = min((k for k in ("eager_ms", "compile_ms", "vendor_ms", "autotune_ms") if r.get(k)), key=lambda k: r[k])
        lines.append("| %s | %.4f | %.4f (%s) | %.2f | %.2f | %s |" % (
            r["id"], r["tessel_ms"], r["best_baseline_ms"], which[:-3], 1 / r["speedup_vs_best"], r["vs_floor"],
            " ".join(r.get("families") or [])))
    bad = [r for r in rows if not r.get("tessel_correct")]
    if bad:
        lines += ["", "## Not correct or not compiled (%d)" % len(bad), ""]
        for r in bad:
            lines.append("- %s: status %s %s" % (r["id"], r.get("tessel_status"), (r.get("tessel_log") or "").strip().splitlines()[-1:] ))
    fam = {}
    for r in correct:
        for t in r.get("families") or []:
            fam[t] = fam.get(t, 0) + 1
    lines += ["", "Kernel templates over correct instances: " + ", ".join("%s %d" % kv for kv in sorted(fam.items(), key=lambda kv: -kv[1]))]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plots(args.out, rows, classes, "%s, %s, L2 %s" % (meta["gpu"], meta["date"], meta["l2"]), meta["gpu"],
          "best baseline time (eager, torch.compile, vendor)")


def plots(out, rows, classes, title, machine, baseline):
    """cdf.png (Tessel time / `baseline` per class, from each row's speedup_vs_best) and
    predicted.png (predicted vs measured ms, log-log); shared with run_cpu_sweep.py."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not available: no plots (sweep.csv has the numbers)")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for c in classes:
        v = sorted(1 / r["speedup_vs_best"] for r in rows if r["class"] == c and r.get("speedup_vs_best"))
        if v:
            ax.step([v[0]] + v, [0] + [(i + 1) / len(v) for i in range(len(v))], where="post",
                    label="%s (%d)" % (c, len(v)))
    ax.axvline(1.0, color="gray", lw=0.8)
    ax.axvline(1.1, color="gray", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("Tessel time / " + baseline)
    ax.set_ylabel("fraction of instances")
    ax.set_title("Op sweep CDF, " + title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cdf.png"), dpi=110)
    fig, ax = plt.subplots(figsize=(7, 6))
    for c in classes:
        pts = [(r["tessel_ms"], r["tessel_predicted_ms"]) for r in rows
               if r["class"] == c and r.get("tessel_ms") and r.get("tessel_predicted_ms")]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, label=c)
    lo = min([r["tessel_ms"] for r in rows if r.get("tessel_ms")] + [1e-3])
    hi = max([r["tessel_ms"] for r in rows if r.get("tessel_ms")] + [1.0])
    ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured ms")
    ax.set_ylabel("predicted ms")
    ax.set_title("Cost model: predicted vs measured (%s)" % machine)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "predicted.png"), dpi=110)


if __name__ == "__main__":
    main()
