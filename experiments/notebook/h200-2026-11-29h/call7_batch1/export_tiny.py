# Tiny DeiT-S (depth 1) and torchvision ViT-B (1 layer) exported as run_real_models exports them.
import sys, torch
sys.path.insert(0, "experiments/real_models")
import run_real_models as R
out = sys.argv[1]
import timm, torchvision
torch.manual_seed(0)
m = timm.create_model("deit_small_patch16_224", pretrained=False, depth=1).eval().half().cuda()
x = torch.randn(2, 3, 224, 224, device="cuda", dtype=torch.float16)
print(R.export_onnx(torch, m, (x,), out + "/deit1.onnx", ["image"], ["output"]))
v = torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=1, num_heads=3, hidden_dim=192, mlp_dim=768).eval().half().cuda()
print(R.export_onnx(torch, v, (x,), out + "/vit1.onnx", ["image"], ["output"]))
