// The reference interpreter: runs any OpGraph on the CPU, accumulating floats in fp64 and
// integers exactly. It is the oracle for every correctness test of compiled code.
//
// Each node's body is compiled once into a small register program that is evaluated on batches of
// points along the innermost loop axis, with affine address arithmetic precomputed per input, so
// the inner loop does no heap work. Float and bool values are doubles, rounded to the node's dtype
// when stored; the accumulator is a double. Integer values are int64_t: arithmetic and reductions
// wrap like two's complement at the dtype's width, integer division truncates, and a division by
// 0 gives 0 (expr.h's apply_binary_integer: the CPU backend's semantics).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "tilegraph/host_tensor.h"
#include "tilegraph/op_graph.h"

namespace tessel {

/// A box of a node's iteration domain: begin and extent per axis (spatial axes, then reduction).
struct DomainBox {
  std::vector<int64_t> begin, extent;
};

struct InterpretOptions {
  /// Worker threads for the outer loops; 0 = one per hardware thread.
  int threads = 0;
  /// Instrumentation (tile propagation tests): called for every element a node reads from one of
  /// its inputs, with the input slot and the tensor index (rank = the tensor's rank). Reads
  /// outside the tensor yield the pad value and are not reported. Setting it (or `domain_tile`)
  /// makes evaluate_node take a plain point-by-point path: slow, single-threaded.
  std::function<void(int input, const int64_t* index)> read_observer;
  /// Restricts evaluate_node to the points of this box of the domain: output elements outside it
  /// stay 0, and a reduction covers only the box's reduction range.
  std::optional<DomainBox> domain_tile;
};

/// Runs `graph` on `inputs` (one per graph input, in order, with matching types) and returns one
/// tensor per graph output. Raises UserError if an input's type does not match.
std::vector<HostTensor> interpret(const OpGraph& graph, const std::vector<HostTensor>& inputs,
                                  const InterpretOptions& options = {});

/// A box of a tensor: `values` holds the elements from `origin` (one entry per dimension; empty
/// means all zeros) over values->shape() of the tensor's dimensions.
struct TensorWindow {
  const HostTensor* values = nullptr;
  std::vector<int64_t> origin;
};

/// Evaluates `node` on the points of `box` (all its axes; a reduction covers the box's reduction
/// range), reading input i through the window `inputs[i]`, which must hold every in-range element
/// the box reads (tile_propagation.h's input_region); returns only the box's spatial part of the
/// output (shape: the box's spatial extents, in the node's spatial coordinates). Point by point,
/// single-threaded: for samples (sampled_reference.h), not whole graphs.
HostTensor evaluate_window(const TeNode& node, const std::vector<TensorWindow>& inputs, const DomainBox& box);

/// Evaluates one node on host tensors (used for constant folding and by tests).
HostTensor evaluate_node(const TeNode& node, const std::vector<const HostTensor*>& inputs,
                         const InterpretOptions& options = {});

}  // namespace tessel
