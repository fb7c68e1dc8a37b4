#!/usr/bin/python3
"""One baseline measurement of one CPU-suite workload, in a process of its own (run_suite.py runs
one of these per baseline and workload, so that no thread pool of one library, e.g. PyTorch's
spinning OpenMP workers, competes with another's measurement).

  baselines.py eager WID     PyTorch eager (torch.no_grad), workloads.torch_fn
  baselines.py openblas WID  GEMM only: numpy.matmul(out=) -> cblas_sgemm of OpenBLAS
  baselines.py onednn WID    gemm: torch._C._nn.mkldnn_linear on oneDNN tensors (weights packed
                             once); conv_bn_relu: torch.utils.mkldnn.MkldnnConv2d with the BN folded
                             into weights and bias, then ReLU, on oneDNN tensors
  baselines.py halide WID --autoscheduler Adams2019|Mullapudi2016|Li2018
                             the halide/pipelines.py pipeline, autoscheduled, JIT-compiled, checked
                             against PyTorch (relative L2 error), timed through Pipeline.realize

Prints one JSON object on stdout: times_s (every timed run), median_s, and what the baseline is.
Times are wall-clock (time.perf_counter) medians of --repeats calls after --warmup calls, on the
same fresh random inputs as workloads.torch_case (seed 0).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "workloads"))
sys.path.insert(0, os.path.join(HERE, "halide"))

KINDS = ("eager", "openblas", "onednn", "halide")


def applicable(kind, wid):
    """Which baselines exist for which workload."""
    if kind == "openblas":
        return wid == "gemm"
    if kind == "onednn":
        return wid in ("gemm", "conv_bn_relu")
    return True


def timed(fn, warmup, repeats, max_seconds=None, out=None):
    """Seconds of `repeats` calls of fn after `warmup` calls. With max_seconds, a first call
    estimates the time and both counts shrink so that the timed calls take about max_seconds
    (never fewer than 3 timed calls, nor fewer than one warm-up call besides the first)."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    if max_seconds:
        repeats = max(3, min(repeats, int(max_seconds / max(first, 1e-9))))
        warmup = max(0, min(warmup - 1, int(0.25 * max_seconds / max(first, 1e-9))))
    else:
        warmup -= 1
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    if out is not None:
        out["warmup_runs"], out["timed_runs"] = warmup + 1, repeats
    return times


def rel_l2(actual, expected):
    import numpy as np
    a, e = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    return float(np.linalg.norm(a - e) / max(np.linalg.norm(e), 1e-300))


class CaptureStderr:
    """Collects what C++ code writes to file descriptor 2 (Adams2019's progress lines)."""

    def __enter__(self):
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read().decode(errors="replace")
        self.file.close()
        return False


def openblas_info():
    """OpenBLAS's own description of itself, read from the library numpy loaded."""
    import ctypes
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "blas" in line and ".so" in line})
    info = {"libraries": libs}
    for lib in libs:
        if "openblas" in lib:
            try:
                ob = ctypes.CDLL(lib)
                ob.openblas_get_config.restype = ctypes.c_char_p
                ob.openblas_get_corename.restype = ctypes.c_char_p
                info.update(config=ob.openblas_get_config().decode(), core=ob.openblas_get_corename().decode(),
                            threads=ob.openblas_get_num_threads())
            except (OSError, AttributeError):
                pass
    return info


