#!/usr/bin/env python3
"""f32 contractions on the GPU (the simt family: kernels/cuda/README.md): Tessel against eager
PyTorch (cuBLAS / cuDNN in f32 with TF32 off: set here, cuDNN's default is on) and torch.compile, side by side in one
process on one GPU, each timed the same way (../timing/gpu_timing.py: the call captured in a CUDA
graph, replays between events behind a spin, warm L2, median of 30), every Tessel output checked
against the interpreter first. The per-model work is ../python_interop/run_interop.py's run_model.

    python3 experiments/f32_simt/run_f32.py --out DIR [--models linear_4096,...]

Writes DIR/f32.json and DIR/f32.csv and prints a table. Needs the GPU machine (PyTorch,
torchvision, transformers) and the `tessel` package on PYTHONPATH.
"""
import argparse
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments/timing"))
sys.path.insert(0, str(ROOT / "experiments/python_interop"))


def catalog(torch):
    import run_interop

    base = run_interop.models(torch)

    class Linear(torch.nn.Module):
        def __init__(self, k, n):
            super().__init__()
            self.fc = torch.nn.Linear(k, n)

        def forward(self, x):
            return self.fc(x)

    class ConvBnRelu(torch.nn.Module):
        def __init__(self, c, k, stride):
            super().__init__()
            self.conv = torch.nn.Conv2d(c, c, k, stride=stride, padding=k // 2, bias=False)
            self.bn = torch.nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    def linear(m, k, n):
        return (lambda: Linear(k, n), lambda: torch.randn(m, k, device="cuda"))

    def conv(b, c, hw, k, stride):
        return (lambda: ConvBnRelu(c, k, stride), lambda: torch.randn(b, c, hw, hw, device="cuda"))

    out = {
        "linear_4096": linear(4096, 4096, 4096),
        "linear_bert_ffn": linear(1024, 768, 3072),
        "linear_odd": linear(1000, 999, 1001),
        "linear_decode": linear(16, 4096, 4096),
        # (Added with the few-row warp tiles and the K split: rows not 16-byte aligned apart from an
        # odd N; one token; 32 tokens into LLaMA-7B's MLP width; ResNet-50's classifier at batch 8.)
        "linear_odd_k_aligned": linear(1000, 1000, 1001),
        "linear_decode_m1": linear(1, 4096, 4096),
        "linear_decode_m32": linear(32, 4096, 11008),
        "linear_fc_8x2048": linear(8, 2048, 1000),
        "conv3x3_64_56": conv(8, 64, 56, 3, 1),
        "conv3x3_128_28_s2": conv(8, 128, 56, 3, 2),
        "mlp_f32": base["mlp_f32"],
        "bert2_f32": base["bert2"],
    }

    def resnet50():
        import torchvision

        return torchvision.models.resnet50(weights=None)

    out["resnet50_f32"] = (resnet50, lambda: torch.randn(8, 3, 224, 224, device="cuda"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    import torch

    import run_interop

    # f32 on both sides: PyTorch's matmuls keep TF32 off by default, but cuDNN's convolutions use
    # it unless told not to.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    models = catalog(torch)
    names = args.models.split(",") if args.models else list(models)
    rows = run_interop.run_models(torch, models, names, args.out, "f32", args.repeats, tf32=False)
    print(f"{'model':18} {'ok':5} {'eager ms':>9} {'compile ms':>10} {'tessel ms':>9} {'eager/tessel':>12} {'compile/tessel':>14}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:18} {r['error']}")
            continue
        print(f"{r['model']:18} {str(r['check_ok']):5} {r['eager_ms']:9.4f} {r['torch_compile_ms']:10.4f} {r['tessel_python_ms']:9.4f} "
              f"{r['eager_ms'] / r['tessel_python_ms']:12.2f} {r['compile_over_tessel']:14.2f}")
    ok = [r for r in rows if r.get("check_ok")]
    if ok:
        print("geomean eager / Tessel:", round(statistics.geometric_mean(r["eager_ms"] / r["tessel_python_ms"] for r in ok), 3),
              " torch.compile / Tessel:", round(statistics.geometric_mean(r["compile_over_tessel"] for r in ok), 3))


if __name__ == "__main__":
    main()
