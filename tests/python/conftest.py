"""pytest set-up for the Python package's tests (ctest runs them with PYTHONPATH at the build
tree's assembled package, python/README.md)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(os.environ.get("TESSEL_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture
def root():
    return ROOT


@pytest.fixture
def small_bert():
    return str(ROOT / "tests/distributed/bert_layer_small.json")


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory):
    """The tests share one compile cache of their own (nothing read from or left in $HOME)."""
    old = os.environ.get("TESSEL_CACHE_DIR")
    os.environ["TESSEL_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("TESSEL_CACHE_DIR", None)
    else:
        os.environ["TESSEL_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def host_spec():
    """This CPU's spec, probed once: compiles that compare predictions must share one spec (each
    probe measures again, and the model's numbers move with it)."""
    import tessel

    return tessel.hw.probe("cpu", quick=True)
