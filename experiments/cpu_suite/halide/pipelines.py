"""The CPU suite's workloads as Halide 14 pipelines (Python bindings), for the Halide baseline.

These are baselines, not part of Tessel. Each pipeline computes the same function as the
workload's PyTorch definition in experiments/workloads/workloads.py (fp32), over inputs with the
same names and shapes, and carries no schedule: every schedule comes from one of Halide's
autoschedulers (`schedule()` below). Input and output extents are fixed at compile time (as
Tessel's are) and given as estimates, which the autoschedulers need.

Layout: Halide's dimension 0 is the innermost (unit stride), so a row-major numpy array of shape
[d0, ..., dn] is the Halide buffer (dn, ..., d0) and `a[i, j]` is written `A[j, i]` below. The
convolution is written in the layout Halide's own conv_layer app uses, channels innermost
(NHWC: Halide (c, x, y, n)), which is the one its autoschedulers vectorize best; the runner
transposes (and pads) those inputs once, outside the timed region.

Math: `hl.exp` and `hl.erf` (full-precision, as torch and Tessel compute them); Halide's
`fast_exp` is not used, so that the pipelines match PyTorch to float precision.
"""

import math

import halide as hl

PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/halide14"
AUTOSCHEDULERS = {"Adams2019": "libautoschedule_adams2019.so",
                  "Mullapudi2016": "libautoschedule_mullapudi2016.so",
                  "Li2018": "libautoschedule_li2018.so"}
_loaded = set()


def load_autoscheduler(name):
    if name not in _loaded:
        hl.load_plugin(PLUGIN_DIR + "/" + AUTOSCHEDULERS[name])
        _loaded.add(name)


class Built:
    """A pipeline's inputs (name -> (ImageParam, numpy shape)), output Func and output shape."""

    def __init__(self):
        self.params = {}
        self.output = None
        self.out_shape = None
        self.prepare = {}  # input name -> numpy function applied once before binding (conv: NHWC, halo)
        self.out_layout = None  # permutation that takes the Halide result back to the torch layout

    def input(self, name, shape):
        """An fp32 input of numpy shape `shape` with fixed extents, dense row-major strides, estimates."""
        p = hl.ImageParam(hl.Float(32), len(shape), name)
        stride = 1
        for d, extent in enumerate(reversed(shape)):
            p.dim(d).set_bounds(0, extent).set_stride(stride).set_estimate(0, extent)
            stride *= extent
        self.params[name] = (p, list(shape))
        return p

    def set_output(self, f, shape):
        f.set_estimates([hl.Range(0, e) for e in reversed(shape)])
        ob = f.output_buffer()
        stride = 1
        for d, extent in enumerate(reversed(shape)):
            ob.dim(d).set_bounds(0, extent).set_stride(stride)
            stride *= extent
        self.output, self.out_shape = f, list(shape)


def _gelu(y):
    return hl.f32(0.5) * y * (hl.f32(1.0) + hl.erf(y * hl.f32(1.0 / math.sqrt(2.0))))


def _matmul(name, a, b, k_extent, bias=None):
    """C[n, m] = sum_k a(k, m) b(n, k) (+ bias(n)): a is [M, K] row-major, b is [K, N] row-major.
    a, b are callables taking (k, m) and (n, k) (Funcs or ImageParams)."""
    n, m = hl.Var(name + "_n"), hl.Var(name + "_m")
    r = hl.RDom([(0, k_extent)], name + "_r")
    c = hl.Func(name)
    c[n, m] = 0.0 if bias is None else bias[n]
    c[n, m] += a[r.x, m] * b[n, r.x]
    return c


def _layer_norm(name, x, cols, scale, bias, eps):
    """Over dimension 0 of the 2-D Func x (cols wide), two-pass mean and variance like torch."""
    c, r = hl.Var(name + "_c"), hl.Var(name + "_r")
    k = hl.RDom([(0, cols)], name + "_k")
    s = hl.Func(name + "_sum")
    s[r] = 0.0
    s[r] += x[k.x, r]
    mean = hl.Func(name + "_mean")
    mean[r] = s[r] * hl.f32(1.0 / cols)
    sq = hl.Func(name + "_sq")
    sq[r] = 0.0
    sq[r] += (x[k.x, r] - mean[r]) * (x[k.x, r] - mean[r])
    inv = hl.Func(name + "_inv")
    inv[r] = hl.f32(1.0) / hl.sqrt(sq[r] * hl.f32(1.0 / cols) + hl.f32(eps))
    out = hl.Func(name)
    out[c, r] = (x[c, r] - mean[r]) * inv[r] * scale[c] + bias[c]
    return out


