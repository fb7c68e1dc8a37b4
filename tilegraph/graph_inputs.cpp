// check_graph_inputs (see graph_inputs.h).
#include "tilegraph/graph_inputs.h"

#include "tilegraph/error.h"
#include "tilegraph/op_graph.h"

namespace tessel {

void check_graph_inputs(const OpGraph& graph, const std::vector<HostTensor>& inputs, const std::string& where,
                        const std::string& hint) {
  const std::string tail = hint.empty() ? std::string() : cat(" (", hint, ")");
  if (inputs.size() != graph.inputs().size())
    throw UserError(where, "", cat("the model has ", graph.inputs().size(), " inputs, ", inputs.size(), " were given", tail));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = graph.tensor(graph.inputs()[i]);
    if (inputs[i].type() != info.type)
      throw UserError(where, cat("input '", info.name, "'"), cat("expected ", info.type.print(), ", given ", inputs[i].type().print(), tail));
  }
}

}  // namespace tessel
