# usage: prof.py export|profile OUTDIR ROWID...   (run from the repository root on the GPU machine)
import sys, os, json, time, collections
import torch
sys.path.insert(0, "experiments/real_models")
import run_real_models as R
mode, out, ids = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(out, exist_ok=True)
for model in R.MODELS:
    for case in model["cases"]:
        rid = R.case_id(model, case)
        if rid not in ids:
            continue
        t0 = time.time()
        torch.manual_seed(0)
        module = model["build"](torch, "eager").eval().half().cuda()
        torch.manual_seed(1)
        inputs = model["inputs"](torch, case)
        if mode == "export":
            r = R.export_onnx(torch, module, inputs, "%s/%s.onnx" % (out, rid), model["input_names"], ["output"])
            print(rid, "export", r.get("exporter"), "%.1fs" % (time.time() - t0), flush=True)
            continue
        with torch.no_grad():
            torch._dynamo.reset()
            c = torch.compile(module)
            for _ in range(5):
                c(*inputs)
            torch.cuda.synchronize()
            # graph replay time as the suites time it
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                c(*inputs)
            torch.cuda.current_stream().wait_stream(s)
            try:
                with torch.cuda.graph(g):
                    c(*inputs)
                ts = []
                for _ in range(30):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
                ts.sort(); gms = ts[len(ts) // 2]
            except Exception as e:
                gms = None; print(rid, "graph failed", e)
            N = 10
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
                for _ in range(N):
                    c(*inputs)
                torch.cuda.synchronize()
        per = collections.defaultdict(lambda: [0, 0.0])
        for e in p.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                d = per[e.name]; d[0] += 1; d[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        rows = sorted(((v[1] / N, v[0] / N, k) for k, v in per.items()), reverse=True)
        tot = sum(r[0] for r in rows)
        with open("%s/%s.torch.txt" % (out, rid), "w") as f:
            f.write("%s graph median %s ms; kernel sum %.1f us per run\n" % (rid, gms, tot))
            for us, n, k in rows:
                f.write("%9.1f us %5.1f x  %s\n" % (us, n, k[:160]))
        print(rid, "torch.compile graph %s ms, kernel sum %.1f us (%.0fs)" % (gms, tot, time.time() - t0), flush=True)
        del c, module
        R.free_cuda(torch)
