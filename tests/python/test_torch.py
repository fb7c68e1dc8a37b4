"""torch modules through tessel.compile, and torch.compile(backend="tessel"). Needs PyTorch and the
onnx package (the GPU machine has both; CI's CPU machine does not: SKIP). The GPU cases need a
CUDA device."""
import logging

import pytest

torch = pytest.importorskip("torch")
# Every case exports a module through torch.onnx, whose exporters need the onnx package (a PyTorch
# installed without it, as from PyPI on its own: SKIP rather than fail on the missing module).
pytest.importorskip("onnx", reason="torch.onnx's exporters need the onnx package")
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
    assert m._impl.device_resident  # CUDA tensors are read and written in place
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


@pytest.fixture(scope="module")
def gpu_mlp():
    """An f16 MLP compiled for the GPU, its input, and the outputs of the host path (the same
    kernels, inputs copied in and outputs out; checked against the interpreter)."""
    torch.manual_seed(0)
    model = Mlp(256, 1024).cuda().half().eval()
    x = torch.randn(8, 128, 256, device="cuda", dtype=torch.half)
    m = tessel.compile(model, example_inputs=(x,), device="cuda")
    assert all(r["ok"] for r in m.check(x.cpu()))
    return m, x, m(x.cpu())


def same_as_host_path(y, host):
    """A device run computed what the host path computed (the same kernels on the same values)."""
    assert y.is_cuda
    assert rel_l2(y, host) < 1e-3


@cuda
def test_device_run_is_queued_on_the_callers_stream(gpu_mlp):
    m, x, host = gpu_mlp
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of spinning ahead of the run on this stream
        y = m(x)
        assert not s.query(), "the call waited for the stream (it should only queue the run)"
    s.synchronize()
    m.synchronize()
    same_as_host_path(y, host)


@cuda
def test_device_runs_on_two_streams_are_ordered(gpu_mlp):
    m, x, host = gpu_mlp
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x2 = x.flip(0).contiguous()
    host2 = m(x2.cpu())
    torch.cuda.synchronize()
    with torch.cuda.stream(a):
        torch.cuda._sleep(200_000_000)
        y1 = m(x)
    with torch.cuda.stream(b):
        y2 = m(x2)  # shares the first run's intermediates: must wait for it
        assert not b.query(), "a run on another stream did not wait for the run queued before it"
    torch.cuda.synchronize()
    same_as_host_path(y1, host)
    same_as_host_path(y2, host2)


@cuda
def test_device_run_copies_nothing(gpu_mlp):
    m, x, _ = gpu_mlp
    y = m(x)  # warm
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        y = m(x)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    copies = [n for n in names if "memcpy" in n.lower() and "pinned" not in n.lower()]
    print("\nGPU activity of one call:", names)
    assert not copies, f"a device run copied tensors: {copies}"
    assert sum(1 for n in names if "memcpy" not in n.lower() and "memset" not in n.lower()) == m.report["groups"]
    assert y.is_cuda


@cuda
def test_device_run_in_a_cuda_graph(gpu_mlp):
    m, x, _ = gpu_mlp
    static_x = x.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        m(static_x)  # warm-up outside the capture, as torch.cuda.graph asks
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = m(static_x)
    x2 = torch.randn_like(x)
    static_x.copy_(x2)
    g.replay()
    torch.cuda.synchronize()
    same_as_host_path(static_y, m(x2.cpu()))


@cuda
def test_device_run_on_another_stream_waits_for_its_inputs(gpu_mlp):
    m, x, host = gpu_mlp
    s = torch.cuda.Stream()
    strided = torch.empty(x.shape[0], x.shape[1], 2 * x.shape[2], dtype=torch.half, device="cuda")[..., ::2]
    strided.copy_(x)
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # the current stream is busy: the copy of the strided input waits behind it
    y = m(strided, stream=s)  # the copy is queued on the current stream, the run on s
    torch.cuda.synchronize()
    same_as_host_path(y, host)
    if torch.cuda.device_count() > 1:  # (a stream of another GPU is refused)
        with pytest.raises(tessel.UserError, match="stream= is a stream of"):
            m(x, stream=torch.cuda.Stream(device="cuda:1"))


@cuda
def test_a_gather_error_of_runs_queued_back_to_back_is_raised():
    class Take(torch.nn.Module):
        def forward(self, x, i):
            return x[i]

    x = torch.randn(10, 4, device="cuda")
    good, bad = torch.tensor([1, 2], device="cuda"), torch.tensor([1, 100], device="cuda")
    m = tessel.compile(Take(), example_inputs=(x, good), device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)
        m(x, bad)
        m(x, good)  # queued before the bad run is done: its flag must survive
    with pytest.raises(tessel.UserError, match="gather index is out of range"):
        m.synchronize()
    m.synchronize()  # read once
    torch.testing.assert_close(m(x, good), x[good])


class Dlpack:
    """A device array known only through DLPack (as a CuPy or JAX array would be)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@cuda
def test_device_run_on_dlpack_arrays_with_out(gpu_mlp):
    m, x, host = gpu_mlp
    y = torch.empty_like(host, device="cuda")
    stream = torch.cuda.current_stream()
    out = m.run(Dlpack(x), out=[Dlpack(y)], stream=stream)
    assert isinstance(out[0], Dlpack)
    stream.synchronize()
    same_as_host_path(y, host)
    with pytest.raises(tessel.UserError, match="need out= arrays"):
        m.run(Dlpack(x))
    with pytest.raises(tessel.UserError, match="the model expects f16"):
        m.run(Dlpack(x.float()), out=[Dlpack(y)])
    with pytest.raises(tessel.UserError, match="must be contiguous"):
        m(x, out=torch.empty(tuple(host.shape[::-1]), dtype=torch.half, device="cuda").transpose(0, 2))
    strided = torch.empty(x.shape[0], x.shape[1], 2 * x.shape[2], dtype=torch.half, device="cuda")[..., ::2]
    strided.copy_(x)
    same_as_host_path(m(strided), host)  # a strided torch input is copied first


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
