// The z3 gap experiment (README.md): for a fixed set of operators on two shipped hardware specs,
// how far roller's best tile is from the least outer-level traffic the z3 policy proves.
//
//   z3_gap <tessel source dir> <out.csv> [timeout_ms]
//
// Per node of every operator: roller's best candidate (rank 1 by the cost model) and the least
// traffic among its top-k, z3's proven minimum over the aligned tile space (z3_policy.h), both
// as tile_traffic bytes of the outermost tile from the device level, and their ratio.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cost_model/analytic_model.h"
#include "policy/roller.h"
#include "policy/z3_policy.h"
#include "tilegraph/error.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"
#include "tilegraph/tile_traffic.h"

using namespace tessel;

namespace {

struct Operator {
  std::string name;
  ModelDef model;
};

ModelDef one_op(const std::string& op_type, const std::vector<TensorType>& inputs,
                std::map<std::string, AttrValue> attrs = {}) {
  ModelDef m;
  m.name = op_type;
  OpDef op;
  op.name = "op";
  op.op_type = op_type;
  op.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    op.inputs.push_back("in" + std::to_string(i));
    m.inputs.push_back({op.inputs.back(), inputs[i]});
  }
  op.outputs = {"out"};
  m.outputs = {"out"};
  m.ops.push_back(op);
  return m;
}

Operator gemm(DType t, int64_t m, int64_t n, int64_t k) {
  return {cat("gemm_", dtype_name(t), "_", m, "x", n, "x", k),
          one_op("MatMul", {TensorType{t, {m, k}}, TensorType{t, {k, n}}})};
}

// NCHW convolution without bias: batch n, c -> oc channels, h x h image, r x r kernel.
Operator conv(const std::string& layer, int64_t n, int64_t c, int64_t h, int64_t oc, int64_t r,
              int64_t stride) {
  const int64_t pad = r / 2;
  return {cat("conv_", layer, "_", c, "to", oc, "_", h, "px_", r, "x", r, "s", stride),
          one_op("Conv", {TensorType{DType::f32, {n, c, h, h}}, TensorType{DType::f32, {oc, c, r, r}}},
                 {{"strides", std::vector<int64_t>{stride, stride}},
                  {"pads", std::vector<int64_t>{pad, pad, pad, pad}}})};
}

