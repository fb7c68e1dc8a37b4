"""Tessel as a torch.compile backend, and the export of torch modules to ONNX.

    import tessel.torch_backend            # registers the backend (pip installs also register it
    fast = torch.compile(model, backend="tessel")   # through the torch_dynamo_backends entry point)

Each graph TorchDynamo captures is exported to ONNX (torch.onnx, the TorchScript exporter) and
compiled by Tessel for the device its inputs are on; the compiled model replaces the graph. A graph
Tessel cannot take -- an operator the exporter or Tessel's importer does not support, a dynamic
shape, a model over the device's limits -- runs as PyTorch would have run it, and the reason is
logged (logger "tessel", level WARNING) once per graph. Options go through
`torch.compile(..., options={...})` and are tessel.compile's keyword arguments (policy, hw, tune,
...). Limits: the fallback is per captured graph, not per operator; the weights are compiled in as
constants (a module whose parameters change after compiling must be compiled again); shapes are
static (a new input shape is a new graph for TorchDynamo, compiled again).
"""
import io
import logging
import warnings

log = logging.getLogger("tessel")


def export_onnx(module, example_inputs, path):
    """Writes `module` called on `example_inputs` as an ONNX model at `path`: through the
    TorchScript exporter (opset 17), else through torch.export's (dynamo=True, which needs
    onnxscript) when the first cannot take the module; the error of each when neither can."""
    import torch

    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    errors = []
    for dynamo in (False, True):
        buf = io.BytesIO()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if dynamo:
                    program = torch.onnx.export(module, args, dynamo=True, optimize=True, verbose=False)
                    program.save(str(path))
                    return
                torch.onnx.export(module, args, buf, opset_version=17, do_constant_folding=True, dynamo=False)
            with open(path, "wb") as f:
                f.write(buf.getvalue())
            return
        except Exception as e:  # noqa: BLE001 - each exporter's reason is reported
            first = str(e).splitlines()[0] if str(e) else ""
            errors.append(f"{'torch.export' if dynamo else 'TorchScript'} exporter: {type(e).__name__}: {first}")
    raise RuntimeError("; ".join(errors))


def tessel_backend(gm, example_inputs, **options):
    """A torch.compile backend: Tessel's compiled model for `gm`, or `gm` itself with the reason
    logged when Tessel cannot take it."""
    import torch

    from . import compile as tessel_compile

    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if len(tensors) != len(example_inputs):
        log.warning("tessel: graph kept in PyTorch: non-tensor inputs (%s)",
                    ", ".join(sorted({type(x).__name__ for x in example_inputs if not isinstance(x, torch.Tensor)})))
        return gm.forward
    devices = {str(t.device) for t in tensors}
    if len(devices) > 1:
        log.warning("tessel: graph kept in PyTorch: inputs on several devices (%s)", ", ".join(sorted(devices)))
        return gm.forward
    device = devices.pop() if devices else "cpu"
    if device.split(":")[0] not in ("cpu", "cuda"):
        log.warning("tessel: graph kept in PyTorch: inputs on %s", device)
        return gm.forward

    with torch.no_grad():
        reference = gm(*example_inputs)
    single = not isinstance(reference, (tuple, list))
    outputs = [reference] if single else list(reference)
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        log.warning("tessel: graph kept in PyTorch: an output is not a tensor")
        return gm.forward
    try:
        compiled = tessel_compile(gm, example_inputs=tuple(example_inputs), device=device, **options)
    except Exception as e:  # noqa: BLE001 - any reason Tessel cannot take the graph is a fallback
        log.warning("tessel: graph kept in PyTorch: %s: %s", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return gm.forward
    if len(compiled.outputs) != len(outputs):
        log.warning("tessel: graph kept in PyTorch: the exported model has %d outputs, the graph %d",
                    len(compiled.outputs), len(outputs))
        return gm.forward
    log.info("tessel: compiled a graph of %d nodes into %d kernels (%s)", len(gm.graph.nodes),
             compiled.report["groups"], compiled.report["hw"])

    def run(*args):
        outs = compiled.run(*args)
        return outs[0] if single else type(reference)(outs) if isinstance(reference, tuple) else outs

    run.tessel = compiled  # the Compiled model, to read its schedule or explanation
    return run


def _register():
    try:
        from torch._dynamo import list_backends, register_backend
    except ImportError:  # pragma: no cover
        return
    if "tessel" not in list_backends(exclude_tags=()):
        register_backend(name="tessel")(tessel_backend)


_register()
