#!/usr/bin/env python3
"""Block-sparse GEMM benchmark: Tessel's block-sparse weights against dense cuBLAS and the sparse
kernels of PyTorch and cuSPARSE, on the linear layers of BERT-base and LLaMA-7B (M = 4096 tokens), over a grid of
densities and block shapes, timed with the one method of ../timing/ (GPU time on both sides:
CUDA-graph replays between events, L2 warm unless --cold-l2).

Per shape (M, K, N) and weight layout (kn: MatMul(x, w) with w [K, N]; nk: Gemm(x, w, transB=1)
with w [N, K], as linear layers are exported), one Tessel model with a dense weight: "Tessel dense",
the reference the cost model's dense/sparse choice is judged against. Per point (shape, layout,
square block b, density d):
  * Tessel: a model whose weight carries {"sparsity": {"pattern": "block", "block": [b, b],
    "density": d}} (the compiler prunes the weight to that fraction of non-zero blocks, by block L1
    magnitude, and its policy picks a dense or a block-sparse kernel by its cost model). Cold
    compile, every output checked against the interpreter (`tessel run --check`), then timed from
    the kernel cache (`tessel run --time N`); the predicted time, the kernel templates, and the text
    of `tessel explain` with the tile kind that ran (block_sparse or dense, read from that text);
  * the baselines (their own random block mask of the same block shape and density: the masks
    differ between the sides, the count of non-zero blocks is the same): dense cuBLAS (torch.matmul,
    once per shape); PyTorch's Triton block-sparse kernel (torch.sparse._triton_ops.bsr_dense_mm);
    torch.sparse.mm on the weight as sparse_bsr (on PyTorch 2.11 in fp16 this runs the same Triton
    kernel, not cuSPARSE) and as sparse_csr (cuSPARSE SpMM); and cuSPARSE itself through ctypes,
    which PyTorch does not reach for BSR: cusparseSpMM on the weight as BSR (the legacy fp32
    cusparseSbsrmm where SpMM refuses) and as Blocked-ELL (cuSPARSE's tensor-core block-sparse
    path). PyTorch's sparse calls compute y^T = W (sparse, [N, K]) @ x^T ([K, M], made contiguous
    outside the timed window), since PyTorch multiplies sparse @ dense; the direct cuSPARSE calls
    read x as a column-major x^T and write y as a column-major y^T, so they need no copy. Every
    baseline's output is compared with cuBLAS on the same masked weight (relative L2 error), and
    the GPU kernels one call launches are recorded (torch.profiler), so a table says what each
    entry point actually ran.
With --nm, one 2:4 point per shape: Tessel's model whose weight carries {"sparsity": {"pattern":
"nm", "n": 2, "m": 4, "axis": <K's dimension>}} (the compiler prunes it to the two largest magnitudes
of every four along K, and its policy picks dense or the sparse tensor cores by its cost model;
--force-sparse-args times the 2:4 kernel where the policy picked dense); the baselines' weight
2:4-pruned the same way, torch.sparse.to_sparse_semi_structured on the cuSPARSELt backend and then
on CUTLASS (SparseSemiStructuredTensor._FORCE_CUTLASS), timed as F.linear(x, W) against dense
F.linear.

Two phases keep the GPU to one timed thing at a time (as ../op_sweep/run_sweep.py does):
  A. (parallel, --jobs) Tessel compiles, checks and explains every model; no timing;
  B. Tessel processes load each model from its kernel cache (--jobs at once) and PyTorch worker
     processes (--torch-workers) build their sparse tensors; every timed section holds one file
     lock (`tessel run --time-lock`, and the workers' GpuTimer calls), so the GPU times one thing
     at a time. Shapes are taken in order, so a run cut off by --time-budget leaves whole shapes
     untimed rather than holes in every density sweep.

  run_sparse.py [--quick] [--only-shapes S ...] [--densities D ...] [--blocks B ...] [--nm]
                [--weight-layout kn|nk|both] [--time-budget S] [--jobs J] [--cold-l2] [--out DIR]
  run_sparse.py --list | --write-models DIR          (the points and Tessel models, nothing run)
  run_sparse.py --render A/sparse.json [B/sparse.json ...] --out DIR   (merge; report and plot)
  run_sparse.py --device cpu --no-torch --scale 16   (a dry run of the pipeline on Tessel's CPU
                                                      backend, f32, shapes divided by 16)
Writes sparse.json (everything), sparse.csv (one row per point), report.md and speedup.png;
--render merges runs (a later run's point replaces an earlier one's) and writes all four again.
Python 3 standard library; torch only in the worker processes, matplotlib only for the plot.
"""

import argparse
import concurrent.futures
import csv
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "op_sweep"))
sys.path.insert(0, os.path.join(ROOT, "experiments", "timing"))
sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
import generate_models as gm  # noqa: E402
import run_sweep as sweep  # noqa: E402  (GpuLock, read_report, fmt, geomean)

# The linear layers of the two families at M = 4096 tokens: (id, family, M, K, N, what).
SHAPES = [
    ("bert.768x3072", "bert", 4096, 768, 3072, "BERT-base FFN up"),
    ("bert.3072x768", "bert", 4096, 3072, 768, "BERT-base FFN down"),
    ("bert.768x768", "bert", 4096, 768, 768, "BERT-base attention projection"),
    ("llama7b.4096x11008", "llama7b", 4096, 4096, 11008, "LLaMA-7B gate / up projection"),
    ("llama7b.11008x4096", "llama7b", 4096, 11008, 4096, "LLaMA-7B down projection"),
    ("llama7b.4096x4096", "llama7b", 4096, 4096, 4096, "LLaMA-7B attention projection"),
]
LARGE_FAMILIES = ("llama7b",)  # "large GEMMs" of the targets
DENSITIES = [0.5, 0.3, 0.1, 0.05, 0.01]
BLOCKS = [16, 32, 64, 128]
QUICK_SHAPES = ["llama7b.4096x4096", "llama7b.4096x11008", "bert.768x3072"]
QUICK_BLOCKS = [32, 64, 128]
# Two times within 3% are a tie: the policy's choice between them counts as right, and Tessel
# counts as "at" a baseline.
TIE = 0.03
# The methods of a block point: the column prefix in sparse.csv and the name in tables and plots.
METHODS = [("tessel", "Tessel"), ("bsr_triton", "Triton BSR"), ("torch_bsr_mm", "torch.sparse.mm BSR"),
           ("cusparse_bsr", "cuSPARSE BSR"), ("cusparse_bell", "cuSPARSE Blocked-ELL"), ("cusparse_csr", "cuSPARSE CSR")]
BASELINES = ("bsr_triton", "torch_bsr_mm", "cusparse_bsr", "cusparse_bell", "cusparse_csr", "semi_cusparselt",
             "semi_cutlass")


def log(*args):
    """Progress, only when someone watches (stderr is a terminal)."""
    if sys.stderr.isatty():
        print(*args, file=sys.stderr, flush=True)


def fail(message):
    print("run_sparse.py: " + message, file=sys.stderr)
    sys.exit(2)


# ------------------------------------------------------------------------------------------------
# Points and models.


