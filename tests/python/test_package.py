"""The Python package on the CPU: compile, run, check, read, replay; hardware specs; policies."""
import json

import numpy as np
import pytest

import tessel


def inputs_for(m, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(i["shape"]).astype(np.float32) for i in m.inputs]


def test_registries_are_read_not_listed():
    names = [p["name"] for p in tessel.policies()]
    assert names[0] == "welder" and len(names) == len(set(names))
    welder = tessel.policies()[0]
    assert welder["options"], "welder's options (--policy-opt) are listed with their values"
    backends = {b["name"]: b for b in tessel.backends()}
    assert backends["cpu"]["available"]
    assert "cuda" in backends and "cuda" in backends["cuda"]["formats"]


def test_hw_specs_by_name():
    names = tessel.hw.specs()
    assert "nvidia-h100-sxm" in names
    spec = tessel.hw.load("nvidia-h100-sxm")
    assert spec["kind"] == "gpu" and spec["name"]
    assert tessel.hw.path("nvidia-h100-sxm").endswith("nvidia-h100-sxm.json")
    with pytest.raises(tessel.UserError, match="did you mean nvidia-h100-sxm"):
        tessel.hw.load("nvidia-h100-sx")
    probed = tessel.hw.probe("cpu", quick=True)
    assert probed["kind"] == "cpu"


def test_compile_run_check_time(small_bert):
    m = tessel.compile(small_bert, device="cpu")
    assert m.inputs == [{"name": "hidden", "shape": [1, 16, 64], "dtype": "f32"}]
    x = inputs_for(m)
    y = m(*x)
    assert isinstance(y, np.ndarray) and y.shape == (1, 16, 64) and y.dtype == np.float32
    expected = m.reference(*x)[0]
    assert np.abs(y - expected).max() < 1e-3
    results = m.check(*x)
    assert results[0]["ok"] and results[0]["output"] == "l0_ln2"
    assert m.check()[0]["ok"]  # random inputs
    t = m.time(*x, warmup=1, repeats=3)
    assert len(t["times_s"]) == 3 and 0 < t["min_s"] <= t["median_s"]
    r = m.report
    assert r["backend"] == "cpu" and r["policy"] == "welder" and r["groups"] == len(r["kernels"]) > 0
    assert r["compiled_kernels"] == r["groups"] and r["peak_memory_bytes"] > 0
    assert set(r["stage_seconds"]) == {"import", "normalize", "schedule", "load"}


def test_strided_and_list_inputs(small_bert):
    m = tessel.compile(small_bert, device="cpu")
    x = inputs_for(m)[0]
    strided = np.asfortranarray(x)  # same values, other strides
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(m(strided), m(x))


def test_contiguous_host_arrays_run_in_place(small_bert):
    """Contiguous arrays of the model's dtypes go to the kernels as they are (Executable::
    run_in_place): inputs read in place and never written, outputs written by the kernels into
    aligned arrays; an input off the alignment is copied first, with the same result."""
    m = tessel.compile(small_bert, device="cpu")
    x = inputs_for(m, seed=3)
    before = [a.copy() for a in x]
    y = m(*x)
    for a, b in zip(x, before):
        np.testing.assert_array_equal(a, b)
    outs = y if isinstance(y, tuple) else (y,)
    assert all(o.ctypes.data % 64 == 0 and o.flags.c_contiguous for o in outs)
    expected = m.reference(*x) if hasattr(m, "reference") else None
    if expected is not None:
        exp = expected if isinstance(expected, (list, tuple)) else [expected]
        for o, e in zip(outs, exp):
            np.testing.assert_allclose(o, e, rtol=1e-3, atol=1e-3)
    raw = np.empty(x[0].nbytes + 4, np.uint8)
    shifted = raw[4:4 + x[0].nbytes].view(x[0].dtype).reshape(x[0].shape)
    shifted[...] = x[0]
    assert shifted.ctypes.data % 64 != 0 and shifted.flags.c_contiguous
    again = m(shifted, *x[1:])
    for a, b in zip(again if isinstance(again, tuple) else (again,), outs):
        np.testing.assert_array_equal(a, b)
    # The strided path (converted through the interpreter's tensors) gives the same bits.
    np.testing.assert_array_equal(m(np.asfortranarray(x[0]), *x[1:]), y)


def decisions(schedule):
    """What a schedule decides (a replay prices it again: the predictions are not compared)."""
    return [{k: v for k, v in g.items() if k != "predicted"} for g in schedule["groups"]]


