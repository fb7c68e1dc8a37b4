// The interpreter's values of a sample of a graph's output elements, for checking compiled code
// on graphs too large to interpret whole (an LLM projection of a few TFLOP, long attention).
//
// A sample is a few boxes of each output (the first corner, the last corner -- where tiles are
// partial -- and boxes at seeded random positions). Each box is propagated backwards through
// the graph (tile_propagation.h's propagate_group): every producer is evaluated only on the
// domain box its consumers read, through TensorWindow, so the work is about the box's share of
// the graph plus the reductions that feed it (an attention row needs its whole score row). A
// Reshape's box is laid out in its output's coordinates for its consumers.
//
// Example: a 16384 x 8192 x 28672 GEMM (7.7 TFLOP) sampled with 4 boxes of 1024 elements
// evaluates 4 x 1024 x 8192 multiply-adds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilegraph/host_tensor.h"
#include "tilegraph/op_graph.h"

namespace tessel {

/// Graphs up to this many FLOPs (the sum of TeNode::flops, as `tessel inspect` counts them) are
/// checked whole by `tessel run --check`; larger ones on a sample.
inline constexpr double kWholeCheckMaxFlops = 20e9;

struct SampleOptions {
  int64_t min_elements = 4096;  // per output, over all boxes (fewer if the output is smaller)
  int boxes = 4;                // first corner, last corner, then seeded random positions
  uint64_t seed = 0;
  /// A sample is refused (the caller then interprets the whole graph) when it would evaluate more
  /// than this share of the whole graph's domain points: the sample runs point by point on one
  /// thread per box, about 45x slower per point and thread than the whole interpreter's vectorized
  /// path on every core (measured on a BERT layer, batch 32: a 2.1% sample took as long as the
  /// whole graph on 2 cores). Refused, e.g.: a decoder block, whose every row needs the keys and
  /// values of all tokens; a classifier, whose 1000 outputs need every feature map. <= 0: no limit.
  double max_share = 0.002;
};

/// One output's sample: the row-major flat indices of the sampled elements and their values.
struct SampledOutput {
  std::vector<int64_t> flat_index;
  HostTensor expected;  // 1-D, the output's dtype, one value per flat_index entry
};

/// On success one SampledOutput per graph output; otherwise `reason` says why the graph is not
/// sampled (an output that is an input or a weight, a sample that would cost more than
/// SampleOptions::max_share of the whole graph), and the caller interprets the whole graph.
/// Nodes that reinterpret their domain (Reshape) are followed through the row-major linear index.
struct SampledReference {
  bool ok = false;
  std::string reason;
  std::vector<SampledOutput> outputs;
};

/// The interpreter's values (fp64 accumulation, as interpret()) of a sample of every output of
/// `graph` on `inputs`; boxes run on parallel threads.
SampledReference interpret_sample(const OpGraph& graph, const std::vector<HostTensor>& inputs,
                                  const SampleOptions& options = {});

/// The elements of `tensor` at `flat_index`, as a 1-D tensor of its dtype.
HostTensor gather_elements(const HostTensor& tensor, const std::vector<int64_t>& flat_index);

/// Sum of TeNode::flops over the graph.
double graph_flops(const OpGraph& graph);

}  // namespace tessel
