"""Hardware specs: the shipped ones by name, spec files, and probes of this machine.

A spec is the JSON document `hw_specs/` holds (docs/hw-specs.md); these functions return it as a
dict, checked. `compile(..., hw=...)` takes a shipped name, a path, or such a dict.
"""
import json
import os
import pathlib

from . import _tessel


def specs():
    """The names of the shipped specs (what `hw=` and `tessel ... --hw NAME` accept), sorted."""
    names = set()
    for d in _tessel.hw_spec_dirs():
        p = pathlib.Path(d)
        if p.is_dir():
            names.update(f.stem for f in p.glob("*.json"))
    return sorted(names)


def path(name_or_path):
    """The file a shipped spec's name stands for (a path is returned as it is)."""
    return _tessel.hw_resolve(os.fspath(name_or_path))


def load(name_or_path):
    """A spec (shipped name or file), checked and with `extends` resolved, as a dict."""
    return json.loads(_tessel.hw_load(os.fspath(name_or_path)))


def probe(device="cpu", quick=True):
    """Measures this machine ("cpu", or "cuda" for GPU 0) and returns its spec as a dict."""
    return json.loads(_tessel.hw_probe(device, quick))
