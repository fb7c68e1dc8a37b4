# GEMM micro-models: x[M,K] @ w[K,N] (+ bias) (+ Gelu) (+ residual), f16.
import json, sys, os
out = sys.argv[1]
cases = {
  "deit_fc1":  (1576, 384, 1536, "bias,gelu"),
  "deit_fc2":  (1576, 1536, 384, "bias,res"),
  "deit_proj": (1576, 384, 384, "bias,res"),
  "deit_qkv":  (1576, 384, 1152, "bias"),
  "bert8_q":   (1024, 768, 768, "bias"),
  "bert8_fc1": (1024, 768, 3072, "bias,gelu"),
  "bert8_fc2": (1024, 3072, 768, "bias,res"),
  "vit8_fc1":  (1576, 768, 3072, "bias,gelu"),
  "plain_4k":  (4096, 4096, 4096, ""),
  "odd_fc1":   (1000, 520, 2056, "bias,gelu"),
  "llama_o":   (128, 2048, 2048, "res"),
  "llama_down": (128, 5632, 2048, "res"),
  "gpt2_fc2":  (512, 3072, 768, "bias,res"),
}
os.makedirs(out, exist_ok=True)
for name, (M, K, N, epi) in cases.items():
    ops = [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["mm"]}]
    ws = [{"name": "w", "dtype": "f16", "shape": [K, N], "init": {"dist": "normal", "mean": 0.0, "std": 0.03, "seed": 1}}]
    inputs = [{"name": "x", "dtype": "f16", "shape": [M, K]}]
    cur = "mm"
    if "bias" in epi:
        ws.append({"name": "b", "dtype": "f16", "shape": [N], "init": {"dist": "normal", "mean": 0.0, "std": 0.5, "seed": 2}})
        ops.append({"name": "bias", "op": "Add", "inputs": [cur, "b"], "outputs": ["bias"]}); cur = "bias"
    if "gelu" in epi:
        ops.append({"name": "gelu", "op": "Gelu", "inputs": [cur], "outputs": ["gelu"]}); cur = "gelu"
    if "res" in epi:
        inputs.append({"name": "r", "dtype": "f16", "shape": [M, N]})
        ops.append({"name": "res", "op": "Add", "inputs": [cur, "r"], "outputs": ["res"]}); cur = "res"
    m = {"format": "tessel-model", "version": 1, "name": name, "opset": 20, "inputs": inputs, "outputs": [cur], "ops": ops, "weights": ws}
    json.dump(m, open(f"{out}/{name}.json", "w"))
