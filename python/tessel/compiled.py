"""tessel.compile and the Compiled model it returns."""
import contextlib
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile

from . import _tessel
from .policy import Policy, register_policy

_LAST_STAGES = ("import", "normalize", "schedule", "emit", "load")


def _framework(x):
    """'torch', 'numpy' or None: what kind of array the caller passed (outputs come back alike)."""
    mod = type(x).__module__.split(".")[0]
    return mod if mod in ("torch", "numpy") else None


def _as_host_array(x):
    """Something nanobind reads as a host array: torch tensors moved to the host and made
    contiguous, numpy arrays and DLPack / buffer-protocol objects as they are, scalars and nested
    lists through numpy when it is there."""
    if _framework(x) == "torch":
        return x.detach().cpu().contiguous()
    if hasattr(x, "__dlpack__") or isinstance(x, memoryview):
        return x
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        raise _tessel.UserError(f"inputs: a {type(x).__name__} is not an array (pass numpy arrays, torch tensors or DLPack objects)")
    return np.asarray(x)


_DLPACK_CUDA = 2  # DLPack's device type of CUDA memory (kDLCUDA)
_TORCH_DTYPES = ("f64", "float64"), ("f32", "float32"), ("f16", "float16"), ("bf16", "bfloat16"), ("i64", "int64"), \
    ("i32", "int32"), ("i8", "int8"), ("u8", "uint8"), ("bool", "bool")


def _on_cuda(x):
    """Whether `x` is an array in CUDA device memory (a torch tensor, or any DLPack producer)."""
    if _framework(x) == "torch":
        return x.is_cuda
    try:
        return x.__dlpack_device__()[0] == _DLPACK_CUDA
    except (AttributeError, TypeError):
        return False


def _stream_handle(stream, like, device):
    """The CUstream handle a run goes on: `stream` as given (a handle, or an object with
    `.cuda_stream` (torch) or `.ptr` (CuPy)); else the caller's current stream (torch, CuPy);
    else 0, the legacy default stream."""
    if stream is None:
        if like == "torch":
            import torch

            return torch.cuda.current_stream(device).cuda_stream
        if like == "cupy":
            import cupy

            with cupy.cuda.Device(device):
                return cupy.cuda.get_current_stream().ptr
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


def _convert_output(out, like, device=None):
    if like == "torch":
        import torch

        t = torch.from_dlpack(out)
        return t.to(device) if device is not None and device.type != "cpu" else t
    try:
        import numpy as np

        return np.from_dlpack(out)
    except (ImportError, TypeError, RuntimeError, BufferError):
        return out  # bf16 has no numpy dtype: the DLPack / buffer-protocol array itself


