#!/usr/bin/env python3
"""Tensor parallelism on two GPUs of one host, side by side in one run (issue 26's 2-GPU targets).

For the LLaMA-7B MLP (y = x + down(silu(x gate) * (x up)), hidden 4096, FFN 11008, f16) at several
token counts M:
  tessel_1gpu      tessel run --device cuda (one GPU)
  tessel_2gpu      tessel run --device cuda --mesh 2: the plan Tessel's cost model chose
  tessel_megatron  the same with Megatron's plan pinned (gate/up column-parallel, down row-parallel)
  tessel_2gpu_rows_out  the cost model's plan with the output left sharded by rows (y=S0), as a next
                   layer consuming it sharded would take it: no output collective
  torch_1gpu       PyTorch eager on one GPU (cuBLAS), CUDA graph replays
  torch_tp         PyTorch with the same Megatron plan on 2 processes (torch.distributed, NCCL):
                   column-parallel gate/up, row-parallel down, one all-reduce; CUDA graph replays
Every Tessel run is checked against the interpreter first (--check; sampled for large M). All
times are GPU time: CUDA-graph replays between events, L2 warm, the median of --repeats; a 2-GPU
step is the slower device's.

Then NCCL's collectives (all-reduce, all-gather, reduce-scatter over both GPUs) measured through
torch.distributed at several sizes, against what the spec's interconnect level predicts with the
ring formulas of cost_model/collective_cost.h (restated here).

    python3 experiments/distributed/run_tp.py --tessel dist/tessel/bin/tessel --out DIR [--m 2048 8192]

Writes DIR/tp.csv, DIR/collectives.csv and DIR/README.md (tables, the machine).
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HIDDEN, FFN = 4096, 11008
COLL_SIZES = [1, 4, 16, 64, 256]  # MiB; --coll-sizes


def mlp_model(m):
    def w(name, shape, seed):
        return {"name": name, "dtype": "f16", "shape": shape, "init": {"dist": "normal", "mean": 0, "std": 0.02, "seed": seed}}
    return {
        "format": "tessel-model", "version": 1, "name": "llama7b_mlp_m%d" % m, "opset": 23,
        "inputs": [{"name": "x", "dtype": "f16", "shape": [m, HIDDEN]}], "outputs": ["y"],
        "weights": [w("gate_w", [HIDDEN, FFN], 2), w("up_w", [HIDDEN, FFN], 3), w("down_w", [FFN, HIDDEN], 4)],
        "ops": [
            {"name": "gate", "op": "MatMul", "inputs": ["x", "gate_w"], "outputs": ["g"]},
            {"name": "up", "op": "MatMul", "inputs": ["x", "up_w"], "outputs": ["u"]},
            {"name": "gate_sigmoid", "op": "Sigmoid", "inputs": ["g"], "outputs": ["gs"]},
            {"name": "silu", "op": "Mul", "inputs": ["g", "gs"], "outputs": ["a"]},
            {"name": "swiglu", "op": "Mul", "inputs": ["a", "u"], "outputs": ["h"]},
            {"name": "down", "op": "MatMul", "inputs": ["h", "down_w"], "outputs": ["d"]},
            {"name": "residual", "op": "Add", "inputs": ["d", "x"], "outputs": ["y"]},
        ],
    }


def run(cmd, timeout=900):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.time() - t0


def tessel_time(text):
    m = re.search(r"time: ([0-9.]+) ms per step", text)
    if m:
        return float(m.group(1))
    m = re.search(r"median ([0-9.]+) (ms|us|s)\b", text)
    if m:
        return float(m.group(1)) * {"ms": 1, "us": 1e-3, "s": 1e3}[m.group(2)]
    return None


def torch_worker(rank, world, m, repeats, port, queue, sizes):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.manual_seed(0)
    dev = torch.device("cuda", rank)
    f = FFN // world
    x = torch.randn(m, HIDDEN, device=dev, dtype=torch.float16)
    wg = torch.randn(HIDDEN, f, device=dev, dtype=torch.float16) * 0.02
    wu = torch.randn(HIDDEN, f, device=dev, dtype=torch.float16) * 0.02
    wd = torch.randn(f, HIDDEN, device=dev, dtype=torch.float16) * 0.02

    def step():
        g = x @ wg
        h = torch.nn.functional.silu(g) * (x @ wu)
        y = h @ wd
        if world > 1:
            dist.all_reduce(y)
        return y + x

    times = time_graph(torch, step, repeats)
    # Collectives at several sizes (only on the 2-process run).
    coll = []
    if world > 1:
        for mib in sizes:
            n = mib * (1 << 20) // 2
            buf = torch.randn(n, device=dev, dtype=torch.float16)
            out = torch.empty(n * world, device=dev, dtype=torch.float16)
            piece = torch.empty(n // world, device=dev, dtype=torch.float16)
            for name, fn in (("all_reduce", lambda: dist.all_reduce(buf)),
                             ("all_gather", lambda: dist.all_gather_into_tensor(out, buf)),
                             ("reduce_scatter", lambda: dist.reduce_scatter_tensor(piece, buf))):
                t = time_graph(torch, fn, 20)
                coll.append({"collective": name, "mib": mib, "ms": sorted(t)[len(t) // 2]})
    queue.put((rank, times, coll))
    dist.barrier()
    dist.destroy_process_group()


def time_graph(torch, fn, repeats):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out


def torch_run(world, m, repeats, port):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=torch_worker, args=(r, world, m, repeats, port, q, list(COLL_SIZES))) for r in range(world)]
    for p in procs:
        p.start()
    res = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    med = max(sorted(t)[len(t) // 2] for _, t, _ in res)
    coll = [c for r, _, c in res if r == 0]
    return med, coll[0] if coll else []


def predicted_collective_ms(spec, name, mib, world):
    """cost_model/collective_cost.h's ring formulas on the spec's level (restated)."""
    level = spec["interconnect"]["levels"][0]
    fit = level.get("collectives", {}).get(name, level)
    b = mib * (1 << 20)
    p = world
    if name == "all_reduce":
        vol, steps = 2 * (p - 1) / p * b, 2 * (p - 1)
    elif name == "all_gather":  # the piece is b bytes; every device receives the other p - 1
        vol, steps = (p - 1) * b, p - 1
    else:  # reduce_scatter of a b-byte tensor
        vol, steps = (p - 1) / p * b, p - 1
    return 1e3 * (steps * fit["latency_us"] * 1e-6 + vol / (fit["bandwidth_gbps"] * 1e9))


def resolve_spec(tessel, path):
    """The spec at `path` with its "extends" resolved, as Tessel reads it (`tessel hw show --json`)."""
    return json.loads(subprocess.run([tessel, "hw", "show", path, "--json"], check=True, capture_output=True, text=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--m", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--hw", default=os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json"))
    ap.add_argument("--hw2", default=os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm-x2.json"))
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--coll-sizes", type=int, nargs="+", help="MiB of the collectives measured (default 1 4 16 64 256)")
    ap.add_argument("--collectives-only", action="store_true", help="only the collectives (no MLP runs)")
    a = ap.parse_args()
    if a.coll_sizes:
        COLL_SIZES[:] = a.coll_sizes
    os.makedirs(a.out, exist_ok=True)
    import torch
    machine = "%s x %d (torch %s)" % (torch.cuda.get_device_name(0), torch.cuda.device_count(), torch.__version__)
    rows, logs, coll = [], [], []
    port = 29500
    if a.collectives_only:
        _, coll = torch_run(2, 256, 3, port)
        a.m = []
    for m in a.m:
        path = os.path.join(a.out, "mlp_m%d.json" % m)
        json.dump(mlp_model(m), open(path, "w"), indent=1)
        row = {"M": m}
        for key, extra in (("tessel_1gpu", ["--hw", a.hw]),
                           ("tessel_2gpu", ["--mesh", "2", "--hw", a.hw2]),
                           ("tessel_megatron", ["--mesh", "2", "--hw", a.hw2, "--shard", "gate_w=S1 up_w=S1 down_w=S0"]),
                           ("tessel_2gpu_rows_out", ["--mesh", "2", "--hw", a.hw2, "--shard", "y=S0"])):
            rc, text, wall = run([a.tessel, "run", path, "--device", "cuda", "--check", "--time", str(a.repeats)] + extra)
            row[key + "_ms"] = tessel_time(text) if rc == 0 else None
            row[key + "_ok"] = rc == 0
            pm = re.search(r"predicted ([0-9.]+) ms", text)
            if pm:
                row[key + "_predicted_ms"] = float(pm.group(1))
            logs.append("## M=%d %s (exit %s, %.0f s)\n```\n%s\n```\n" % (m, key, rc, wall, text[-4000:]))
            print(key, m, row.get(key + "_ms"), "ok" if rc == 0 else "FAILED", flush=True)
        if not a.skip_torch:
            port += 1
            row["torch_1gpu_ms"], _ = torch_run(1, m, a.repeats, port)
            port += 1
            row["torch_tp_ms"], c = torch_run(2, m, a.repeats, port)
            if not coll:
                coll = c
            print("torch", m, row["torch_1gpu_ms"], row["torch_tp_ms"], flush=True)
        rows.append(row)
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "M", k))
    with open(os.path.join(a.out, "tp.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    spec = resolve_spec(a.tessel, a.hw2)
    for c in coll:
        c["predicted_ms"] = predicted_collective_ms(spec, c["collective"], c["mib"], 2)
        c["measured_over_predicted"] = c["ms"] / c["predicted_ms"]
    if coll:
        with open(os.path.join(a.out, "collectives.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(coll[0].keys()))
            w.writeheader()
            w.writerows(coll)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("# Tensor parallelism on 2 GPUs\n\nMachine: %s. Command: `%s`.\n\n" % (machine, " ".join(sys.argv)))
        f.write("| M | " + " | ".join(k for k in keys if k != "M") + " |\n|" + "---|" * len(keys) + "\n")
        for r in rows:
            f.write("| %d | " % r["M"] + " | ".join(str(r.get(k)) for k in keys if k != "M") + " |\n")
        if coll:
            f.write("\n| collective | MiB | measured ms | predicted ms | measured / predicted |\n|---|---|---|---|---|\n")
            for c in coll:
                f.write("| %s | %d | %.4f | %.4f | %.2f |\n" % (c["collective"], c["mib"], c["ms"], c["predicted_ms"], c["measured_over_predicted"]))
        f.write("\n" + "\n".join(logs))
    print(open(os.path.join(a.out, "README.md")).read()[:3000])


if __name__ == "__main__":
    main()
