"""Policies written in Python: the tile-graph API, registration, use from compile() and the CLI,
and what a broken policy gets (a one-line UserError, never an illegal kernel)."""
import os
import pathlib
import runpy
import subprocess
import sys

import numpy as np
import pytest

import tessel

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"


class OneKernelPerOp(tessel.Policy):
    """Each operator alone, tiled with roller's top candidate: roller, written in Python."""

    name = "py-roller"
    description = "roller in Python"

    def __init__(self):
        self.seen = None

    def schedule(self, ctx):
        nodes = ctx.nodes()
        self.seen = nodes
        return [ctx.group([n["id"]], {n["id"]: ctx.candidates(n["id"], 1)[0]}) for n in reversed(nodes)]


def test_context_api(small_bert):
    seen = {}

    class Probe(tessel.Policy):
        name = "probe"

        def schedule(self, ctx):
            nodes = ctx.nodes()
            first = nodes[0]
            tiles = ctx.candidates(first["name"], 3)
            assert 1 <= len(tiles) <= 3 and str(tiles[0]) and tiles[0].levels
            g = ctx.group([first["id"]], {first["id"]: tiles[0]})
            seen["estimate"] = ctx.estimate(g)
            seen["check"] = ctx.check(g)
            seen["footprint"] = ctx.footprint(g)
            seen["base"] = ctx.base("welder")
            seen["ctx"] = ctx
            seen["nodes"] = nodes
            return seen["base"]

    m = tessel.compile(small_bert, device="cpu", policy=Probe(), stage="schedule")
    assert m.schedule["policy"] == "probe"
    e = seen["estimate"]
    assert e["latency_s"] > 0 and e["bound"] and "compute" in e["terms"]
    assert seen["check"] == [] and seen["footprint"]["threads_per_block"] >= 1
    assert sum(len(g.nodes) for g in seen["base"]) == len(seen["nodes"])
    assert all(set(n) >= {"id", "name", "shape", "producers", "consumers", "flops"} for n in seen["nodes"])
    with pytest.raises(tessel.UserError, match="used after"):
        seen["ctx"].nodes()  # a Context lives only while schedule() runs


def test_python_policy_compiles_and_matches(small_bert):
    policy = OneKernelPerOp()
    m = tessel.compile(small_bert, device="cpu", policy=policy)
    assert m.schedule["policy"] == "py-roller"
    assert m.report["groups"] == len(policy.seen)  # one kernel per operator, in dependence order
    assert all(r["ok"] for r in m.check())
    assert "py-roller" in [p["name"] for p in tessel.policies()]
    assert tessel.unregister_policy("py-roller") and not tessel.unregister_policy("py-roller")


@pytest.mark.parametrize("bad, message", [
    (lambda ctx: [], "is in no group"),
    (lambda ctx: [ctx.group([0], {0: ctx.candidates(0, 1)[0]})] * 2, "is also in group"),
    (lambda ctx: 42, "must return a list"),
    (lambda ctx: 1 / 0, "ZeroDivisionError"),
    (lambda ctx: [ctx.group(["no_such_node"], {})], "no node named"),
])
def test_broken_policies_are_user_errors(small_bert, bad, message):
    class Broken(tessel.Policy):
        name = "broken"

        def schedule(self, ctx):
            return bad(ctx)

    with pytest.raises(tessel.UserError, match=message):
        tessel.compile(small_bert, device="cpu", policy=Broken(), stage="schedule")


