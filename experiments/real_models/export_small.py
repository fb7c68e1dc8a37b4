#!/usr/bin/env python3
"""Small versions of the real models, exported as run_real_models.py exports them, to study on a
machine without PyTorch: the same architectures, the same exporter (opset 18, TorchScript first),
fp16, random weights, with fewer layers or smaller images so that the files are a few MB. What
Tessel's normalize stage and kernel families do with an exporter's graph depends on the graph's
pattern (views, BatchNormalization, depthwise convolutions, squeeze-excitation), not on its size, so
these reproduce the patterns of the full models. Run on the GPU machine (PyTorch, torchvision):

    python3 experiments/real_models/export_small.py OUT_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_real_models import export_onnx  # noqa: E402


def models(torch, torchvision):
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    from torchvision.models.vision_transformer import VisionTransformer
    img = lambda b, s: torch.randn(b, 3, s, s)  # noqa: E731
    return {
        # torchvision's ViT block (nn.MultiheadAttention, batch_first), one layer, 4 patches.
        "vit_small_block": (VisionTransformer(image_size=32, patch_size=16, num_layers=1, num_heads=2,
                                              hidden_dim=128, mlp_dim=256), img(2, 32)),
        # the full networks at a 64x64 image: every block pattern of the 224x224 models.
        "efficientnet_b0_64": (torchvision.models.efficientnet_b0(weights=None), img(1, 64)),
        "mobilenet_v2_64": (torchvision.models.mobilenet_v2(weights=None), img(1, 64)),
        # ConvNeXt with one block per stage and a quarter of the channels.
        "convnext_small_blocks": (ConvNeXt([CNBlockConfig(24, 48, 1), CNBlockConfig(48, 96, 1),
                                            CNBlockConfig(96, 192, 1), CNBlockConfig(192, None, 1)]), img(1, 64)),
    }


def main():
    import torch
    import torchvision
    out = sys.argv[1] if len(sys.argv) > 1 else "small-models"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, (module, x) in models(torch, torchvision).items():
        module = module.eval().half().cuda()
        path = os.path.join(out, name + ".onnx")
        with torch.no_grad():
            info = export_onnx(torch, module, [x.half().cuda()], path, ["x"], ["y"])
        print(name, info.get("exporter"), os.path.getsize(path) if os.path.exists(path) else "not written", flush=True)


if __name__ == "__main__":
    main()