def round_up(v, multiple):
    return max(multiple, (v + multiple - 1) // multiple * multiple)


def select_points(args):
    """(points, dense): every point (a dict) and one Tessel-dense entry per shape and layout."""
    shapes = args.only_shapes or (QUICK_SHAPES if args.quick else [s[0] for s in SHAPES])
    known = {s[0]: s for s in SHAPES}
    chosen = []
    for name in shapes:
        matches = [s for s in SHAPES if s[0] == name or s[1] == name]
        if not matches:
            fail("unknown shape %r (known: %s, or a family: bert, llama7b)" % (name, ", ".join(known)))
        chosen += [s for s in matches if s not in chosen]
    blocks = args.blocks or (QUICK_BLOCKS if args.quick else BLOCKS)
    densities = args.densities or DENSITIES
    for d in densities:
        if not 0 < d <= 1:
            fail("density %g is not in (0, 1]" % d)
    for b in blocks:
        if b < 1:
            fail("block %d is not positive" % b)
    layouts = ["kn", "nk"] if args.weight_layout == "both" else [args.weight_layout]
    # --scale divides M, K, N (a dry run); K and N are rounded up to a multiple of every block
    # (and of 4 for 2:4), so that each point stays valid. At scale 1 every shape already is.
    align = 4
    for b in blocks:
        align = align * b // math.gcd(align, b)
    points, dense = [], []
    for sid, family, m_, k, n, what in chosen:
        if args.scale > 1:
            m_ = round_up(m_ // args.scale, 16)
            k, n = round_up(k // args.scale, align), round_up(n // args.scale, align)
        for b in blocks:
            if k % b or n % b:
                fail("block %d does not divide %s's K x N = %d x %d" % (b, sid, k, n))
        for layout in layouts:
            base = {"shape": sid, "family": family, "what": what, "layout": layout, "m": m_, "k": k, "n": n,
                    "dtype": args.dtype}
            key = "%s.%s" % (sid, layout)
            dense.append(dict(base, key=key, id=key + ".dense", pattern="dense"))
            if not args.nm_only:
                for b in blocks:
                    for d in densities:
                        points.append(dict(base, key=key, id="%s.b%d.d%g" % (key, b, d), pattern="block",
                                           block=b, density=d))
            if args.nm or args.nm_only:
                points.append(dict(base, key=key, id=key + ".nm2of4", pattern="2:4", block=None, density=0.5))
    return points, dense


def build_model(p):
    """The Tessel model of a point or of a shape's dense entry: y = x w (MatMul, w [K, N]) or
    y = x w^T (Gemm transB=1, w [N, K]); the weight carries the point's sparsity."""
    m = gm.Model(p["id"].replace(".", "_"), 20, p["dtype"])
    x = m.input("x", [p["m"], p["k"]])
    shape = [p["k"], p["n"]] if p["layout"] == "kn" else [p["n"], p["k"]]
    w = m.normal("w", shape, std=1.0 / math.sqrt(p["k"]))
    if p["pattern"] == "block":  # in the canonical key order: name, dtype, shape, sparsity, init
        weight = m.weights[-1]
        init = weight.pop("init")
        weight["sparsity"] = {"pattern": "block", "block": [p["block"], p["block"]], "density": p["density"]}
        weight["init"] = init
    elif p["pattern"] == "2:4":  # pruned along K: w [K, N] (kn) or [N, K] (nk)
        weight = m.weights[-1]
        init = weight.pop("init")
        weight["sparsity"] = {"pattern": "nm", "n": 2, "m": 4, "axis": 0 if p["layout"] == "kn" else 1}
        weight["init"] = init
    if p["layout"] == "kn":
        m.output(m.op("y", "MatMul", [x, w]))
    else:
        m.output(m.op("y", "Gemm", [x, w], transB=1))
    return m


def tessel_models(points, dense, args):
    """Every (model id, point) Tessel compiles: the dense entries, the block and 2:4 points, and with
    --force-sparse-args a second run of every such point with those arguments."""
    models = [(d["id"], d) for d in dense]
    for p in points:
        if p["pattern"] in ("block", "2:4"):
            models.append((p["id"], p))
            if args.force_sparse_args:
                models.append((p["id"] + ".forced", p))
    return models


def write_models(models, folder):
    os.makedirs(folder, exist_ok=True)
    for mid, p in models:
        if mid.endswith(".forced"):
            continue  # the same model file, other arguments
        with open(os.path.join(folder, mid + ".json"), "w") as f:
            f.write(gm.render(build_model(p).document()) + "\n")


def list_points(points, dense):
    print("%-40s %6s %6s %6s  %-6s %s" % ("id", "M", "K", "N", "layout", "what"))
    for p in dense + points:
        if p["pattern"] == "block":
            what = "block %dx%d, density %g" % (p["block"], p["block"], p["density"])
        else:
            what = {"dense": "Tessel dense (no sparsity key)", "2:4": "2:4 along K"}[p["pattern"]]
        print("%-40s %6d %6d %6d  %-6s %s" % (p["id"], p["m"], p["k"], p["n"], p["layout"], what))
    print("%d points, %d dense shapes" % (len(points), len(dense)), file=sys.stderr)


# ------------------------------------------------------------------------------------------------
# Tessel.


def tessel_base(args, model, cache, report):
    cmd = [args.tessel, "run", model, "--device", args.device, "--cache", cache, "--report", report]
    return cmd + ["--hw", args.hw] + args.tessel_args.split()


def extra_args(args, mid):
    return args.force_sparse_args.split() if mid.endswith(".forced") else []


def kernel_kind(explain_text):
    """What the policy chose, from `tessel explain`'s text: (kind, fields). A group whose
    contraction reads a sparse weight has a line

      kind      block_sparse: 'w' has density 0.100098 at 32x64 blocks: block-sparse mma 0.037 ms
                vs dense wgmma 0.156 ms predicted; they break even near density 0.452

    (or "kind      dense: ..." with the same comparison, or "dense: no block-sparse kernel of 'w' can
    be emitted here"); the first word is the kind, the rest is parsed best-effort. A model without
    such a line ran dense. None when the text has no kernel at all."""
    lines = re.findall(r"^\s*kind\s+(\w+)\b:?\s*(.*)$", explain_text, re.M)
    fields = {}
    if lines:
        kinds = [k for k, _ in lines]
        kind = "block_sparse" if "block_sparse" in kinds else "nm_sparse" if "nm_sparse" in kinds else "dense"
        m = re.search(r"is 2:4 sparse: 2:4 \S+ \(sparse tensor cores\) ([0-9.]+) ms vs dense (\S+) ([0-9.]+) ms predicted", explain_text)
        if m:
            fields.update({"predicted_sparse_ms": float(m.group(1)), "dense_family": m.group(2),
                           "predicted_dense_ms": float(m.group(3))})
        fields["kind_line"] = " | ".join("%s: %s" % kl for kl in lines)[:600]
        m = re.search(r"has density ([0-9.eE+-]+) at (\d+)x(\d+) blocks: block-sparse \S+ ([0-9.]+) ms vs dense (\S+) "
                      r"([0-9.]+) ms predicted; they break even near density ([0-9.]+)", explain_text)
        if m:
            fields.update({"kernel_density": float(m.group(1)), "kernel_block": "%sx%s" % (m.group(2), m.group(3)),
                           "predicted_sparse_ms": float(m.group(4)), "dense_family": m.group(5),
                           "predicted_dense_ms": float(m.group(6)), "breakeven_density": float(m.group(7))})
        return kind, fields
    if re.search(r"^kernel \d+", explain_text, re.M):
        return "dense", fields
    return None, fields


def phase_a(args, mid, work):
    """Cold compile + check + explain of one model, no timing. Returns Tessel fields (unprefixed)."""
    if time.time() > args.deadline:
        return {"status": "skipped", "log": "not compiled: time budget reached"}
    model = os.path.join(work, "models", mid.replace(".forced", "") + ".json")
    cache = os.path.join(work, "cache", mid)
    shutil.rmtree(cache, ignore_errors=True)
    report = os.path.join(work, "reports", mid + ".check.json")
    cmd = tessel_base(args, model, cache, report) + ["--check", "--threads", str(args.interp_threads)]
    cmd += extra_args(args, mid)
    t0 = time.time()
    status, text = sweep.run_tessel(cmd, args.tessel_timeout)
    rep = sweep.read_report(report)
    outs = rep.get("outputs", [])
    row = {"status": status, "check_wall_s": round(time.time() - t0, 3),
           "correct": status == 0 and bool(outs) and all(o.get("ok") for o in outs),
           "rel_l2_error": max((o.get("rel_l2_error", 0) for o in outs), default=None),
           "check_mode": rep.get("check_mode"), "kernels": rep.get("kernels"),
           "families": rep.get("kernel_templates"),
           "predicted_ms": 1e3 * rep["predicted_s"] if rep.get("predicted_s") is not None else None}
    if "schedule_s" in rep:
        row["compile_cold_s"] = rep.get("schedule_s", 0) + rep.get("codegen_s", 0) + rep.get("toolchain_s", 0)
    m = re.search(r"ran in ([0-9.]+) ms \(first run", text)
    if m:
        row["first_run_ms"] = float(m.group(1))
    if status != 0:
        row["log"] = text[-1500:]
    # What the policy chose: `tessel explain` on the same spec (the run above scheduled with it).
    cmd = [args.tessel, "explain", model, "--hw", args.hw, "--cache", cache] + args.tessel_args.split() + extra_args(args, mid)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.tessel_timeout)
        row["explain_status"] = proc.returncode
        row["explain"] = (proc.stdout if proc.returncode == 0 else proc.stdout + proc.stderr)[:8000]
    except subprocess.TimeoutExpired:
        row["explain_status"], row["explain"] = "timeout", ""
    if row["explain_status"] == 0:
        row["kind"], parsed = kernel_kind(row["explain"])
        row.update(parsed)
    return row


def phase_b(args, mid, fields, work):
    """Tessel timed from its kernel cache, the timed section under the GPU lock. Returns fields."""
    if not fields.get("correct"):
        return {}
    if time.time() > args.deadline:
        return {"time_log": "not timed: time budget reached"}
    model = os.path.join(work, "models", mid.replace(".forced", "") + ".json")
    cache = os.path.join(work, "cache", mid)
    report = os.path.join(work, "reports", mid + ".time.json")
    # About --time-per-point seconds of replays, at least 3 (a slow fallback kernel is not
    # replayed 30 times).
    first_s = fields.get("first_run_ms", 0) / 1e3
    repeats = args.repeats if first_s <= 0 else max(3, min(args.repeats, int(args.time_per_point / first_s)))
    cmd = tessel_base(args, model, cache, report) + ["--time", str(repeats), "--time-lock", args.lock]
    cmd += (["--cold-l2"] if args.cold_l2 else []) + extra_args(args, mid)
    out = {"repeats": repeats}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.tessel_timeout)
        rep = sweep.read_report(report)
        if proc.returncode == 0 and rep.get("median_s"):
            out["ms"] = 1e3 * rep["median_s"]
            out["timing"] = rep.get("timing", {}).get("method")
            if rep.get("predicted_s") is not None:
                out["predicted_ms"] = 1e3 * rep["predicted_s"]
        else:
            out["time_log"] = (proc.stdout + proc.stderr)[-1000:]
    except subprocess.TimeoutExpired:
        out["time_log"] = "timed out"
    return out


# ------------------------------------------------------------------------------------------------
# PyTorch worker (a separate process: --time-torch PLAN.json). One JSON line per result.


def torch_worker(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    import torch
    import torch.nn.functional as F
    from gpu_timing import GpuTimer
    lock = sweep.GpuLock(plan["lock"])
    timer = GpuTimer(torch, cold_l2=plan["cold_l2"], warmup=5, repeats=plan["repeats"])
    tdtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[plan["dtype"]]
    emit("meta", {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                  "cuda": torch.version.cuda, "cusparselt": cusparselt_version(torch)})
    groups = {}
    for p in plan["points"]:
        groups.setdefault(p["key"], []).append(p)
    for key, pts in groups.items():
        if time.time() > plan["deadline"]:
            for p in pts:
                emit("skipped", {"id": p["id"]})
            emit("skipped", {"id": "dense:" + key})
            continue
        p0 = pts[0]
        m_, k, n = p0["m"], p0["k"], p0["n"]
        gen = torch.Generator(device="cuda").manual_seed(plan["seed"])
        x = torch.randn(m_, k, generator=gen, device="cuda").to(tdtype)
        w_nk = (torch.randn(n, k, generator=gen, device="cuda") / math.sqrt(k)).to(tdtype)
        xt = x.t().contiguous()
        # Dense cuBLAS, once per shape and layout: it does not depend on the density.
        row = {"id": "dense:" + key}
        if p0["layout"] == "kn":
            w_kn = w_nk.t().contiguous()
            fn = (lambda: torch.matmul(x, w_kn))
        else:
            fn = (lambda: F.linear(x, w_nk))
        try:
            fn()
            with lock:
                r = timer.time(fn)
            row["dense_ms"], row["dense_method"] = r["ms"], r["method"]
            row["dense_kernels"] = kernel_names(torch, fn)
        except Exception as e:
            row["dense_error"] = short(e)
        emit("result", row)
        cpu_gen = torch.Generator().manual_seed(plan["seed"])
        for p in pts:
            if p["pattern"] == "dense":  # a shape with no sparse point: cuBLAS only
                continue
            if time.time() > plan["deadline"]:
                emit("skipped", {"id": p["id"]})
                continue
            row = {"id": p["id"]}
            try:
                if p["pattern"] == "block":
                    block_baselines(torch, timer, lock, row, p, x, xt, w_nk, cpu_gen)
                else:
                    semi_baselines(torch, F, timer, lock, row, p, x, w_nk)
            except Exception as e:  # setting up the point failed (e.g. out of memory)
                row["torch_error"] = short(e)
            emit("result", row)
            torch.cuda.empty_cache()
        torch.cuda.empty_cache()


def emit(kind, obj):
    print(kind + " " + json.dumps(obj), flush=True)


def short(e):
    text = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (text[0] if text else ""))[:300]


def cusparselt_version(torch):
    try:
        return torch.backends.cusparselt.version() if torch.backends.cusparselt.is_available() else None
    except Exception:
        return None


def kernel_names(torch, fn):
    """The distinct GPU kernels one call of fn launches (torch.profiler), at most 4, short."""
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = []
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name not in names:
                names.append(e.name)
        return [n[:100] for n in names[:4]]
    except Exception as e:
        return ["(profiler: %s)" % short(e)]


def rel_l2(out, ref):
    out, ref = out.float(), ref.float()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def attempt(torch, timer, lock, row, name, variants, ref_yt):
    """Times the first variant that works: variants is a list of (dtype name, setup), setup()
    building the operands outside the timed window and returning (callable, "y" or "yt": whether
    the callable returns y [M, N] or y^T [N, M]). Its first output is compared with ref_yt [N, M].
    Every failure is kept in row[name + "_error"]."""
    errors = []
    for dtype_name, setup in variants:
        try:
            fn, orient = setup()
            out = fn()  # first call outside the lock: Triton compiles here; unsupported cases raise
            torch.cuda.synchronize()
            err = rel_l2(out, ref_yt if orient == "yt" else ref_yt.t())
            with lock:
                r = timer.time(fn)
                kernels = kernel_names(torch, fn)
            row.update({name + "_ms": r["ms"], name + "_method": r["method"], name + "_dtype": dtype_name,
                        name + "_rel_err": err, name + "_kernels": kernels, name + "_output": orient})
            if r.get("capture_error"):
                row[name + "_capture_error"] = r["capture_error"]
            if errors:
                row[name + "_error"] = "; ".join(errors)
            return True
        except Exception as e:
            errors.append("%s: %s" % (dtype_name, short(e)))
    row[name + "_error"] = "; ".join(errors)
    return False


def block_baselines(torch, timer, lock, row, p, x, xt, w_nk, cpu_gen):
    """PyTorch's block-sparse kernels and cuSPARSE on a random block mask of the point's block and
    density. PyTorch multiplies sparse @ dense: its calls compute y^T [N, M] = W [N, K] @ x^T [K, M];
    the direct cuSPARSE calls read x [M, K] as a column-major x^T and write y [M, N] as a
    column-major y^T, so they need no transposed copy."""
    b, n, k = p["block"], p["n"], p["k"]
    rows_b, cols_b = n // b, k // b
    total = rows_b * cols_b
    keep = max(1, math.floor(p["density"] * total + 0.5))  # Tessel's count: round(density x blocks), >= 1
    chosen = torch.randperm(total, generator=cpu_gen)[:keep]
    mask = torch.zeros(total, dtype=torch.bool)
    mask[chosen] = True
    mask = mask.view(rows_b, cols_b).to("cuda")
    w = w_nk * mask.repeat_interleave(b, 0).repeat_interleave(b, 1)
    row.update({"nnz_blocks": keep, "blocks_total": total})
    ref_yt = torch.matmul(w, xt)  # cuBLAS on the masked weight

    def triton_setup():
        from torch.sparse._triton_ops import bsr_dense_mm
        bsr = w.to_sparse_bsr((b, b))
        return (lambda: bsr_dense_mm(bsr, xt)), "yt"
    attempt(torch, timer, lock, row, "bsr_triton", [(p["dtype"], triton_setup)], ref_yt)

    def mm_setup(layout, dtype):
        def setup():
            wd, xd = w.to(dtype), xt.to(dtype)
            if layout == "bsr":
                sparse = wd.to_sparse_bsr((b, b))
            else:  # CSR with 32-bit indices (cuSPARSE's faster index type)
                csr = wd.to_sparse_csr()
                sparse = torch.sparse_csr_tensor(csr.crow_indices().to(torch.int32), csr.col_indices().to(torch.int32),
                                                 csr.values(), size=csr.shape)
            return (lambda: torch.sparse.mm(sparse, xd)), "yt"
        return setup
    for name, layout in (("torch_bsr_mm", "bsr"), ("cusparse_csr", "csr")):
        variants = [(p["dtype"], mm_setup(layout, w.dtype))]
        if w.dtype != torch.float32:
            variants.append(("f32", mm_setup(layout, torch.float32)))
        attempt(torch, timer, lock, row, name, variants, ref_yt)

    # cuSPARSE itself (PyTorch's BSR path does not reach it for fp16/bf16/fp32).
    cs = CuSparse.get(torch)
    attempt(torch, timer, lock, row, "cusparse_bsr", [
        (p["dtype"] + " SpMM", lambda: cs.spmm_bsr(w, b, x)),
        ("f32 bsrmm", lambda: cs.bsrmm_f32(w, b, x))], ref_yt)
    attempt(torch, timer, lock, row, "cusparse_bell", [
        (p["dtype"] + " SpMM", lambda: cs.spmm_blocked_ell(w, mask, b, x))], ref_yt)


class CuSparse:
    """The cuSPARSE calls PyTorch does not expose, through ctypes: generic SpMM (cusparseSpMM) on a
    BSR or a Blocked-ELL matrix (the latter is cuSPARSE's tensor-core block-sparse path), and the
    legacy fp32 cusparseSbsrmm. Every call returns (callable, "y"): the callable sets the handle's
    stream to the current one (so that it can be captured in a CUDA graph) and writes y [M, N]."""
    _instance = None
    ROW, COL = 2, 1  # cusparseOrder_t
    I32 = 2  # CUSPARSE_INDEX_32I
    R32F, R16F = 0, 2  # cudaDataType

    @classmethod
    def get(cls, torch):
        if cls._instance is None:
            cls._instance = cls(torch)
        return cls._instance

    def __init__(self, torch):
        import ctypes as C
        self.C, self.torch = C, torch
        self.lib = L = self._load(torch)
        self.handle = C.c_void_p()
        self.check(L.cusparseCreate(C.byref(self.handle)), "cusparseCreate")
        L.cusparseSetStream.argtypes = [C.c_void_p, C.c_void_p]
        L.cusparseCreateBsr.argtypes = [C.c_void_p] + [C.c_int64] * 5 + [C.c_void_p] * 3 + [C.c_int] * 5
        L.cusparseCreateBlockedEll.argtypes = [C.c_void_p] + [C.c_int64] * 4 + [C.c_void_p] * 2 + [C.c_int] * 3
        L.cusparseCreateDnMat.argtypes = [C.c_void_p] + [C.c_int64] * 3 + [C.c_void_p] + [C.c_int] * 2
        spmm = [C.c_void_p, C.c_int, C.c_int, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p, C.c_int, C.c_int]
        L.cusparseSpMM_bufferSize.argtypes = spmm + [C.POINTER(C.c_size_t)]
        L.cusparseSpMM_preprocess.argtypes = spmm + [C.c_void_p]
        L.cusparseSpMM.argtypes = spmm + [C.c_void_p]

    @staticmethod
    def _load(torch):
        import ctypes
        import glob
        for name in ("libcusparse.so.12", "libcusparse.so.13", "libcusparse.so"):
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
        site = os.path.dirname(os.path.dirname(torch.__file__))
        for path in sorted(glob.glob(os.path.join(site, "nvidia", "**", "libcusparse.so*"), recursive=True)):
            try:
                return ctypes.CDLL(path)
            except OSError:
                pass
        raise OSError("libcusparse not found")

    @staticmethod
    def check(status, what):
        if status != 0:
            raise RuntimeError("%s: cuSPARSE status %d" % (what, status))

    def code(self, t):
        torch = self.torch
        return {torch.float16: self.R16F, torch.bfloat16: 14, torch.float32: self.R32F}[t.dtype]

    def _dense(self, t, rows, cols, ld):
        d = self.C.c_void_p()
        self.check(self.lib.cusparseCreateDnMat(self.C.byref(d), rows, cols, ld, t.data_ptr(), self.code(t), self.COL),
                   "cusparseCreateDnMat")
        return d

    def _spmm(self, sparse, keep, n, x):
        """y [M, N] = sparse [N, K] @ x^T: B is x read as a column-major [K, M], C is y written as a
        column-major [N, M]. fp32 accumulation (compute type CUDA_R_32F)."""
        torch, C, L = self.torch, self.C, self.lib
        m, k = x.shape
        y = torch.empty(m, n, dtype=x.dtype, device=x.device)
        db, dc = self._dense(x, k, m, k), self._dense(y, n, m, n)
        alpha, beta = C.c_float(1.0), C.c_float(0.0)
        args = [self.handle, 0, 0, C.byref(alpha), sparse, db, C.byref(beta), dc, self.R32F, 0]  # ALG_DEFAULT
        size = C.c_size_t()
        self.check(L.cusparseSpMM_bufferSize(*args, C.byref(size)), "cusparseSpMM_bufferSize")
        buf = torch.empty(max(1, size.value), dtype=torch.uint8, device=x.device)
        L.cusparseSpMM_preprocess(*args, C.c_void_p(buf.data_ptr()))  # optional; a format without it refuses

        def fn():
            L.cusparseSetStream(self.handle, C.c_void_p(torch.cuda.current_stream().cuda_stream))
            self.check(L.cusparseSpMM(*args, C.c_void_p(buf.data_ptr())), "cusparseSpMM")
            return y
        fn.keep = (keep, x, y, buf, db, dc, alpha, beta)  # alive as long as the callable
        return fn, "y"

    def spmm_bsr(self, w, b, x):
        bsr = w.to_sparse_bsr((b, b))
        crow = bsr.crow_indices().to(self.torch.int32)
        col = bsr.col_indices().to(self.torch.int32)
        vals = bsr.values().contiguous()
        n, k = w.shape
        d = self.C.c_void_p()
        self.check(self.lib.cusparseCreateBsr(self.C.byref(d), n // b, k // b, vals.shape[0], b, b, crow.data_ptr(),
                                              col.data_ptr(), vals.data_ptr(), self.I32, self.I32, 0, self.code(vals),
                                              self.ROW), "cusparseCreateBsr")
        return self._spmm(d, (crow, col, vals), n, x)

    def spmm_blocked_ell(self, w, mask, b, x):
        """Blocked-ELL: every block row holds as many blocks as the fullest one (padding blocks:
        column index -1, zero values), so it reads more than BSR when rows differ."""
        torch = self.torch
        rows_b, cols_b = mask.shape
        width = int(mask.sum(1).max())
        order = torch.sort(mask.to(torch.int8), dim=1, descending=True, stable=True)
        idx, valid = order.indices[:, :width], order.values[:, :width] > 0
        colind = torch.where(valid, idx, -1).to(torch.int32).contiguous()
        blocks = w.view(rows_b, b, cols_b, b).permute(0, 2, 1, 3)
        picked = blocks[torch.arange(rows_b, device=w.device)[:, None], idx] * valid[:, :, None, None]
        values = picked.permute(0, 2, 1, 3).reshape(rows_b * b, width * b).contiguous()
        n, k = w.shape
        d = self.C.c_void_p()
        self.check(self.lib.cusparseCreateBlockedEll(self.C.byref(d), n, k, b, width * b, colind.data_ptr(),
                                                     values.data_ptr(), self.I32, 0, self.code(values)),
                   "cusparseCreateBlockedEll")
        return self._spmm(d, (colind, values), n, x)

    def bsrmm_f32(self, w, b, x):
        """The legacy cusparseSbsrmm (fp32 only): y = W x^T with B = x as a column-major [K, M]."""
        torch, C, L = self.torch, self.C, self.lib
        bsr = w.float().to_sparse_bsr((b, b))
        crow, col = bsr.crow_indices().to(torch.int32), bsr.col_indices().to(torch.int32)
        vals = bsr.values().contiguous()
        xf = x.float().contiguous()
        m, k = xf.shape
        n = w.shape[0]
        y = torch.empty(m, n, dtype=torch.float32, device=x.device)
        descr = C.c_void_p()
        self.check(L.cusparseCreateMatDescr(C.byref(descr)), "cusparseCreateMatDescr")
        alpha, beta = C.c_float(1.0), C.c_float(0.0)
        L.cusparseSbsrmm.argtypes = [C.c_void_p] + [C.c_int] * 7 + [C.c_void_p] * 5 + [C.c_int, C.c_void_p, C.c_int,
                                                                                        C.c_void_p, C.c_void_p, C.c_int]

        def fn():
            L.cusparseSetStream(self.handle, C.c_void_p(torch.cuda.current_stream().cuda_stream))
            self.check(L.cusparseSbsrmm(self.handle, 0, 0, 0, n // b, m, k // b, vals.shape[0], C.byref(alpha), descr,
                                        vals.data_ptr(), crow.data_ptr(), col.data_ptr(), b, xf.data_ptr(), k,
                                        C.byref(beta), y.data_ptr(), n), "cusparseSbsrmm")
            return y
        fn.keep = (crow, col, vals, xf, y, descr, alpha, beta)
        return fn, "y"


def semi_baselines(torch, F, timer, lock, row, p, x, w_nk):
    """2:4 semi-structured weight (the two largest magnitudes of every four along K), F.linear on
    cuSPARSELt, then on CUTLASS. y = x W^T [M, N], the same orientation as Tessel's model."""
    n, k = p["n"], p["k"]
    groups = w_nk.view(n, k // 4, 4)
    top = groups.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, top, True)
    w = (groups * mask).view(n, k)
    ref_t = F.linear(x, w)
    from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured

    def setup(force_cutlass, expect):
        def make():
            SparseSemiStructuredTensor._FORCE_CUTLASS = force_cutlass
            ws = to_sparse_semi_structured(w)
            backend = type(ws).__name__
            if expect not in backend.upper():
                raise RuntimeError("to_sparse_semi_structured gave %s, not %s" % (backend, expect))
            return (lambda: F.linear(x, ws)), "y"
        return make
    for name, force, expect in (("semi_cusparselt", False, "CUSPARSELT"), ("semi_cutlass", True, "CUTLASS")):
        attempt(torch, timer, lock, row, name, [(p["dtype"], setup(force, expect))], ref_t.t())
    SparseSemiStructuredTensor._FORCE_CUTLASS = False


# ------------------------------------------------------------------------------------------------
# The run.


def resolve_spec(args, work):
    if args.hw:
        return args.hw
    if args.device == "cuda":
        return os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json")
    spec = os.path.join(work, "cpu-probe.json")  # explain needs a spec: the one `run` probes
    subprocess.run([args.tessel, "hw", "probe", "--device", "cpu", "--quick", "-o", spec], check=True,
                   stdout=subprocess.DEVNULL)
    return spec


def run(args):
    start = time.time()
    args.deadline = start + args.time_budget
    work = args.work
    for d in ("models", "cache", "reports"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    if not os.access(args.tessel, os.X_OK):
        fail("%s is not an executable (build it, or on the GPU machine unpack the bundle: "
             "tar -C dist -xJf dist/tessel-*-x86_64.tar.xz; or pass --tessel)" % args.tessel)
    args.hw = resolve_spec(args, work)
    args.lock = os.path.join(work, "gpu.lock")
    points, dense = select_points(args)
    models = tessel_models(points, dense, args)
    write_models(models, os.path.join(work, "models"))
    log("sparse: %d points, %d dense shapes, %d Tessel models" % (len(points), len(dense), len(models)))
    rows = {p["id"]: dict(p) for p in points}
    shapes = {d["key"]: dict(d) for d in dense}
    tessel = {}  # model id -> Tessel fields

    # Phase A: every Tessel model compiled, checked and explained, in parallel; the biggest first.
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        order = sorted(models, key=lambda mp: -mp[1]["m"] * mp[1]["k"] * mp[1]["n"])
        futures = {pool.submit(phase_a, args, mid, work): mid for mid, _ in order}
        for n_done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            tessel[futures[fut]] = fut.result()
            if n_done % 10 == 0 or n_done == len(models):
                log("  phase A %d/%d (%.0f s)" % (n_done, len(models), time.time() - start))
    log("phase A done in %.0f s: %d of %d correct" % (
        time.time() - start, sum(1 for t in tessel.values() if t.get("correct")), len(models)))

    # Phase B: Tessel timings and the PyTorch workers, one timed section at a time.
    meta = {"device": args.device, "dtype": args.dtype, "l2": "cold" if args.cold_l2 else "warm",
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "hw_spec": args.hw,
            "tessel_version": first_line([args.tessel, "version"]), "scale": args.scale,
            "force_sparse_args": args.force_sparse_args, "argv": sys.argv[1:], "tie": TIE,
            "timing": "GPU time: CUDA-graph replays between events, queued behind a spin, median of %d "
                      "(experiments/timing); timed sections serialized by one lock" % args.repeats
                      if args.device == "cuda" else "Tessel CPU backend, wall time (a dry run)"}
    mutex = threading.Lock()
    progress = {"n": 0}

    def save_now():
        with mutex:
            progress["n"] += 1
            if progress["n"] % 10 == 0:
                write(args.out, meta, merge(rows, shapes, tessel), list(shapes.values()))

    def tessel_side(mid):
        fields = phase_b(args, mid, tessel[mid], work)
        with mutex:
            tessel[mid].update(fields)
        if fields.get("ms"):
            log("  tessel %-44s %.4f ms" % (mid, fields["ms"]))
        save_now()

    def torch_side(part, w):
        plan = os.path.join(work, "torch-plan-%d.json" % w)
        with open(plan, "w") as f:
            json.dump({"points": part, "lock": args.lock, "deadline": args.deadline, "cold_l2": args.cold_l2,
                       "repeats": args.repeats, "dtype": args.dtype, "seed": args.seed}, f)
        err_path = os.path.join(work, "torch-worker-%d.log" % w)  # a file: warnings cannot fill a pipe
        with open(err_path, "w") as err_file:
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--time-torch", plan],
                                    stdout=subprocess.PIPE, stderr=err_file, text=True)
        seen = set()
        for line in proc.stdout:
            kind, _, body = line.partition(" ")
            if kind not in ("meta", "result", "skipped"):
                continue
            r = json.loads(body)
            if kind == "meta":
                with mutex:
                    meta.update(r)
                continue
            rid = r.pop("id")
            seen.add(rid)
            with mutex:
                target = shapes[rid[len("dense:"):]] if rid.startswith("dense:") else rows[rid]
                target.update(r)
                if kind == "skipped":
                    target["torch_skipped"] = "time budget reached"
            log("  torch  %-44s %s" % (rid, " ".join("%s %.4f" % (k[:-3], v) for k, v in r.items()
                                                       if k.endswith("_ms") and v)))
            save_now()
        proc.wait()
        with open(err_path) as f:
            err = f.read()
        with mutex:  # a worker that died: what it did not report says so
            for p in part:
                for rid, target in ((p["id"], rows.get(p["id"])), ("dense:" + p["key"], shapes[p["key"]])):
                    if rid not in seen and target is not None and "torch_error" not in target:
                        target["torch_error"] = "torch worker exited %s: %s" % (proc.returncode, err[-300:])

    torch_points = [] if args.no_torch else points + [d for d in dense if not any(p["key"] == d["key"] for p in points)]
    keys = list(dict.fromkeys(p["key"] for p in torch_points))
    workers = min(max(1, args.torch_workers), len(keys)) if keys else 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs + workers) as pool:
        futures = []
        for w in range(workers):
            mine = set(keys[w::workers])
            futures.append(pool.submit(torch_side, [p for p in torch_points if p["key"] in mine], w))
        futures += [pool.submit(tessel_side, mid) for mid, _ in models]  # in shape order
        for fut in futures:
            fut.result()
    if "gpu" not in meta:
        meta["gpu"] = device_name(args)
    result = merge(rows, shapes, tessel)
    untimed = [r["id"] for r in result if not r.get("tessel_ms") and not r.get("dense_ms")]
    if untimed:
        meta["untimed"] = len(untimed)
    write(args.out, meta, result, list(shapes.values()))
    log("done in %.0f s: %d points, %d timed on either side" % (time.time() - start, len(result),
                                                                 len(result) - len(untimed)))
    # The report and plot of this run alone (--render merges several runs the same way).
    args.render = [os.path.join(args.out, "sparse.json")]
    render(args)


