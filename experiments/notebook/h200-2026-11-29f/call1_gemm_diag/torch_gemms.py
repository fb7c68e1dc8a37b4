# cuBLAS on the four profiled shapes, as the op sweep's eager baseline (matmul + bias).
import torch
shapes = [(512, 768, 768), (1024, 768, 3072), (6304, 4096, 1024), (2048, 4096, 4096)]  # M, K, N
for m, k, n in shapes:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        c = a @ b
    torch.cuda.synchronize()
