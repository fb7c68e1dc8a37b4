#!/usr/bin/env python3
"""The operator sweep of ../../../shared/BENCHMARKS.md: GPU operator instances taken from the layer
shapes of real model families (Roller's operator benchmark at today's scale).

Every instance is a small Tessel model (generate_models.Model, seeded random weights), a PyTorch
function computing the same thing on fresh random tensors, its useful FLOPs and the minimum bytes
any implementation must move. Shapes come from the published model configurations (see
README_instances.md), not from what Tessel is good at.

  instances.py --list                  one line per instance: id, class, FLOPs, bytes
  instances.py --summary               counts per class, family and dtype
  instances.py --out DIR [--only ID..] write DIR/<id>.json (Tessel models)
Python 3 standard library only at import time; torch is only used inside torch_case / sdpa_case.
"""

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "workloads"))
sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
import workloads as wl  # noqa: E402
import generate_models as gm  # noqa: E402

BYTES = {"f32": 4, "f16": 2, "bf16": 2}
CLASSES = ("gemm", "conv", "row", "attention", "eltwise", "pool")
# Families whose instances also get a bf16 copy (LLMs, transformers, ViT, diffusion, speech).
BF16_FAMILIES = {"bert", "gpt2", "llama7b", "llama70b", "gemma7b", "vit_b16", "vit_l16", "sd_unet",
                 "whisper"}


def _torch_dtype(torch, dtype):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]


class Instance:
    """One operator instance. `proto` holds the dtype-independent parts (see _proto)."""

    def __init__(self, proto, dtype):
        self.proto = proto
        self.cls, self.family = proto["cls"], proto["family"]
        self.dtype = dtype
        self.id = "%s.%s.%s.%s" % (self.cls, self.family, proto["name"], dtype)
        self.description = proto["desc"]
        self.flops = float(proto["flops"])
        self.vendor = proto["vendor"]
        self.nhwc = proto["nhwc"]
        self.min_bytes = self._min_bytes()

    def build(self):
        """The Tessel model, in self.dtype."""
        m = self.proto["build"](self.dtype)
        m.name = self.id.replace(".", "_")
        return m

    def _min_bytes(self):
        m = self.proto["build"](self.dtype)
        elems = sum(math.prod(t["shape"]) for t in m.inputs)
        elems += sum(math.prod(w["shape"]) for w in m.weights if w["dtype"] != "i64")
        return int((elems + self.proto["out_elems"]) * BYTES[self.dtype])

    def _tensors(self, torch, device):
        """Fresh random tensors for every float input and weight of the Tessel model, drawn from the
        same distributions (inputs ~ N(0,1)). NHWC instances: 4-D tensors are made in the Tessel
        layout and permuted to logical NCHW (channels_last strides), as workloads.torch_case does."""
        tdtype = _torch_dtype(torch, self.dtype)
        gen = torch.Generator(device=device).manual_seed(0)  # drawn on the device: fast for GB tensors
        m = self.proto["build"](self.dtype)
        tensors = {}
        for t in m.inputs:
            tensors[t["name"]] = torch.randn(t["shape"], generator=gen, device=device)
        for w in m.weights:
            if w["dtype"] == "i64":
                continue
            shape = w["shape"]
            if "data" in w:
                value = torch.tensor(w["data"], dtype=torch.float32).reshape(shape)
            elif w["init"]["dist"] == "normal":
                value = torch.randn(shape, generator=gen, device=device) * w["init"]["std"] + w["init"]["mean"]
            else:
                lo, hi = w["init"]["low"], w["init"]["high"]
                value = torch.rand(shape, generator=gen, device=device) * (hi - lo) + lo
            tensors[w["name"]] = value
        out = {}
        for name, value in tensors.items():
            value = value.to(device=device, dtype=tdtype)
            if self.nhwc and value.dim() == 4:
                value = value.permute(0, 3, 1, 2)  # logical NCHW, channels_last memory format
            out[name] = value
        extra = self.proto.get("extra")
        if extra:
            out.update(extra(torch, device, tdtype))
        return out

    def torch_case(self, torch, device="cuda"):
        """(fn, tensors): fn(tensors) computes the instance's function in PyTorch."""
        if self.proto.get("workload") is not None:
            w = self.proto["workload"]
            return wl.torch_case(w, torch, device, self.dtype)
        tensors = self._tensors(torch, device)
        fn = self.proto["torch"]
        return (lambda v: fn(torch, v)), tensors

    def sdpa_case(self, torch, device="cuda"):
        """Attention only: (fn, tensors) calling scaled_dot_product_attention; else None."""
        a = self.proto.get("sdpa")
        if a is None:
            return None
        tdtype = _torch_dtype(torch, self.dtype)
        gen = torch.Generator(device=device).manual_seed(0)
        q = torch.randn([a["b"], a["h"], a["sq"], a["d"]], generator=gen, device=device).to(tdtype)
        k = torch.randn([a["b"], a["hkv"], a["skv"], a["d"]], generator=gen, device=device).to(tdtype)
        v = torch.randn([a["b"], a["hkv"], a["skv"], a["d"]], generator=gen, device=device).to(tdtype)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        causal = a["causal"]
        if causal and a["sq"] != a["skv"]:
            # is_causal aligns the mask top-left; a KV cache needs it bottom-right (query i is
            # position S_kv - S_q + i), as the Tessel graph's Trilu(k = S_kv - S_q + 1) does.
            try:
                from torch.nn.attention.bias import causal_lower_right
                mask = causal_lower_right(a["sq"], a["skv"])
            except ImportError:
                mask = torch.ones(a["sq"], a["skv"], dtype=torch.bool, device=device).tril(a["skv"] - a["sq"])
            plain = sdpa

            def sdpa(q_, k_, v_, is_causal=False, **kw):
                return plain(q_, k_, v_, attn_mask=mask, **kw)
        if a["hkv"] != a["h"]:
            def fn(t):
                return sdpa(t["q"], t["k"], t["v"], is_causal=causal, enable_gqa=True)
            try:  # enable_gqa needs torch >= 2.5; older: K/V expanded outside the timed call
                fn({"q": q[:, :, :1], "k": k[:, :, :1], "v": v[:, :, :1]})
            except TypeError:
                g = a["h"] // a["hkv"]
                k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)

                def fn(t):
                    return sdpa(t["q"], t["k"], t["v"], is_causal=causal)
        else:
            def fn(t):
                return sdpa(t["q"], t["k"], t["v"], is_causal=causal)
        return fn, {"q": q, "k": k, "v": v}


def _proto(cls, family, name, desc, flops, out_elems, build, torch_fn=None, vendor=None, nhwc=False,
           extra=None, sdpa=None, workload=None):
    assert cls in CLASSES
    return {"cls": cls, "family": family, "name": name, "desc": desc, "flops": flops,
            "out_elems": out_elems, "build": build, "torch": torch_fn, "vendor": vendor,
            "nhwc": nhwc, "extra": extra, "sdpa": sdpa, "workload": workload}


def _model(name, dtype, opset=20):
    return gm.Model(name, opset, dtype)


# ================================================================================================
# GEMM class


def gemm_plain(family, name, m_, k, n, what):
    """C = A B (reuses workloads.gemm: inputs x [M,K], w [K,N] with std 1/sqrt(K))."""
    w = wl.gemm(name, m_, k, n, what)
    return _proto("gemm", family, name, "%s: [%d,%d] x [%d,%d]" % (what, m_, k, k, n), w.flops,
                  m_ * n, w.build, vendor="cublas", workload=w)


def gemm_epi(family, name, m_, k, n, what, bias=True, act=None, lead=None):
    """y = act(x W + b): MatMul + bias Add + activation (Gelu erf / Gelu tanh / Relu / Sigmoid).
    `lead` gives a batched leading shape of x instead of [M] (e.g. [N,H,W] channels-last)."""
    lead = lead or [m_]
    rows = math.prod(lead)

    def build(dtype):
        m = _model(name, dtype)
        x = m.input("x", lead + [k])
        y = gm.linear(m, "fc", x, k, n, bias, std=1.0 / math.sqrt(k))
        if act == "gelu":
            y = m.op("gelu", "Gelu", [y], approximate="none")
        elif act == "gelu_tanh":
            y = m.op("gelu", "Gelu", [y], approximate="tanh")
        elif act == "relu":
            y = m.op("relu", "Relu", [y])
        elif act == "sigmoid":
            y = m.op("sigmoid", "Sigmoid", [y])
        m.output(y)
        return m

    def fn(t, v):
        y = t.matmul(v["x"], v["fc_w"])
        if bias:
            y = y + v["fc_b"]
        if act == "gelu":
            y = t.nn.functional.gelu(y)
        elif act == "gelu_tanh":
            y = t.nn.functional.gelu(y, approximate="tanh")
        elif act == "relu":
            y = t.relu(y)
        elif act == "sigmoid":
            y = t.sigmoid(y)
        return y
    epi = ("+bias" if bias else "") + ("+" + act if act else "")
    flops = 2.0 * rows * k * n + (rows * n if bias else 0) + ({"gelu": 8, "gelu_tanh": 8, "relu": 1, "sigmoid": 4}
                                                              .get(act, 0) * rows * n)
    return _proto("gemm", family, name, "%s: [%s,%d] x [%d,%d]%s" % (what, ",".join(map(str, lead)), k, k, n, epi),
                  flops, rows * n, build, fn, vendor="cublas")


def gemm_glu(family, name, m_, k, n, what, kind="swiglu"):
    """Gated MLP up-projection with its epilogue: silu(x Wg) * (x Wu) (LLaMA SwiGLU) or
    (x Wu + bu) * gelu(x Wg + bg) (Stable Diffusion GEGLU). Two GEMMs sharing x."""
    def build(dtype):
        m = _model(name, dtype)
        x = m.input("x", [m_, k])
        bias = kind == "geglu"
        g = gm.linear(m, "gate", x, k, n, bias, std=1.0 / math.sqrt(k))
        u = gm.linear(m, "up", x, k, n, bias, std=1.0 / math.sqrt(k))
        if kind == "swiglu":
            act = m.op("silu", "Mul", [g, m.op("sig", "Sigmoid", [g])])
        else:
            act = m.op("gelu", "Gelu", [g], approximate="none")
        m.output(m.op("glu", "Mul", [act, u]))
        return m

    def fn(t, v):
        x = v["x"]
        if kind == "swiglu":
            return t.nn.functional.silu(t.matmul(x, v["gate_w"])) * t.matmul(x, v["up_w"])
        return t.nn.functional.gelu(t.matmul(x, v["gate_w"]) + v["gate_b"]) * (t.matmul(x, v["up_w"]) + v["up_b"])
    return _proto("gemm", family, name, "%s: 2 x [%d,%d] x [%d,%d] + %s" % (what, m_, k, k, n, kind),
                  4.0 * m_ * k * n + 6.0 * m_ * n, m_ * n, build, fn, vendor="cublas")