def first_line(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception:
        return None


def device_name(args):
    if args.device == "cuda":
        name = first_line(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
        return name or "cuda (unknown)"
    return "cpu: " + (platform.processor() or platform.machine())


def prefixed(prefix, fields):
    return {prefix + k: v for k, v in fields.items()}


def merge(rows, shapes, tessel):
    """The rows with their Tessel fields (tessel_*, the shape's tessel_dense_*, tessel_forced_*)
    and the shape's dense cuBLAS time."""
    for key, s in shapes.items():
        s.update(prefixed("tessel_dense_", tessel.get(s["id"], {})))
    out = []
    for rid, r in rows.items():
        r = dict(r)
        r.update(prefixed("tessel_", tessel.get(rid, {})))
        r.update(prefixed("tessel_forced_", tessel.get(rid + ".forced", {})))
        s = shapes[r["key"]]
        for k in ("tessel_dense_ms", "tessel_dense_predicted_ms", "tessel_dense_correct", "tessel_dense_kind",
                  "dense_ms", "dense_method"):
            if s.get(k) is not None:
                r[k] = s[k]
        out.append(r)
    return out


# ------------------------------------------------------------------------------------------------
# Derived columns, files.


def finish(rows, shapes):
    """Speedups over dense cuBLAS, semi_ms, the policy verdict and an errors summary, per row."""
    for r in rows:
        if r.get("tessel_forced_ms"):
            r["tessel_forced_sparse_ms"] = r["tessel_forced_ms"]
        semis = [(r[k + "_ms"], k[5:]) for k in ("semi_cusparselt", "semi_cutlass") if r.get(k + "_ms")]
        if semis:
            r["semi_ms"], r["semi_backend"] = min(semis)
        for m in [m for m, _ in METHODS] + ["semi"]:
            if r.get("dense_ms") and r.get(m + "_ms"):
                r["speedup_" + m] = r["dense_ms"] / r[m + "_ms"]
        if r.get("tessel_ms") and r.get("tessel_dense_ms"):
            r["tessel_over_tessel_dense"] = r["tessel_dense_ms"] / r["tessel_ms"]
        if r.get("tessel_ms") and r.get("tessel_predicted_ms"):
            r["predicted_over_measured"] = r["tessel_predicted_ms"] / r["tessel_ms"]
        errors = []
        if r["pattern"] == "block" and r.get("tessel_status") not in (None, 0):
            errors.append("tessel: " + re.sub(r"^tessel: (error: )?", "", last_line(r.get("tessel_log"))))
        elif r["pattern"] == "block" and r.get("tessel_status") == 0 and not r.get("tessel_correct"):
            errors.append("tessel: output does not match the interpreter")
        for k in ("torch_error", "dense_error") + tuple(b + "_error" for b in BASELINES):
            if r.get(k):
                errors.append("%s: %s" % (k[:-6], r[k]))
        r["errors"] = " | ".join(errors)
    judge_policy(rows)


def last_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def judge_policy(rows):
    """policy_pick (the tile kind the policy chose for the sparse model) and policy_verdict:
      faster   the pick was the faster (within TIE) of Tessel dense and Tessel block-sparse;
      slower   it was not;
      unjudged the other kernel's time is unknown.
    Picked block_sparse: its time against the dense model's. Picked dense: against the forced
    block-sparse run (--force-sparse-args) when there is one; otherwise "slower (inferred)" when the
    block-sparse kernel already beat Tessel dense at a higher density of the same shape and block
    (a block-sparse kernel's time falls with the density), else unjudged."""
    by_series = {}
    for r in rows:
        if r["pattern"] == "block":
            by_series.setdefault((r["key"], r["block"]), []).append(r)
    for r in rows:
        if r["pattern"] != "block":
            continue
        kind, t, t_dense = r.get("tessel_kind"), r.get("tessel_ms"), r.get("tessel_dense_ms")
        r["policy_pick"] = kind
        if not (t and t_dense and kind):
            r["policy_verdict"] = None
            continue
        if kind == "block_sparse":
            r["policy_verdict"] = "faster" if t <= t_dense * (1 + TIE) else "slower"
            continue
        forced = r.get("tessel_forced_sparse_ms")
        if forced and r.get("tessel_forced_kind") == "block_sparse":
            r["policy_verdict"] = "faster" if t <= forced * (1 + TIE) else "slower"
            continue
        evidence = [o for o in by_series[(r["key"], r["block"])] if o["density"] >= r["density"]
                    and o.get("tessel_kind") == "block_sparse" and o.get("tessel_ms")
                    and o["tessel_ms"] * (1 + TIE) < t_dense]
        r["policy_verdict"] = "slower (inferred)" if evidence else "unjudged"


COLUMNS = (["id", "shape", "family", "layout", "m", "k", "n", "pattern", "block", "density", "dtype",
            "tessel_ms", "tessel_predicted_ms", "tessel_kind", "tessel_correct", "tessel_kernel_block",
            "tessel_kernel_density", "tessel_predicted_sparse_ms", "tessel_predicted_dense_ms",
            "tessel_breakeven_density", "tessel_dense_ms", "tessel_dense_predicted_ms", "tessel_forced_sparse_ms",
            "dense_ms"] + [m + suffix for m, _ in METHODS[1:] for suffix in ("_ms", "_dtype")] +
           ["semi_ms", "semi_backend", "semi_cusparselt_ms", "semi_cutlass_ms"] +
           ["speedup_" + m for m, _ in METHODS] + ["speedup_semi", "tessel_over_tessel_dense", "policy_pick",
                                                   "policy_verdict", "tessel_families", "nnz_blocks", "blocks_total",
                                                   "errors", "gpu", "date"])


def write(out, meta, rows, shapes):
    rows = [dict(r) for r in rows]
    finish(rows, shapes)
    doc = {"meta": meta, "shapes": shapes, "points": rows}
    tmp = os.path.join(out, "sparse.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, os.path.join(out, "sparse.json"))
    with open(os.path.join(out, "sparse.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r, gpu=meta.get("gpu"), date=meta.get("date"),
                            tessel_families=" ".join(r.get("tessel_families") or [])))
    return rows


# ------------------------------------------------------------------------------------------------
# Report.


def fmt_x(v):
    return "-" if v is None else "%.2fx" % v


def fmt_ms(v):
    return "-" if v is None else "%.4f" % v


def crossover(series, method):
    """The highest density at which `method` beats dense cuBLAS ("none" if at none)."""
    beats = [r["density"] for r in series if (r.get("speedup_" + method) or 0) > 1]
    return "%g" % max(beats) if beats else ("none" if any(r.get("speedup_" + method) for r in series) else "-")


def render(args):
    """Merges runs (a later run's row replaces an earlier one's), writes the tables and plot."""
    meta, shapes, rows = None, {}, {}
    for path in args.render:
        with open(path) as f:
            run_doc = json.load(f)
        meta = meta or dict(run_doc["meta"])
        for s in run_doc["shapes"]:
            shapes[s["key"]] = s
        for r in run_doc["points"]:
            rows.pop(r["id"], None)
            rows[r["id"]] = r
    meta["merged_from"] = args.render
    rows = write(args.out, meta, list(rows.values()), list(shapes.values()))
    ref_name = "dense cuBLAS" if any(r.get("dense_ms") for r in rows) else None
    lines = ["# Block-sparse GEMMs: %s, %s, %s, L2 %s" % (meta.get("gpu"), meta.get("date"), meta.get("dtype"),
                                                            meta.get("l2")), ""]
    lines += ["Timing: %s. Speedup = dense cuBLAS time / the method's time at the same M, K, N (> 1: faster "
              "than dense). Tessel prunes its own weight; the PyTorch baselines use a random block mask of the "
              "same block shape and density (same count of non-zero blocks). %s; PyTorch %s (CUDA %s); cuSPARSELt %s." % (
                  meta.get("timing"), meta.get("tessel_version"), meta.get("torch"), meta.get("cuda"),
                  meta.get("cusparselt")), ""]
    untimed = [r for r in rows if not any(r.get(m + "_ms") for m in [m for m, _ in METHODS] + ["semi"])]
    if untimed:
        lines += ["%d of %d points have no time on either side: a --time-budget cut them off, or they failed (see "
                  "below)." % (len(untimed), len(rows)), ""]
    if not ref_name:
        lines += ["No dense cuBLAS times in these runs (--no-torch): the tables below give Tessel block-sparse "
                  "against Tessel dense only.", ""]
    block_rows = [r for r in rows if r["pattern"] == "block"]
    lines += targets(block_rows, rows)
    lines += policy_section(block_rows)
    for key in dict.fromkeys(r["key"] for r in rows):
        lines += shape_section(key, shapes.get(key, {}), [r for r in rows if r["key"] == key])
    lines += failures(rows, shapes)
    lines += kernels_ran(rows, shapes)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(args.out, rows, shapes, meta)


def targets(block_rows, rows):
    """The issue's targets, each with what these runs say."""
    out = ["## Targets", ""]
    large = [r for r in block_rows if r["family"] in LARGE_FAMILIES and r["block"] == 64]
    at90 = [r for r in large if abs(r["density"] - 0.1) < 1e-9]
    if any(r.get("speedup_tessel") for r in at90):
        parts = ["%s %s" % (r["key"], fmt_x(r.get("speedup_tessel"))) for r in at90]
        ok = all((r.get("speedup_tessel") or 0) >= 4.5 for r in at90)
        out.append("- Block-sparse 64x64 at 90%% sparsity >= 4.5x dense cuBLAS on large GEMMs (LLaMA-7B): %s -- %s"
                   % ("met" if ok else "not met", ", ".join(parts)))
    else:
        out.append("- Block-sparse 64x64 at 90% sparsity >= 4.5x dense cuBLAS on large GEMMs: no such point measured")
    if any(r.get("speedup_tessel") for r in large):
        parts, ok = [], True
        for key in dict.fromkeys(r["key"] for r in large):
            series = [r for r in large if r["key"] == key]
            upto = [r for r in series if r["density"] <= 0.5 + 1e-9 and r.get("speedup_tessel")]
            faster = sum(1 for r in upto if r["speedup_tessel"] > 1)
            parts.append("%s crossover %s, faster at %d of %d densities <= 0.5" % (
                key, crossover(series, "tessel"), faster, len(upto)))
            ok = ok and any(abs(r["density"] - 0.5) < 1e-9 for r in upto) and faster == len(upto)
        out.append("- Block-sparse 64x64 faster than dense cuBLAS from at most 50%% sparsity (every density <= 0.5, "
                   "0.5 measured) on large GEMMs: %s -- %s" % ("met" if ok else "not met", "; ".join(parts)))
    else:
        out.append("- Block-sparse 64x64 faster than dense cuBLAS from at most 50% sparsity: not measured")
    for base, label in (("bsr_triton", "PyTorch's block-sparse kernel (Triton bsr_dense_mm)"),
                        ("torch_bsr_mm", "torch.sparse.mm on a BSR tensor"),
                        ("cusparse_bsr", "cuSPARSE BSR (SpMM, or fp32 bsrmm where SpMM refuses)"),
                        ("cusparse_bell", "cuSPARSE Blocked-ELL (not in the issue's targets)")):
        both = [r for r in block_rows if r.get("tessel_ms") and r.get(base + "_ms")]
        at = sum(1 for r in both if r["tessel_ms"] <= r[base + "_ms"] * (1 + TIE))
        out.append("- At or ahead of %s at every density (within %d%%): %s -- %d of %d points" % (
            label, round(100 * TIE), ("met" if at == len(both) else "not met") if both else "no points", at, len(both)))
    nm_rows = [r for r in rows if r["pattern"] == "2:4"]
    semi = [r for r in nm_rows if r.get("speedup_semi")]
    best = ", ".join("%s %s (%s)" % (r["key"], fmt_x(r["speedup_semi"]), r.get("semi_backend")) for r in semi)
    # Tessel's 2:4 kernel: the model's pick, or the forced 2:4 kernel where the pick was dense.
    def nm_ms(r):
        if r.get("tessel_kind") == "nm_sparse":
            return r.get("tessel_ms")
        return r.get("tessel_forced_sparse_ms") if r.get("tessel_forced_kind") == "nm_sparse" else None
    measured = [(r, nm_ms(r)) for r in nm_rows if nm_ms(r) and r.get("dense_ms")]
    ok = measured and all(r["dense_ms"] / t >= 1.35 for r, t in measured)
    out.append("- 2:4 >= 1.35x dense cuBLAS on large GEMMs: %s -- %s" % (
        ("met" if ok else "not met") if measured else "not measured",
        "; ".join("%s %s" % (r["key"], fmt_x(r["dense_ms"] / t)) for r, t in measured) or "no Tessel 2:4 time"))
    ahead = [(r, t) for r, t in measured if r.get("semi_ms")]
    out.append("- 2:4 at or ahead of PyTorch's 2:4 kernels (within %d%%): %s -- %s" % (
        round(100 * TIE), ("met" if all(t <= r["semi_ms"] * (1 + TIE) for r, t in ahead) else "not met") if ahead else "not measured",
        "; ".join("%s Tessel %s ms vs %s %s ms" % (r["key"], fmt_ms(t), r.get("semi_backend"), fmt_ms(r["semi_ms"])) for r, t in ahead)
        or "no pair"))
    out.append("  (PyTorch's 2:4 over dense cuBLAS: %s)" % (best or "not measured"))
    judged = [r for r in block_rows if r.get("policy_verdict") in ("faster", "slower", "slower (inferred)")]
    right = sum(1 for r in judged if r["policy_verdict"] == "faster")
    out.append("- Cost model picks the faster of dense and sparse on >= 90%% of points: %s -- %d of %d judged "
               "points (%d unjudged, see below)" % (
                   ("met" if right >= 0.9 * len(judged) else "not met") if judged else "no judged points",
                   right, len(judged), sum(1 for r in block_rows if r.get("policy_verdict") == "unjudged")))
    return out + [""]


def policy_section(block_rows):
    timed = [r for r in block_rows if r.get("policy_verdict")]
    out = ["## The cost model's choice", ""]
    if not timed:
        return out + ["No point has both a Tessel time and a Tessel-dense time.", ""]
    judged = [r for r in timed if r["policy_verdict"] != "unjudged"]
    right = sum(1 for r in judged if r["policy_verdict"] == "faster")
    out.append("Cost model picked the faster of Tessel dense and Tessel sparse: %d of %d points (ties within %d%% "
               "count as right). Picked block_sparse: %d (its time against the dense model's); picked dense: %d, "
               "of them %d judged against a forced block-sparse run or inferred from a faster block-sparse run at a "
               "higher density, %d unjudged (no block-sparse time at that point)." % (
                   right, len(judged), round(100 * TIE),
                   sum(1 for r in timed if r["policy_pick"] == "block_sparse"),
                   sum(1 for r in timed if r["policy_pick"] == "dense"),
                   sum(1 for r in judged if r["policy_pick"] == "dense"),
                   sum(1 for r in timed if r["policy_verdict"] == "unjudged")))
    wrong = [r for r in judged if r["policy_verdict"] != "faster"]
    if wrong:
        out += ["", "The wrong picks (predicted: explain's comparison of the two kernels; break-even: the density "
                "where the model puts them equal):", "",
                "| point | picked | Tessel ms | Tessel dense ms | forced sparse ms | predicted sparse / dense ms | "
                "kernel blocks @ density | break-even | verdict |", "|---|---|---|---|---|---|---|---|---|"]
        for r in wrong:
            out.append("| %s | %s | %s | %s | %s | %s / %s | %s @ %s | %s | %s |" % (
                r["id"], r["policy_pick"], fmt_ms(r.get("tessel_ms")), fmt_ms(r.get("tessel_dense_ms")),
                fmt_ms(r.get("tessel_forced_sparse_ms")), fmt_ms(r.get("tessel_predicted_sparse_ms")),
                fmt_ms(r.get("tessel_predicted_dense_ms")), r.get("tessel_kernel_block") or "-",
                sweep.fmt(r.get("tessel_kernel_density"), "%.3f"), sweep.fmt(r.get("tessel_breakeven_density"), "%.3f"),
                r["policy_verdict"]))
    return out + [""]


def shape_section(key, shape, rs):
    s0 = rs[0]
    out = ["## %s (%s): M=%d K=%d N=%d, %s" % (key, "MatMul, w [K, N]" if s0["layout"] == "kn" else
                                               "Gemm transB=1, w [N, K]", s0["m"], s0["k"], s0["n"], s0["what"]), ""]
    dense_ms, t_dense = shape.get("dense_ms"), shape.get("tessel_dense_ms")
    out.append("Dense cuBLAS %s ms; Tessel dense %s ms (%s of cuBLAS's speed, kernel %s)." % (
        fmt_ms(dense_ms), fmt_ms(t_dense), fmt_x(dense_ms / t_dense if dense_ms and t_dense else None),
        " ".join(shape.get("tessel_dense_families") or []) or "-"))
    out.append("")
    block = [r for r in rs if r["pattern"] == "block"]
    if block:
        out += ["Speedups over dense cuBLAS; Tessel's kernel blocks and the weight's density at them (explain; a "
                "b x b pattern seen through other tiles is denser); vs Tessel dense = Tessel dense ms / Tessel ms; "
                "a baseline's variant in brackets where it is not the point's dtype.", "",
                "| block | density | Tessel ms (kind) | kernel blocks @ density | vs Tessel dense | " +
                " | ".join(label for _, label in METHODS) + " | policy |", "|" + "---|" * (6 + len(METHODS))]
        for r in sorted(block, key=lambda r: (r["block"], -r["density"])):
            ok = "" if r.get("tessel_correct") or r.get("tessel_status") is None else " NOT CORRECT"
            cells = []
            for m, _ in METHODS:
                variant = r.get(m + "_dtype")
                cells.append(fmt_x(r.get("speedup_" + m)) +
                             ("" if not variant or variant.split()[0] == r["dtype"] else " (%s)" % variant))
            out.append("| %d | %g | %s (%s)%s | %s @ %s | %s | %s | %s |" % (
                r["block"], r["density"], fmt_ms(r.get("tessel_ms")), r.get("tessel_kind") or "-", ok,
                r.get("tessel_kernel_block") or "-", sweep.fmt(r.get("tessel_kernel_density"), "%.3f"),
                fmt_x(r.get("tessel_over_tessel_dense")), " | ".join(cells), r.get("policy_verdict") or "-"))
        blocks = sorted({r["block"] for r in block})
        out += ["", "Crossover density (the highest density at which the method beats dense cuBLAS; - = not measured):",
                "", "| method | " + " | ".join("b%d" % b for b in blocks) + " |", "|---|" + "---|" * len(blocks)]
        for m, label in METHODS:
            out.append("| %s | %s |" % (label, " | ".join(crossover([r for r in block if r["block"] == b], m)
                                                          for b in blocks)))
        out.append("")
    for r in (r for r in rs if r["pattern"] == "2:4"):
        out.append("2:4: cuSPARSELt %s ms (%s), CUTLASS %s ms (%s); Tessel %s ms (%s, picked %s, correct %s), "
                   "forced 2:4 %s ms (%s), Tessel dense %s ms." % (
            fmt_ms(r.get("semi_cusparselt_ms")), fmt_x(dense_ms / r["semi_cusparselt_ms"] if dense_ms and r.get(
                "semi_cusparselt_ms") else None), fmt_ms(r.get("semi_cutlass_ms")),
            fmt_x(dense_ms / r["semi_cutlass_ms"] if dense_ms and r.get("semi_cutlass_ms") else None),
            fmt_ms(r.get("tessel_ms")), fmt_x(dense_ms / r["tessel_ms"] if dense_ms and r.get("tessel_ms") else None),
            r.get("tessel_kind"), r.get("tessel_correct"), fmt_ms(r.get("tessel_forced_sparse_ms")),
            fmt_x(dense_ms / r["tessel_forced_sparse_ms"] if dense_ms and r.get("tessel_forced_sparse_ms") else None),
            fmt_ms(r.get("tessel_dense_ms"))))
        out.append("")
    return out


def failures(rows, shapes):
    out = []
    bad = [s for s in shapes.values() if s.get("tessel_dense_status") not in (None, 0) or
           (s.get("tessel_dense_status") == 0 and not s.get("tessel_dense_correct"))]
    bad_rows = [r for r in rows if r["pattern"] == "block" and r.get("tessel_status") is not None
                and not r.get("tessel_correct")]
    if bad or bad_rows:
        out += ["## Tessel not compiled or not correct (%d)" % (len(bad) + len(bad_rows)), ""]
        for s in bad:
            out.append("- %s: status %s: %s" % (s["id"], s.get("tessel_dense_status"), last_line(s.get("tessel_dense_log"))))
        for r in bad_rows:
            out.append("- %s: status %s: %s" % (r["id"], r.get("tessel_status"), last_line(r.get("tessel_log"))))
        out.append("")
    off = [(r["id"], b, r[b + "_rel_err"]) for r in rows for b in BASELINES if (r.get(b + "_rel_err") or 0) > 0.02]
    if off:
        out += ["## Baseline outputs that differ from cuBLAS on the same weight by more than 2% (relative L2)", ""]
        out += ["- %s %s: %.3g" % o for o in off] + [""]
    counts = {}
    for r in rows:
        for b in BASELINES + ("torch", "dense"):
            e = r.get(b + "_error")
            if e:
                msg = re.sub(r"\d+", "N", e)[:160]
                counts.setdefault((b, msg), []).append(r["id"])
    if counts:
        out += ["## Baseline errors (a baseline that failed at some points; digits shown as N)", "",
                "| baseline | error | points |", "|---|---|---|"]
        for (b, msg), ids in sorted(counts.items()):
            out.append("| %s | %s | %d (e.g. %s) |" % (b, msg.replace("|", "/"), len(ids), ids[0]))
        out.append("")
    return out


def kernels_ran(rows, shapes):
    """What each PyTorch entry point launched (torch.profiler over one call), distinct sets."""
    seen = {}
    for r in list(rows) + list(shapes.values()):
        for b in ("dense",) + BASELINES:
            ks = r.get(b + "_kernels")
            if ks:
                seen.setdefault(b, {}).setdefault(" + ".join(ks), 0)
                seen[b][" + ".join(ks)] += 1
    if not seen:
        return []
    out = ["## What each PyTorch baseline ran (GPU kernels of one call)", ""]
    for b, sets in seen.items():
        for ks, n in sorted(sets.items(), key=lambda kv: -kv[1])[:4]:
            out.append("- %s (%d): `%s`" % (b, n, ks))
    return out + [""]


def plot(out, rows, shapes, meta):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        print("matplotlib is not installed: no speedup.png (sparse.csv and report.md have the numbers)",
              file=sys.stderr)
        return
    keys = list(dict.fromkeys(r["key"] for r in rows))
    cols = min(3, len(keys))
    nrows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.5 * cols, 4.2 * nrows), squeeze=False)
    have_cublas = any(r.get("dense_ms") for r in rows)
    colors = {m: "C%d" % i for i, (m, _) in enumerate(METHODS)}
    styles = ["-", "--", ":", "-."]
    for ax, key in zip(axes.flat, keys):
        rs = [r for r in rows if r["key"] == key]
        blocks = sorted({r["block"] for r in rs if r["pattern"] == "block"})
        shape = shapes.get(key, {})
        for m, label in METHODS:
            for i, b in enumerate(blocks):
                pts = []
                for r in sorted((r for r in rs if r["pattern"] == "block" and r["block"] == b), key=lambda r: r["density"]):
                    ref = r.get("dense_ms") if have_cublas else r.get("tessel_dense_ms")
                    if ref and r.get(m + "_ms"):
                        pts.append((r["density"], ref / r[m + "_ms"]))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[m], ls=styles[i % len(styles)],
                            marker="o", ms=3, label="%s b%d" % (label, b))
        if have_cublas and shape.get("dense_ms") and shape.get("tessel_dense_ms"):
            ax.axhline(shape["dense_ms"] / shape["tessel_dense_ms"], color="C0", lw=0.8, ls=(0, (1, 3)),
                       label="Tessel dense")
        for r in rs:
            if r["pattern"] == "2:4" and r.get("speedup_semi"):
                ax.plot([0.5], [r["speedup_semi"]], "k*", ms=9, label="2:4 (%s)" % r.get("semi_backend"))
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Ticks at the measured densities and at 1-2-5 speedups, written plainly.
        densities = sorted({r["density"] for r in rs})
        ax.xaxis.set_major_locator(ticker.FixedLocator(densities))
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: "%g" % v))
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(ticker.NullLocator())
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: "%gx" % v))
        ax.set_title("%s  M=%d K=%d N=%d" % (key, rs[0]["m"], rs[0]["k"], rs[0]["n"]), fontsize=9)
        ax.set_xlabel("density (fraction of non-zero blocks)")
        ax.set_ylabel("speedup over " + ("dense cuBLAS" if have_cublas else "Tessel dense"))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle("Block-sparse GEMM, %s, %s, %s, L2 %s" % (meta.get("gpu"), meta.get("date"), meta.get("dtype"),
                                                            meta.get("l2")))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "speedup.png"), dpi=110)


