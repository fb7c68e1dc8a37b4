"""torch modules through tessel.compile, and torch.compile(backend="tessel"). Needs PyTorch (the
GPU machine has it; CI's CPU machine does not: SKIP). The GPU cases need a CUDA device."""
import logging

import pytest

torch = pytest.importorskip("torch")
import tessel  # noqa: E402
import tessel.torch_backend  # noqa: E402,F401  (registers the backend)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def took_tessel(caplog, what):
    """Every graph TorchDynamo captured was compiled by Tessel (none kept in PyTorch); prints what
    was compiled, for the run's record."""
    compiled = [r.message for r in caplog.records if "compiled a graph" in r.message]
    kept = [r.message for r in caplog.records if "kept in PyTorch" in r.message]
    print(f"\n{what}: " + "; ".join(compiled + kept))
    assert compiled and not kept, caplog.text


def rel_l2(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


class Mlp(torch.nn.Module):
    def __init__(self, d=64, h=256):
        super().__init__()
        self.up = torch.nn.Linear(d, h)
        self.down = torch.nn.Linear(h, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


def test_module_on_the_cpu():
    torch.manual_seed(0)
    model = Mlp().eval()
    x = torch.randn(4, 32, 64)
    m = tessel.compile(model, example_inputs=(x,), device="cpu")
    y = m(x)
    assert isinstance(y, torch.Tensor) and y.shape == x.shape
    assert rel_l2(y, model(x)) < 1e-4
    assert all(r["ok"] for r in m.check(x.numpy()))


def test_torch_compile_backend_on_the_cpu(caplog):
    torch.manual_seed(0)
    model = Mlp().eval()
    x = torch.randn(2, 8, 64)
    fast = torch.compile(model, backend="tessel")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="tessel"):
        y = fast(x)
    assert rel_l2(y, model(x)) < 1e-4
    assert any("compiled a graph" in r.message for r in caplog.records), caplog.text


def test_unsupported_graph_falls_back_with_a_reason(caplog):
    def f(x):
        return torch.fft.rfft(x).abs()  # complex numbers: not a Tessel dtype

    x = torch.randn(16)
    fast = torch.compile(f, backend="tessel")
    with caplog.at_level(logging.WARNING, logger="tessel"):
        y = fast(x)
    assert torch.allclose(y, f(x))
    assert any("kept in PyTorch" in r.message for r in caplog.records), caplog.text


@cuda
def test_module_on_the_gpu_device_resident():
    torch.manual_seed(0)
    model = Mlp(256, 1024).cuda().half().eval()
    x = torch.randn(8, 128, 256, device="cuda", dtype=torch.half)
    m = tessel.compile(model, example_inputs=(x,), device="cuda")
    assert m._impl.device_resident  # CUDA tensors go device to device, no host round trip
    with torch.no_grad():
        expected = model(x)
    y = m(x)
    assert y.is_cuda and y.dtype == torch.half
    assert rel_l2(y, expected) < 2e-2
    assert all(r["ok"] for r in m.check())
    kernels = m.profile(repeats=5)  # each kernel timed between its own events
    assert len(kernels) == m.report["groups"] and all(k["measured_s"] > 0 for k in kernels)
    print("\nMLP f16 kernels, predicted vs measured:", [(k["family"], k["predicted_s"], k["measured_s"]) for k in kernels])
    assert m.explain(profile=kernels).count("  profiled  ") == len(kernels)


@cuda
def test_torch_compile_resnet50(caplog):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda().eval()
    x = torch.randn(2, 3, 224, 224, device="cuda")
    fast = torch.compile(model, backend="tessel")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="tessel"):
        expected = model(x)
        y = fast(x)
    took_tessel(caplog, f"resnet50 (relative L2 error {rel_l2(y, expected):.2e})")
    assert rel_l2(y, expected) < 1e-2


@cuda
def test_torch_compile_transformers_bert(caplog):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig()  # BERT-base, random weights
    model = transformers.BertModel(config).cuda().eval()
    ids = torch.randint(0, config.vocab_size, (2, 128), device="cuda")
    fast = torch.compile(model, backend="tessel")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="tessel"):
        expected = model(input_ids=ids).last_hidden_state
        y = fast(input_ids=ids).last_hidden_state
    took_tessel(caplog, f"transformers BERT-base (relative L2 error {rel_l2(y, expected):.2e})")
    assert rel_l2(y, expected) < 1e-2
