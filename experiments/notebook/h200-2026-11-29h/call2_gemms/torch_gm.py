# cuBLAS (torch eager ops in a CUDA graph) for each tmp_diag/gm model: addmm alone and the whole op.
import json, sys, glob, os, torch
def t(fn, n=50):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(10): fn()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 10)
    ts.sort(); return ts[len(ts) // 2] * 1000
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    m = json.load(open(path)); M, K = m["inputs"][0]["shape"]; N = m["weights"][0]["shape"][1]
    ops = [o["op"] for o in m["ops"]]
    x = torch.randn(M, K, device="cuda", dtype=torch.half); w = torch.randn(K, N, device="cuda", dtype=torch.half) * 0.03
    b = torch.randn(N, device="cuda", dtype=torch.half); r = torch.randn(M, N, device="cuda", dtype=torch.half)
    mm = t(lambda: torch.mm(x, w)); am = t(lambda: torch.addmm(b, x, w))
    def whole():
        y = torch.addmm(b, x, w) if "Add" in ops else torch.mm(x, w)
        if "Gelu" in ops: y = torch.nn.functional.gelu(y)
        if ops.count("Add") > 1: y = y + r
        return y
    wh = t(whole)
    print("%-22s M=%d K=%d N=%d  mm %.2f us  addmm %.2f us  whole(eager ops) %.2f us" % (os.path.basename(path)[:-5], M, K, N, mm, am, wh), flush=True)