def bmm(family, name, batch, m_, k, n, what, trans_b=False):
    """Batched GEMM [batch..., M, K] x [batch..., K, N] (trans_b: the second operand stored
    [batch..., N, K] and transposed in the graph, as attention scores / DLRM interaction do)."""
    batch = list(batch)

    def build(dtype):
        mdl = _model(name, dtype)
        a = mdl.input("a", batch + [m_, k])
        if trans_b:
            b = mdl.input("b", batch + [n, k])
            perm = list(range(len(batch))) + [len(batch) + 1, len(batch)]
            b = mdl.op("bt", "Transpose", [b], perm=perm)
        else:
            b = mdl.input("b", batch + [k, n])
        mdl.output(mdl.op("y", "MatMul", [a, b]))
        return mdl

    def fn(t, v):
        return t.matmul(v["a"], v["b"].transpose(-1, -2) if trans_b else v["b"])
    nb = math.prod(batch)
    return _proto("gemm", family, name, "%s: batched %s x [%d,%d] x [%d,%d]%s" % (
        what, "x".join(map(str, batch)), m_, k, k, n, ", B^T" if trans_b else ""),
        2.0 * nb * m_ * k * n, nb * m_ * n, build, fn, vendor="cublas")


# ================================================================================================
# Convolution class


