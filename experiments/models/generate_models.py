#!/usr/bin/env python3
"""Writes the bundled Tessel JSON models (docs/model-format.md) into experiments/models/.

Every weight is a seeded random `init` (no weight data is written, only tiny i64 shape constants and
scalars as inline `data`), so the files stay small and every run of the generator gives the same
bytes. The text is printed in the same canonical layout as Tessel's writer (`write_model_json`):
fixed key order, 2-space indent, containers that fit in 100 columns on one line, floats in their
shortest round-trip form. Loading a file and writing it again therefore gives identical text.

Models (see README.md next to this script):
  bert_base_layer, bert_base_12_layers, vit_b_block, llama_decoder_block, resnet50_bottleneck,
  resnet50.

Usage: generate_models.py [--batch B] [--seq S] [--image N] [--out DIR] [--only NAME ...]
                          [per-model sizes: --bert-hidden ... --llama-ffn ...]
Python 3 standard library only.
"""

import argparse
import decimal
import json
import math
import os
import struct

LINE_WIDTH = 100

# ------------------------------------------------------------------------------------------------
# Canonical JSON text (the same layout as tilegraph/import/model_json.cpp).


def format_float(x):
    """A float as nlohmann_json prints it: shortest round-trip digits, decimal notation for
    decimal exponents in (-4, 15], otherwise d.ddde+XX; integral values get a trailing '.0'."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError("non-finite floats are written as strings")
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exp += 1
    text = "".join(map(str, digits))
    k, n = len(digits), len(digits) + exp
    if k <= n <= 15:
        body = text + "0" * (n - k) + ".0"
    elif 0 < n <= 15:
        body = text[:n] + "." + text[n:]
    elif -4 < n <= 0:
        body = "0." + "0" * (-n) + text
    else:
        e = n - 1
        mantissa = text if k == 1 else text[0] + "." + text[1:]
        body = "%se%s%02d" % (mantissa, "-" if e < 0 else "+", abs(e))
    return ("-" if sign else "") + body


def f32(x):
    """The value of x rounded to float32, in its shortest decimal form (as Tessel writes f32 data)."""
    rounded = struct.unpack("f", struct.pack("f", x))[0]
    for digits in range(1, 10):
        candidate = float("%.*g" % (digits, rounded))
        if struct.unpack("f", struct.pack("f", candidate))[0] == rounded:
            return candidate
    return rounded


def render_inline(v):
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k) + ": " + render_inline(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(render_inline(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    return json.dumps(v, ensure_ascii=False)


def render(v, indent=0, column=0):
    structured = isinstance(v, (dict, list))
    if not structured or not v:
        return render_inline(v)
    line = render_inline(v)
    if column < LINE_WIDTH and len(line) <= LINE_WIDTH - column:
        return line
    pad = " " * (indent + 2)
    close = "\n" + " " * indent + ("}" if isinstance(v, dict) else "]")
    if isinstance(v, list) and not any(isinstance(x, (dict, list)) for x in v):
        out, col = "[\n" + pad, len(pad)
        for i, x in enumerate(v):
            item = render_inline(x) + ("," if i + 1 < len(v) else "")
            if i > 0 and col + 1 + len(item) > LINE_WIDTH:
                out += "\n" + pad
                col = len(pad)
            elif i > 0:
                out += " "
                col += 1
            out += item
            col += len(item)
        return out + close
    if isinstance(v, list):
        parts = [render(x, indent + 2, len(pad)) for x in v]
        return "[\n" + ",\n".join(pad + p for p in parts) + close
    parts = []
    for k, x in v.items():
        prefix = json.dumps(k) + ": "
        parts.append(pad + prefix + render(x, indent + 2, len(pad) + len(prefix)))
    return "{\n" + ",\n".join(parts) + close


# ------------------------------------------------------------------------------------------------
# Building a model.


class Model:
    """A Tessel model under construction. Tensor names are unique; every op's output tensor is
    named after the op (ops and tensors have separate namespaces in the format). `dtype` is the
    element type of every floating-point input, weight and constant ("f32", "f16", "bf16")."""

    def __init__(self, name, opset, dtype="f32"):
        self.name, self.opset, self.dtype = name, opset, dtype
        self.inputs, self.outputs, self.weights, self.ops = [], [], [], []
        self.next_seed = 1

    def input(self, name, shape):
        self.inputs.append({"name": name, "dtype": self.dtype, "shape": list(shape)})
        return name

    def _weight(self, name, dtype, shape, source):
        self.weights.append(dict({"name": name, "dtype": dtype, "shape": list(shape)}, **source))
        return name

    def normal(self, name, shape, std=0.02, mean=0.0):
        seed, self.next_seed = self.next_seed, self.next_seed + 1
        init = {"dist": "normal", "mean": float(mean), "std": float(std), "seed": seed}
        return self._weight(name, self.dtype, shape, {"init": init})

    def uniform(self, name, shape, low, high):
        seed, self.next_seed = self.next_seed, self.next_seed + 1
        init = {"dist": "uniform", "low": float(low), "high": float(high), "seed": seed}
        return self._weight(name, self.dtype, shape, {"init": init})

    def i64(self, name, values, shape=None):
        shape = [len(values)] if shape is None else shape
        return self._weight(name, "i64", shape, {"data": [int(v) for v in values]})

    def f32_scalar(self, name, value):
        """A scalar constant of the model's float dtype (its value written as the f32 nearest)."""
        return self._weight(name, self.dtype, [], {"data": [f32(value)]})

    def op(self, name, op_type, inputs, **attrs):
        entry = {"name": name, "op": op_type, "inputs": list(inputs), "outputs": [name]}
        if attrs:
            entry["attrs"] = {k: attrs[k] for k in sorted(attrs)}
        self.ops.append(entry)
        return name

    def output(self, name):
        self.outputs.append(name)

    def document(self):
        return {"format": "tessel-model", "version": 1, "name": self.name, "opset": self.opset,
                "inputs": self.inputs, "outputs": self.outputs, "weights": self.weights,
                "ops": self.ops}