# ------------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"),
                   help="the tessel binary (default: dist/tessel/bin/tessel)")
    p.add_argument("--hw", help="spec to schedule and explain for (default: hw_specs/nvidia-h100-sxm.json for "
                                "cuda; a quick probe of this machine for cpu)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: a dry run of the pipeline on Tessel's CPU backend (with --no-torch)")
    p.add_argument("--dtype", choices=["f16", "bf16", "f32"], help="default f16 on cuda, f32 on cpu")
    p.add_argument("--out", default=os.environ.get("OUT", "sparse-out"), help="results (default: $OUT or sparse-out)")
    p.add_argument("--work", default="/tmp/tessel-sparse", help="models, kernel caches, reports (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="shapes %s, blocks %s (densities as --densities)" % (" ".join(QUICK_SHAPES), QUICK_BLOCKS))
    p.add_argument("--only-shapes", nargs="+", metavar="SHAPE", help="shape ids or families (--list shows them)")
    p.add_argument("--densities", nargs="+", type=float, metavar="D", help="default %s" % DENSITIES)
    p.add_argument("--blocks", nargs="+", type=int, metavar="B", help="square block sides; default %s" % BLOCKS)
    p.add_argument("--weight-layout", choices=["kn", "nk", "both"], default="kn",
                   help="kn: MatMul with w [K, N]; nk: Gemm transB=1 with w [N, K] (exported linear layers)")
    p.add_argument("--nm", action="store_true", help="add a 2:4 point per shape (Tessel and PyTorch's 2:4 kernels)")
    p.add_argument("--nm-only", action="store_true", help="only the 2:4 points (and the dense references)")
    p.add_argument("--scale", type=int, default=1, help="divide M, K, N by this (a small dry run)")
    p.add_argument("--force-sparse-args", default="--sparse-kernels block_sparse",
                   help="extra `tessel run`/`tessel explain` arguments that force the block-sparse kernel: every "
                        "block point also runs with them, so that a dense pick can be judged (default: "
                        "'--sparse-kernels block_sparse'; '' to skip the forced runs)")
    p.add_argument("--tessel-args", default="",
                   help="extra arguments for every `tessel run` and `tessel explain` (e.g. '--tune 6': the dense and "
                        "block-sparse kernels measured, the faster kept; explain shares run's --cache); use with "
                        "--jobs 1 so that measurements do not overlap")
    p.add_argument("--list", action="store_true", help="print the points and exit")
    p.add_argument("--write-models", metavar="DIR", help="write the Tessel models into DIR and exit")
    p.add_argument("--render", nargs="+", metavar="SPARSE_JSON", help="merge runs; write report.md and speedup.png")
    p.add_argument("--repeats", type=int, default=30, help="timed replays per measurement (default: 30)")
    p.add_argument("--time-per-point", type=float, default=0.5,
                   help="seconds of Tessel's timed replays to aim for (fewer replays of slow code; default 0.5)")
    p.add_argument("--jobs", type=int, default=max(2, (os.cpu_count() or 4) // 2),
                   help="Tessel processes at once (phase A compiles, phase B preparation)")
    p.add_argument("--interp-threads", type=int, default=2, help="interpreter threads per Tessel check")
    p.add_argument("--torch-workers", type=int, default=2, help="PyTorch worker processes (shapes split among them)")
    p.add_argument("--tessel-timeout", type=int, default=300, help="seconds per Tessel process")
    p.add_argument("--time-budget", type=float, default=1e9,
                   help="seconds: after this no model is compiled and nothing more is timed; the results so far "
                        "are written")
    p.add_argument("--cold-l2", action="store_true", help="flush the L2 before every timed replay, both sides")
    p.add_argument("--no-torch", action="store_true", help="Tessel only (no PyTorch baselines)")
    p.add_argument("--seed", type=int, default=0, help="PyTorch side: inputs, weights and block masks")
    p.add_argument("--time-torch", metavar="PLAN", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.time_torch:
        torch_worker(args.time_torch)
        return
    if args.render:
        os.makedirs(args.out, exist_ok=True)
        render(args)
        return
    args.dtype = args.dtype or ("f16" if args.device == "cuda" else "f32")
    if args.device == "cpu" and not args.no_torch:
        fail("the PyTorch baselines run on the GPU only: with --device cpu pass --no-torch")
    if args.scale < 1:
        fail("--scale must be >= 1")
    points, dense = select_points(args)
    if args.list:
        list_points(points, dense)
        return
    if args.write_models:
        models = tessel_models(points, dense, args)
        write_models(models, args.write_models)
        print("wrote %d models to %s" % (len([m for m in models if not m[0].endswith(".forced")]), args.write_models))
        return
    run(args)


if __name__ == "__main__":
    main()
