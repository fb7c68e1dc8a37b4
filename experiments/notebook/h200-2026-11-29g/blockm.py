# For each op-sweep model: the wgmma/mma groups' params the binary schedules (roller default policy).
import json, os, subprocess, sys, concurrent.futures as cf
tessel, models, out = sys.argv[1], sys.argv[2], sys.argv[3]
spec = "hw_specs/nvidia-h100-sxm.json"
ids = sorted(f[:-5] for f in os.listdir(models) if f.startswith(("gemm", "conv", "bmm")) and f.endswith(".json"))
def one(i):
    o = f"/tmp/i64/s_{os.path.basename(out)}_{i}.json"
    r = subprocess.run([tessel, "schedule", f"{models}/{i}.json", "--hw", spec, "-o", o], capture_output=True, text=True)
    if r.returncode: return i, None
    s = json.load(open(o))
    ks = [g["kernel"] for g in s["groups"] if g.get("kernel", {}).get("family") in ("wgmma", "mma")]
    return i, [(k["family"], k["params"]) for k in ks]
res = dict(cf.ThreadPoolExecutor(2).map(one, ids))
json.dump(res, open(out, "w"), indent=0)
