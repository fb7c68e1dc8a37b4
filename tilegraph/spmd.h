// SPMD partitioning: one graph and a sharding plan become the program every device of a mesh runs
// (docs/distributed.md).
//
// Every device runs the same local graph -- each node split as the plan says (sharding.h's
// local_node), weights holding only this device's piece -- cut where a tensor must change layout
// across devices. A cut is a transfer: the tensor before it is an output of the local graph, the
// tensor after it an input, and a collective (all-gather, all-reduce, reduce-scatter,
// all-to-all) runs between them. Changes that need no communication (a replicated tensor
// sharded) are slice nodes inside the local graph. The local graphs of all devices have the same
// structure and the same transfers in the same order; only weight pieces and slice offsets differ
// (and, where a node is overlapped with ring shifts, the order its pieces are joined in).
//
// Overlap (Mercury's shift): a node that needs an input all-gathered along one mesh axis can
// instead run in P pieces, one per block of that input, while the blocks rotate around the axis's
// ring -- piece s computes on the block held after s shifts while the next shift moves it on (the
// runners put transfers on a queue of their own). ShardPlan::shifted records the choice per node;
// shift_form says whether a node can run that way.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
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
  /// Per NodeId, the input delivered by ring shifts instead of an all-gather (overlapped with the
  /// node's pieces), or -1. Empty: none.
  std::vector<int> shifted;
  int shifted_input(NodeId n) const { return n < static_cast<NodeId>(shifted.size()) ? shifted[n] : -1; }
};

/// How a node runs with one input delivered by ring shifts along mesh axis `mesh_axis` (P devices):
/// P pieces, each the node (split as the plan says) with loop axis `axis` cut once more into P, reading
/// one block of the input along its dimension `input_dim` and making one block of the output along
/// `output_dim`; the pieces are joined along output_dim.
struct ShiftForm {
  int mesh_axis = -1;
  int axis = -1;
  int input_dim = -1;
  int output_dim = -1;
  int64_t parts = 0;
  TensorLayout block_layout;  // the layout the input's blocks are held in (S(input_dim) along mesh_axis)
  Mesh piece_mesh;            // the mesh with one more axis (the pieces) ...
  NodeSharding piece;         // ... and the node's sharding on it: one piece's node is local_node(node, piece, piece_mesh)
};

/// Whether `node`, split as `sharding`, can take its input `input` by ring shifts when that input is
/// held in `held` (the layouts its producer made): the input is needed replicated along exactly one
/// mesh axis where it is held sharded (other axes alike), the loop axis reading that dimension is
/// spatial, read by no other input and is one whole dimension of the output. The reason otherwise.
std::variant<ShiftForm, std::string> shift_form(const TeNode& node, const NodeSharding& sharding, int input,
                                                const std::vector<TensorLayout>& held, const Mesh& mesh);

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