class HalvedTiles(tessel.Policy):
    """Each operator alone, with roller's top tile made smaller by the policy itself: every even
    outer spatial extent halved (Tile.replace), the inner levels clamped to it."""

    name = "py-halved"

    def __init__(self):
        self.made = []

    def schedule(self, ctx):
        groups = []
        for n in reversed(ctx.nodes()):
            best = ctx.candidates(n["id"], 1)[0]
            outer = [e // 2 if e % 2 == 0 and e > 1 else e for e in best.levels[0][1]]
            levels = [(best.levels[0][0], outer, best.levels[0][2])]
            for name, spatial, reduction in best.levels[1:]:
                levels.append((name, [min(a, b) for a, b in zip(spatial, outer)], reduction))
            threads = [min(t, e) for t, e in zip(best.threads, outer)] if best.threads else []
            tile = best.replace(levels=levels, threads=threads)
            assert tessel.Tile.from_json(tile.to_json()) == tile
            # A halving the tile rules refuse (ctx.group: e.g. a vector width that no longer
            # divides the tile, on a host whose probe gave roller a narrow tile) or the hardware
            # rules refuse (ctx.check): keep roller's tile.
            try:
                g = ctx.group([n["id"]], {n["id"]: tile})
                refused = bool(ctx.check(g))
            except tessel.UserError:
                refused = True
            if refused:
                g = ctx.group([n["id"]], {n["id"]: best})
            else:
                self.made.append(tile)
            groups.append(g)
        return groups


def test_python_policy_sets_its_own_tiles(small_bert):
    policy = HalvedTiles()
    m = tessel.compile(small_bert, device="cpu", policy=policy)
    assert policy.made  # some tiles were the policy's own
    assert all(r["ok"] for r in m.check())
    # A Tile made from scratch, and a malformed one refused with the node's name.
    t = tessel.Tile([("l2", [4, 8], [16])], vector_width=4)
    assert t.levels == [("l2", [4, 8], [16])] and t.vector_width == 4 and t.threads == []

    class Wrong(tessel.Policy):
        name = "wrong-tile"

        def schedule(self, ctx):
            n = ctx.nodes()[0]
            bad = tessel.Tile([("l2", [0] * len(n["shape"]), [])])
            return [ctx.group([n["id"]], {n["id"]: bad})]

    with pytest.raises(tessel.UserError, match="tile for node"):
        tessel.compile(small_bert, device="cpu", policy=Wrong(), stage="schedule")
    with pytest.raises(tessel.UserError, match="Tile.from_json"):
        tessel.Tile.from_json('{"levels": 3}')
    tessel.unregister_policy("py-halved")


def test_builtin_names_are_taken_and_names_are_required():
    class Welder(tessel.Policy):
        name = "welder"

    with pytest.raises(tessel.UserError, match="built-in"):
        tessel.register_policy(Welder())
    with pytest.raises(tessel.UserError, match="has no name"):
        tessel.register_policy(tessel.Policy())


def test_worked_example(small_bert, host_spec):
    """python/examples/split_if_faster.py: registers itself; never slower than welder by the model."""
    runpy.run_path(str(EXAMPLES / "split_if_faster.py"))
    welder = tessel.compile(small_bert, hw=host_spec, stage="schedule")
    mine = tessel.compile(small_bert, hw=host_spec, policy="split-if-faster")
    assert mine.schedule["policy"] == "split-if-faster"
    assert all(r["ok"] for r in mine.check())
    assert mine.report["predicted_s"] <= welder.report["predicted_s"] * 1.0001


def run_cli(*args, cwd=None):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "tessel", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_cli_with_a_plugin_policy(small_bert, tmp_path):
    out = tmp_path / "s.json"
    r = run_cli("--plugin", str(EXAMPLES / "split_if_faster.py"), "schedule", small_bert, "--hw", "nvidia-h100-sxm",
                "--policy", "split-if-faster", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert '"policy": "split-if-faster"' in out.read_text()
    r = run_cli("schedule", small_bert, "--hw", "nvidia-h100-sxm", "--policy", "split-if-faster", "-o", str(out))
    assert r.returncode == 2 and "unknown policy" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("--plugin", str(tmp_path / "none.py"), "version")
    assert r.returncode == 2 and "no such file" in r.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('plugin is broken')\n")
    r = run_cli("--plugin", str(bad), "version")
    assert r.returncode == 2 and "plugin is broken" in r.stderr
    r = run_cli("version")
    assert r.returncode == 0 and "tessel" in r.stdout


def test_compile_example_runs(root):
    r = subprocess.run([sys.executable, str(EXAMPLES / "compile_and_check.py"), str(root / "tests/distributed/bert_layer_small.json")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "check l0_ln2 ok" in r.stdout
