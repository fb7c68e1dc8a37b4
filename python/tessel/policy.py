"""Policies written in Python.

A policy turns the tile graph into a schedule: which operators fuse into one kernel, the tile of
every operator at every memory level, and where intermediates live. Subclass `Policy`, give it a
`name`, and implement `schedule(ctx)` returning a list of groups made with `ctx.group`; register
it, and every entry point finds it by name -- `tessel.compile(..., policy="name")`, and the
command line through `tessel --plugin file.py schedule MODEL --policy name` (the package's
`tessel` command). Tessel orders the groups, prices each with the cost model, records the edges
between groups, and checks the whole schedule before any code is emitted.

What `ctx` (a `Context`, valid only during the call) offers -- the tile-graph API:
  ctx.nodes()                      the operators in topological order (id, name, shape, axes,
                                   extents, flops, producers, consumers, is_output)
  ctx.candidates(node, k)          roller's best tile configurations for one operator (Tile)
  ctx.group(nodes, tiles, levels)  a fused group: its nodes, a Tile per node, and the memory
                                   level ("registers", "smem", ...) of tensors kept inside
  ctx.estimate(group)              the cost model's prediction, priced as the kernel family the
                                   backend would emit (latency, terms, bytes per level, bound)
  ctx.check(group)                 the rules a group breaks (capacity, grid, alignment), or []
  ctx.footprint(group)             shared memory per block, registers per thread, threads
  ctx.grid(nodes, sink, sink_tile) whether the nodes share the grid the sink's tile induces
  ctx.base("welder")               a built-in policy's groups, to start from
A policy may also set tiles of its own: `Tile(levels, threads=[], vector_width=1,
pipeline_stages=1, raster_group=1)` with levels outermost first, each (level name, spatial
extents, reduction steps); `tile.replace(levels=..., threads=..., ...)` edits a copy of one
(a candidate's, say); `Tile.from_json` / `tile.to_json()` use the schedule format. `ctx.group`
checks every tile against its node (a UserError naming it), `ctx.check` the hardware's rules.
python/examples/split_if_faster.py is a worked example.
"""
from . import _tessel
from ._tessel import Context, Group, Tile


class Policy:
    """Base class of a Python policy: set `name` (and `description`), implement `schedule`."""

    name = None
    description = ""

    def schedule(self, ctx):  # pragma: no cover - the subclass's
        raise NotImplementedError("a Policy implements schedule(ctx) and returns a list of ctx.group(...)")


def register_policy(policy):
    """Registers a Policy (an instance, or a class made with no arguments) under its name;
    registering a name again replaces it. Returns the policy, so it can decorate a class."""
    instance = policy() if isinstance(policy, type) else policy
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name:
        raise _tessel.UserError(f"register_policy: {type(instance).__name__}: has no name (set a `name` attribute)")
    _tessel.register_policy(name, getattr(instance, "description", "") or "", instance.schedule)
    return policy


def unregister_policy(name):
    """Removes a registered Python policy; False when there was none of that name."""
    return _tessel.unregister_policy(name)


def policies():
    """Every policy, built-in and registered: name, description and options (name -> (value, help))."""
    return _tessel.policies()


__all__ = ["Context", "Group", "Policy", "Tile", "policies", "register_policy", "unregister_policy"]
