# Diagnose the ONNX export of transformers' BERT as TorchDynamo captures it.
import traceback, io, torch, transformers
graphs = []
def grab(gm, example_inputs):
    graphs.append((gm, example_inputs))
    return gm.forward
torch.manual_seed(0)
config = transformers.BertConfig()
model = transformers.BertModel(config).cuda().eval()
ids = torch.randint(0, config.vocab_size, (2, 128), device="cuda")
with torch.no_grad():
    torch.compile(model, backend=grab)(input_ids=ids)
print("graphs:", len(graphs))
for gm, ex in graphs:
    print([ (type(x).__name__, getattr(x, "device", None), getattr(x, "shape", None)) for x in ex][:8])
    for name, b in list(gm.named_buffers())[:5] + list(gm.named_parameters())[:3]:
        print("  buffer/param", name, b.device, tuple(b.shape))
    for n in gm.graph.nodes:
        if n.op == "get_attr": print("  get_attr", n.target, getattr(getattr(gm, n.target, None), "device", None))
    try:
        torch.onnx.export(gm, tuple(ex), io.BytesIO(), opset_version=17, dynamo=False)
        print("TorchScript export ok")
    except Exception:
        traceback.print_exc(limit=-8)