def test_schedule_replays(small_bert, tmp_path):
    m = tessel.compile(small_bert, device="cpu", policy="roller")
    s = m.schedule
    assert s["policy"] == "roller" and len(s["groups"]) == m.report["groups"]
    again = tessel.compile(small_bert, device="cpu", schedule=s)
    assert decisions(again.schedule) == decisions(s)
    x = inputs_for(m)
    np.testing.assert_array_equal(again(*x), m(*x))
    path = tmp_path / "s.json"
    path.write_text(json.dumps(s))
    assert decisions(tessel.compile(small_bert, device="cpu", schedule=path, stage="schedule").schedule) == decisions(s)


def test_model_from_bytes_and_dict(small_bert):
    text = open(small_bert, "rb").read()
    a = tessel.compile(text, device="cpu")
    b = tessel.compile(json.loads(text), device="cpu", stage="schedule")
    assert a.inputs == b.inputs
    with pytest.raises(tessel.UserError, match="not loaded"):
        b(*inputs_for(a))
    x = inputs_for(a)
    np.testing.assert_allclose(tessel.interpret(small_bert, *x), a.reference(*x)[0])


def test_gpu_spec_schedules_without_a_gpu(small_bert):
    m = tessel.compile(small_bert, hw="nvidia-h100-sxm", stage="schedule")
    assert m.report["backend"] == "cuda" and m.report["hw"]
    text = m.explain()
    assert "kernel" in text.lower()
    assert m.explain("dot").startswith("digraph")
    assert all(k["family"] for k in m.report["kernels"])


def test_policy_options(small_bert):
    m = tessel.compile(small_bert, device="cpu", stage="schedule", policy="welder", policy_options={"max_group_nodes": 1})
    assert all(len(g["nodes"]) == 1 for g in m.schedule["groups"])
    with pytest.raises(tessel.UserError, match="did you mean max_group_nodes"):
        tessel.compile(small_bert, device="cpu", stage="schedule", policy_options={"max_group_node": 1})


def test_bad_inputs_are_one_line_user_errors(small_bert):
    m = tessel.compile(small_bert, device="cpu")
    x = inputs_for(m)[0]
    with pytest.raises(tessel.UserError, match=r"input: hidden: has shape \[1,16,32\]"):
        m(x[:, :, :32].copy())
    with pytest.raises(tessel.UserError, match="has dtype float64"):
        m(x.astype(np.float64))
    with pytest.raises(tessel.UserError, match="takes 1 inputs, got 2"):
        m(x, x)
    with pytest.raises(tessel.UserError, match="did you mean roller"):
        tessel.compile(small_bert, device="cpu", policy="rolle")
    with pytest.raises(tessel.UserError, match="no such model file"):
        tessel.compile(small_bert + ".missing", device="cpu")
    with pytest.raises(tessel.UserError, match="stage"):
        tessel.compile(small_bert, stage="link")
    with pytest.raises(tessel.UserError, match="unknown format"):
        tessel.compile(small_bert, device="cpu", stage="schedule").explain("pdf")
    with pytest.raises(ValueError):  # UserError is a ValueError
        tessel.compile(small_bert, device="gpu")
    with pytest.raises(tessel.UserError, match="only cuda takes a device index"):
        tessel.compile(small_bert, device="cpu:1")
    with pytest.raises(tessel.UserError, match="is not a number"):
        tessel.compile(small_bert, device="cuda:x")
    with pytest.raises(tessel.UserError, match="out= and stream= are for device arrays"):
        m(x, out=[x])


def test_bert_base_layer_matches_the_interpreter(root):
    """The issue's "done when": the bundled BERT layer compiled and run on the CPU from Python."""
    m = tessel.compile(str(root / "experiments/models/bert_base_layer.json"), device="cpu")
    assert all(r["ok"] for r in m.check(seed=3))


def test_profile_and_explain_with_it(small_bert, host_spec):
    m = tessel.compile(small_bert, hw=host_spec)
    kernels = m.profile(repeats=3)
    assert len(kernels) == m.report["groups"]
    assert all(k["measured_s"] > 0 and k["predicted_s"] > 0 and k["family"] for k in kernels)
    text = m.explain(profile=kernels)
    assert text.count("  profiled  ") == len(kernels) and "profiled: the kernels took" in text
    assert "  work      " in m.explain() and "profiled" not in m.explain()
    assert "<th>profiled</th>" in m.explain("html", profile=True)


def test_errors_in_values_name_the_argument(small_bert):
    spec = tessel.hw.load("nvidia-h100-sxm")
    spec["compute"]["units"] = -3
    with pytest.raises(tessel.UserError, match=r"hw=<dict>.*units") as e:
        tessel.compile(small_bert, hw=spec, stage="schedule")
    assert "tessel_" not in str(e.value)  # not the temporary file it was written to
