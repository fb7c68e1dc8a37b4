#!/usr/bin/env python3
"""Tessel called from Python on CUDA tensors: zero-copy, on the caller's stream.

For each model (a torch module, exported through tessel.compile), on one GPU in one process:

* correctness: the compiled model against the interpreter (`Compiled.check`, the host path), and
  the device path's output (the caller's tensors read and written in place, queued on the
  caller's stream) against the host path's and against eager PyTorch;
* GPU time, one method for every row (../timing/gpu_timing.py: the callable captured in a CUDA
  graph with torch.cuda.graph, replays timed between events behind a spin, warm L2): eager
  PyTorch, torch.compile (default mode), and Tessel called from Python (`m(x)`, captured the same
  way -- possible only because the call queues its kernels on the caller's stream without
  waiting); beside them Tessel's own timing of the same executable (`Compiled.time`, C++);
* host cost per call: wall time of 100 back-to-back calls without a graph, then one wait,
  divided by 100 (launch overhead included; not GPU time).

    python3 experiments/python_interop/run_interop.py --out DIR [--models mlp,bert2,resnet50,...]

Writes DIR/interop.json and DIR/interop.csv, one row per model, and prints a table. Needs the GPU
machine (PyTorch, torchvision, transformers) and the `tessel` package on PYTHONPATH.
"""
import argparse
import csv
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments/timing"))


def models(torch):
    """name -> (module builder, example input builder); f16, random weights, no downloads."""

    class Mlp(torch.nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.up, self.down, self.norm = torch.nn.Linear(d, h), torch.nn.Linear(h, d), torch.nn.LayerNorm(d)

        def forward(self, x):
            return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))

    def bert2():
        import transformers

        config = transformers.BertConfig(num_hidden_layers=2, attn_implementation="eager")

        class LastHidden(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = transformers.BertModel(config)

            def forward(self, ids):
                return self.bert(input_ids=ids).last_hidden_state

        return LastHidden()

    def resnet50():
        import torchvision

        return torchvision.models.resnet50(weights=None)

    class Linear(torch.nn.Module):  # (f32: the dtype check keeps it f32, see run_model)
        def __init__(self, k, n):
            super().__init__()
            self.fc = torch.nn.Linear(k, n)

        def forward(self, x):
            return self.fc(x)

    return {
        "mlp": (lambda: Mlp(256, 1024), lambda: torch.randn(8, 128, 256, device="cuda").half()),
        "mlp_f32": (lambda: Mlp(256, 1024), lambda: torch.randn(8, 128, 256, device="cuda")),
        "linear_f32": (lambda: Linear(4096, 4096), lambda: torch.randn(4096, 4096, device="cuda")),
        "bert2": (bert2, lambda: torch.randint(0, 30522, (8, 128), device="cuda")),
        "resnet50": (resnet50, lambda: torch.randn(8, 3, 224, 224, device="cuda").half()),
    }


def rel_l2(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def per_call_us(torch, fn, calls=100):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def run_model(torch, tessel, timer, name, build, make_input, log):
    torch.manual_seed(0)
    module = build().cuda().eval()
    x = make_input()
    if x.dtype == torch.half:
        module = module.half()
    row = {"model": name, "input": f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}",
           "weights": str(next(module.parameters()).dtype).replace("torch.", "")}
    t0 = time.perf_counter()
    m = tessel.compile(module, example_inputs=(x,), device="cuda")
    row["compile_s"] = round(time.perf_counter() - t0, 1)
    row["kernels"] = m.report["groups"]
    log(f"{name}: compiled into {row['kernels']} kernels in {row['compile_s']} s")

    checks = m.check(x.cpu())
    row["check_ok"] = all(c["ok"] for c in checks)
    row["check_rel_l2"] = max(c["rel_l2_error"] for c in checks)
    host = m(x.cpu())
    with torch.no_grad():
        eager = module(x)
        y = m(x)
        torch.cuda.synchronize()
        m.synchronize()
        row["device_vs_host_rel_l2"] = rel_l2(y, host)
        row["device_vs_eager_rel_l2"] = rel_l2(y, eager)

        row["eager_ms"] = timer.time(lambda: module(x))["ms"]
        compiled = torch.compile(module)
        compiled(x)
        row["torch_compile_ms"] = timer.time(lambda: compiled(x))["ms"]
        r = timer.time(lambda: m(x))
        row["tessel_python_ms"], row["tessel_python_method"] = r["ms"], r["method"]
        times = m.time(x.cpu(), repeats=timer.repeats)
        row["tessel_own_ms"] = times["median_s"] * 1e3
        row["eager_call_us"] = per_call_us(torch, lambda: module(x))
        row["torch_compile_call_us"] = per_call_us(torch, lambda: compiled(x))
        row["tessel_call_us"] = per_call_us(torch, lambda: m(x))
    row["python_vs_own"] = row["tessel_python_ms"] / row["tessel_own_ms"]
    row["compile_over_tessel"] = row["torch_compile_ms"] / row["tessel_python_ms"]
    log(json.dumps(row))
    return row


def run_models(torch, catalog, names, out, stem, repeats, **meta):
    """run_model for each of `names` (a failure is a row with its error), written to
    OUT/STEM.json (with `meta`, the device and the timing method) and OUT/STEM.csv; the rows."""
    import tessel
    from gpu_timing import GpuTimer

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg):  # (progress on a terminal, the log itself when piped)
        print(msg, file=sys.stderr if sys.stderr.isatty() else sys.stdout, flush=True)

    timer = GpuTimer(torch, cold_l2=False, warmup=5, repeats=repeats)
    rows = []
    for name in names:
        try:
            rows.append(run_model(torch, tessel, timer, name, *catalog[name], log))
        except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end of the run
            rows.append({"model": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"})
            log(f"{name}: {rows[-1]['error']}")
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "l2": timer.l2_state, "repeats": repeats,
            **meta, "rows": rows}
    (out / f"{stem}.json").write_text(json.dumps(meta, indent=1))
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "model", k))
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="mlp,mlp_f32,linear_f32,bert2,resnet50")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    import torch

    rows = run_models(torch, models(torch), args.models.split(","), args.out, "interop", args.repeats)
    print(f"{'model':10} {'ok':4} {'eager':>8} {'compile':>8} {'tessel py':>9} {'tessel C++':>10} {'compile/tessel':>14} "
          f"{'us/call eager':>13} {'tessel':>7}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:10} {r['error']}")
            continue
        print(f"{r['model']:10} {str(r['check_ok']):4} {r['eager_ms']:8.4f} {r['torch_compile_ms']:8.4f} {r['tessel_python_ms']:9.4f} "
              f"{r['tessel_own_ms']:10.4f} {r['compile_over_tessel']:14.2f} {r['eager_call_us']:13.1f} {r['tessel_call_us']:7.1f}")
    ok = [r for r in rows if r.get("check_ok")]
    if ok:
        print("geomean torch.compile / Tessel (from Python):",
              round(statistics.geometric_mean(r["compile_over_tessel"] for r in ok), 3))


if __name__ == "__main__":
    main()