std::vector<Operator> operators() {
  std::vector<Operator> ops;
  for (DType t : {DType::f16, DType::f32}) {
    ops.push_back(gemm(t, 4096, 4096, 4096));
    ops.push_back(gemm(t, 1000, 1000, 1000));
    ops.push_back(gemm(t, 127, 3000, 513));
    ops.push_back(gemm(t, 8192, 64, 1024));
    ops.push_back(gemm(t, 1, 4096, 4096));
  }
  // ResNet-50 (batch 1): the stem, and one 1x1 / 3x3 / 1x1 bottleneck layer of each stage.
  ops.push_back(conv("stem", 1, 3, 224, 64, 7, 2));
  ops.push_back(conv("res2a_1x1", 1, 64, 56, 64, 1, 1));
  ops.push_back(conv("res2a_3x3", 1, 64, 56, 64, 3, 1));
  ops.push_back(conv("res2a_expand", 1, 64, 56, 256, 1, 1));
  ops.push_back(conv("res3a_3x3", 1, 128, 56, 128, 3, 2));
  ops.push_back(conv("res4a_3x3", 1, 256, 14, 256, 3, 1));
  ops.push_back(conv("res5a_expand", 1, 512, 7, 2048, 1, 1));
  ops.push_back({"softmax_4096x1000", one_op("Softmax", {TensorType{DType::f32, {4096, 1000}}}, {{"axis", int64_t{-1}}})});
  ops.push_back({"layernorm_2048x768",
                 one_op("LayerNormalization", {TensorType{DType::f32, {2048, 768}}, TensorType{DType::f32, {768}},
                                               TensorType{DType::f32, {768}}},
                        {{"axis", int64_t{-1}}})});
  ops.push_back({"add_4096x4096", one_op("Add", {TensorType{DType::f32, {4096, 4096}}, TensorType{DType::f32, {4096, 4096}}})});
  ops.push_back({"relu_1000x999", one_op("Relu", {TensorType{DType::f32, {1000, 999}}})});
  return ops;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <tessel source dir> <out.csv> [timeout_ms]\n", argv[0]);
    return 2;
  }
  const std::string src = argv[1];
  Z3Options options;
  if (argc > 3) options.timeout_ms = std::stoi(argv[3]);
  std::ofstream csv(argv[2]);
  csv << "spec,operator,node,axes,roller_tile,roller_bytes,roller_topk_min_bytes,z3_tile,z3_bytes,ratio,"
         "z3_proven,z3_rounds,z3_ms,z3_encode_ms,z3_values_per_axis\n";
  const AnalyticCostModel cost;
  for (const std::string spec_name : {"nvidia-h100-sxm", "x86-64-avx512-server"}) {
    const HwSpec spec = load_hw_spec(src + "/hw_specs/" + spec_name + ".json");
    std::printf("== %s\n", spec_name.c_str());
    std::printf("%-34s %-12s %14s %14s %7s %6s %8s\n", "operator", "node", "roller B", "z3 B", "ratio", "proven", "z3 ms");
    for (const Operator& op : operators()) {
      const OpGraph graph = lower_model(op.model);
      for (NodeId n : graph.topological_order()) {
        const TeNode& node = graph.node(n);
        const TileSpace space = tile_space(node, spec, options);
        const std::vector<TileCandidate> roller = roller_candidates(graph, n, spec, cost);
        int64_t roller_bytes = -1, roller_min = -1;
        std::string roller_tile = "-";
        for (size_t i = 0; i < roller.size(); ++i) {
          const int64_t q = tile_traffic(node, roller[i].tiles.levels.front(), space.traffic).total_bytes;
          if (i == 0) {
            roller_bytes = q;
            roller_tile = print_tile_config(roller[i].tiles);
          }
          if (roller_min < 0 || q < roller_min) roller_min = q;
        }
        const Z3NodeResult z = solve_node_z3(graph, n, spec, cost, options);
        const bool z3_ok = z.solved && !z.fallback;
        const double ratio = z3_ok && roller_bytes >= 0 && z.traffic_bytes > 0
                                 ? static_cast<double>(roller_bytes) / static_cast<double>(z.traffic_bytes)
                                 : 0;
        std::string axes, values;
        for (const std::vector<int64_t>& v : space.values) values += cat(values.empty() ? "" : "x", v.size());
        for (const Axis& a : node.axes()) axes += cat(axes.empty() ? "" : "x", a.extent);
        std::printf("%-34s %-12s %14lld %14lld %7.3f %6s %8.0f\n", op.name.c_str(), node.name().c_str(),
                    static_cast<long long>(roller_bytes), static_cast<long long>(z3_ok ? z.traffic_bytes : -1), ratio,
                    z.proven_optimal ? "yes" : "no", z.solve_ms);
        std::fflush(stdout);
        csv << spec_name << ',' << op.name << ',' << node.name() << ',' << axes << ",\"" << roller_tile << "\","
            << roller_bytes << ',' << roller_min << ",\"" << (z3_ok ? print_tile_config(z.tiles) : "-") << "\","
            << (z3_ok ? z.traffic_bytes : -1) << ',' << ratio << ',' << (z.proven_optimal ? 1 : 0) << ','
            << z.rounds << ',' << static_cast<int64_t>(z.solve_ms) << ',' << static_cast<int64_t>(z.encode_ms) << ','
            << values << '\n';
        csv.flush();  // a row at a time, so an interrupted run keeps what it finished
      }
    }
  }
  // The whole bundled BERT-base layer scheduled by the z3 policy: wall time and proven nodes.
  for (const std::string spec_name : {"nvidia-h100-sxm", "x86-64-avx512-server"}) {
    const HwSpec spec = load_hw_spec(src + "/hw_specs/" + spec_name + ".json");
    const OpGraph bert = lower_model(load_model(src + "/experiments/models/bert_base_layer.json"));
    const auto start = std::chrono::steady_clock::now();
    const Schedule s = Z3Policy(options).schedule(PolicyContext{bert, spec, cost});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    int proven = 0;
    for (const ScheduleGroup& g : s.groups)
      for (const std::string& note : g.predicted.notes) proven += note.find("proven") != std::string::npos;
    std::printf("bert_base_layer on %s: %zu nodes, %d proven, z3 policy schedule %.0f ms\n", spec_name.c_str(),
                s.groups.size(), proven, ms);
  }
  return 0;
}