def _softmax_rows(name, x, cols, dims):
    """Softmax over dimension 0 of Func x; `dims` are the Vars of the remaining dimensions."""
    c = hl.Var(name + "_c")
    k = hl.RDom([(0, cols)], name + "_k")
    mx = hl.Func(name + "_max")
    mx[dims] = hl.maximum(x[[k.x] + dims])
    e = hl.Func(name + "_exp")
    e[[c] + dims] = hl.exp(x[[c] + dims] - mx[dims])
    s = hl.Func(name + "_sum")
    s[dims] = 0.0
    s[dims] += e[[k.x] + dims]
    out = hl.Func(name)
    out[[c] + dims] = e[[c] + dims] / s[dims]
    return out


def _identity_func(name, p):
    """A Func wrapper of an ImageParam (so helpers can index it like any Func)."""
    vs = [hl.Var("%s_%d" % (name, i)) for i in range(p.dimensions())]
    f = hl.Func(name + "_in")
    f[vs] = p[vs]
    return f


# ---- the workloads --------------------------------------------------------------------------


def gemm(w):
    b = Built()
    (m_, k), (_, n) = w.shapes["x"], w.shapes["w"]
    x, wt = b.input("x", [m_, k]), b.input("w", [k, n])
    c = _matmul("gemm", x, wt, k)
    # A pure output Func over the reduction, as Halide's own matmul apps write it: an output Func
    # with an update definition cannot be computed at tiles of anything, and the autoschedulers
    # then leave the accumulator in memory (Adams2019: ~1 s instead of tens of ms here).
    j, i = hl.Var("j"), hl.Var("i")
    out = hl.Func("out")
    out[j, i] = c[j, i]
    b.set_output(out, [m_, n])
    return b


def bert_ffn1(w):
    b = Built()
    (m_, k), (_, n) = w.shapes["x"], w.shapes["w"]
    x, wt, bias = b.input("x", [m_, k]), b.input("w", [k, n]), b.input("b", [n])
    y = _matmul("ffn1", x, wt, k, bias)
    j, i = hl.Var("j"), hl.Var("i")
    out = hl.Func("gelu")
    out[j, i] = _gelu(y[j, i])
    b.set_output(out, [m_, n])
    return b


def layernorm(w):
    b = Built()
    rows, cols = w.shapes["x"]
    x, scale, bias = b.input("x", [rows, cols]), b.input("scale", [cols]), b.input("bias", [cols])
    b.set_output(_layer_norm("ln", x, cols, scale, bias, 1e-5), [rows, cols])
    return b


def softmax(w):
    b = Built()
    rows, cols = w.shapes["x"]
    x = b.input("x", [rows, cols])
    b.set_output(_softmax_rows("softmax", x, cols, [hl.Var("r")]), [rows, cols])
    return b


def eltwise_chain(w):
    b = Built()
    (n,) = w.shapes["x"]
    x, a, bb, c = (b.input(s, [n]) for s in "xabc")
    i = hl.Var("i")
    out = hl.Func("eltwise")
    out[i] = _gelu(x[i] * a[i] + bb[i]) * c[i]
    b.set_output(out, [n])
    return b


def conv_bn_relu(w):
    """NHWC: input (c, x, y, n), padded by the runner; weights (co, ci, kx, ky) from [co, ci, kh, kw].

    The input arrives with its zero halo already in place (as in Halide's apps/conv_layer, whose
    input includes the border): the runner pads it once, outside the timed region. Halide 14's
    Adams2019 runs out of memory (std::bad_alloc after > 20 GB) autoscheduling this pipeline when
    the padding is a Func (BoundaryConditions::constant_exterior or a select), so every
    autoscheduler gets the pre-padded form."""
    import numpy as np
    b = Built()
    batch, cin, hh, ww = w.shapes["x"]
    cout, _, kh, kw = w.shapes["w"]
    pad = kh // 2
    x = b.input("x", [batch, hh + 2 * pad, ww + 2 * pad, cin])
    wt = b.input("w", [kh, kw, cin, cout])
    scale, shift = b.input("scale", [cout]), b.input("shift", [cout])
    b.prepare = {
        "x": lambda a: np.pad(a.transpose(0, 2, 3, 1), ((0, 0), (pad, pad), (pad, pad), (0, 0))),
        "w": lambda a: a.transpose(2, 3, 1, 0),
    }
    c, xx, yy, nn = hl.Var("c"), hl.Var("x"), hl.Var("y"), hl.Var("n")
    r = hl.RDom([(0, cin), (0, kw), (0, kh)], "r")
    conv = hl.Func("conv")
    conv[c, xx, yy, nn] = hl.f32(0)
    conv[c, xx, yy, nn] += wt[c, r.x, r.y, r.z] * x[r.x, xx + r.y, yy + r.z, nn]
    out = hl.Func("bn_relu")
    out[c, xx, yy, nn] = hl.max(conv[c, xx, yy, nn] * scale[c] + shift[c], hl.f32(0))
    b.set_output(out, [batch, hh, ww, cout])
    b.out_layout = (0, 3, 1, 2)                      # NHWC result -> NCHW like torch's output
    return b


