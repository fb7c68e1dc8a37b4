#!/usr/bin/env python3
"""The benchmark workloads of ../../../shared/BENCHMARKS.md, defined once for every suite.

Each workload is three things that must agree:
  * a Tessel model (JSON, docs/model-format.md) built with generate_models.Model, which Tessel
    compiles and checks against its interpreter;
  * a PyTorch function over tensors of the same shapes, for the eager / torch.compile / vendor
    library baselines (weights are fresh random tensors: baselines are timed, not checked);
  * the FLOPs and the minimum bytes any implementation must move (inputs and weights read once,
    outputs written once), for the roofline floor.

Usage:
  workloads.py --suite gpu|cpu --out DIR        write DIR/<id>.json for every workload of a suite
  workloads.py --list                           print the workloads with their FLOPs and bytes
Python 3 standard library only, except torch_case(), which imports torch.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import generate_models as gm  # noqa: E402

BYTES = {"f32": 4, "f16": 2, "bf16": 2}


class Workload:
    def __init__(self, wid, description, build, torch_fn, shapes, flops, baselines):
        self.id, self.description = wid, description
        self.build = build          # dtype -> generate_models.Model
        self.torch_fn = torch_fn    # (torch, tensors dict) -> output tensor
        self.shapes = shapes        # name -> shape, in the order of the model's inputs then weights
        self.flops = flops
        self.baselines = baselines  # extra baselines: "cublas", "sdpa", "max_autotune"

    def min_bytes(self, dtype):
        outputs = self.output_elems
        return (sum(math.prod(s) for s in self.shapes.values()) + outputs) * BYTES[dtype]


def _model(name, dtype, opset=20):
    return gm.Model(name, opset, dtype)


# ---- GEMM-class ---------------------------------------------------------------------------------


def gemm(wid, m_, k, n, description):
    def build(dtype):
        m = _model(wid, dtype)
        x = m.input("x", [m_, k])
        m.output(m.op("y", "MatMul", [x, m.normal("w", [k, n], 1.0 / math.sqrt(k))]))
        return m
    w = Workload(wid, description, build, lambda t, v: t.matmul(v["x"], v["w"]),
                 {"x": [m_, k], "w": [k, n]}, 2.0 * m_ * k * n, ["cublas"])
    w.output_elems = m_ * n
    return w


def bert_ffn1(m_, k=768, n=3072):
    def build(dtype):
        m = _model("bert_ffn1", dtype)
        x = m.input("x", [m_, k])
        y = gm.linear(m, "ffn1", x, k, n)
        m.output(m.op("gelu", "Gelu", [y], approximate="none"))
        return m

    def fn(t, v):
        return t.nn.functional.gelu(t.addmm(v["b"], v["x"], v["w"]))
    w = Workload("bert_ffn1", "gelu(X W + b), M=%d K=%d N=%d" % (m_, k, n), build, fn,
                 {"x": [m_, k], "w": [k, n], "b": [n]}, 2.0 * m_ * k * n + 10.0 * m_ * n, ["max_autotune"])
    w.output_elems = m_ * n
    return w


def rmsnorm_gemm(n):
    def build(dtype):
        m = _model("rmsnorm_gemm", dtype, opset=23)
        x = m.input("x", [n, n])
        h = gm.rms_norm(m, "norm", x, n, 1e-5)
        m.output(m.op("y", "MatMul", [h, m.normal("w", [n, n], 1.0 / math.sqrt(n))]))
        return m

    def fn(t, v):
        x = v["x"]
        h = x * t.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * v["scale"]
        return t.matmul(h, v["w"])
    w = Workload("rmsnorm_gemm", "rmsnorm(X) W, %d^3" % n, build, fn,
                 {"x": [n, n], "scale": [n], "w": [n, n]}, 2.0 * n ** 3 + 4.0 * n * n, [])
    w.output_elems = n * n
    return w


def llama_mlp(m_, hidden, ffn):
    def build(dtype):
        m = _model("llama_mlp", dtype)
        x = m.input("x", [m_, hidden])
        gate = gm.linear(m, "gate", x, hidden, ffn, bias=False, std=1.0 / math.sqrt(hidden))
        silu = m.op("silu", "Mul", [gate, m.op("sig", "Sigmoid", [gate])])
        up = gm.linear(m, "up", x, hidden, ffn, bias=False, std=1.0 / math.sqrt(hidden))
        prod = m.op("swiglu", "Mul", [silu, up])
        m.output(gm.linear(m, "down", prod, ffn, hidden, bias=False, std=1.0 / math.sqrt(ffn)))
        return m

    def fn(t, v):
        x = v["x"]
        return t.matmul(t.nn.functional.silu(t.matmul(x, v["w1"])) * t.matmul(x, v["w3"]), v["w2"])
    w = Workload("llama_mlp", "(silu(X W1) * (X W3)) W2, M=%d, %d -> %d -> %d" % (m_, hidden, ffn, hidden),
                 build, fn, {"x": [m_, hidden], "w1": [hidden, ffn], "w3": [hidden, ffn], "w2": [ffn, hidden]},
                 6.0 * m_ * hidden * ffn, [])
    w.output_elems = m_ * hidden
    return w


# ---- Memory-bound -------------------------------------------------------------------------------


def layernorm(rows, cols):
    def build(dtype):
        m = _model("layernorm", dtype)
        x = m.input("x", [rows, cols])
        m.output(gm.layer_norm(m, "ln", x, cols, 1e-5))
        return m

    def fn(t, v):
        return t.nn.functional.layer_norm(v["x"], (cols,), v["scale"], v["bias"], 1e-5)
    w = Workload("layernorm", "%d x %d, affine" % (rows, cols), build, fn,
                 {"x": [rows, cols], "scale": [cols], "bias": [cols]}, 8.0 * rows * cols, [])
    w.output_elems = rows * cols
    return w


def softmax(rows, cols):
    def build(dtype):
        m = _model("softmax", dtype)
        x = m.input("x", [rows, cols])
        m.output(m.op("y", "Softmax", [x], axis=-1))
        return m
    w = Workload("softmax", "%d x %d, last axis" % (rows, cols), build,
                 lambda t, v: t.softmax(v["x"], -1), {"x": [rows, cols]}, 5.0 * rows * cols, [])
    w.output_elems = rows * cols
    return w


def eltwise_chain(n):
    def build(dtype):
        m = _model("eltwise_chain", dtype)
        x, a, b, c = (m.input(s, [n]) for s in "xabc")
        y = m.op("axb", "Add", [m.op("xa", "Mul", [x, a]), b])
        m.output(m.op("y", "Mul", [m.op("gelu", "Gelu", [y], approximate="none"), c]))
        return m

    def fn(t, v):
        return t.nn.functional.gelu(v["x"] * v["a"] + v["b"]) * v["c"]
    w = Workload("eltwise_chain", "gelu(x * a + b) * c, %d elements" % n, build, fn,
                 {s: [n] for s in "xabc"}, 12.0 * n, [])
    w.output_elems = n
    return w


# ---- Convolution, attention, blocks -------------------------------------------------------------


def conv_bn_nhwc(m, prefix, x, c_in, c_out, kernel, stride=1, relu=True):
    """Conv in NHWC (Tessel's `layout` attribute; OHWI weights) with batch norm folded into a
    per-channel scale and shift, then ReLU: what an inference compiler sees after BN folding."""
    pad = kernel // 2
    w = m.normal(prefix + "_w", [c_out, kernel, kernel, c_in], 1.0 / math.sqrt(c_in * kernel * kernel))
    y = m.op(prefix, "Conv", [x, w], kernel_shape=[kernel, kernel], pads=[pad] * 4, strides=[stride, stride],
             dilations=[1, 1], group=1, layout="NHWC")
    y = m.op(prefix + "_scale", "Mul", [y, m.uniform(prefix + "_s", [c_out], 0.9, 1.1)])
    y = m.op(prefix + "_shift", "Add", [y, m.normal(prefix + "_t", [c_out], 0.02)])
    return m.op(prefix + "_relu", "Relu", [y]) if relu else y


def conv_bn_relu(batch, c, hw, layout="NCHW"):
    """conv3x3 + BN + ReLU. NHWC (the GPU suite, as BENCHMARKS.md lists it, and what the tensor-core
    path takes) folds BN into a scale and shift; NCHW keeps ONNX's BatchNormalization."""
    def build(dtype):
        m = _model("conv_bn_relu", dtype, opset=17)
        if layout == "NHWC":
            m.output(conv_bn_nhwc(m, "conv", m.input("x", [batch, hw, hw, c]), c, c, 3))
        else:
            m.output(gm.conv_bn(m, "conv", m.input("x", [batch, c, hw, hw]), c, c, 3))
        return m

    def fn(t, v):
        # Folded BN: a per-channel scale and shift after the convolution (channels_last layout).
        y = t.nn.functional.conv2d(v["x"], v["w"], padding=1)
        return t.relu(y * v["scale"].view(1, -1, 1, 1) + v["shift"].view(1, -1, 1, 1))
    w = Workload("conv_bn_relu", "conv3x3 %d->%d, %dx%d, N=%d, %s, BN, ReLU" % (c, c, hw, hw, batch, layout), build, fn,
                 {"x": [batch, c, hw, hw], "w": [c, c, 3, 3], "scale": [c], "shift": [c]},
                 2.0 * batch * c * c * 9 * hw * hw, ["channels_last"])
    w.output_elems = batch * c * hw * hw
    return w


def attention(b, h, s, d):
    def build(dtype):
        m = _model("attention", dtype)
        q, k, v = (m.input(n, [b, h, s, d]) for n in "qkv")
        kt = m.op("kt", "Transpose", [k], perm=[0, 1, 3, 2])
        scores = m.op("scores", "MatMul", [q, kt])
        scaled = m.op("scaled", "Mul", [scores, m.f32_scalar("scale", 1.0 / math.sqrt(d))])
        probs = m.op("probs", "Softmax", [scaled], axis=-1)
        m.output(m.op("ctx", "MatMul", [probs, v]))
        return m

    def fn(t, v):
        scores = t.matmul(v["q"], v["k"].transpose(-1, -2)) * (1.0 / math.sqrt(d))
        return t.matmul(t.softmax(scores, -1), v["v"])
    w = Workload("attention", "softmax(Q K^T / sqrt(d)) V, B=%d H=%d S=%d D=%d, unfused graph" % (b, h, s, d),
                 build, fn, {n: [b, h, s, d] for n in "qkv"}, 4.0 * b * h * s * s * d, ["sdpa"])
    w.output_elems = b * h * s * d
    return w


class _Args:
    """The generate_models argument namespace for one block."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def bert_layer(batch, seq, hidden=768, heads=12, ffn=3072):
    def build(dtype):
        a = _Args(batch=batch, bert_seq=seq, bert_hidden=hidden, bert_heads=heads, bert_ffn=ffn, dtype=dtype)
        return gm.bert(a, 1, "bert_layer")

    def fn(t, v):
        x = v["hidden"]
        d = hidden // heads

        def heads_of(y):
            return y.view(batch, seq, heads, d).transpose(1, 2)
        q, k, vv = (heads_of(t.addmm(v[n + "_b"], x.view(-1, hidden), v[n + "_w"])) for n in "qkv")
        p = t.softmax(t.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)), -1)
        ctx = t.matmul(p, vv).transpose(1, 2).reshape(-1, hidden)
        h = t.nn.functional.layer_norm(t.addmm(v["o_b"], ctx, v["o_w"]) + x.view(-1, hidden), (hidden,),
                                       v["ln1_s"], v["ln1_b"], 1e-12)
        f = t.addmm(v["f2_b"], t.nn.functional.gelu(t.addmm(v["f1_b"], h, v["f1_w"])), v["f2_w"])
        return t.nn.functional.layer_norm(f + h, (hidden,), v["ln2_s"], v["ln2_b"], 1e-12).view(batch, seq, hidden)
    shapes = {"hidden": [batch, seq, hidden]}
    for n in "qko":
        shapes[n + "_w"], shapes[n + "_b"] = [hidden, hidden], [hidden]
    shapes["v_w"], shapes["v_b"] = [hidden, hidden], [hidden]
    shapes.update({"f1_w": [hidden, ffn], "f1_b": [ffn], "f2_w": [ffn, hidden], "f2_b": [hidden],
                   "ln1_s": [hidden], "ln1_b": [hidden], "ln2_s": [hidden], "ln2_b": [hidden]})
    tokens = batch * seq
    w = Workload("bert_layer", "BERT-base encoder layer, batch %d, seq %d" % (batch, seq), build, fn, shapes,
                 2.0 * tokens * (4 * hidden * hidden + 2 * hidden * ffn) + 4.0 * batch * seq * seq * hidden, [])
    w.output_elems = tokens * hidden
    return w


def resnet_block(batch, image=224, layout="NCHW"):
    """ResNet-50's stage-3 bottleneck (identity shortcut). NHWC folds BN (conv_bn_nhwc)."""
    hw = gm.resnet50_spatial(image)

    def build(dtype):
        m = _model("resnet_block", dtype, opset=17)
        if layout == "NHWC":
            x = m.input("x", [batch, hw, hw, 1024])
            y = conv_bn_nhwc(m, "block_conv1", x, 1024, 256, 1)
            y = conv_bn_nhwc(m, "block_conv2", y, 256, 256, 3)
            y = conv_bn_nhwc(m, "block_conv3", y, 256, 1024, 1, relu=False)
            m.output(m.op("block_relu", "Relu", [m.op("block_add", "Add", [y, x])]))
        else:
            x = m.input("x", [batch, 1024, hw, hw])
            m.output(gm.bottleneck(m, "block", x, 1024, 256, 1024, 1))
        return m

    def fn(t, v):
        def cbr(x, n, pad, relu=True):
            y = t.nn.functional.conv2d(x, v[n + "_w"], padding=pad)
            y = y * v[n + "_s"].view(1, -1, 1, 1) + v[n + "_t"].view(1, -1, 1, 1)
            return t.relu(y) if relu else y
        y = cbr(cbr(cbr(v["x"], "c1", 0), "c2", 1), "c3", 0, relu=False)
        return t.relu(y + v["x"])
    shapes = {"x": [batch, 1024, hw, hw], "c1_w": [256, 1024, 1, 1], "c2_w": [256, 256, 3, 3],
              "c3_w": [1024, 256, 1, 1]}
    for n, c in (("c1", 256), ("c2", 256), ("c3", 1024)):
        shapes[n + "_s"], shapes[n + "_t"] = [c], [c]
    w = Workload("resnet_block", "ResNet-50 bottleneck block (stage 3), batch %d, %s" % (batch, layout), build, fn, shapes,
                 2.0 * batch * hw * hw * (1024 * 256 + 256 * 256 * 9 + 256 * 1024), ["channels_last"])
    w.output_elems = batch * 1024 * hw * hw
    return w


def llama_block(seq, hidden=4096, heads=32, ffn=11008):
    def build(dtype):
        return gm.llama_block(_Args(batch=1, llama_seq=seq, llama_hidden=hidden, llama_heads=heads,
                                    llama_ffn=ffn, dtype=dtype))

    def fn(t, v):
        d = hidden // heads
        x = v["hidden"].view(seq, hidden)

        def rms(y, s):
            return y * t.rsqrt(y.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(y.dtype) * s

        def heads_of(y):
            return y.view(seq, heads, d).transpose(0, 1)
        n1 = rms(x, v["n1"])
        q, k, vv = (heads_of(t.matmul(n1, v[n])) for n in ("wq", "wk", "wv"))
        scores = t.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + v["mask"]
        ctx = t.matmul(t.softmax(scores, -1), vv).transpose(0, 1).reshape(seq, hidden)
        h = x + t.matmul(ctx, v["wo"])
        n2 = rms(h, v["n2"])
        return (h + t.matmul(t.nn.functional.silu(t.matmul(n2, v["w1"])) * t.matmul(n2, v["w3"]), v["w2"])).view(
            1, seq, hidden)
    shapes = {"hidden": [1, seq, hidden], "n1": [hidden], "n2": [hidden], "mask": [seq, seq],
              "wq": [hidden, hidden], "wk": [hidden, hidden], "wv": [hidden, hidden], "wo": [hidden, hidden],
              "w1": [hidden, ffn], "w3": [hidden, ffn], "w2": [ffn, hidden]}
    w = Workload("llama_block", "LLaMA-style decoder block, hidden %d, %d tokens" % (hidden, seq), build, fn, shapes,
                 2.0 * seq * (4 * hidden * hidden + 3 * hidden * ffn) + 4.0 * seq * seq * hidden, [])
    w.output_elems = seq * hidden
    return w


# ---- Suites -------------------------------------------------------------------------------------

def gpu_suite():
    """BENCHMARKS.md's GPU suite (fp16 data, fp32 accumulation)."""
    return [gemm("gemm_4096", 4096, 4096, 4096, "C = A B, 4096 x 4096 x 4096"),
            gemm("gemm_llm_up", 4096, 4096, 11008, "4096 x 4096 -> 11008"),
            gemm("gemm_decode", 16, 4096, 4096, "M=16, K=4096, N=4096 (memory bound)"),
            bert_ffn1(4096), layernorm(8192, 4096), softmax(8192, 4096), rmsnorm_gemm(4096),
            llama_mlp(4096, 4096, 11008), attention(8, 16, 2048, 128), eltwise_chain(1 << 26),
            conv_bn_relu(64, 256, 14, "NHWC"), bert_layer(32, 128), resnet_block(32, layout="NHWC"), llama_block(2048)]


def cpu_suite():
    """BENCHMARKS.md's CPU suite (fp32)."""
    return [gemm("gemm", 1024, 1024, 1024, "C = A B, 1024^3"), bert_ffn1(512), layernorm(4096, 1024),
            softmax(4096, 1024), eltwise_chain(1 << 24), conv_bn_relu(1, 64, 56), bert_layer(1, 128)]


SUITES = {"gpu": (gpu_suite, "f16"), "cpu": (cpu_suite, "f32")}


def torch_case(workload, torch, device, dtype):
    """(fn, tensors) for PyTorch: fresh random tensors of the workload's shapes (scales keep values
    in range: weights ~ 1/sqrt(fan-in), norms' scales ~ 1, the mask causal)."""
    tdtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cpu").manual_seed(0)
    tensors = {}
    for name, shape in workload.shapes.items():
        if name == "mask":
            full = torch.full(shape, -6e4 if dtype != "f32" else -1e9)
            value = torch.triu(full, diagonal=1)
        elif len(shape) == 1 and name not in "xabc":
            value = 1.0 + 0.02 * torch.randn(shape, generator=gen)
        elif len(shape) >= 2 and name not in ("x", "hidden", "q", "k", "v"):
            fan_in = shape[1] * shape[2] * shape[3] if len(shape) == 4 else shape[0]
            value = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
        else:
            value = torch.randn(shape, generator=gen)
        tensors[name] = value.to(device=device, dtype=tdtype)
    if "channels_last" in workload.baselines:
        for name, value in tensors.items():
            if value.dim() == 4:
                tensors[name] = value.contiguous(memory_format=torch.channels_last)
    return (lambda v: workload.torch_fn(torch, v)), tensors


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=sorted(SUITES), default="gpu")
    p.add_argument("--out", help="write <id>.json for every workload of the suite into this directory")
    p.add_argument("--dtype", help="override the suite's dtype (f32, f16, bf16)")
    p.add_argument("--only", nargs="+", help="only these workload ids")
    p.add_argument("--list", action="store_true", help="print the workloads")
    a = p.parse_args()
    suite, dtype = SUITES[a.suite]
    dtype = a.dtype or dtype
    for w in suite():
        if a.only and w.id not in a.only:
            continue
        if a.list or not a.out:
            print("%-14s %-60s %10.3g FLOP %10.3g B" % (w.id, w.description, w.flops, w.min_bytes(dtype)))
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            path = os.path.join(a.out, w.id + ".json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(gm.render(w.build(dtype).document()) + "\n")


if __name__ == "__main__":
    main()