def llc_bytes():
    """The largest cache level's size from sysfs (Halide's MachineParams last_level_cache_size)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            with open(os.path.join(base, index, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        best = max(best, int(text.rstrip("KMG")) * scale)
    return best or (32 << 20)


def onednn_version(torch):
    import re
    m = re.search(r"MKL-DNN (v[0-9.]+)", torch.__config__.show())
    return m.group(1) if m else "?"


def measure(kind, w, args):
    import torch
    import workloads
    torch.set_num_threads(args.threads)
    fn, tensors = workloads.torch_case(w, torch, "cpu", "f32")
    out = {"kind": kind, "id": w.id, "threads": args.threads}

    if kind == "eager":
        out["what"] = "PyTorch %s eager, %d threads (torch.set_num_threads)" % (torch.__version__, args.threads)
        with torch.no_grad():
            out["times_s"] = timed(lambda: fn(tensors), args.warmup, args.repeats, args.max_seconds, out)
        return out

    if kind == "openblas":
        import numpy as np
        a, b = tensors["x"].numpy(), tensors["w"].numpy()
        c = np.empty((a.shape[0], b.shape[1]), np.float32)
        np.matmul(a, b, out=c)
        out["max_abs_diff_vs_torch"] = float(np.abs(c - torch.matmul(tensors["x"], tensors["w"]).numpy()).max())
        out["times_s"] = timed(lambda: np.matmul(a, b, out=c), args.warmup, args.repeats, args.max_seconds, out)
        info = openblas_info()
        out["blas"] = info
        out["what"] = "OpenBLAS sgemm via numpy %s matmul (%s)" % (np.__version__, info.get("config", info["libraries"]))
        return out

    if kind == "onednn":
        import torch.utils.mkldnn as mk
        with torch.no_grad():
            if w.id == "gemm":
                x, wt = tensors["x"], tensors["w"]
                xm, wm = x.to_mkldnn(), wt.t().contiguous().to_mkldnn()
                ref = torch.matmul(x, wt)
                y = torch._C._nn.mkldnn_linear(xm, wm, None)
                out["rel_l2_error_vs_eager"] = rel_l2(y.to_dense().numpy(), ref.numpy())
                out["times_s"] = timed(lambda: torch._C._nn.mkldnn_linear(xm, wm, None), args.warmup, args.repeats,
                                       args.max_seconds, out)
                out["what"] = "oneDNN %s inner product (torch._C._nn.mkldnn_linear), oneDNN tensors in and out" % (
                    onednn_version(torch))
            else:  # conv_bn_relu: BN folded into the convolution's weights and bias
                x, wt, scale, shift = tensors["x"], tensors["w"], tensors["scale"], tensors["shift"]
                conv = torch.nn.Conv2d(wt.shape[1], wt.shape[0], wt.shape[2], padding=wt.shape[2] // 2)
                conv.weight.copy_((wt * scale.view(-1, 1, 1, 1)).contiguous())
                conv.bias.copy_(shift)
                mconv = mk.to_mkldnn(conv.eval())
                xm = x.contiguous().to_mkldnn()
                ref = fn(tensors)
                y = torch.relu(mconv(xm)).to_dense()
                out["rel_l2_error_vs_eager"] = rel_l2(y.numpy(), ref.contiguous().numpy())
                out["times_s"] = timed(lambda: torch.relu(mconv(xm)), args.warmup, args.repeats, args.max_seconds, out)
                out["what"] = ("oneDNN %s convolution (torch.utils.mkldnn.MkldnnConv2d, BN folded into weights "
                               "and bias) + ReLU, oneDNN blocked tensors in and out" % onednn_version(torch))
        return out

    if kind == "halide":
        import numpy as np
        import halide as hl
        import pipelines
        with torch.no_grad():
            torch.set_num_threads(1)  # the reference only; no PyTorch worker threads while Halide runs
            ref = fn(tensors).contiguous().numpy()
        target = hl.get_host_target()
        machine = hl.MachineParams(args.threads, args.llc_bytes, args.balance)
        t0 = time.time()
        built = pipelines.build(w)
        with CaptureStderr() as cap:
            pipe, source = pipelines.schedule(built, args.autoscheduler, target, machine)
        t1 = time.time()
        with CaptureStderr() as cap2:
            pipe.compile_jit(hl.get_jit_target_from_environment())
        t2 = time.time()
        keep = []
        for name, (param, shape) in built.params.items():
            arr = tensors[name].contiguous().numpy()
            if name in built.prepare:
                arr = np.ascontiguousarray(built.prepare[name](arr))
            assert list(arr.shape) == shape, (name, arr.shape, shape)
            keep.append(arr)
            param.set(hl.Buffer(arr.T) if arr.ndim > 1 else hl.Buffer(arr))
        result = np.empty(built.out_shape, np.float32)
        buf = hl.Buffer(result.T) if result.ndim > 1 else hl.Buffer(result)
        pipe.realize(buf)
        got = result.transpose(built.out_layout) if built.out_layout else result
        out["rel_l2_error_vs_eager"] = rel_l2(got, ref)
        out["times_s"] = timed(lambda: pipe.realize(buf), args.warmup, args.repeats, args.max_seconds, out)
        out.update(autoscheduler=args.autoscheduler, autoschedule_s=t1 - t0, jit_compile_s=t2 - t1,
                   machine_params=str(machine), target=str(target), halide_threads=os.environ.get("HL_NUM_THREADS"),
                   schedule_source=source, autoscheduler_log=(cap.text + cap2.text)[-2000:])
        out["what"] = "Halide 14 (%s autoscheduler, MachineParams %s), JIT for %s" % (args.autoscheduler, machine, target)
        return out
    raise ValueError(kind)


def main():
    # Libraries print to stdout (Halide's warnings): send fd 1 to stderr, keep the JSON's own channel.
    sys.stdout.flush()
    result_fd = os.dup(1)
    os.dup2(2, 1)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=KINDS)
    p.add_argument("workload")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--max-seconds", type=float, default=None,
                   help="shrink repeats (to >= 3) so that the timed runs take about this long")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--autoscheduler", default="Adams2019")
    p.add_argument("--llc-bytes", type=int, default=llc_bytes(),
                   help="MachineParams last_level_cache_size (default: this machine's largest cache)")
    p.add_argument("--balance", type=int, default=40, help="MachineParams balance (Halide's default 40)")
    args = p.parse_args()
    import workloads
    w = next((x for x in workloads.cpu_suite() if x.id == args.workload), None)
    if w is None:
        sys.exit("unknown CPU-suite workload %r" % args.workload)
    if not applicable(args.kind, w.id):
        sys.exit("no %s baseline for %s" % (args.kind, w.id))
    out = measure(args.kind, w, args)
    out["median_s"] = statistics.median(out["times_s"])
    out["min_s"] = min(out["times_s"])
    sys.stdout.flush()
    with os.fdopen(result_fd, "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