# ------------------------------------------------------------------------------------------------
# Shared pieces.


def linear(m, prefix, x, d_in, d_out, bias=True, std=0.02):
    """x @ W (+ b): MatMul with a [d_in, d_out] weight, then Add of a [d_out] bias."""
    y = m.op(prefix, "MatMul", [x, m.normal(prefix + "_w", [d_in, d_out], std)])
    if bias:
        y = m.op(prefix + "_add", "Add", [y, m.normal(prefix + "_b", [d_out], 0.02)])
    return y


def layer_norm(m, prefix, x, hidden, epsilon):
    scale = m.uniform(prefix + "_scale", [hidden], 0.9, 1.1)
    bias = m.normal(prefix + "_bias", [hidden], 0.02)
    return m.op(prefix, "LayerNormalization", [x, scale, bias], axis=-1, epsilon=epsilon)


def rms_norm(m, prefix, x, hidden, epsilon):
    scale = m.uniform(prefix + "_scale", [hidden], 0.9, 1.1)
    return m.op(prefix, "RMSNormalization", [x, scale], axis=-1, epsilon=epsilon)


def attention(m, prefix, x, batch, seq, hidden, heads, bias, shapes, mask=None):
    """Multi-head self-attention on x [B,S,hidden]; returns the output projection [B,S,hidden].
    `shapes` names the i64 shape constants [B,S,heads,d] and [B,S,hidden] and the scale 1/sqrt(d)."""
    q = linear(m, prefix + "_q", x, hidden, hidden, bias)
    k = linear(m, prefix + "_k", x, hidden, hidden, bias)
    v = linear(m, prefix + "_v", x, hidden, hidden, bias)
    q = m.op(prefix + "_q_heads", "Reshape", [q, shapes["heads"]])
    k = m.op(prefix + "_k_heads", "Reshape", [k, shapes["heads"]])
    v = m.op(prefix + "_v_heads", "Reshape", [v, shapes["heads"]])
    q = m.op(prefix + "_q_t", "Transpose", [q], perm=[0, 2, 1, 3])  # [B,h,S,d]
    k = m.op(prefix + "_k_t", "Transpose", [k], perm=[0, 2, 3, 1])  # [B,h,d,S]
    v = m.op(prefix + "_v_t", "Transpose", [v], perm=[0, 2, 1, 3])  # [B,h,S,d]
    scores = m.op(prefix + "_scores", "MatMul", [q, k])             # [B,h,S,S]
    scores = m.op(prefix + "_scaled", "Mul", [scores, shapes["scale"]])
    if mask is not None:
        scores = m.op(prefix + "_masked", "Add", [scores, mask])
    probs = m.op(prefix + "_probs", "Softmax", [scores], axis=-1)
    ctx = m.op(prefix + "_ctx", "MatMul", [probs, v])               # [B,h,S,d]
    ctx = m.op(prefix + "_ctx_t", "Transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = m.op(prefix + "_ctx_merge", "Reshape", [ctx, shapes["hidden"]])
    return linear(m, prefix + "_o", ctx, hidden, hidden, bias)


def attention_constants(m, batch, seq, hidden, heads):
    head_dim = hidden // heads
    return {"heads": m.i64("shape_heads", [batch, seq, heads, head_dim]),
            "hidden": m.i64("shape_hidden", [batch, seq, hidden]),
            "scale": m.f32_scalar("attn_scale", 1.0 / math.sqrt(head_dim))}


# ------------------------------------------------------------------------------------------------
# Transformers.


def bert_layer(m, prefix, x, a, consts):
    """Post-LN BERT encoder layer: LN(x + Attn(x)), then LN(h + FFN(h)) with GELU (erf)."""
    attn = attention(m, prefix + "_attn", x, a.batch, a.bert_seq, a.bert_hidden, a.bert_heads, True,
                     consts)
    h = m.op(prefix + "_res1", "Add", [attn, x])
    h = layer_norm(m, prefix + "_ln1", h, a.bert_hidden, 1e-12)
    f = linear(m, prefix + "_ffn1", h, a.bert_hidden, a.bert_ffn)
    f = m.op(prefix + "_gelu", "Gelu", [f], approximate="none")
    f = linear(m, prefix + "_ffn2", f, a.bert_ffn, a.bert_hidden)
    out = m.op(prefix + "_res2", "Add", [f, h])
    return layer_norm(m, prefix + "_ln2", out, a.bert_hidden, 1e-12)


def bert(a, layers, name):
    m = Model(name, 20, getattr(a, "dtype", "f32"))  # Gelu is opset 20
    x = m.input("hidden", [a.batch, a.bert_seq, a.bert_hidden])
    consts = attention_constants(m, a.batch, a.bert_seq, a.bert_hidden, a.bert_heads)
    for i in range(layers):
        x = bert_layer(m, "l%d" % i, x, a, consts)
    m.output(x)
    return m


def vit_block(a):
    """Pre-LN ViT-B/16 encoder block: h = x + Attn(LN(x)); out = h + MLP(LN(h))."""
    m = Model("vit_b_block", opset=20)
    x = m.input("tokens", [a.batch, a.vit_seq, a.vit_hidden])
    consts = attention_constants(m, a.batch, a.vit_seq, a.vit_hidden, a.vit_heads)
    n1 = layer_norm(m, "ln1", x, a.vit_hidden, 1e-6)
    attn = attention(m, "attn", n1, a.batch, a.vit_seq, a.vit_hidden, a.vit_heads, True, consts)
    h = m.op("res1", "Add", [x, attn])
    n2 = layer_norm(m, "ln2", h, a.vit_hidden, 1e-6)
    f = linear(m, "mlp1", n2, a.vit_hidden, a.vit_mlp)
    f = m.op("gelu", "Gelu", [f], approximate="none")
    f = linear(m, "mlp2", f, a.vit_mlp, a.vit_hidden)
    m.output(m.op("res2", "Add", [h, f]))
    return m


def llama_block(a):
    """LLaMA-style decoder block: RMSNorm, causal attention without biases (the mask is built in
    the graph), residual, RMSNorm, SwiGLU MLP, residual. No rotary embedding."""
    m = Model("llama_decoder_block", 23, getattr(a, "dtype", "f32"))  # RMSNormalization: opset 23
    s, hidden = a.llama_seq, a.llama_hidden
    x = m.input("hidden", [a.batch, s, hidden])
    consts = attention_constants(m, a.batch, s, hidden, a.llama_heads)
    # Causal mask: -1e9 above the diagonal, 0 elsewhere: Trilu(upper=1, k=1) of a [S,S] fill.
    fill = m.op("mask_fill", "ConstantOfShape", [m.i64("mask_shape", [s, s])],
                value={"tensor": {"dtype": m.dtype, "shape": [1], "data": [-1e9 if m.dtype == "f32" else -6e4]}})
    mask = m.op("causal_mask", "Trilu", [fill, m.i64("mask_k", [1], shape=[])], upper=1)

    n1 = rms_norm(m, "attn_norm", x, hidden, 1e-5)
    attn = attention(m, "attn", n1, a.batch, s, hidden, a.llama_heads, False, consts, mask)
    h = m.op("res1", "Add", [x, attn])
    n2 = rms_norm(m, "mlp_norm", h, hidden, 1e-5)
    gate = linear(m, "mlp_gate", n2, hidden, a.llama_ffn, bias=False)
    sig = m.op("mlp_gate_sigmoid", "Sigmoid", [gate])
    silu = m.op("mlp_silu", "Mul", [gate, sig])
    up = linear(m, "mlp_up", n2, hidden, a.llama_ffn, bias=False)
    prod = m.op("mlp_swiglu", "Mul", [silu, up])
    down = linear(m, "mlp_down", prod, a.llama_ffn, hidden, bias=False)
    m.output(m.op("res2", "Add", [h, down]))
    return m


# ------------------------------------------------------------------------------------------------
# ResNet-50 v1.5 (NCHW). Conv weights are normal with std 1/sqrt(fan_in) so activations keep
# their scale through 50 layers; BN uses inference statistics.


def conv_out(size, kernel, stride, pad):
    return (size + 2 * pad - kernel) // stride + 1


def conv_bn(m, prefix, x, c_in, c_out, kernel, stride=1, relu=True):
    pad = kernel // 2
    w = m.normal(prefix + "_w", [c_out, c_in, kernel, kernel], 1.0 / math.sqrt(c_in * kernel * kernel))
    y = m.op(prefix, "Conv", [x, w], kernel_shape=[kernel, kernel], pads=[pad, pad, pad, pad],
             strides=[stride, stride], dilations=[1, 1], group=1)
    bn = [y, m.uniform(prefix + "_bn_scale", [c_out], 0.9, 1.1),
          m.normal(prefix + "_bn_bias", [c_out], 0.02),
          m.normal(prefix + "_bn_mean", [c_out], 0.02),
          m.uniform(prefix + "_bn_var", [c_out], 0.5, 1.5)]
    y = m.op(prefix + "_bn", "BatchNormalization", bn, epsilon=1e-5, momentum=0.9)
    return m.op(prefix + "_relu", "Relu", [y]) if relu else y


def bottleneck(m, prefix, x, c_in, c_mid, c_out, stride):
    """1x1 reduce, 3x3 (carrying the stride: v1.5), 1x1 expand; projection shortcut when the
    shape changes; Add; Relu."""
    y = conv_bn(m, prefix + "_conv1", x, c_in, c_mid, 1)
    y = conv_bn(m, prefix + "_conv2", y, c_mid, c_mid, 3, stride)
    y = conv_bn(m, prefix + "_conv3", y, c_mid, c_out, 1, relu=False)
    shortcut = x
    if stride != 1 or c_in != c_out:
        shortcut = conv_bn(m, prefix + "_proj", x, c_in, c_out, 1, stride, relu=False)
    y = m.op(prefix + "_add", "Add", [y, shortcut])
    return m.op(prefix + "_relu", "Relu", [y])


def resnet50_spatial(image):
    """Spatial size at the input of stage 3 (conv4_x) for an image of `image` pixels."""
    s = conv_out(image, 7, 2, 3)   # stem conv
    s = conv_out(s, 3, 2, 1)       # max pool
    s = conv_out(s, 3, 2, 1)       # stage 2 downsamples
    return conv_out(s, 3, 2, 1)    # stage 3 downsamples in its first block


def resnet50_bottleneck(a):
    m = Model("resnet50_bottleneck", opset=17)
    hw = resnet50_spatial(a.image)
    x = m.input("x", [a.batch, 1024, hw, hw])
    m.output(bottleneck(m, "block", x, 1024, 256, 1024, 1))
    return m


def resnet50(a):
    m = Model("resnet50", opset=17)
    x = m.input("image", [a.batch, 3, a.image, a.image])
    y = conv_bn(m, "stem", x, 3, 64, 7, 2)
    y = m.op("stem_pool", "MaxPool", [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    c_in = 64
    for stage, (c_mid, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for b in range(blocks):
            y = bottleneck(m, "s%d_b%d" % (stage + 1, b), y, c_in, c_mid, 4 * c_mid,
                           stride if b == 0 else 1)
            c_in = 4 * c_mid
    y = m.op("pool", "GlobalAveragePool", [y])
    y = m.op("flatten", "Flatten", [y], axis=1)
    fc_w = m.normal("fc_w", [1000, c_in], 1.0 / math.sqrt(c_in))
    fc_b = m.normal("fc_b", [1000], 0.02)
    m.output(m.op("fc", "Gemm", [y, fc_w, fc_b], alpha=1.0, beta=1.0, transB=1))
    return m


# ------------------------------------------------------------------------------------------------

MODELS = {
    "bert_base_layer": lambda a: bert(a, 1, "bert_base_layer"),
    "bert_base_12_layers": lambda a: bert(a, a.bert_layers, "bert_base_12_layers"),
    "vit_b_block": vit_block,
    "llama_decoder_block": llama_block,
    "resnet50_bottleneck": resnet50_bottleneck,
    "resnet50": resnet50,
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                   help="output directory (default: next to this script)")
    p.add_argument("--only", nargs="+", choices=sorted(MODELS), help="generate only these models")
    p.add_argument("--batch", type=int, default=1, help="batch size of every model (default 1)")
    p.add_argument("--seq", type=int, help="tokens of every transformer (overrides the per-model defaults)")
    p.add_argument("--image", type=int, default=224, help="ResNet image size (default 224)")
    g = p.add_argument_group("BERT-base")
    g.add_argument("--bert-seq", type=int, default=128)
    g.add_argument("--bert-hidden", type=int, default=768)
    g.add_argument("--bert-heads", type=int, default=12)
    g.add_argument("--bert-ffn", type=int, default=3072)
    g.add_argument("--bert-layers", type=int, default=12, help="layers of bert_base_12_layers")
    g = p.add_argument_group("ViT-B/16")
    g.add_argument("--vit-seq", type=int, default=197)
    g.add_argument("--vit-hidden", type=int, default=768)
    g.add_argument("--vit-heads", type=int, default=12)
    g.add_argument("--vit-mlp", type=int, default=3072)
    g = p.add_argument_group("LLaMA decoder block")
    g.add_argument("--llama-seq", type=int, default=16)
    g.add_argument("--llama-hidden", type=int, default=4096)
    g.add_argument("--llama-heads", type=int, default=32)
    g.add_argument("--llama-ffn", type=int, default=11008)
    a = p.parse_args()
    if a.seq is not None:
        a.bert_seq = a.vit_seq = a.llama_seq = a.seq
    for hidden, heads, what in [(a.bert_hidden, a.bert_heads, "bert"), (a.vit_hidden, a.vit_heads, "vit"),
                                (a.llama_hidden, a.llama_heads, "llama")]:
        if hidden % heads:
            p.error("--%s-hidden %d is not a multiple of --%s-heads %d" % (what, hidden, what, heads))
    if min(a.batch, a.bert_seq, a.vit_seq, a.llama_seq, a.image) < 1:
        p.error("sizes must be positive")
    return a


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.only or MODELS:
        m = MODELS[name](a)
        path = os.path.join(a.out, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(render(m.document()) + "\n")
        print("wrote %s (%d ops, %d weights)" % (path, len(m.ops), len(m.weights)))


if __name__ == "__main__":
    main()
