import json, sys
def w(name, shape, seed, std=0.03):
    return {"name": name, "dtype": "f16", "shape": shape, "init": {"dist": "normal", "mean": 0.0, "std": std, "seed": seed}}
def model(name, inputs, weights, ops, outputs):
    return {"format": "tessel-model", "version": 1, "name": name, "opset": 17, "inputs": inputs, "outputs": outputs, "weights": weights, "ops": ops}
def bn(prefix, src, c, seed, res=None):
    ops = [{"name": prefix+"_scale", "op": "Mul", "inputs": [src, prefix+"_s"], "outputs": [prefix+"_scale"]},
           {"name": prefix+"_shift", "op": "Add", "inputs": [prefix+"_scale", prefix+"_t"], "outputs": [prefix+"_shift"]}]
    last = prefix+"_shift"
    if res:
        ops.append({"name": prefix+"_add", "op": "Add", "inputs": [last, res], "outputs": [prefix+"_add"]}); last = prefix+"_add"
    ops.append({"name": prefix+"_relu", "op": "Relu", "inputs": [last], "outputs": [prefix+"_relu"]})
    ws = [{"name": prefix+"_s", "dtype": "f16", "shape": [c], "init": {"dist": "uniform", "low": 0.9, "high": 1.1, "seed": seed}},
          w(prefix+"_t", [c], seed+1, 0.02)]
    return ops, ws, prefix+"_relu"
conv_attrs = {"dilations": [1, 1], "group": 1, "kernel_shape": [1, 1], "layout": "NHWC", "pads": [0, 0, 0, 0], "strides": [1, 1]}
B, H, W = 32, 14, 14
M = B * H * W
out = {}
# conv1: 1024 -> 256, BN, relu
for kind in ("conv", "gemm"):
    for (cin, cout, res) in ((1024, 256, False), (256, 1024, True)):
        shape_in = [B, H, W, cin] if kind == "conv" else [M, cin]
        inputs = [{"name": "x", "dtype": "f16", "shape": shape_in}]
        if res:
            inputs.append({"name": "r", "dtype": "f16", "shape": [B, H, W, cout] if kind == "conv" else [M, cout]})
        if kind == "conv":
            wt = w("wc", [cout, 1, 1, cin], 1, 1.0 / cin ** 0.5)
            op = {"name": "c", "op": "Conv", "inputs": ["x", "wc"], "outputs": ["c"], "attrs": conv_attrs}
        else:
            wt = w("wc", [cin, cout], 1, 1.0 / cin ** 0.5)
            op = {"name": "c", "op": "MatMul", "inputs": ["x", "wc"], "outputs": ["c"]}
        ops, ws, last = bn("b", "c", cout, 2, "r" if res else None)
        name = f"{kind}_{cin}_{cout}" + ("_res" if res else "")
        json.dump(model(name, inputs, [wt] + ws, [op] + ops, [last]), open(name + ".json", "w"))
        print(name)