def _conv_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv(family, name, batch, c_in, c_out, hw, k, what, stride=1, pad=None, dil=1, groups=1, layout="NCHW",
         norm="bn", act="relu"):
    """2-D convolution in NCHW (ONNX Conv, BatchNormalization where the model has it) or NHWC
    (Tessel's layout="NHWC", OHWI weights; BN folded into a per-channel Mul + Add as
    workloads.conv_bn_nhwc does). norm: "bn" | "bias" | None; act: "relu" | "relu6" | "silu" |
    "gelu" | None. hw is an int (square) or (H, W)."""
    h, w_ = (hw, hw) if isinstance(hw, int) else hw
    kh, kw = (k, k) if isinstance(k, int) else k
    if pad is None:
        pad = (dil * (kh - 1) // 2, dil * (kw - 1) // 2)
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    oh, ow = _conv_out(h, kh, sh, ph, dil), _conv_out(w_, kw, sw, pw, dil)
    cg = c_in // groups
    nhwc = layout == "NHWC"
    fan_in = cg * kh * kw

    def build(dtype):
        m = _model(name, dtype, opset=17)
        if nhwc:
            x = m.input("x", [batch, h, w_, c_in])
            wt = m.normal("w", [c_out, kh, kw, cg], 1.0 / math.sqrt(fan_in))
        else:
            x = m.input("x", [batch, c_in, h, w_])
            wt = m.normal("w", [c_out, cg, kh, kw], 1.0 / math.sqrt(fan_in))
        ins = [x, wt]
        if norm == "bias":
            ins.append(m.normal("b", [c_out], 0.02))
        attrs = dict(kernel_shape=[kh, kw], pads=[ph, pw, ph, pw], strides=[sh, sw], dilations=[dil, dil],
                     group=groups)
        if nhwc:
            attrs["layout"] = "NHWC"
        y = m.op("conv", "Conv", ins, **attrs)
        if norm == "bn" and nhwc:
            y = m.op("bn_scale", "Mul", [y, m.uniform("s", [c_out], 0.9, 1.1)])
            y = m.op("bn_shift", "Add", [y, m.normal("t", [c_out], 0.02)])
        elif norm == "bn":
            y = m.op("bn", "BatchNormalization", [y, m.uniform("bn_scale", [c_out], 0.9, 1.1),
                                                  m.normal("bn_bias", [c_out], 0.02),
                                                  m.normal("bn_mean", [c_out], 0.02),
                                                  m.uniform("bn_var", [c_out], 0.5, 1.5)],
                     epsilon=1e-5, momentum=0.9)
        if act == "relu":
            y = m.op("relu", "Relu", [y])
        elif act == "relu6":
            y = m.op("relu6", "Clip", [y, m.f32_scalar("lo", 0.0), m.f32_scalar("hi", 6.0)])
        elif act == "silu":
            y = m.op("silu", "Mul", [y, m.op("sig", "Sigmoid", [y])])
        elif act == "gelu":
            y = m.op("gelu", "Gelu", [y], approximate="none")
        m.output(y)
        return m

    def fn(t, v):
        F = t.nn.functional
        y = F.conv2d(v["x"], v["w"], v.get("b"), stride=(sh, sw), padding=(ph, pw), dilation=dil, groups=groups)
        if norm == "bn" and nhwc:
            y = y * v["s"].view(1, -1, 1, 1) + v["t"].view(1, -1, 1, 1)
        elif norm == "bn":
            y = F.batch_norm(y, v["bn_mean"], v["bn_var"], v["bn_scale"], v["bn_bias"], False, 0.0, 1e-5)
        if act == "relu":
            y = t.relu(y)
        elif act == "relu6":
            y = t.clamp(y, 0.0, 6.0)
        elif act == "silu":
            y = F.silu(y)
        elif act == "gelu":
            y = F.gelu(y)
        return y
    out = batch * c_out * oh * ow
    flops = 2.0 * out * fan_in + (2 * out if norm == "bn" else out if norm == "bias" else 0) + (out if act else 0)
    kind = "dw" if groups == c_in and groups > 1 else ("g%d" % groups if groups > 1 else "")
    desc = "%s: conv%dx%d%s/%d%s %d->%d, %dx%d -> %dx%d, N=%d, %s%s%s" % (
        what, kh, kw, (" " + kind) if kind else "", sh, (" dil%d" % dil) if dil > 1 else "", c_in, c_out, h, w_,
        oh, ow, batch, layout, {"bn": ", BN" if not nhwc else ", BN folded", "bias": ", bias"}.get(norm, ""),
        (", " + act) if act else "")
    return _proto("conv", family, name + "." + layout.lower(), desc, flops, out, build, fn, vendor="cudnn",
                  nhwc=nhwc)


def conv_both(family, name, *args, **kw):
    return [conv(family, name, *args, layout="NCHW", **kw), conv(family, name, *args, layout="NHWC", **kw)]


def conv1d(family, name, batch, c_in, c_out, length, k, stride, what, act="gelu"):
    """1-D convolution (Whisper's front end): an N-d ONNX Conv on [N, C, L] with bias + GELU."""
    pad = k // 2
    out_len = _conv_out(length, k, stride, pad, 1)

    def build(dtype):
        m = _model(name, dtype, opset=17)
        x = m.input("x", [batch, c_in, length])
        y = m.op("conv", "Conv", [x, m.normal("w", [c_out, c_in, k], 1.0 / math.sqrt(c_in * k)),
                                  m.normal("b", [c_out], 0.02)],
                 kernel_shape=[k], pads=[pad, pad], strides=[stride], dilations=[1], group=1)
        m.output(m.op("gelu", "Gelu", [y], approximate="none"))
        return m

    def fn(t, v):
        return t.nn.functional.gelu(t.nn.functional.conv1d(v["x"], v["w"], v["b"], stride=stride, padding=pad))
    out = batch * c_out * out_len
    return _proto("conv", family, name + ".ncw", "%s: conv1d k%d/%d %d->%d, L=%d -> %d, N=%d, NCW, bias, gelu" % (
        what, k, stride, c_in, c_out, length, out_len, batch), 2.0 * out * c_in * k + 9.0 * out, out, build, fn,
        vendor="cudnn")


# ================================================================================================
# Row class


def row_softmax(family, name, rows, cols, what, log=False):
    if not log:
        w = wl.softmax(rows, cols)
        return _proto("row", family, name, "%s: softmax over %d, %d rows" % (what, cols, rows), w.flops,
                      rows * cols, w.build, workload=w)

    def build(dtype):
        m = _model(name, dtype)
        m.output(m.op("y", "LogSoftmax", [m.input("x", [rows, cols])], axis=-1))
        return m
    return _proto("row", family, name, "%s: log-softmax over %d, %d rows" % (what, cols, rows), 5.0 * rows * cols,
                  rows * cols, build, lambda t, v: t.log_softmax(v["x"], -1))


def row_layernorm(family, name, shape, what, eps=1e-5):
    """LayerNormalization over the last axis of `shape` (affine)."""
    shape = list(shape)
    cols, rows = shape[-1], math.prod(shape[:-1])
    if len(shape) == 2 and eps == 1e-5:
        w = wl.layernorm(rows, cols)
        return _proto("row", family, name, "%s: layernorm over %d, %d rows" % (what, cols, rows), w.flops,
                      rows * cols, w.build, workload=w)

    def build(dtype):
        m = _model(name, dtype, opset=17)
        m.output(gm.layer_norm(m, "ln", m.input("x", shape), cols, eps))
        return m

    def fn(t, v):
        return t.nn.functional.layer_norm(v["x"], (cols,), v["ln_scale"], v["ln_bias"], eps)
    return _proto("row", family, name, "%s: layernorm over %d of %s" % (what, cols, shape), 8.0 * rows * cols,
                  rows * cols, build, fn)


def row_rmsnorm(family, name, rows, cols, what, eps=1e-5):
    def build(dtype):
        m = _model(name, dtype, opset=23)
        m.output(gm.rms_norm(m, "norm", m.input("x", [rows, cols]), cols, eps))
        return m

    def fn(t, v):
        x = v["x"]
        return x * t.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * v["norm_scale"]
    return _proto("row", family, name, "%s: rmsnorm over %d, %d rows" % (what, cols, rows), 4.0 * rows * cols,
                  rows * cols, build, fn)


def row_reduce(family, name, shape, op, what, keepdims=1, axis=-1):
    """ReduceSum / ReduceMean / ReduceMax over one axis, the last by default (axes given as an
    input: opset 18)."""
    shape = list(shape)
    rows = math.prod(shape) // shape[axis]

    def build(dtype):
        m = _model(name, dtype, opset=18)
        x = m.input("x", shape)
        m.output(m.op("y", op, [x, m.i64("axes", [axis])], keepdims=keepdims))
        return m

    def fn(t, v):
        x = v["x"]
        if op == "ReduceSum":
            return x.sum(axis, keepdim=bool(keepdims))
        if op == "ReduceMean":
            return x.mean(axis, keepdim=bool(keepdims))
        return x.amax(axis, keepdim=bool(keepdims))
    return _proto("row", family, name, "%s: %s over axis %d (%d) of %s" % (what, op, axis, shape[axis], shape),
                  1.0 * math.prod(shape), rows, build, fn)


def row_groupnorm(family, name, batch, c, hw, groups, what, eps=1e-5, silu=True):
    """GroupNorm (+ SiLU, as the SD UNet ResNet blocks have it). Tessel has no GroupNormalization:
    it is written as PyTorch's ONNX export writes it: Reshape to [N, G, C/G*H*W],
    InstanceNormalization (scale 1, bias 0 per group), Reshape back, per-channel Mul + Add."""
    def build(dtype):
        m = _model(name, dtype, opset=17)
        x = m.input("x", [batch, c, hw, hw])
        y = m.op("grouped", "Reshape", [x, m.i64("shape_g", [batch, groups, -1])])
        one = m._weight("g_one", m.dtype, [groups], {"data": [1.0] * groups})
        zero = m._weight("g_zero", m.dtype, [groups], {"data": [0.0] * groups})
        y = m.op("inorm", "InstanceNormalization", [y, one, zero], epsilon=eps)
        y = m.op("ungrouped", "Reshape", [y, m.i64("shape_x", [batch, c, hw, hw])])
        y = m.op("gamma", "Mul", [y, m.uniform("scale", [c, 1, 1], 0.9, 1.1)])
        y = m.op("beta", "Add", [y, m.normal("bias", [c, 1, 1], 0.02)])
        if silu:
            y = m.op("silu", "Mul", [y, m.op("sig", "Sigmoid", [y])])
        m.output(y)
        return m

    def fn(t, v):
        y = t.nn.functional.group_norm(v["x"], groups, v["scale"].view(-1), v["bias"].view(-1), eps)
        return t.nn.functional.silu(y) if silu else y
    n = batch * c * hw * hw
    return _proto("row", family, name, "%s: groupnorm(%d groups)%s on [%d,%d,%d,%d] (Reshape+InstanceNorm+affine)" % (
        what, groups, "+silu" if silu else "", batch, c, hw, hw), (12.0 if silu else 8.0) * n, n, build, fn)


# ================================================================================================
# Attention class: the unfused graph of workloads.attention (Q K^T, scale, optional causal mask,
# softmax, P V), generalised to S_q != S_kv, causal masks and grouped-query K/V.


def attention(family, name, b, h, sq, skv, d, what, causal=False, hkv=None):
    hkv = hkv or h
    g = h // hkv
    assert b * h * sq * skv <= 2 ** 31 + 1, name
    full = 4.0 * b * h * sq * skv * d
    flops = full / 2 if causal else full
    sdpa = {"b": b, "h": h, "hkv": hkv, "sq": sq, "skv": skv, "d": d, "causal": causal}
    desc = "%s: B=%d H=%d%s S_q=%d S_kv=%d D=%d%s, unfused" % (
        what, b, h, (" H_kv=%d" % hkv) if g > 1 else "", sq, skv, d, ", causal" if causal else "")
    if sq == skv and not causal and g == 1:
        w = wl.attention(b, h, sq, d)
        return _proto("attention", family, name, desc, flops, b * h * sq * d, w.build, vendor="sdpa", sdpa=sdpa,
                      workload=w)
    # GQA: q [B, H_kv, G, S_q, d] against k, v [B, H_kv, 1, S_kv, d] (broadcast over the G query heads
    # sharing a K/V head); otherwise 4-D as workloads.attention.
    qs = [b, hkv, g, sq, d] if g > 1 else [b, h, sq, d]
    ks = [b, hkv, 1, skv, d] if g > 1 else [b, h, skv, d]
    r = len(qs)

    def build(dtype):
        m = _model(name, dtype)
        q, k, v = m.input("q", qs), m.input("k", ks), m.input("v", ks)
        kt = m.op("kt", "Transpose", [k], perm=list(range(r - 2)) + [r - 1, r - 2])
        scores = m.op("scores", "MatMul", [q, kt])
        scaled = m.op("scaled", "Mul", [scores, m.f32_scalar("scale", 1.0 / math.sqrt(d))])
        if causal:
            # As generate_models.llama_block: Trilu(upper=1, k) of a [S_q, S_kv] fill; k = S_kv - S_q + 1
            # keeps query i (the (S_kv - S_q + i)-th position) from seeing later keys.
            fill = m.op("mask_fill", "ConstantOfShape", [m.i64("mask_shape", [sq, skv])],
                        value={"tensor": {"dtype": m.dtype, "shape": [1],
                                          "data": [-1e9 if m.dtype == "f32" else -6e4]}})
            mask = m.op("causal_mask", "Trilu", [fill, m.i64("mask_k", [skv - sq + 1], shape=[])], upper=1)
            scaled = m.op("masked", "Add", [scaled, mask])
        probs = m.op("probs", "Softmax", [scaled], axis=-1)
        m.output(m.op("ctx", "MatMul", [probs, v]))
        return m

    def fn(t, v):
        s = t.matmul(v["q"], v["k"].transpose(-1, -2)) * (1.0 / math.sqrt(d))
        if causal:
            s = s + v["mask"]
        return t.matmul(t.softmax(s, -1), v["v"])

    def extra(torch, device, tdtype):
        if not causal:
            return {}
        full_ = torch.full([sq, skv], -6e4 if tdtype != torch.float32 else -1e9)
        return {"mask": torch.triu(full_, diagonal=skv - sq + 1).to(device=device, dtype=tdtype)}
    return _proto("attention", family, name, desc, flops, b * h * sq * d, build, fn, vendor="sdpa", extra=extra,
                  sdpa=sdpa)


# ================================================================================================
# Elementwise class


def elt_gelu(family, name, shape, what, approximate="none"):
    shape = list(shape)

    def build(dtype):
        m = _model(name, dtype)
        m.output(m.op("gelu", "Gelu", [m.input("x", shape)], approximate=approximate))
        return m
    n = math.prod(shape)
    return _proto("eltwise", family, name, "%s: gelu(%s) on %s" % (what, approximate, shape), 8.0 * n, n, build,
                  lambda t, v: t.nn.functional.gelu(v["x"], approximate=approximate))


def elt_swiglu(family, name, rows, cols, what):
    def build(dtype):
        m = _model(name, dtype)
        g, u = m.input("gate", [rows, cols]), m.input("up", [rows, cols])
        m.output(m.op("swiglu", "Mul", [m.op("silu", "Mul", [g, m.op("sig", "Sigmoid", [g])]), u]))
        return m
    n = rows * cols
    return _proto("eltwise", family, name, "%s: silu(gate) * up on [%d,%d]" % (what, rows, cols), 6.0 * n, n, build,
                  lambda t, v: t.nn.functional.silu(v["gate"]) * v["up"])


def elt_bias_residual(family, name, shape, what, gelu=False):
    """y = x + b + residual (the bias + residual add after an output projection); optional GELU
    on x + b first (bias + GELU epilogue separated from its GEMM)."""
    shape = list(shape)

    def build(dtype):
        m = _model(name, dtype)
        x, r = m.input("x", shape), m.input("res", shape)
        y = m.op("bias", "Add", [x, m.normal("b", [shape[-1]], 0.02)])
        if gelu:
            y = m.op("gelu", "Gelu", [y], approximate="none")
        m.output(m.op("residual", "Add", [y, r]))
        return m

    def fn(t, v):
        y = v["x"] + v["b"]
        if gelu:
            y = t.nn.functional.gelu(y)
        return y + v["res"]
    n = math.prod(shape)
    return _proto("eltwise", family, name, "%s: %sx + b + residual on %s" % (what, "gelu" if gelu else "", shape),
                  (10.0 if gelu else 2.0) * n, n, build, fn)


def elt_residual(family, name, shape, what, relu=False):
    """y = x + residual (+ ReLU, as ResNet's bottleneck ends)."""
    shape = list(shape)

    def build(dtype):
        m = _model(name, dtype)
        y = m.op("residual", "Add", [m.input("x", shape), m.input("res", shape)])
        m.output(m.op("relu", "Relu", [y]) if relu else y)
        return m

    def fn(t, v):
        y = v["x"] + v["res"]
        return t.relu(y) if relu else y
    n = math.prod(shape)
    return _proto("eltwise", family, name, "%s: x + residual%s on %s" % (what, " + relu" if relu else "", shape),
                  (2.0 if relu else 1.0) * n, n, build, fn)


def elt_layerscale_residual(family, name, shape, what):
    """ConvNeXt: residual + gamma * x (layer scale), channels-last."""
    shape = list(shape)

    def build(dtype):
        m = _model(name, dtype)
        x, r = m.input("x", shape), m.input("res", shape)
        y = m.op("scale", "Mul", [x, m.uniform("gamma", [shape[-1]], 0.9, 1.1)])
        m.output(m.op("residual", "Add", [r, y]))
        return m
    n = math.prod(shape)
    return _proto("eltwise", family, name, "%s: residual + gamma * x on %s" % (what, shape), 2.0 * n, n, build,
                  lambda t, v: v["res"] + v["gamma"] * v["x"])


def elt_gate(family, name, x_shape, g_shape, what):
    """Sigmoid gating: x * sigmoid(g) with g broadcast (squeeze-excite's excite step)."""
    def build(dtype):
        m = _model(name, dtype)
        x, g = m.input("x", x_shape), m.input("g", g_shape)
        m.output(m.op("gated", "Mul", [x, m.op("sig", "Sigmoid", [g])]))
        return m
    n = math.prod(x_shape)
    return _proto("eltwise", family, name, "%s: x * sigmoid(g), x %s, g %s" % (what, x_shape, g_shape),
                  n + 4.0 * math.prod(g_shape), n, build, lambda t, v: v["x"] * t.sigmoid(v["g"]))


def elt_relu6(family, name, shape, what):
    def build(dtype):
        m = _model(name, dtype, opset=17)
        x = m.input("x", shape)
        m.output(m.op("relu6", "Clip", [x, m.f32_scalar("lo", 0.0), m.f32_scalar("hi", 6.0)]))
        return m
    n = math.prod(shape)
    return _proto("eltwise", family, name, "%s: clip(x, 0, 6) on %s" % (what, shape), 2.0 * n, n, build,
                  lambda t, v: t.clamp(v["x"], 0.0, 6.0))


def elt_cast_f32(family, name, shape, what, scale=None):
    """Logits to float32 (optionally scaled first): Cast to f32."""
    shape = list(shape)

    def build(dtype):
        m = _model(name, dtype)
        x = m.input("x", shape)
        if scale is not None:
            x = m.op("scaled", "Mul", [x, m.f32_scalar("scale", scale)])
        m.output(m.op("cast", "Cast", [x], to=1))  # ONNX TensorProto.FLOAT
        return m

    def fn(t, v):
        x = v["x"] * scale if scale is not None else v["x"]
        return x.float()
    n = math.prod(shape)
    return _proto("eltwise", family, name, "%s: %scast to f32 on %s" % (what, "scale, " if scale else "", shape),
                  float(n), 2 * n, build, fn)  # out_elems in dtype units: an f32 output is 2 of them


def elt_rope(family, name, tokens, heads, d, what):
    """Rotary embedding (HF LLaMA rotate_half): x * cos + cat(-x2, x1) * sin, x [T, H, d]; cos/sin
    [T, 1, d] precomputed tables broadcast over heads."""
    half = d // 2

    def build(dtype):
        m = _model(name, dtype, opset=18)
        x = m.input("x", [tokens, heads, d])
        cos, sin = m.input("cos", [tokens, 1, d]), m.input("sin", [tokens, 1, d])
        axes = m.i64("axes", [2])
        x1 = m.op("x1", "Slice", [x, m.i64("s0", [0]), m.i64("e0", [half]), axes])
        x2 = m.op("x2", "Slice", [x, m.i64("s1", [half]), m.i64("e1", [d]), axes])
        rot = m.op("rot", "Concat", [m.op("neg", "Neg", [x2]), x1], axis=2)
        y = m.op("add", "Add", [m.op("xc", "Mul", [x, cos]), m.op("rs", "Mul", [rot, sin])])
        m.output(y)
        return m

    def fn(t, v):
        x = v["x"]
        rot = t.cat([-x[..., half:], x[..., :half]], -1)
        return x * v["cos"] + rot * v["sin"]
    n = tokens * heads * d
    return _proto("eltwise", family, name, "%s: rotary embedding on [%d,%d,%d]" % (what, tokens, heads, d), 3.0 * n,
                  n, build, fn)


# ================================================================================================
# Pool class


def pool(family, name, op, shape, what, k=3, s=2, p=1, layout="NCHW"):
    """MaxPool / AveragePool or GlobalAveragePool; `shape` is [n, c, h, w]. layout "NHWC": the model
    holds x as [n, h, w, c] (the pooling's layout attribute; a global pool as ReduceMean over axes 1
    and 2), PyTorch gets it as channels_last."""
    n, c, h, w_ = shape
    nhwc = layout == "NHWC"

    def build(dtype):
        m = _model(name, dtype, opset=17)
        x = m.input("x", [n, h, w_, c] if nhwc else shape)
        if op == "GlobalAveragePool":
            y = m.op("pool", "ReduceMean", [x], axes=[1, 2], keepdims=1) if nhwc else m.op("pool", op, [x])
        elif nhwc:
            y = m.op("pool", op, [x], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, layout="NHWC")
        else:
            y = m.op("pool", op, [x], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
        m.output(y)
        return m
    if op == "GlobalAveragePool":
        oh = ow = 1

        def fn(t, v):
            return v["x"].mean((2, 3), keepdim=True)
        desc = "%s: global average pool of %s" % (what, shape)
        flops = n * c * h * w_
    else:
        oh, ow = _conv_out(h, k, s, p, 1), _conv_out(w_, k, s, p, 1)
        if op == "MaxPool":
            def fn(t, v):
                return t.nn.functional.max_pool2d(v["x"], k, s, p)
        else:
            def fn(t, v):
                return t.nn.functional.avg_pool2d(v["x"], k, s, p, count_include_pad=False)
        desc = "%s: %s %dx%d/%d pad %d of %s -> %dx%d" % (what, op, k, k, s, p, shape, oh, ow)
        flops = n * c * oh * ow * k * k
    if nhwc:
        desc += ", NHWC"
    return _proto("pool", family, name, desc, float(flops), n * c * oh * ow, build, fn, nhwc=nhwc)


def squeeze_excite(family, name, batch, c, hw, c_se, what):
    """EfficientNet-B0 squeeze-excite: GlobalAveragePool, 1x1 conv (FC) c -> c_se + SiLU,
    1x1 conv c_se -> c + Sigmoid, Mul with x (NCHW)."""
    def build(dtype):
        m = _model(name, dtype, opset=17)
        x = m.input("x", [batch, c, hw, hw])
        s = m.op("squeeze", "GlobalAveragePool", [x])
        s = m.op("fc1", "Conv", [s, m.normal("w1", [c_se, c, 1, 1], 1.0 / math.sqrt(c)), m.normal("b1", [c_se], 0.02)],
                 kernel_shape=[1, 1])
        s = m.op("silu", "Mul", [s, m.op("sig1", "Sigmoid", [s])])
        s = m.op("fc2", "Conv", [s, m.normal("w2", [c, c_se, 1, 1], 1.0 / math.sqrt(c_se)), m.normal("b2", [c], 0.02)],
                 kernel_shape=[1, 1])
        m.output(m.op("excite", "Mul", [x, m.op("sig2", "Sigmoid", [s])]))
        return m

    def fn(t, v):
        F = t.nn.functional
        s = v["x"].mean((2, 3), keepdim=True)
        s = F.silu(F.conv2d(s, v["w1"], v["b1"]))
        return v["x"] * t.sigmoid(F.conv2d(s, v["w2"], v["b2"]))
    n = batch * c * hw * hw
    return _proto("pool", family, name, "%s: squeeze-excite (GAP, FC %d->%d silu, FC %d->%d sigmoid, mul) on [%d,%d,%d,%d]"
                  % (what, c, c_se, c_se, c, batch, c, hw, hw), 2.0 * n + 4.0 * batch * c * c_se, n, build, fn)


# ================================================================================================
# The families. Config values are the published ones (README_instances.md lists the sources).


def transformer_gemms(family, hidden, ffn, ms, qkv_n=None, act="gelu", bias=True, what=""):
    """The four GEMMs of a transformer layer at token counts `ms`."""
    out = []
    qkv_n = qkv_n or 3 * hidden
    for m_ in ms:
        out.append(gemm_epi(family, "qkv.m%d" % m_, m_, hidden, qkv_n, what + " fused QKV", bias))
        out.append(gemm_epi(family, "attn_out.m%d" % m_, m_, hidden, hidden, what + " attention output", bias))
        if act in ("gelu", "gelu_tanh"):
            out.append(gemm_epi(family, "ffn_up.m%d" % m_, m_, hidden, ffn, what + " FFN up", bias, act))
        out.append(gemm_epi(family, "ffn_down.m%d" % m_, m_, ffn, hidden, what + " FFN down", bias))
    return out


def bert():
    f, h, ffn, heads = "bert", 768, 3072, 12   # BERT-base / RoBERTa-base
    p = transformer_gemms(f, h, ffn, [512, 4096, 16384], what="BERT-base")
    p.append(gemm_epi(f, "mlm_head.m4096", 4096, h, 30522, "BERT MLM decoder (vocab 30522)"))
    p.append(gemm_epi(f, "roberta_mlm_head.m4096", 4096, h, 50265, "RoBERTa-base MLM decoder (vocab 50265)"))
    p.append(gemm_epi(f, "pooler.m32", 32, h, h, "BERT pooler (tanh omitted)"))
    p.append(bmm(f, "scores.b32s128", [32, heads], 128, 64, 128, "BERT scores Q K^T", trans_b=True))
    p.append(bmm(f, "pv.b32s128", [32, heads], 128, 128, 64, "BERT P V"))
    p.append(attention(f, "attn.b32s128", 32, heads, 128, 128, 64, "BERT-base self-attention"))
    p.append(attention(f, "attn.b8s512", 8, heads, 512, 512, 64, "BERT-base self-attention"))
    p.append(row_layernorm(f, "ln.b32s128", [4096, h], "BERT-base LayerNorm", ))
    p.append(row_layernorm(f, "ln.b8s512", [8, 512, h], "BERT-base LayerNorm", eps=1e-12))
    p.append(row_softmax(f, "scores_softmax.b32s128", 32 * heads * 128, 128, "BERT attention probs"))
    p.append(row_softmax(f, "mlm_softmax.m512", 512, 30522, "BERT MLM vocab softmax"))
    p.append(elt_gelu(f, "gelu.b32s128", [4096, ffn], "BERT FFN GELU"))
    p.append(elt_bias_residual(f, "bias_residual.b32s128", [32, 128, h], "BERT output bias + residual"))
    return p


def gpt2():
    f, h, ffn, heads, vocab = "gpt2", 768, 3072, 12, 50257   # GPT-2 small
    p = transformer_gemms(f, h, ffn, [1024, 8192], act="gelu_tanh", what="GPT-2")
    p += [gemm_epi(f, "lm_head.m%d" % m_, m_, h, vocab, "GPT-2 LM head (vocab 50257)", bias=False)
          for m_ in (1, 8, 1024, 8192)]
    # GPT-2 XL (1600 hidden, 25 heads of 64, FFN 6400): odd head count.
    p += transformer_gemms(f, 1600, 6400, [2048], act="gelu_tanh", what="GPT-2 XL")
    p.append(gemm_epi(f, "xl_lm_head.m1", 1, 1600, vocab, "GPT-2 XL LM head decode", bias=False))
    p.append(attention(f, "attn.b8s1024", 8, heads, 1024, 1024, 64, "GPT-2 causal self-attention", causal=True))
    p.append(attention(f, "xl_attn.b2s1024", 2, 25, 1024, 1024, 64, "GPT-2 XL causal self-attention", causal=True))
    p.append(attention(f, "decode.b16kv1024", 16, heads, 1, 1024, 64, "GPT-2 decode attention"))
    p.append(row_softmax(f, "vocab_softmax.m1024", 1024, vocab, "GPT-2 vocab softmax (50257)"))
    p.append(row_softmax(f, "vocab_softmax.m8", 8, vocab, "GPT-2 decode vocab softmax"))
    p.append(row_softmax(f, "vocab_logsoftmax.m2048", 2048, vocab, "GPT-2 LM loss log-softmax", log=True))
    p.append(row_reduce(f, "vocab_max.m1024", [1024, vocab], "ReduceMax", "GPT-2 logits max (greedy)"))
    p.append(row_layernorm(f, "ln.b8s1024", [8192, h], "GPT-2 LayerNorm"))
    p.append(row_layernorm(f, "xl_ln.b2s1024", [2048, 1600], "GPT-2 XL LayerNorm"))
    p.append(elt_gelu(f, "gelu_tanh.b8s1024", [8192, ffn], "GPT-2 MLP gelu_new", approximate="tanh"))
    p.append(elt_bias_residual(f, "bias_residual.b8s1024", [8, 1024, h], "GPT-2 c_proj bias + residual"))
    return p


def llama(f, h, heads, kv_heads, ffn, prefill, decode, what):
    vocab, d = 32000, 128
    qkv_n = h + 2 * kv_heads * d
    p = []
    for m_ in prefill + decode:
        p.append(gemm_epi(f, "qkv.m%d" % m_, m_, h, qkv_n, what + " fused QKV", bias=False))
        p.append(gemm_epi(f, "o.m%d" % m_, m_, h, h, what + " attention output", bias=False))
        p.append(gemm_glu(f, "gate_up_swiglu.m%d" % m_, m_, h, ffn, what + " MLP gate/up"))
        p.append(gemm_epi(f, "down.m%d" % m_, m_, ffn, h, what + " MLP down", bias=False))
        p.append(gemm_epi(f, "lm_head.m%d" % m_, m_, h, vocab, what + " vocabulary projection (32000)", bias=False))
    for m_ in (1, 4, 16):
        p.append(row_rmsnorm(f, "rmsnorm.m%d" % m_, m_, h, what + " RMSNorm"))
    for m_ in prefill:
        p.append(row_rmsnorm(f, "rmsnorm.m%d" % m_, m_, h, what + " RMSNorm"))
        p.append(elt_swiglu(f, "swiglu.m%d" % m_, m_, ffn, what + " SwiGLU"))
    p.append(row_softmax(f, "vocab_softmax.m%d" % prefill[0], prefill[0], vocab, what + " vocab softmax"))
    p.append(row_softmax(f, "vocab_softmax.m16", 16, vocab, what + " decode vocab softmax"))
    return p


def llama7b():
    f = "llama7b"
    p = llama(f, 4096, 32, 32, 11008, [512, 2048, 8192], [1, 4, 16], "LLaMA-7B")
    for s in (512, 2048, 8192):
        p.append(attention(f, "prefill.s%d" % s, 1, 32, s, s, 128, "LLaMA-7B causal prefill", causal=True))
    p.append(attention(f, "prefill.b4s2048", 4, 32, 2048, 2048, 128, "LLaMA-7B causal prefill", causal=True))
    for b, kv in ((1, 4096), (1, 32768), (16, 4096), (8, 16384)):
        p.append(attention(f, "decode.b%dkv%d" % (b, kv), b, 32, 1, kv, 128, "LLaMA-7B decode attention"))
    # chunked prefill / speculative verify: 16 new tokens against a 4096 cache, causal
    p.append(attention(f, "chunk.q16kv4096", 1, 32, 16, 4096, 128, "LLaMA-7B 16-token chunk", causal=True))
    p.append(bmm(f, "scores.s2048", [32], 2048, 128, 2048, "LLaMA-7B scores Q K^T", trans_b=True))
    p.append(elt_rope(f, "rope.t2048", 2048, 32, 128, "LLaMA-7B"))
    p.append(elt_cast_f32(f, "logits_f32.m2048", [2048, 32000], "LLaMA-7B logits"))
    p.append(elt_residual(f, "residual.m2048", [2048, 4096], "LLaMA-7B residual add"))
    p.append(row_reduce(f, "vocab_max.m16", [16, 32000], "ReduceMax", "LLaMA-7B greedy decode max"))
    return p


def llama70b():
    f = "llama70b"
    p = llama(f, 8192, 64, 8, 28672, [512, 2048], [1, 16], "LLaMA-70B")
    for s in (512, 2048, 4096):
        p.append(attention(f, "prefill.s%d" % s, 1, 64, s, s, 128, "LLaMA-70B causal prefill (GQA 8)", causal=True,
                           hkv=8))
    for b, kv in ((1, 4096), (16, 8192), (1, 32768)):
        p.append(attention(f, "decode.b%dkv%d" % (b, kv), b, 64, 1, kv, 128, "LLaMA-70B decode (GQA 8)", hkv=8))
    return p


def gemma7b():
    f = "gemma7b"   # Gemma-7B: hidden 3072, 16 heads of 256, FFN 24576 (GeGLU), vocab 256000
    h, d, ffn, vocab = 3072, 256, 24576, 256000
    p = []
    for m_ in (1, 2048):
        p.append(gemm_epi(f, "qkv.m%d" % m_, m_, h, 3 * 16 * d, "Gemma-7B fused QKV (16x256 heads)", bias=False))
        p.append(gemm_epi(f, "o.m%d" % m_, m_, 16 * d, h, "Gemma-7B attention output", bias=False))
        p.append(gemm_epi(f, "down.m%d" % m_, m_, ffn, h, "Gemma-7B MLP down", bias=False))
    p.append(gemm_epi(f, "lm_head.m1024", 1024, h, vocab, "Gemma-7B vocabulary projection (256000)", bias=False))
    p.append(gemm_epi(f, "lm_head.m1", 1, h, vocab, "Gemma-7B decode vocabulary projection", bias=False))
    p.append(attention(f, "prefill.s2048", 1, 16, 2048, 2048, d, "Gemma-7B causal prefill, head dim 256", causal=True))
    p.append(attention(f, "prefill.b4s1024", 4, 16, 1024, 1024, d, "Gemma-7B causal prefill, head dim 256",
                       causal=True))
    p.append(attention(f, "decode.b8kv8192", 8, 16, 1, 8192, d, "Gemma-7B decode, head dim 256"))
    p.append(row_softmax(f, "vocab_softmax.m64", 64, vocab, "Gemma-7B vocab softmax (256000)"))
    p.append(row_rmsnorm(f, "rmsnorm.m2048", 2048, h, "Gemma-7B RMSNorm", eps=1e-6))
    return p


def vit(f, h, heads, mlp, what):
    tokens, batch = 197, 32
    m_ = batch * tokens
    p = transformer_gemms(f, h, mlp, [m_, tokens], what=what)
    p.append(gemm_epi(f, "head.m32", 32, h, 1000, what + " classifier head"))
    p.append(attention(f, "attn.b32", batch, heads, tokens, tokens, h // heads, what + " self-attention"))
    p.append(attention(f, "attn.b1", 1, heads, tokens, tokens, h // heads, what + " self-attention"))
    p.append(row_layernorm(f, "ln.b32", [batch, tokens, h], what + " LayerNorm", eps=1e-6))
    p.append(row_softmax(f, "attn_softmax.b32", batch * heads * tokens, tokens, what + " attention probs (197)"))
    p.append(elt_gelu(f, "gelu.b32", [batch, tokens, mlp], what + " MLP GELU"))
    p.append(elt_bias_residual(f, "bias_residual.b32", [batch, tokens, h], what + " bias + residual"))
    p += conv_both(f, "patch_embed.b32", batch, 3, h, 224, 16, what + " patch embedding", stride=16, pad=0,
                   norm="bias", act=None)
    return p


def vit_b16():
    return vit("vit_b16", 768, 12, 3072, "ViT-B/16")


def vit_l16():
    return vit("vit_l16", 1024, 16, 4096, "ViT-L/16")


def resnet50():
    f, n = "resnet50", 32
    p = []
    p += conv_both(f, "stem.b%d" % n, n, 3, 64, 224, 7, "ResNet-50 stem", stride=2)
    for c_in, c_out, hw, k, s, what in [(64, 64, 56, 1, 1, "conv2 1x1 reduce"), (64, 64, 56, 3, 1, "conv2 3x3"),
                                        (64, 256, 56, 1, 1, "conv2 1x1 expand"),
                                        (256, 512, 56, 1, 2, "conv3 projection 1x1/2"),
                                        (128, 128, 56, 3, 2, "conv3 3x3/2 (v1.5)"), (256, 256, 14, 3, 1, "conv4 3x3"),
                                        (1024, 256, 14, 1, 1, "conv4 1x1 reduce"), (512, 512, 7, 3, 1, "conv5 3x3"),
                                        (512, 2048, 7, 1, 1, "conv5 1x1 expand")]:
        p += conv_both(f, "%s.b%d" % (what.split()[0] + "_" + ("%dx%d" % (k, k)) + ("s2" if s > 1 else "") +
                                      "_c%d_%d" % (c_in, c_out), n), n, c_in, c_out, hw, k, "ResNet-50 " + what,
                       stride=s, act=None if "expand" in what or "projection" in what else "relu")
    p += conv_both(f, "conv4_3x3.b1", 1, 256, 256, 14, 3, "ResNet-50 conv4 3x3, batch 1")
    p.append(pool(f, "maxpool.b%d" % n, "MaxPool", [n, 64, 112, 112], "ResNet-50 stem max pool"))
    p.append(pool(f, "gap.b%d" % n, "GlobalAveragePool", [n, 2048, 7, 7], "ResNet-50 final pool"))
    p.append(pool(f, "avgpool_d.b%d" % n, "AveragePool", [n, 256, 56, 56], "ResNet-50-D shortcut avg pool 2x2/2",
                  k=2, s=2, p=0))
    p.append(pool(f, "maxpool.b%d.nhwc" % n, "MaxPool", [n, 64, 112, 112], "ResNet-50 stem max pool", layout="NHWC"))
    p.append(pool(f, "gap.b%d.nhwc" % n, "GlobalAveragePool", [n, 2048, 7, 7], "ResNet-50 final pool", layout="NHWC"))
    p.append(pool(f, "gap.b1.nhwc", "GlobalAveragePool", [1, 2048, 7, 7], "ResNet-50 final pool, batch 1", layout="NHWC"))
    p.append(gemm_epi(f, "fc.m%d" % n, n, 2048, 1000, "ResNet-50 fc"))
    p.append(row_reduce(f, "reduce_w7.b%d" % n, [n, 2048, 7, 7], "ReduceMean", "ResNet-50 mean over W of 7x7 map"))
    p.append(row_reduce(f, "reduce_hw49.b%d" % n, [n, 2048, 49], "ReduceMean", "ResNet-50 mean over 7x7=49"))
    p.append(elt_residual(f, "residual_relu.b%d" % n, [n, 1024, 14, 14], "ResNet-50 bottleneck residual", relu=True))
    return p


def resnext50():
    f, n = "resnext50", 32   # ResNeXt-50 32x4d: grouped 3x3, 32 groups
    p = []
    p += conv_both(f, "conv2_3x3_g32.b%d" % n, n, 128, 128, 56, 3, "ResNeXt-50 conv2 grouped 3x3", groups=32)
    p += conv_both(f, "conv3_3x3_g32_s2.b%d" % n, n, 256, 256, 56, 3, "ResNeXt-50 conv3 grouped 3x3/2", stride=2,
                   groups=32)
    p += conv_both(f, "conv4_3x3_g32.b%d" % n, n, 512, 512, 14, 3, "ResNeXt-50 conv4 grouped 3x3", groups=32)
    return p


def deeplabv3():
    f, n = "deeplabv3", 8   # ResNet-50 backbone at output stride 8, 512x512 input -> 64x64
    p = []
    p += conv_both(f, "conv4_3x3_d2.b%d" % n, n, 256, 256, 64, 3, "DeepLabv3 dilated conv4 3x3", dil=2)
    p += conv_both(f, "conv5_3x3_d4.b%d" % n, n, 512, 512, 64, 3, "DeepLabv3 dilated conv5 3x3", dil=4)
    p += conv_both(f, "aspp_3x3_d12.b%d" % n, n, 2048, 256, 64, 3, "DeepLabv3 ASPP 3x3 rate 12", dil=12)
    p.append(pool(f, "aspp_gap.b%d" % n, "GlobalAveragePool", [n, 2048, 64, 64], "DeepLabv3 ASPP image pool"))
    return p


def mobilenetv2():
    f, n = "mobilenetv2", 32
    p = []
    p += conv_both(f, "stem.b%d" % n, n, 3, 32, 224, 3, "MobileNetV2 stem 3x3/2", stride=2, act="relu6")
    p += conv_both(f, "dw3x3_c32.b%d" % n, n, 32, 32, 112, 3, "MobileNetV2 depthwise", groups=32, act="relu6")
    p += conv_both(f, "dw3x3s2_c144.b%d" % n, n, 144, 144, 56, 3, "MobileNetV2 depthwise/2", stride=2, groups=144,
                   act="relu6")
    p += conv_both(f, "dw3x3_c576.b%d" % n, n, 576, 576, 14, 3, "MobileNetV2 depthwise", groups=576, act="relu6")
    p += conv_both(f, "pw_expand_24_144.b%d" % n, n, 24, 144, 56, 1, "MobileNetV2 pointwise expand", act="relu6")
    p += conv_both(f, "pw_project_960_160.b%d" % n, n, 960, 160, 7, 1, "MobileNetV2 pointwise project", act=None)
    p += conv_both(f, "pw_last_320_1280.b%d" % n, n, 320, 1280, 7, 1, "MobileNetV2 last 1x1", act="relu6")
    p.append(pool(f, "gap.b%d" % n, "GlobalAveragePool", [n, 1280, 7, 7], "MobileNetV2 final pool"))
    p.append(gemm_epi(f, "classifier.m%d" % n, n, 1280, 1000, "MobileNetV2 classifier"))
    p.append(elt_relu6(f, "relu6.b%d" % n, [n, 144, 56, 56], "MobileNetV2 ReLU6"))
    return p


def efficientnet_b0():
    f, n = "efficientnet_b0", 32
    p = []
    p += conv_both(f, "dw5x5s2_c144.b%d" % n, n, 144, 144, 56, 5, "EfficientNet-B0 MBConv6 k5 depthwise/2",
                   stride=2, groups=144, act="silu")
    p += conv_both(f, "dw5x5_c480.b%d" % n, n, 480, 480, 14, 5, "EfficientNet-B0 MBConv6 k5 depthwise", groups=480,
                   act="silu")
    p += conv_both(f, "dw5x5_c1152.b%d" % n, n, 1152, 1152, 7, 5, "EfficientNet-B0 MBConv6 k5 depthwise", groups=1152,
                   act="silu")
    p += conv_both(f, "dw3x3_c96.b%d" % n, n, 96, 96, 112, 3, "EfficientNet-B0 MBConv6 k3 depthwise", groups=96,
                   act="silu")
    p += conv_both(f, "pw_40_240.b%d" % n, n, 40, 240, 28, 1, "EfficientNet-B0 pointwise expand", act="silu")
    p += conv_both(f, "pw_1152_192.b%d" % n, n, 1152, 192, 7, 1, "EfficientNet-B0 pointwise project", act=None)
    p.append(squeeze_excite(f, "se_c144.b%d" % n, n, 144, 56, 6, "EfficientNet-B0 SE"))
    p.append(squeeze_excite(f, "se_c480.b%d" % n, n, 480, 14, 20, "EfficientNet-B0 SE"))
    p.append(squeeze_excite(f, "se_c1152.b%d" % n, n, 1152, 7, 48, "EfficientNet-B0 SE"))
    p.append(pool(f, "gap_c240.b%d" % n, "GlobalAveragePool", [n, 240, 28, 28], "EfficientNet-B0 SE squeeze"))
    p.append(pool(f, "gap_c240.b%d.nhwc" % n, "GlobalAveragePool", [n, 240, 28, 28], "EfficientNet-B0 SE squeeze",
                  layout="NHWC"))
    p.append(pool(f, "gap_c144.b%d.nhwc" % n, "GlobalAveragePool", [n, 144, 56, 56], "EfficientNet-B0 SE squeeze",
                  layout="NHWC"))
    p.append(pool(f, "gap_c96.b8.nhwc", "GlobalAveragePool", [8, 96, 56, 56], "EfficientNet-B0 SE squeeze, batch 8",
                  layout="NHWC"))
    p.append(pool(f, "gap_c32.b1.nhwc", "GlobalAveragePool", [1, 32, 112, 112], "EfficientNet-B0 first SE squeeze, batch 1",
                  layout="NHWC"))
    p.append(elt_gate(f, "se_excite_c240.b%d" % n, [n, 240, 28, 28], [n, 240, 1, 1], "EfficientNet-B0 SE excite"))
    return p


def convnext_t():
    f, n = "convnext_t", 32
    p = []
    p += conv_both(f, "stem4x4s4.b%d" % n, n, 3, 96, 224, 4, "ConvNeXt-T patchify stem", stride=4, pad=0,
                   norm="bias", act=None)
    p += conv_both(f, "dw7x7_c96.b%d" % n, n, 96, 96, 56, 7, "ConvNeXt-T depthwise 7x7", groups=96, norm="bias",
                   act=None)
    p += conv_both(f, "dw7x7_c384.b%d" % n, n, 384, 384, 14, 7, "ConvNeXt-T depthwise 7x7", groups=384, norm="bias",
                   act=None)
    p += conv_both(f, "down2x2s2_c96.b%d" % n, n, 96, 192, 56, 2, "ConvNeXt-T downsample 2x2/2", stride=2, pad=0,
                   norm="bias", act=None)
    for c, hw in ((96, 56), (384, 14), (768, 7)):
        p.append(row_layernorm(f, "ln_c%d.b%d" % (c, n), [n, hw, hw, c], "ConvNeXt-T channel LayerNorm (NHWC)",
                               eps=1e-6))
    for c, hw, b in ((96, 56, 8), (384, 14, n), (768, 7, n)):
        p.append(gemm_epi(f, "pw1_c%d.b%d" % (c, b), b * hw * hw, c, 4 * c, "ConvNeXt-T MLP pwconv1", act="gelu",
                          lead=[b, hw, hw]))
        p.append(gemm_epi(f, "pw2_c%d.b%d" % (c, b), b * hw * hw, 4 * c, c, "ConvNeXt-T MLP pwconv2", lead=[b, hw, hw]))
    p.append(elt_layerscale_residual(f, "layerscale.b%d" % n, [n, 56, 56, 96], "ConvNeXt-T layer scale + residual"))
    p.append(pool(f, "gap.b%d" % n, "GlobalAveragePool", [n, 768, 7, 7], "ConvNeXt-T final pool"))
    return p


def sd_unet():
    f, b = "sd_unet", 2   # Stable Diffusion 1.5 UNet, 512x512 image -> 64x64 latent, batch 2 (CFG)
    p = []
    p += conv_both(f, "conv_in.b%d" % b, b, 4, 320, 64, 3, "SD UNet conv_in (4 latent channels)", norm="bias", act=None)
    for c, hw in ((320, 64), (640, 32), (1280, 16), (1280, 8)):
        p += conv_both(f, "res_conv_c%d_%d.b%d" % (c, hw, b), b, c, c, hw, 3, "SD UNet ResBlock 3x3", norm="bias",
                       act=None)
    p += conv_both(f, "down_c320.b%d" % b, b, 320, 320, 64, 3, "SD UNet downsample 3x3/2", stride=2, norm="bias",
                   act=None)
    p += conv_both(f, "up_cat_c2560_1280.b%d" % b, b, 2560, 1280, 16, 3, "SD UNet up-block 3x3 on concat",
                   norm="bias", act=None)
    for c, hw in ((320, 64), (640, 32), (1280, 16)):
        p.append(row_groupnorm(f, "groupnorm_silu_c%d.b%d" % (c, b), b, c, hw, 32, "SD UNet ResBlock GroupNorm"))
        s = hw * hw
        p.append(gemm_epi(f, "attn_qkv_c%d.m%d" % (c, b * s), b * s, c, 3 * c, "SD UNet self-attn QKV", bias=False))
        p.append(gemm_epi(f, "attn_out_c%d.m%d" % (c, b * s), b * s, c, c, "SD UNet attn out"))
        p.append(gemm_glu(f, "geglu_c%d.m%d" % (c, b * s), b * s, c, 4 * c, "SD UNet GEGLU FF", kind="geglu"))
        p.append(gemm_epi(f, "ff_out_c%d.m%d" % (c, b * s), b * s, 4 * c, c, "SD UNet FF out"))
        p.append(gemm_epi(f, "cross_kv_c%d.m%d" % (c, b * 77), b * 77, 768, 2 * c, "SD UNet cross-attn K,V of text",
                          bias=False))
        p.append(row_layernorm(f, "ln_c%d.b%d" % (c, b), [b, s, c], "SD UNet transformer LayerNorm"))
    # self-attention: 8 heads, head dim 40/80/160 (SD 1.5); SD 2.x: head dim 64
    p.append(attention(f, "self_s4096_d40.b%d" % b, b, 8, 4096, 4096, 40, "SD 1.5 self-attention 64x64"))
    p.append(attention(f, "self_s1024_d80.b%d" % b, b, 8, 1024, 1024, 80, "SD 1.5 self-attention 32x32"))
    p.append(attention(f, "self_s256_d160.b%d" % b, b, 8, 256, 256, 160, "SD 1.5 self-attention 16x16"))
    p.append(attention(f, "self_s4096_d64.b%d" % b, b, 5, 4096, 4096, 64, "SD 2.x self-attention 64x64 (5x64)"))
    p.append(attention(f, "cross_s4096_kv77_d40.b%d" % b, b, 8, 4096, 77, 40, "SD 1.5 cross-attention"))
    p.append(attention(f, "cross_s1024_kv77_d80.b%d" % b, b, 8, 1024, 77, 80, "SD 1.5 cross-attention"))
    p.append(attention(f, "cross_s4096_kv77_d64.b%d" % b, b, 5, 4096, 77, 64, "SD 2.x cross-attention"))
    p.append(row_softmax(f, "cross_softmax_kv77.b%d" % b, b * 8 * 4096, 77, "SD cross-attn probs (77)"))
    p.append(elt_bias_residual(f, "bias_residual_c320.b%d" % b, [b, 4096, 320], "SD UNet attn bias + residual"))
    return p


def whisper():
    f, b = "whisper", 4   # Whisper large-v2 encoder: d 1280, 20 heads of 64, FFN 5120, 1500 frames
    h, heads, ffn, s = 1280, 20, 5120, 1500
    p = []
    p.append(conv1d(f, "conv1.b%d" % b, b, 80, h, 3000, 3, 1, "Whisper conv1 (mel 80 -> 1280)"))
    p.append(conv1d(f, "conv2.b%d" % b, b, h, h, 3000, 3, 2, "Whisper conv2 (stride 2)"))
    p += conv_both(f, "conv2_as_2d.b%d" % b, b, h, h, (1, 3000), (1, 3), "Whisper conv2 as a 1x3 2-D conv",
                   stride=(1, 2), pad=(0, 1), norm="bias", act="gelu")
    p += transformer_gemms(f, h, ffn, [b * s, s], what="Whisper-large")
    p.append(attention(f, "enc_attn.b%d" % b, b, heads, s, s, 64, "Whisper encoder self-attention (1500)"))
    p.append(attention(f, "dec_cross.b%d" % b, b, heads, 1, s, 64, "Whisper decoder cross-attention (1 token)"))
    p.append(row_layernorm(f, "ln.b%d" % b, [b, s, h], "Whisper LayerNorm"))
    p.append(elt_gelu(f, "gelu.b%d" % b, [b, s, ffn], "Whisper MLP GELU"))
    p.append(gemm_epi(f, "dec_vocab.m%d" % b, b, h, 51865, "Whisper decoder vocab projection (51865)", bias=False))
    p.append(row_softmax(f, "dec_vocab_softmax.m%d" % (b * 64), b * 64, 51865, "Whisper vocab log-probs", log=True))
    return p


def dlrm():
    f = "dlrm"   # MLPerf DLRM (Criteo Terabyte): bottom 13-512-256-128, top 479-1024-1024-512-256-1;
    p = []       # DLRM Kaggle config: bottom 13-512-256-64-16, top 367-512-256-1
    for bsz in (2048, 16384):
        for part, k, n in (("bot", 13, 512), ("bot", 512, 256), ("bot", 256, 128), ("top", 479, 1024),
                           ("top", 1024, 1024), ("top", 1024, 512), ("top", 512, 256)):
            p.append(gemm_epi(f, "%s_%d_%d.m%d" % (part, k, n, bsz), bsz, k, n, "DLRM %s MLP" % part, act="relu"))
        p.append(gemm_epi(f, "top_out_256_1.m%d" % bsz, bsz, 256, 1, "DLRM top output (sigmoid)", act="sigmoid"))
        p.append(bmm(f, "interaction.m%d" % bsz, [bsz], 27, 128, 27, "DLRM dot interaction (27 features)",
                     trans_b=True))
    p.append(gemm_epi(f, "kaggle_top_367_512.m4096", 4096, 367, 512, "DLRM Kaggle top MLP", act="relu"))
    p.append(gemm_epi(f, "kaggle_bot_64_16.m4096", 4096, 64, 16, "DLRM Kaggle bottom MLP", act="relu"))
    p.append(gemm_plain(f, "odd_1023.m2048", 2048, 1023, 1023, "DLRM-style odd-width MLP (1023)"))
    p.append(row_reduce(f, "bag_sum.m2048", [2048, 26, 37, 128], "ReduceSum",
                        "DLRM embedding-bag sum, 26 tables, 37 ids per bag, dim 128", keepdims=0, axis=-2))
    return p


FAMILIES = [bert, gpt2, llama7b, llama70b, gemma7b, vit_b16, vit_l16, resnet50, resnext50, deeplabv3, mobilenetv2,
            efficientnet_b0, convnext_t, sd_unet, whisper, dlrm]


# ================================================================================================
# The CPU catalog (issue 30): the same constructors and model configurations, at the batch sizes and
# token counts a CPU serves (batch 1-8, decode, short prefill), in f32, each instance sized so that a
# 2-core machine runs it in about 0.2-100 ms.


def cpu_protos():
    p = []
    # GEMM: transformer layers at the token counts of CPU inference, decode GEMVs, odd and skinny.
    p += transformer_gemms("bert", 768, 3072, [128, 512], what="BERT-base")
    p.append(gemm_epi("bert", "pooler.m32", 32, 768, 768, "BERT pooler (tanh omitted)"))
    p.append(bmm("bert", "scores.b1s128", [1, 12], 128, 64, 128, "BERT scores Q K^T", trans_b=True))
    p.append(bmm("bert", "pv.b4s128", [4, 12], 128, 128, 64, "BERT P V"))
    p += transformer_gemms("gpt2", 768, 3072, [256], act="gelu_tanh", what="GPT-2")
    p += [gemm_epi("gpt2", "lm_head.m%d" % m_, m_, 768, 50257, "GPT-2 LM head (vocab 50257)", bias=False)
          for m_ in (1, 8)]
    p += transformer_gemms("gpt2", 1600, 6400, [64], act="gelu_tanh", what="GPT-2 XL")
    for m_ in (1, 4, 32):
        p.append(gemm_epi("llama7b", "qkv.m%d" % m_, m_, 4096, 3 * 4096, "LLaMA-7B fused QKV", bias=False))
        p.append(gemm_epi("llama7b", "o.m%d" % m_, m_, 4096, 4096, "LLaMA-7B attention output", bias=False))
        p.append(gemm_glu("llama7b", "gate_up_swiglu.m%d" % m_, m_, 4096, 11008, "LLaMA-7B MLP gate/up"))
        p.append(gemm_epi("llama7b", "down.m%d" % m_, m_, 11008, 4096, "LLaMA-7B MLP down", bias=False))
    p.append(gemm_epi("llama7b", "lm_head.m1", 1, 4096, 32000, "LLaMA-7B vocabulary projection", bias=False))
    p.append(gemm_epi("llama70b", "o.m1", 1, 8192, 8192, "LLaMA-70B attention output", bias=False))
    p.append(gemm_epi("llama70b", "qkv.m1", 1, 8192, 10240, "LLaMA-70B fused QKV (GQA 8)", bias=False))
    p.append(gemm_epi("gemma7b", "qkv.m1", 1, 3072, 3 * 16 * 256, "Gemma-7B fused QKV", bias=False))
    p.append(gemm_epi("gemma7b", "o.m16", 16, 4096, 3072, "Gemma-7B attention output", bias=False))
    p += transformer_gemms("vit_b16", 768, 3072, [197], what="ViT-B/16")
    p.append(gemm_epi("vit_b16", "head.m16", 16, 768, 1000, "ViT-B/16 classifier head"))
    p.append(gemm_epi("resnet50", "fc.m8", 8, 2048, 1000, "ResNet-50 fc"))
    p.append(gemm_epi("mobilenetv2", "classifier.m8", 8, 1280, 1000, "MobileNetV2 classifier"))
    for part, k, n, m_ in (("bot", 13, 512, 4096), ("bot", 512, 256, 512), ("top", 479, 1024, 512),
                           ("top", 1024, 1024, 512)):
        p.append(gemm_epi("dlrm", "%s_%d_%d.m%d" % (part, k, n, m_), m_, k, n, "DLRM %s MLP" % part, act="relu"))
    p.append(gemm_epi("dlrm", "top_out_256_1.m16384", 16384, 256, 1, "DLRM top output (sigmoid)", act="sigmoid"))
    p.append(bmm("dlrm", "interaction.m512", [512], 27, 128, 27, "DLRM dot interaction", trans_b=True))
    p.append(gemm_plain("dlrm", "odd_1023.m127", 127, 1023, 1023, "odd-width MLP, skinny odd M"))
    p.append(gemm_epi("dlrm", "kaggle_top_367_512.m256", 256, 367, 512, "DLRM Kaggle top MLP", act="relu"))
    for c, hw in ((96, 56), (384, 14)):
        p.append(gemm_epi("convnext_t", "pw1_c%d.b1" % c, hw * hw, c, 4 * c, "ConvNeXt-T MLP pwconv1", act="gelu",
                          lead=[1, hw, hw]))
        p.append(gemm_epi("convnext_t", "pw2_c%d.b1" % c, hw * hw, 4 * c, c, "ConvNeXt-T MLP pwconv2", lead=[1, hw, hw]))
    p.append(gemm_epi("whisper", "ffn_up.m375", 375, 1280, 5120, "Whisper-large FFN up (a quarter of 1500 frames)",
                      act="gelu"))
    p.append(gemm_epi("sd_unet", "cross_kv_c320.m77", 77, 768, 640, "SD UNet cross-attn K,V of text", bias=False))
    p.append(gemm_glu("sd_unet", "geglu_c320.m256", 256, 320, 1280, "SD UNet GEGLU FF", kind="geglu"))

    # Convolution: ResNet-50 at batch 1 (NCHW and NHWC), mobile depthwise / pointwise, grouped, dilated.
    for c_in, c_out, hw, k, s, what in [(3, 64, 224, 7, 2, "stem"), (64, 64, 56, 1, 1, "conv2 1x1 reduce"),
                                        (64, 64, 56, 3, 1, "conv2 3x3"), (64, 256, 56, 1, 1, "conv2 1x1 expand"),
                                        (256, 512, 56, 1, 2, "conv3 projection 1x1/2"),
                                        (128, 128, 56, 3, 2, "conv3 3x3/2 (v1.5)"), (256, 256, 14, 3, 1, "conv4 3x3"),
                                        (1024, 256, 14, 1, 1, "conv4 1x1 reduce"), (512, 512, 7, 3, 1, "conv5 3x3"),
                                        (512, 2048, 7, 1, 1, "conv5 1x1 expand")]:
        name = "%s_%dx%d%s_c%d_%d.b1" % (what.split()[0], k, k, "s2" if s > 1 else "", c_in, c_out)
        p += conv_both("resnet50", name, 1, c_in, c_out, hw, k, "ResNet-50 " + what, stride=s,
                       act=None if "expand" in what or "projection" in what else "relu")
    p += conv_both("resnet50", "conv2_3x3.b4", 4, 64, 64, 56, 3, "ResNet-50 conv2 3x3, batch 4")
    f = "mobilenetv2"
    p += conv_both(f, "stem.b4", 4, 3, 32, 224, 3, "MobileNetV2 stem 3x3/2", stride=2, act="relu6")
    p += conv_both(f, "dw3x3_c32.b4", 4, 32, 32, 112, 3, "MobileNetV2 depthwise", groups=32, act="relu6")
    p += conv_both(f, "dw3x3s2_c144.b4", 4, 144, 144, 56, 3, "MobileNetV2 depthwise/2", stride=2, groups=144,
                   act="relu6")
    p += conv_both(f, "dw3x3_c576.b16", 16, 576, 576, 14, 3, "MobileNetV2 depthwise", groups=576, act="relu6")
    p += conv_both(f, "pw_expand_24_144.b4", 4, 24, 144, 56, 1, "MobileNetV2 pointwise expand", act="relu6")
    p += conv_both(f, "pw_project_960_160.b4", 4, 960, 160, 7, 1, "MobileNetV2 pointwise project", act=None)
    f = "efficientnet_b0"
    p += conv_both(f, "dw5x5s2_c144.b4", 4, 144, 144, 56, 5, "EfficientNet-B0 k5 depthwise/2", stride=2, groups=144,
                   act="silu")
    p += conv_both(f, "dw5x5_c480.b16", 16, 480, 480, 14, 5, "EfficientNet-B0 k5 depthwise", groups=480, act="silu")
    p += conv_both(f, "pw_40_240.b4", 4, 40, 240, 28, 1, "EfficientNet-B0 pointwise expand", act="silu")
    p += conv_both("resnext50", "conv2_3x3_g32.b1", 1, 128, 128, 56, 3, "ResNeXt-50 grouped 3x3", groups=32)
    p += conv_both("resnext50", "conv3_3x3_g32_s2.b1", 1, 256, 256, 56, 3, "ResNeXt-50 grouped 3x3/2", stride=2,
                   groups=32)
    p += conv_both("deeplabv3", "conv4_3x3_d2.b1", 1, 256, 256, 32, 3, "DeepLabv3 dilated 3x3 (256 px input)", dil=2)
    p += conv_both("convnext_t", "dw7x7_c96.b1", 1, 96, 96, 56, 7, "ConvNeXt-T depthwise 7x7", groups=96, norm="bias",
                   act=None)
    p += conv_both("convnext_t", "stem4x4s4.b1", 1, 3, 96, 224, 4, "ConvNeXt-T patchify stem", stride=4, pad=0,
                   norm="bias", act=None)
    p += conv_both("sd_unet", "conv_in.b1", 1, 4, 320, 64, 3, "SD UNet conv_in (4 latent channels)", norm="bias",
                   act=None)
    p += conv_both("sd_unet", "res_conv_c640_16.b1", 1, 640, 640, 16, 3, "SD UNet ResBlock 3x3", norm="bias", act=None)
    p += conv_both("vit_b16", "patch_embed.b1", 1, 3, 768, 224, 16, "ViT-B/16 patch embedding", stride=16, pad=0,
                   norm="bias", act=None)
    p.append(conv1d("whisper", "conv1.b1", 1, 80, 1280, 3000, 3, 1, "Whisper conv1 (mel 80 -> 1280)"))

    # Row operations of many widths.
    p.append(row_layernorm("bert", "ln.b8s128", [8, 128, 768], "BERT-base LayerNorm", eps=1e-12))
    p.append(row_layernorm("gpt2", "xl_ln.s512", [512, 1600], "GPT-2 XL LayerNorm"))
    p.append(row_layernorm("vit_b16", "ln.b8", [8, 197, 768], "ViT-B/16 LayerNorm", eps=1e-6))
    p.append(row_layernorm("convnext_t", "ln_c96.b4", [4, 56, 56, 96], "ConvNeXt-T channel LayerNorm (NHWC)", eps=1e-6))
    p.append(row_layernorm("whisper", "ln.b1", [1, 1500, 1280], "Whisper LayerNorm"))
    p.append(row_softmax("bert", "scores_softmax.b4s512", 4 * 12 * 512, 512, "BERT attention probs (512)"))
    p.append(row_softmax("bert", "scores_softmax.b8s128", 8 * 12 * 128, 128, "BERT attention probs"))
    p.append(row_softmax("vit_b16", "attn_softmax.b8", 8 * 12 * 197, 197, "ViT-B/16 attention probs (197)"))
    p.append(row_softmax("sd_unet", "cross_softmax_kv77.b4", 4 * 8 * 1024, 77, "SD cross-attn probs (77)"))
    p.append(row_softmax("gpt2", "vocab_softmax.m32", 32, 50257, "GPT-2 decode vocab softmax"))
    p.append(row_softmax("gpt2", "vocab_logsoftmax.m64", 64, 50257, "GPT-2 LM loss log-softmax", log=True))
    p.append(row_softmax("llama7b", "vocab_softmax.m64", 64, 32000, "LLaMA-7B decode vocab softmax"))
    p.append(row_softmax("gemma7b", "vocab_softmax.m4", 4, 256000, "Gemma-7B vocab softmax (256000)"))
    p.append(row_softmax("bert", "mlm_softmax.m32", 32, 30522, "BERT MLM vocab softmax"))
    p.append(row_rmsnorm("llama7b", "rmsnorm.m512", 512, 4096, "LLaMA-7B RMSNorm"))
    p.append(row_rmsnorm("llama70b", "rmsnorm.m256", 256, 8192, "LLaMA-70B RMSNorm"))
    p.append(row_rmsnorm("gemma7b", "rmsnorm.m256", 256, 3072, "Gemma-7B RMSNorm", eps=1e-6))
    p.append(row_reduce("llama7b", "vocab_max.m64", [64, 32000], "ReduceMax", "LLaMA-7B greedy decode max"))
    p.append(row_reduce("resnet50", "reduce_hw49.b32", [32, 2048, 49], "ReduceMean", "ResNet-50 mean over 7x7=49"))
    p.append(row_reduce("resnet50", "reduce_w7.b32", [32, 2048, 7, 7], "ReduceMean", "ResNet-50 mean over W of 7x7"))
    p.append(row_reduce("dlrm", "bag_sum.m64", [64, 26, 37, 128], "ReduceSum", "DLRM embedding-bag sum", keepdims=0,
                        axis=-2))
    p.append(row_groupnorm("sd_unet", "groupnorm_silu_c320.b1", 1, 320, 64, 32, "SD UNet ResBlock GroupNorm"))
    p.append(row_groupnorm("sd_unet", "groupnorm_silu_c1280.b4", 4, 1280, 16, 32, "SD UNet ResBlock GroupNorm"))

    # Attention: encoder, causal prefill, decode against a KV cache, GQA, cross-attention.
    p.append(attention("bert", "attn.b1s128", 1, 12, 128, 128, 64, "BERT-base self-attention"))
    p.append(attention("bert", "attn.b4s128", 4, 12, 128, 128, 64, "BERT-base self-attention"))
    p.append(attention("gpt2", "attn.b1s512", 1, 12, 512, 512, 64, "GPT-2 causal self-attention", causal=True))
    p.append(attention("gpt2", "decode.b4kv1024", 4, 12, 1, 1024, 64, "GPT-2 decode attention"))
    p.append(attention("llama7b", "prefill.s256", 1, 32, 256, 256, 128, "LLaMA-7B causal prefill", causal=True))
    p.append(attention("llama7b", "decode.b1kv4096", 1, 32, 1, 4096, 128, "LLaMA-7B decode attention"))
    p.append(attention("llama7b", "chunk.q16kv1024", 1, 32, 16, 1024, 128, "LLaMA-7B 16-token chunk", causal=True))
    p.append(attention("llama70b", "decode.b1kv4096", 1, 64, 1, 4096, 128, "LLaMA-70B decode (GQA 8)", hkv=8))
    p.append(attention("gemma7b", "decode.b1kv2048", 1, 16, 1, 2048, 256, "Gemma-7B decode, head dim 256"))
    p.append(attention("vit_b16", "attn.b1", 1, 12, 197, 197, 64, "ViT-B/16 self-attention"))
    p.append(attention("sd_unet", "cross_s1024_kv77_d80.b1", 1, 8, 1024, 77, 80, "SD 1.5 cross-attention"))
    p.append(attention("whisper", "dec_cross.b1", 1, 20, 1, 1500, 64, "Whisper decoder cross-attention (1 token)"))

    # Elementwise chains.
    p.append(elt_gelu("bert", "gelu.b1s512", [512, 3072], "BERT FFN GELU"))
    p.append(elt_gelu("gpt2", "gelu_tanh.s256", [256, 3072], "GPT-2 MLP gelu_new", approximate="tanh"))
    p.append(elt_gelu("whisper", "gelu.b1", [1, 1500, 5120], "Whisper MLP GELU"))
    p.append(elt_swiglu("llama7b", "swiglu.m128", 128, 11008, "LLaMA-7B SwiGLU"))
    p.append(elt_bias_residual("bert", "bias_residual.b16s128", [16, 128, 768], "BERT output bias + residual"))
    p.append(elt_bias_residual("sd_unet", "bias_residual_c320.b1", [1, 4096, 320], "SD UNet attn bias + residual"))
    p.append(elt_residual("llama7b", "residual.m512", [512, 4096], "LLaMA-7B residual add"))
    p.append(elt_residual("resnet50", "residual_relu.b4", [4, 1024, 14, 14], "ResNet-50 bottleneck residual",
                          relu=True))
    p.append(elt_layerscale_residual("convnext_t", "layerscale.b4", [4, 56, 56, 96], "ConvNeXt-T layer scale + residual"))
    p.append(elt_gate("efficientnet_b0", "se_excite_c240.b4", [4, 240, 28, 28], [4, 240, 1, 1],
                      "EfficientNet-B0 SE excite"))
    p.append(elt_relu6("mobilenetv2", "relu6.b1", [1, 144, 112, 112], "MobileNetV2 ReLU6"))
    p.append(elt_rope("llama7b", "rope.t256", 256, 32, 128, "LLaMA-7B"))

    # Pooling.
    for layout in ("NCHW", "NHWC"):
        sfx = "" if layout == "NCHW" else ".nhwc"
        p.append(pool("resnet50", "maxpool.b4" + sfx, "MaxPool", [4, 64, 112, 112], "ResNet-50 stem max pool",
                      layout=layout))
        p.append(pool("resnet50", "gap.b32" + sfx, "GlobalAveragePool", [32, 2048, 7, 7], "ResNet-50 final pool",
                      layout=layout))
        p.append(pool("efficientnet_b0", "gap_c144.b4" + sfx, "GlobalAveragePool", [4, 144, 56, 56],
                      "EfficientNet-B0 SE squeeze", layout=layout))
    p.append(pool("resnet50", "avgpool_d.b4", "AveragePool", [4, 256, 56, 56], "ResNet-50-D shortcut avg pool 2x2/2",
                  k=2, s=2, p=0))
    p.append(pool("deeplabv3", "aspp_gap.b1", "GlobalAveragePool", [1, 2048, 32, 32], "DeepLabv3 ASPP image pool"))
    p.append(pool("convnext_t", "gap.b64", "GlobalAveragePool", [64, 768, 7, 7], "ConvNeXt-T final pool"))
    p.append(squeeze_excite("efficientnet_b0", "se_c144.b4", 4, 144, 56, 6, "EfficientNet-B0 SE"))
    p.append(squeeze_excite("efficientnet_b0", "se_c480.b16", 16, 480, 14, 20, "EfficientNet-B0 SE"))
    return p


def cpu_instances():
    """The CPU catalog, in f32."""
    res = [Instance(p, "f32") for p in cpu_protos()]
    ids = [i.id for i in res]
    assert len(ids) == len(set(ids)), [x for x in ids if ids.count(x) > 1]
    return res


def catalog(name):
    """The instances of a catalog: "gpu" (instances()) or "cpu" (cpu_instances())."""
    return {"gpu": instances, "cpu": cpu_instances}[name]()


def _protos():
    out = []
    for fam in FAMILIES:
        out += fam()
    return out


def instances():
    """Every instance: all in f16, plus bf16 copies of the transformer / LLM / ViT / diffusion /
    speech families."""
    res = []
    protos = _protos()
    for p in protos:
        res.append(Instance(p, "f16"))
    for p in protos:
        if p["family"] in BF16_FAMILIES:
            res.append(Instance(p, "bf16"))
    ids = [i.id for i in res]
    assert len(ids) == len(set(ids)), [x for x in ids if ids.count(x) > 1]
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--list", action="store_true", help="one line per instance")
    p.add_argument("--summary", action="store_true", help="counts per class, family and dtype")
    p.add_argument("--out", help="write DIR/<id>.json Tessel models")
    p.add_argument("--only", nargs="+", help="only these instance ids")
    p.add_argument("--catalog", choices=("gpu", "cpu"), default="gpu",
                   help="the GPU sweep (f16/bf16) or the CPU sweep's f32 instances (default gpu)")
    a = p.parse_args()
    insts = catalog(a.catalog)
    if a.only:
        wanted = set(a.only)
        insts = [i for i in insts if i.id in wanted]
        missing = wanted - {i.id for i in insts}
        if missing:
            p.error("unknown instance ids: " + " ".join(sorted(missing)))
    if a.list:
        for i in insts:
            print("%-58s %-9s %10.3g FLOP %10.3g B  %s" % (i.id, i.cls, i.flops, i.min_bytes, i.description))
    if a.summary or not (a.list or a.out):
        def table(key, title):
            counts = {}
            for i in insts:
                counts[key(i)] = counts.get(key(i), 0) + 1
            print("%s:" % title)
            for k in sorted(counts):
                print("  %-18s %4d" % (k, counts[k]))
        table(lambda i: i.cls, "class")
        table(lambda i: i.family, "family")
        table(lambda i: i.dtype, "dtype")
        print("total %d instances, %d families, %d classes" % (
            len(insts), len({i.family for i in insts}), len({i.cls for i in insts})))
        print("max FLOPs %.3g, max bytes %.3g" % (max(i.flops for i in insts), max(i.min_bytes for i in insts)))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        for i in insts:
            with open(os.path.join(a.out, i.id + ".json"), "w", encoding="utf-8") as fh:
                fh.write(gm.render(i.build().document()) + "\n")
        print("wrote %d models to %s" % (len(insts), a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
