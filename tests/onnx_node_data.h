// The ONNX backend node tests of Debian's libonnx-testdata as Tessel graphs, shared by the tests
// that run them through the policies and backends.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/host_tensor.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/lower.h"
#include "tilegraph/op_graph.h"

namespace tessel::testing {

struct NodeTest {
  OpGraph graph;
  std::vector<HostTensor> inputs;  // for the graph's inputs, in order
};

// The test lowered with the shapes of its first data set (integer inputs bound as constants when
// a shape depends on them) with its inputs; nullopt when Tessel does not support it.
inline std::optional<NodeTest> load_node_test(const std::filesystem::path& dir) {
  const ModelDef model = import_onnx((dir / "model.onnx").string());
  std::vector<HostTensor> data;
  for (int k = 0;; ++k) {
    const std::filesystem::path p = dir / "test_data_set_0" / cat("input_", k, ".pb");
    if (!std::filesystem::exists(p)) break;
    data.push_back(read_tensor_file(p.string()));
  }
  if (data.size() != model.inputs.size()) return std::nullopt;
  for (bool bind : {false, true}) {
    LowerOptions options;
    for (size_t k = 0; k < data.size(); ++k) {
      options.input_shapes[model.inputs[k].name] = data[k].shape();
      if (bind && is_integer(data[k].dtype())) options.constant_inputs[model.inputs[k].name] = data[k];
    }
    try {
      NodeTest t{lower_model(model, options), {}};
      for (TensorId in : t.graph.inputs())
        for (size_t k = 0; k < data.size(); ++k)
          if (model.inputs[k].name == t.graph.tensor(in).name) t.inputs.push_back(data[k]);
      if (t.inputs.size() != t.graph.inputs().size()) return std::nullopt;
      return t;
    } catch (const UnsupportedError&) {
      return std::nullopt;
    } catch (const UserError&) {
      if (bind) return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace tessel::testing
