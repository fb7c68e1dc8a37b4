"""Tessel from Python: compile ONNX models, Tessel JSON models and torch modules into fused
kernels, run them on arrays, read why each decision was made, and write policies in Python.

    import tessel
    m = tessel.compile("experiments/models/bert_base_layer.json")   # this host's CPU
    y = m(x)                          # numpy arrays, torch tensors, any DLPack array
    m.check()                         # against the reference interpreter (fp64 accumulation)
    print(m.explain())                # every kernel, tile and memory level, and why
    m.schedule                        # the schedule as a dict (replayable: compile(..., schedule=))

    tessel.hw.specs()                 # shipped hardware specs; tessel.hw.load / probe
    tessel.policies()                 # the registry; tessel.register_policy(MyPolicy())
    torch.compile(model, backend="tessel")   # after `import tessel.torch_backend`

Errors in what you pass are tessel.UserError (a ValueError) with one line naming the file, node or
option; bugs in Tessel are tessel.InternalError. See python/README.md and docs/python.md.
"""
import os as _os
import pathlib as _pathlib

__version__ = "0.1.0"

# An installed package carries the shipped hardware specs; the CLI code looks there by name.
_specs = _pathlib.Path(__file__).resolve().parent / "hw_specs"
if _specs.is_dir():
    _os.environ.setdefault("TESSEL_HW_SPECS", str(_specs))

from . import _tessel  # noqa: E402
from ._tessel import InternalError, UserError  # noqa: E402
from . import hw  # noqa: E402
from .compiled import Compiled, compile, interpret  # noqa: E402
from .policy import Context, Group, Policy, Tile, policies, register_policy, unregister_policy  # noqa: E402


def backends():
    """The backends of this build: name, description, emit formats, and whether it runs here."""
    return _tessel.backends()


def main(argv=None):
    """The `tessel` command line (the same commands as the C++ binary), with --plugin FILE.py."""
    from .cli import main as _main

    return _main(argv)


__all__ = [
    "Compiled", "Context", "Group", "InternalError", "Policy", "Tile", "UserError", "backends", "compile",
    "hw", "interpret", "main", "policies", "register_policy", "unregister_policy",
]
