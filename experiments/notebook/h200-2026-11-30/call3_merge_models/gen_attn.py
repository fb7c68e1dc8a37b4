# timm-style attention block (tests/model_builder.h's timm_attention) as a JSON model, f16.
import json, sys
B, S, H, d = [int(v) for v in sys.argv[2:6]]
E = H * d
ops, ws = [], []
def w(name, shape, seed, lo=-0.2, hi=0.2): ws.append({"name": name, "dtype": "f16", "shape": shape, "init": {"dist": "uniform", "low": lo, "high": hi, "seed": seed}}); return name
def wi(name, v): ws.append({"name": name, "dtype": "i64", "shape": [len(v)], "data": v}); return name
def op(name, t, ins, attrs=None, outs=None):
    o = {"name": name, "op": t, "inputs": ins, "outputs": outs or [name]}
    if attrs: o["attrs"] = attrs
    ops.append(o); return name
t = op("qkv_add", "Add", [op("qkv", "MatMul", ["x", w("w_qkv", [E, 3 * E], 1)]), w("b_qkv", [3 * E], 2, -0.1, 0.1)])
t = op("to_heads", "Reshape", [t, wi("heads_shape", [B, S, 3, H, d])])
t = op("perm", "Transpose", [t], {"perm": [2, 0, 3, 1, 4]})
op("split", "Split", [t, wi("ones", [1, 1, 1])], {"axis": 0}, ["p0", "p1", "p2"])
q = op("q", "Squeeze", ["p0", wi("ax0", [0])]); k = op("k", "Squeeze", ["p1", wi("ax1", [0])]); v = op("v", "Squeeze", ["p2", wi("ax2", [0])])
kt = op("kt", "Transpose", [k], {"perm": [0, 1, 3, 2]})
sc = op("scaled", "Mul", [op("scores", "MatMul", [q, kt]), w("scale", [], 3, 0.1, 0.2)])
o = op("o", "MatMul", [op("probs", "Softmax", [sc], {"axis": -1}), v])
m = op("merge_t", "Transpose", [o], {"perm": [0, 2, 1, 3]})
m = op("merge", "Reshape", [m, wi("merge_shape", [B, S, E])])
out = op("out", "Add", [op("proj", "MatMul", [m, w("w_out", [E, E], 4)]), "x"])
json.dump({"format": "tessel-model", "version": 1, "name": "attn", "opset": 20, "inputs": [{"name": "x", "dtype": "f16", "shape": [B, S, E]}],
           "outputs": [out], "ops": ops, "weights": ws}, open(sys.argv[1], "w"))