class Compiled:
    """A model compiled by Tessel for one device: call it on arrays.

    `m(*inputs)` returns the outputs (one, or a tuple), as the same kind of array as the inputs:
    numpy in, numpy out; torch in, torch out (on the inputs' device).

    On a GPU, arrays in device memory (torch tensors, or any DLPack producer) are used in place:
    the kernels read the inputs' memory and write the outputs', queued on the caller's CUDA stream
    (torch's or CuPy's current stream, or `stream=`), and the call returns once they are queued,
    as a PyTorch operator does. Outputs are new torch (or CuPy) arrays, or the arrays given as
    `out=`. Inputs that are strided or not 16-byte aligned are copied first (torch). Host arrays
    are copied in and out, and the call waits. On the CPU, contiguous host arrays of the model's
    dtypes are used in place (Executable::run_in_place); strided ones are converted first.
    """

    def __init__(self, impl, source):
        self._impl = impl
        self._source = source

    # ---- running -----------------------------------------------------------------------
    def __call__(self, *inputs, out=None, stream=None):
        outs = self.run(*inputs, out=out, stream=stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, *inputs, out=None, stream=None):
        """The outputs as a list, in the model's output order. `out` (device runs): the arrays to
        write the outputs into; `stream`: the CUDA stream to queue the run on (see the class)."""
        like = _framework(inputs[0]) if inputs else None
        if self._impl.device_resident and inputs and all(_on_cuda(x) for x in inputs):
            return self._run_on_stream(inputs, out, stream)
        if out is not None or stream is not None:
            raise _tessel.UserError("run: out= and stream= are for device arrays on a GPU (these inputs are host arrays)")
        device = inputs[0].device if like == "torch" else None
        outs = self._impl.run([_as_host_array(x) for x in inputs])
        return [_convert_output(o, like, device) for o in outs]

    def synchronize(self):
        """Waits for the runs queued on device arrays; raises the error a kernel reported (a
        gather index out of range). A later run raises it too, once the run that hit it is done."""
        self._impl.synchronize()

    def _run_on_stream(self, inputs, out, stream):
        """Device arrays: the kernels read and write them in place on the caller's stream."""
        if len(inputs) != len(self.inputs):
            raise _tessel.UserError(f"run: the model takes {len(self.inputs)} inputs, got {len(inputs)}")
        if out is not None:
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(out) != len(self.outputs):
                raise _tessel.UserError(f"run: out: the model has {len(self.outputs)} outputs, got {len(out)} arrays")
        like = _framework(inputs[0]) or type(inputs[0]).__module__.split(".")[0]
        if like == "torch":
            return self._run_torch(inputs, out, stream)
        handle = _stream_handle(stream, like, self._impl.device_index)
        in_ptrs = [self._device_address(x, spec, "input") for x, spec in zip(inputs, self.inputs)]
        if out is None:
            if like != "cupy":
                raise _tessel.UserError(
                    f"run: the outputs of a {type(inputs[0]).__name__} run need out= arrays (torch and CuPy outputs are made for you)")
            import cupy

            with cupy.cuda.Device(self._impl.device_index):
                out = [cupy.empty(o["shape"], dtype=dict(_TORCH_DTYPES)[o["dtype"]]) for o in self.outputs]
            if stream is not None:  # (made on CuPy's current stream: the run's must wait for it)
                cupy.cuda.ExternalStream(handle).wait_event(cupy.cuda.get_current_stream().record())
        out_ptrs = [self._device_address(x, spec, "output") for x, spec in zip(out, self.outputs)]
        self._impl.run_on_stream(in_ptrs, out_ptrs, handle)
        return out

    def _device_address(self, x, spec, what):
        """The device address of a DLPack array `x` after checking it against `spec`."""
        a = _tessel.device_array(x)
        if a["device"] != self._impl.device_index:
            raise _tessel.UserError(f"{what}: {spec['name']}: is on cuda:{a['device']}; the model runs on cuda:{self._impl.device_index}")
        if a["shape"] != spec["shape"] or a["dtype"] != spec["dtype"]:
            raise _tessel.UserError(
                f"{what}: {spec['name']}: is {a['dtype']}{a['shape']}; the model expects {spec['dtype']}{spec['shape']}")
        if not a["contiguous"]:
            raise _tessel.UserError(f"{what}: {spec['name']}: is strided (pass a contiguous array)")
        return a["address"]

    def _run_torch(self, inputs, out, stream):
        import torch

        dtypes = {name: getattr(torch, t) for name, t in _TORCH_DTYPES}
        device = torch.device("cuda", self._impl.device_index)
        align = _tessel.DEVICE_ALIGNMENT
        ins = []
        for spec, t in zip(self.inputs, inputs):
            if list(t.shape) != spec["shape"] or t.dtype != dtypes[spec["dtype"]]:
                raise _tessel.UserError(
                    f"input: {spec['name']}: is {t.dtype}{list(t.shape)}; the model expects {spec['dtype']}{spec['shape']}")
            if t.device != device:
                raise _tessel.UserError(f"input: {spec['name']}: is on {t.device}; the model runs on {device}")
            if not t.is_contiguous():
                t = t.contiguous()
            if t.data_ptr() % align:
                t = t.clone()
            ins.append(t)
        if out is None:
            out = [torch.empty(o["shape"], dtype=dtypes[o["dtype"]], device=device) for o in self.outputs]
        else:
            for spec, t in zip(self.outputs, out):
                if list(t.shape) != spec["shape"] or t.dtype != dtypes[spec["dtype"]] or t.device != device:
                    raise _tessel.UserError(
                        f"output: {spec['name']}: out= is {t.dtype}{list(t.shape)} on {t.device}; the model writes "
                        f"{spec['dtype']}{spec['shape']} on {device}")
                if not t.is_contiguous() or t.data_ptr() % align:
                    raise _tessel.UserError(f"output: {spec['name']}: out= must be contiguous and {align}-byte aligned")
        if getattr(stream, "device", device) != device:
            raise _tessel.UserError(f"run: stream= is a stream of {stream.device}; the model runs on {device}")
        handle = _stream_handle(stream, "torch", device)
        current = torch.cuda.current_stream(device)
        other = torch.cuda.ExternalStream(handle, device=device) if handle != current.cuda_stream else None
        if other is not None:
            # The copies and outputs made here were queued or allocated on the current stream: the
            # run waits for it, and the allocator must not hand that memory out again before the
            # run's stream is done with it.
            other.wait_stream(current)
        self._impl.run_on_stream([t.data_ptr() for t in ins], [t.data_ptr() for t in out], handle)
        if other is not None:
            for t in ins + out:
                t.record_stream(other)
        return out

    def reference(self, *inputs):
        """The reference interpreter's outputs (the model as imported, fp64 accumulation)."""
        like = _framework(inputs[0]) if inputs else None
        outs = self._impl.reference([_as_host_array(x) for x in inputs])
        return [_convert_output(o, like) for o in outs]

    def check(self, *inputs, seed=0):
        """Runs the compiled model and the interpreter on `inputs` (random ones from `seed` when
        none are given) and compares each output with its dtype's tolerance. Returns one dict per
        output (output, ok, max_abs_error, rel_l2_error, message); raises AssertionError with the
        first mismatch."""
        results = self._impl.check([_as_host_array(x) for x in inputs], seed)
        bad = [r for r in results if not r["ok"]]
        if bad:
            raise AssertionError(f"output '{bad[0]['output']}' does not match the interpreter: {bad[0]['message']}")
        return results

    def time(self, *inputs, warmup=10, repeats=30, cold_cache=False, graph=True):
        """Times the compiled model as every Tessel suite does (GPU: CUDA-graph replays between
        events; CPU: wall time; inputs resident; random inputs when none are given). Returns
        median_s, min_s and the list of times."""
        times = self._impl.time([_as_host_array(x) for x in inputs], warmup, repeats, cold_cache, graph)
        return {"median_s": statistics.median(times), "min_s": min(times), "times_s": times}

    # ---- reading ---------------------------------------------------------------------------
    @property
    def inputs(self):
        """The inputs: name, shape, dtype ("f32", "f16", ...)."""
        return self._impl.inputs()

    @property
    def outputs(self):
        return self._impl.outputs()

    @property
    def schedule(self):
        """The schedule as a dict: groups (kernels), tiles per level, memory levels, kernel
        families and their parameters, predictions. `compile(..., schedule=m.schedule)` replays it."""
        return json.loads(self._impl.schedule_json())

    def explain(self, format="text", profile=None):
        """Why each kernel, tile and memory level was chosen: "text", "dot" or "html". With
        `profile` (what `profile()` returned, or True to run it now) each kernel's measured time
        is shown beside its prediction."""
        if profile is True:
            profile = self.profile()
        measured = [k["measured_s"] for k in profile] if profile else []
        return self._impl.explain(format, measured)

    def profile(self, *inputs, repeats=10):
        """Runs the model `repeats` times timing each kernel on its own (GPU: events around every
        launch, queued behind a spin; CPU: each kernel's parallel region) and returns, per kernel
        in schedule order, its nodes, family, predicted and measured (median) seconds."""
        measured = self._impl.profile([_as_host_array(x) for x in inputs], int(repeats))
        kernels = self.report["kernels"]
        return [dict(k, measured_s=m) for k, m in zip(kernels, measured)]

    @property
    def report(self):
        """Backend, spec, policy, predicted time, seconds per stage, per kernel its family and
        prediction, and (once loaded) compile statistics and peak memory."""
        return self._impl.report()

    @property
    def ir(self):
        """The normalized tensor-expression graph, printed."""
        return self._impl.ir()

    def __repr__(self):
        r = self.report
        return (f"<tessel.Compiled {self._source!r}: {r['groups']} kernels for {r['hw']} ({r['backend']}), "
                f"policy {r['policy']}>")


