// Row reuse for the CPU backend: a value that a reduction's body computes at every point of its
// rows and that a later elementwise node of the same group computes again at the same points is
// computed once, stored in a per-thread buffer by the reduction and loaded by the elementwise node.
//
// Softmax is the case it was written for: its lowering is a row max m, a row sum s of exp(x - m)
// and the quotient exp(x - m) / s, so a fused group evaluates exp(x - m) twice per element. The
// analysis knows nothing about softmax: it looks for a subexpression of a reduction node's body
// (R) that also occurs in the body of an elementwise node (E) reading R's output, such that at
// each point q of E the subexpression reads the same tensor elements as R's does at one point
// phi(q) of R's domain (spatial and reduction axes). R then stores the value at each point of its
// task box (all of its reduction points) and E loads it at phi(q) instead of evaluating it.
//
// Runs inside plan_cpu_group (group_plan.h), after the task boxes and before scratch placement;
// the buffer is a scratch array like a fused producer's. Plain data, no LLVM.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/group_plan.h"

namespace tessel {

/// Whether `e` computes a transcendental, a root, a division or a power: operations that cost
/// tens of cycles per element, so that evaluating them twice costs more than a store and a load.
/// (Also the inlining rule of group_plan.cpp.)
bool has_costly_op(const Expr& e);

/// Finds the row reuses of `plan` (CpuRowReuse) whose buffer holds at most `budget_bytes` per
/// thread (0: none) and appends them to plan.reuses, without scratch offsets (the caller places
/// them). Preconditions: plan.nodes, buffers (inlined decided) and boxes are set.
///
/// Conditions, each checked (a candidate that fails one is left as it was: both nodes evaluate
/// the value, which is always correct):
///   - R has reduction axes and E none; E is evaluated in its own loop (not inlined) and reads R's
///     output (shape = R's spatial domain) through a map phi_s that never leaves it: tile
///     propagation then puts phi_s(q) in R's box for every q of E's box;
///   - the subexpression has a costly op (has_costly_op) and a float dtype, and no axis_index;
///   - the two occurrences have the same ops and constants, and each input leaf pair reads the
///     same tensor with the same pad value, no gather, and compose(R's map, phi) == E's map, where
///     phi extends phi_s by one affine row per reduction axis of R, solved from a leaf whose map
///     has that axis with coefficient 1 and no other reduction axis; every row of phi stays inside
///     R's extents over E's domain;
///   - the buffer (R's largest box times its reduction extents, in the compute type) fits.
/// A reduction stores one value (the largest matching subexpression, first in pre-order); an
/// elementwise node reads from at most one reduction.
void plan_row_reuse(const OpGraph& graph, CpuGroupPlan& plan, int64_t budget_bytes);

}  // namespace tessel
