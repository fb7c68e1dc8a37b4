# cuBLAS (torch.addmm, f16) on the GEMM shapes given as MxKxN, GPU time: a CUDA graph of 20 calls
# replayed, timed with events, median of 15 replays / 20 (L2 warm). Prints "shape us".
import sys, torch
for s in sys.argv[1:]:
    m, k, n = map(int, s.split("x"))
    x = torch.randn(m, k, device="cuda", dtype=torch.float16); w = torch.randn(k, n, device="cuda", dtype=torch.float16) * 0.02
    b = torch.randn(n, device="cuda", dtype=torch.float16)
    for _ in range(3): torch.addmm(b, x, w)
    g = torch.cuda.CUDAGraph(); st = torch.cuda.Stream()
    with torch.cuda.stream(st):
        with torch.cuda.graph(g):
            for _ in range(20): y = torch.addmm(b, x, w)
    torch.cuda.synchronize(); g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(15):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize(); ts.append(e0.elapsed_time(e1) / 20 * 1e3)
    print(s, "%.2f" % sorted(ts)[len(ts) // 2])
