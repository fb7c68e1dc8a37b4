// SPMD partitioning: one graph and a sharding plan become the program every device of a mesh runs
// (docs/distributed.md).
//
// Every device runs the same local graph -- each node split as the plan says (sharding.h's
// local_node), weights holding only this device's piece -- cut where a tensor must change layout
// across devices. A cut is a transfer: the tensor before it is an output of the local graph, the
// tensor after it an input, and a collective (all-gather, all-reduce, reduce-scatter,
// all-to-all) runs between them. Changes that need no communication (a replicated tensor
// sharded) are slice nodes inside the local graph. The local graphs of all devices have the same
// structure and the same transfers in the same order; only weight pieces and slice offsets differ.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilegraph/op_graph.h"
#include "tilegraph/sharding.h"

namespace tessel {

/// How a graph is spread over a mesh: a sharding for every node, the layout each graph input is
/// given in and the layout each graph output is returned in (default: replicated).
struct ShardPlan {
  Mesh mesh;
  std::vector<NodeSharding> nodes;     // per NodeId of the graph
  std::vector<TensorLayout> inputs;    // per graph input
  std::vector<TensorLayout> outputs;   // per graph output
};

/// A plan with every node computed whole on every device, inputs and outputs replicated.
ShardPlan replicated_plan(const OpGraph& graph, const Mesh& mesh);

/// Why `plan` cannot run `graph` (a node split illegally, a layout that does not fit its tensor, a
/// conversion no collective makes), naming the node or tensor; nullopt when it can.
std::optional<std::string> check_plan(const OpGraph& graph, const ShardPlan& plan);

/// A tensor changing layout between devices: `source` (an output of the local graph) becomes
/// `result` (an input of it) by `step`'s collective among the devices of its mesh axis (P of
/// them, this device the k-th). Every collective moves contiguous blocks; the layout changes
/// around it are nodes of the local graph (which the policy fuses like any other):
///   all_reduce      result = source combined elementwise over the group
///   all_gather      result [P, source...]: block j is device j's source (a join node after it
///                   makes the gathered dimension)
///   reduce_scatter  source [P, block...] (a blocks node before it cuts the scattered dimension);
///                   result = block k combined over the group
///   all_to_all      source [P, block...]; result [P, block...]: block j is device j's block k
struct Transfer {
  LayoutStep step;
  TensorId source = -1;
  TensorId result = -1;
  std::string tensor;  // the graph tensor it carries
  TensorType global;   // that tensor's type on one device
};

/// What device `device` runs.
struct SpmdProgram {
  Mesh mesh;
  int64_t device = 0;
  /// The local graph. Its inputs: first one per graph input (this device's piece of it, in the
  /// plan's input layout), then one per transfer's result, in transfer order.
  OpGraph local;
  std::vector<Transfer> transfers;   // in an order where every source is computable once the transfers before it ran
  std::vector<TensorId> outputs;     // per graph output: the local tensor holding this device's piece
  std::vector<TensorLayout> input_layouts, output_layouts;
};

/// The program of device `device` (0 <= device < plan.mesh.devices()) for `graph` under `plan`.
/// UserError naming the node or tensor when check_plan fails. Without `weight_values` the weight
/// pieces are dense stand-ins of the right shapes (for scheduling and pricing, never running).
SpmdProgram partition(const OpGraph& graph, const ShardPlan& plan, int64_t device, bool weight_values = true);

/// Device `device`'s piece of a whole tensor in `layout` (a copy), and the whole tensor assembled
/// from every device's piece (pieces[d] for device d; replicated and partial axes take device 0's
/// coordinate 0 piece, partial pieces combined).
HostTensor take_piece(const HostTensor& whole, const TensorLayout& layout, const Mesh& mesh, int64_t device);
HostTensor assemble(const std::vector<HostTensor>& pieces, const std::vector<int64_t>& shape,
                    const TensorLayout& layout, const Mesh& mesh);

}  // namespace tessel