@contextlib.contextmanager
def _model_file(model, example_inputs):
    """A path for `model`: a path as it is; bytes, a dict or a torch module written to a private
    temporary folder, removed afterwards."""
    if isinstance(model, (str, os.PathLike)):
        yield os.fspath(model)
        return
    tmp = tempfile.mkdtemp(prefix="tessel_")
    try:
        if isinstance(model, dict):
            p = pathlib.Path(tmp, "model.json")
            p.write_text(json.dumps(model))
        elif isinstance(model, (bytes, bytearray, memoryview)):
            data = bytes(model)
            p = pathlib.Path(tmp, "model.json" if data.lstrip()[:1] == b"{" else "model.onnx")
            p.write_bytes(data)
        elif type(model).__module__.split(".")[0] == "torch" or "torch" in sys.modules and _is_torch_module(model):
            from .torch_backend import export_onnx

            if example_inputs is None:
                raise _tessel.UserError("compile: a torch module needs example_inputs (a tuple of tensors)")
            p = pathlib.Path(tmp, "model.onnx")
            export_onnx(model, example_inputs, p)
        else:
            raise _tessel.UserError(
                f"compile: model: a {type(model).__name__} (pass a path to .onnx or .json, their bytes, a model dict, "
                "or a torch.nn.Module with example_inputs)")
        yield str(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _is_torch_module(model):
    import torch

    return isinstance(model, torch.nn.Module)


def _text_file(value, tmp, name):
    """A path for a spec or schedule given as a path, a dict or JSON text."""
    if value is None:
        return None
    if isinstance(value, dict):
        p = pathlib.Path(tmp, name)
        p.write_text(json.dumps(value))
        return str(p)
    if isinstance(value, str) and value.lstrip().startswith("{"):
        p = pathlib.Path(tmp, name)
        p.write_text(value)
        return str(p)
    return os.fspath(value)


def compile(model, example_inputs=None, *, hw=None, device=None, policy=None, policy_options=None, cost_model=None,
            shapes=None, schedule=None, cache_dir=None, cache=True, normalize=True, threads=0, tune=0,
            sparse_kernels=None, stage="load"):
    """Compiles `model` and returns a Compiled model.

    model          a path to an ONNX (.onnx) or Tessel JSON (.json) model, their bytes, a model
                   dict, or a torch.nn.Module with `example_inputs` (exported through torch.onnx)
    hw             a shipped spec's name (tessel.hw.specs()), a spec file, or a spec dict; default:
                   a quick probe of the device
    device         "cpu", "cuda" or "cuda:N" (GPU N); default: the one the spec is for, else this host's CPU
    policy         a policy's name (tessel.policies()) or a Policy instance (registered for you)
    policy_options {"name": value} -- the policy's options (`--policy-opt`)
    shapes         {"input": [dims]} for inputs the model leaves unknown
    schedule       a saved schedule (path, dict or JSON text) to replay instead of scheduling
    cache_dir, cache   the compile cache (default $TESSEL_CACHE_DIR or ~/.cache/tessel)
    threads        CPU worker threads (0: the spec's cores)
    tune           measure each group's `tune` best candidates on the device, keep the fastest
    sparse_kernels "cost" (default), "dense" or "block_sparse" for sparse weights
    stage          the last stage: "import", "normalize", "schedule", "emit" or "load" (the
                   default; needs the device). Earlier stages give a model you can read, not run.
    """
    if stage not in _LAST_STAGES:
        raise _tessel.UserError(f"compile: stage: unknown stage '{stage}' ({', '.join(_LAST_STAGES)})")
    if isinstance(policy, Policy) or isinstance(policy, type) and issubclass(policy, Policy):
        register_policy(policy)
        policy = policy.name
    options = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (policy_options or {}).items()}
    shapes = {k: [int(d) for d in v] for k, v in (shapes or {}).items()}
    tmp = tempfile.mkdtemp(prefix="tessel_")
    try:
        hw_path = _text_file(hw, tmp, "spec.json")
        schedule_path = _text_file(schedule, tmp, "schedule.json")
        with _model_file(model, example_inputs) as path:
            try:
                impl = _tessel.compile(path, hw_path, device, policy, options, cost_model, shapes, schedule_path,
                                       None if cache_dir is None else os.fspath(cache_dir), bool(cache), bool(normalize),
                                       int(threads), int(tune), sparse_kernels, stage)
            except _tessel.UserError as e:
                # An error in a spec, schedule or model given as a value names the argument, not the
                # temporary file it was written to.
                message = str(e)
                for given, written, name in ((hw, hw_path, "hw"), (schedule, schedule_path, "schedule"), (model, path, "model")):
                    as_path = os.fspath(given) if isinstance(given, (str, os.PathLike)) else None
                    if written is not None and written != as_path:  # written to a temporary file
                        message = message.replace(written, f"{name}=<{type(given).__name__}>")
                raise _tessel.UserError(message) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Compiled(impl, model if isinstance(model, (str, os.PathLike)) else type(model).__name__)


def interpret(model, *inputs, shapes=None):
    """The reference interpreter's outputs for `model` on `inputs` (no compilation)."""
    m = compile(model, shapes=shapes, stage="normalize")
    outs = m.reference(*inputs)
    return outs[0] if len(outs) == 1 else tuple(outs)
