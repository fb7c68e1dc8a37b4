// OpGraph: the operator graph Tessel schedules. Nodes are tensor-expression nodes (node.h), edges
// are tensors. Boost.Graph stores the structure inside op_graph.cpp; no caller sees Boost.
//
// Tensors are model inputs, weights (with data or a deterministic random init) or node outputs.
// The graph is append-only while it is built; transformations (subgraph extraction, dead-node
// elimination) return a new graph.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tilegraph/host_tensor.h"
#include "tilegraph/node.h"
#include "tilegraph/sparsity.h"

namespace tessel {

using NodeId = int;
using TensorId = int;

enum class TensorKind : uint8_t { input, weight, intermediate };

/// Where a weight's values come from.
using WeightSource = std::variant<std::shared_ptr<const HostTensor>, RandomInit>;

/// The values of a weight: its data, or its random init generated, then pruned as `sparsity` says
/// (apply_sparsity). OpGraph::weight_values and everything reading a ModelDef's weights use it.
HostTensor weight_source_values(const WeightSource& source, const TensorType& type, const std::optional<Sparsity>& sparsity);

struct TensorInfo {
  std::string name;
  TensorType type;
  TensorKind kind = TensorKind::intermediate;
  NodeId producer = -1;                 // for intermediates
  std::optional<WeightSource> weight;   // for weights
  std::optional<Sparsity> sparsity = std::nullopt;  // for weights that declare a pattern (sparsity.h)
};

class OpGraph {
 public:
  OpGraph();
  ~OpGraph();
  OpGraph(const OpGraph&);
  OpGraph& operator=(const OpGraph&);
  OpGraph(OpGraph&&) noexcept;
  OpGraph& operator=(OpGraph&&) noexcept;

  // Building. Names must be unique among tensors (InternalError otherwise).
  TensorId add_input(const std::string& name, const TensorType& type);
  TensorId add_weight(const std::string& name, const TensorType& type, WeightSource source,
                      std::optional<Sparsity> sparsity = std::nullopt);
  /// Adds a node reading `inputs` (one per node input, same types) and returns its output tensor.
  TensorId add_node(NodeRef node, const std::vector<TensorId>& inputs,
                    const std::string& output_name);
  void mark_output(TensorId t);
  /// Renames a tensor (lowering names a node's output after the model tensor it implements).
  void rename_tensor(TensorId t, const std::string& name);

  // Queries.
  int num_nodes() const;
  int num_tensors() const;
  const TeNode& node(NodeId n) const;
  const NodeRef& node_ref(NodeId n) const;
  const std::vector<TensorId>& node_inputs(NodeId n) const;
  TensorId node_output(NodeId n) const;
  const TensorInfo& tensor(TensorId t) const;
  std::optional<TensorId> find_tensor(const std::string& name) const;
  const std::vector<TensorId>& inputs() const;   // model inputs, in declaration order
  const std::vector<TensorId>& weights() const;
  const std::vector<TensorId>& outputs() const;
  NodeId producer(TensorId t) const;               // -1 for inputs and weights
  std::vector<NodeId> consumers(TensorId t) const; // in node order, without duplicates

  /// Nodes in an order where every producer precedes its consumers (stable: ties keep insertion
  /// order). Raises UserError naming a tensor on the cycle if the graph has one.
  std::vector<NodeId> topological_order() const;

  /// Weight values, generating random ones on demand, pruned as the weight's sparsity says.
  HostTensor weight_values(TensorId t) const;
  /// The non-zero cells of a weight with a sparsity attribute (sparsity.h), computed once per
  /// graph object and shared by its users (thread-safe). InternalError for another tensor.
  std::shared_ptr<const NonzeroMap> nonzero_map(TensorId t) const;

  /// Stable text of the whole graph: inputs, weights, nodes in topological order, outputs.
  std::string print() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  TensorId add_tensor(TensorInfo info);
};

/// The nodes `keep` (and the tensors they use) as a graph of their own: tensors produced outside
/// become inputs (weights stay weights), and tensors used outside or marked as outputs become
/// outputs.
OpGraph extract_subgraph(const OpGraph& graph, const std::vector<NodeId>& keep);

/// Drops nodes whose outputs reach no graph output, and weights nothing reads.
OpGraph eliminate_dead_nodes(const OpGraph& graph);

}  // namespace tessel
