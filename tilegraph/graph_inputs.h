// The one check that values given for a graph's inputs fit it: as many as its inputs, each of its
// input's dtype and shape. The interpreter, both backends and the distributed runner ask it before
// they read an input.
#pragma once

#include <string>
#include <vector>

#include "tilegraph/host_tensor.h"

namespace tessel {

class OpGraph;

/// Throws a one-line UserError unless `inputs` match `graph`'s inputs in number and type: it
/// names `where` (the file or option the inputs came from; may be empty), the input, and the type
/// expected and given, followed by `hint` when one is given.
void check_graph_inputs(const OpGraph& graph, const std::vector<HostTensor>& inputs, const std::string& where = "",
                        const std::string& hint = "");

}  // namespace tessel
