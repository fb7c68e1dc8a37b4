// The reference interpreter: runs any OpGraph on the CPU, accumulating in fp64. It is the oracle
// for every correctness test of compiled code.
//
// Each node's body is compiled once into a small register program that is evaluated on batches of
// points along the innermost loop axis, with affine address arithmetic precomputed per input, so
// the inner loop does no heap work. Reduction results and node outputs are rounded to the node's
// dtype when stored; the accumulator is a double.
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

/// Evaluates one node on host tensors (used for constant folding and by tests).
HostTensor evaluate_node(const TeNode& node, const std::vector<const HostTensor*>& inputs,
                         const InterpretOptions& options = {});

}  // namespace tessel
