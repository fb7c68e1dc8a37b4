"""A policy written in Python: welder's fusion, undone where the cost model says it does not pay.

Welder fuses a producer into its consumer when the fused kernel is predicted faster than the two
apart *as welder tiles them*. This policy asks the question once more per finished group, with each
operator free to take its own best tile: if the parts, each with roller's best candidate, are
predicted faster than the fused group, the group is split. It shows the tile-graph API a policy
has (ctx.base, ctx.candidates, ctx.group, ctx.estimate; python/tessel/policy.py lists the rest).

Use it from Python:
    import tessel, split_if_faster
    m = tessel.compile("model.json", policy=split_if_faster.SplitIfFaster())
or from the command line (the Python package's `tessel` command):
    tessel --plugin python/examples/split_if_faster.py explain MODEL --hw x86-64-avx512 --policy split-if-faster
"""
import tessel


class SplitIfFaster(tessel.Policy):
    name = "split-if-faster"
    description = "welder's groups, each split into single operators when the cost model prices the parts faster"

    def __init__(self, candidates=4):
        self.candidates = candidates  # roller candidates tried per operator

    def best_alone(self, ctx, node):
        """The operator as its own kernel with the best of roller's candidates, and its time."""
        best, best_s = None, float("inf")
        for tile in ctx.candidates(node, self.candidates):
            group = ctx.group([node], {node: tile})
            if ctx.check(group):
                continue  # illegal on this chip (capacity, alignment): skip
            seconds = ctx.estimate(group)["latency_s"]
            if seconds < best_s:
                best, best_s = group, seconds
        return best, best_s

    def schedule(self, ctx):
        groups = []
        for fused in ctx.base("welder"):
            if len(fused.nodes) == 1:
                groups.append(fused)
                continue
            parts = [self.best_alone(ctx, n) for n in fused.nodes]
            apart_s = sum(s for _, s in parts)
            if all(g is not None for g, _ in parts) and apart_s < ctx.estimate(fused)["latency_s"]:
                groups.extend(g for g, _ in parts)
            else:
                groups.append(fused)
        return groups


tessel.register_policy(SplitIfFaster())