def bert_layer(w):
    """Post-LN BERT encoder layer, as workloads.bert_layer's torch function."""
    b = Built()
    batch, seq, hidden = w.shapes["hidden"]
    ffn = w.shapes["f1_w"][1]
    heads = hidden // 64  # BERT heads are 64 wide (workloads.bert_layer: 768 / 12)
    d = hidden // heads
    x = b.input("hidden", [batch, seq, hidden])
    p = {}
    for name, shape in w.shapes.items():
        if name != "hidden":
            p[name] = b.input(name, shape)
    # The [B, S, H] input seen as [tokens, H]: Halide (h, t).
    hv, tv = hl.Var("h"), hl.Var("t")
    x2 = hl.Func("x2")
    x2[hv, tv] = x[hv, tv % seq, tv // seq]
    q = _matmul("q", x2, p["q_w"], hidden, p["q_b"])
    k = _matmul("k", x2, p["k_w"], hidden, p["k_b"])
    v = _matmul("v", x2, p["v_w"], hidden, p["v_b"])
    # scores(j, i, head, bb) = q(i) . k(j) / sqrt(d) within batch bb.
    j, i, hd, bb = hl.Var("j"), hl.Var("i"), hl.Var("hd"), hl.Var("bb")
    rd = hl.RDom([(0, d)], "rd")
    scores = hl.Func("scores")
    scores[j, i, hd, bb] = 0.0
    scores[j, i, hd, bb] += q[hd * d + rd.x, bb * seq + i] * k[hd * d + rd.x, bb * seq + j]
    scaled = hl.Func("scaled")
    scaled[j, i, hd, bb] = scores[j, i, hd, bb] * hl.f32(1.0 / math.sqrt(d))
    probs = _softmax_rows("probs", scaled, seq, [i, hd, bb])
    # ctx(h, t): t = bb * seq + i, h = head * d + dd.
    rj = hl.RDom([(0, seq)], "rj")
    ctx = hl.Func("ctx")
    ctx[hv, tv] = 0.0
    ctx[hv, tv] += probs[rj.x, tv % seq, hv // d, tv // seq] * v[hv, (tv // seq) * seq + rj.x]
    o = _matmul("o", ctx, p["o_w"], hidden, p["o_b"])
    res1 = hl.Func("res1")
    res1[hv, tv] = o[hv, tv] + x2[hv, tv]
    h1 = _layer_norm("ln1", res1, hidden, p["ln1_s"], p["ln1_b"], 1e-12)
    f1 = _matmul("f1", h1, p["f1_w"], hidden, p["f1_b"])
    g = hl.Func("gelu")
    g[hv, tv] = _gelu(f1[hv, tv])
    f2 = _matmul("f2", g, p["f2_w"], ffn, p["f2_b"])
    res2 = hl.Func("res2")
    res2[hv, tv] = f2[hv, tv] + h1[hv, tv]
    h2 = _layer_norm("ln2", res2, hidden, p["ln2_s"], p["ln2_b"], 1e-12)
    out = hl.Func("bert_out")
    s_, b_ = hl.Var("s"), hl.Var("b")
    out[hv, s_, b_] = h2[hv, b_ * seq + s_]
    b.set_output(out, [batch, seq, hidden])
    return b


PIPELINES = {"gemm": gemm, "bert_ffn1": bert_ffn1, "layernorm": layernorm, "softmax": softmax,
             "eltwise_chain": eltwise_chain, "conv_bn_relu": conv_bn_relu, "bert_layer": bert_layer}


def build(workload):
    return PIPELINES[workload.id](workload)


def schedule(built, autoscheduler, target, machine):
    """Autoschedule the pipeline; returns (Pipeline, schedule source text)."""
    load_autoscheduler(autoscheduler)
    pipe = hl.Pipeline(built.output)
    result = pipe.auto_schedule(autoscheduler, target, machine)
    return pipe, result.schedule_source
