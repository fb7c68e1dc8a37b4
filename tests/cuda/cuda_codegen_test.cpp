// The CUDA backend without a GPU: every generated kernel must compile with NVRTC for the H100
// spec (sm_90a) -- each bundled model under the welder and roller schedules, and small graphs of
// every operator family -- and the plan's boxes must cover what tile propagation says each node
// computes.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cuda_check.h"
#include "kernels/cuda/group_plan.h"
#include "tilegraph/dtype.h"
#include "tilegraph/tile_propagation.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// Small graphs covering the operator families (also run on the GPU by cuda_run_test.cpp).
std::vector<std::pair<std::string, OpGraph>> family_graphs() {
  std::vector<std::pair<std::string, OpGraph>> out;
  auto add = [&](const std::string& name, OpGraph g) { out.emplace_back(name, std::move(g)); };
  add("add broadcast", op_graph("Add", {random_f32({3, 5, 17}, 1), random_f32({17}, 2)}));
  add("gelu", op_graph("Gelu", {random_f32({7, 33}, 1)}));
  add("matmul odd", op_graph("MatMul", {random_f32({13, 37}, 1), random_f32({37, 29}, 2)}));
  add("softmax", op_graph("Softmax", {random_f32({7, 33}, 1)}, {{"axis", int64_t{-1}}}));
  add("layernorm", op_graph("LayerNormalization", {random_f32({5, 64}, 1), random_f32({64}, 2), random_f32({64}, 3)},
                            {{"axis", int64_t{-1}}}));
  add("conv pad stride", op_graph("Conv", {random_f32({1, 3, 9, 9}, 1), random_f32({4, 3, 3, 3}, 2)},
                                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}}));
  add("maxpool", op_graph("MaxPool", {random_f32({1, 2, 7, 7}, 1)},
                          {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  add("reduce sum", op_graph("ReduceSum", {random_f32({4, 6, 5}, 1), i64({1}, {1})}, {{"keepdims", int64_t{0}}}, {1}));
  add("transpose", op_graph("Transpose", {random_f32({2, 3, 5}, 1)}, {{"perm", std::vector<int64_t>{2, 0, 1}}}));
  add("gather", op_graph("Gather", {random_f32({10, 4}, 1), i64({3}, {2, 0, 9})}, {{"axis", int64_t{0}}}));
  add("cast f16", op_graph("Cast", {random_f32({6, 7}, 1)}, {{"to", std::string("f16")}}));
  add("integer mod", op_graph("Mod", {tensor(DType::i32, {6}, {-7, 7, -7, 7, 5, 0}), tensor(DType::i32, {6}, {3, -3, -3, 3, 0, 4})}));
  add("argmax", op_graph("ArgMax", {random_f32({5, 9}, 1)}, {{"axis", int64_t{1}}}));
  return out;
}

}  // namespace

TEST_CASE("cuda codegen: every operator family compiles with NVRTC for sm_90a") {
  const HwSpec& spec = gpu_spec();
  for (auto& entry : family_graphs())
    for (const std::string policy : {"welder", "roller"}) {
      auto& [name, g] = entry;
      INFO(entry.first, " (", policy, ")");
      const Schedule s = schedule_with(g, spec, policy);
      CHECK(nvrtc_compile_all(g, s, spec) >= 1);
    }
}

TEST_CASE("cuda codegen: every bundled model compiles with NVRTC under welder and roller") {
  const HwSpec& spec = gpu_spec();
  for (const std::string& model : bundled_models()) {
    const OpGraph g = bundled_model(model);
    for (const std::string policy : {"welder", "roller"}) {
      INFO(model, " (", policy, ")");
      CHECK(nvrtc_compile_all(g, schedule_with(g, spec, policy), spec) >= 1);
    }
  }
}

TEST_CASE("cuda codegen: each node's box covers what tile propagation says it computes") {
  const HwSpec& spec = gpu_spec();
  for (const std::string model : {"bert_base_layer", "resnet50_bottleneck", "llama_decoder_block"}) {
    const OpGraph g = bundled_model(model);
    const Schedule s = schedule_with(g, spec, "welder");
    for (const ScheduleGroup& sg : s.groups) {
      const cuda::GroupPlan plan = cuda::plan_group(g, sg.group, spec);
      const TeNode& sink = g.node(sg.group.nodes.back());
      for (int64_t t : {int64_t{0}, plan.num_tiles / 2, plan.num_tiles - 1}) {
        if (t < 0) continue;
        const std::vector<cuda::TileBox> boxes = cuda::tile_boxes(g, plan, t);
        DomainTile tile = DomainTile::whole(sink);
        for (int a = 0; a < sink.num_spatial(); ++a) {
          tile.begin[a] = boxes.back().lo[a];
          tile.extent[a] = boxes.back().hi[a] - boxes.back().lo[a] + 1;
        }
        const GroupPropagation prop = propagate_group(g, sg.group.nodes, sg.group.nodes.back(), tile);
        REQUIRE_MESSAGE(prop.ok, prop.reason);
        for (const NodeTile& nt : prop.nodes) {
          const int i = plan.position(nt.node);
          const TeNode& node = g.node(nt.node);
          if (nt.tile.empty()) continue;
          for (int a = 0; a < node.num_spatial(); ++a) {
            INFO(model, " tile ", t, " node ", node.name(), " axis ", a);
            CHECK(boxes[i].lo[a] <= nt.tile.begin[a]);
            CHECK(boxes[i].hi[a] >= nt.tile.begin[a] + nt.tile.extent[a] - 1);
          }
        }
      }
    }
  }
}

TEST_CASE("cuda codegen: identical layers share one kernel") {
  const OpGraph g = bundled_model("bert_base_12_layers");
  const HwSpec& spec = gpu_spec();
  const Schedule s = schedule_with(g, spec, "welder");
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) names.insert(emit_kernel(g, s, i, spec).name);
  CHECK(names.size() * 6 <= s.groups.size());
}

TEST_CASE("cuda codegen: emit writes one file per kernel and a manifest") {
  const OpGraph g = bundled_model("bert_base_layer");
  const HwSpec& spec = gpu_spec();
  const Schedule s = schedule_with(g, spec, "welder");
  TempDir dir;
  const std::string out = std::getenv("TESSEL_TEST_EMIT_DIR") ? std::getenv("TESSEL_TEST_EMIT_DIR") : dir.file("kernels");
  const std::vector<std::string> files = find_backend("cuda")->emit(g, s, spec, "cuda", out);
  REQUIRE(files.size() >= 2);
  CHECK(files.back() == out + "/manifest.json");
  std::ifstream manifest(files.back());
  const std::string text((std::istreambuf_iterator<char>(manifest)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"kernels\"") != std::string::npos);
  CHECK(text.find("\"buffer_plan\"") != std::string::npos);
  CHECK(text.find("l0_ln2") != std::string::npos);
  for (size_t i = 0; i + 1 < files.size(); ++i) CHECK(std::filesystem::file_size(files[i]) > 0);
  CHECK_THROWS_AS(find_backend("cuda")->emit(g, s, spec, "llvm", out), UserError);
}

TEST_CASE("cuda codegen: a whole tensor summed to one value is shared by a block's threads (T5's isinf().any())") {
  // x summed to one value, compared and selected (Hugging Face T5's clamp in f16): the sum was
  // inlined into its one reader and walked by one thread (1 ms for 65536 elements on an H100).
  // Staged, it is summed by the lanes of a 1024-thread block.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {1, 128, 512});
  const std::string sum = b.op("ReduceSum", {x}, {{"keepdims", int64_t{0}}});
  const std::string big = b.op("Greater", {sum, b.weight("zero", {1}, 1, 0.0, 0.0)});
  const std::string y = b.op("Where", {big, b.weight("hi", {1}, 2), b.weight("lo", {1}, 3)});
  const OpGraph g = b.graph(y);
  const HwSpec& spec = gpu_spec();
  for (const std::string policy : {"welder", "roller"}) {
    INFO(policy);
    const Schedule s = schedule_with(g, spec, policy);
    bool shared = false;
    for (const ScheduleGroup& sg : s.groups) {
      const cuda::GroupPlan plan = cuda::plan_group(g, sg.group, spec);
      for (const cuda::NodePlan& np : plan.nodes)
        if (g.node(np.node).num_reduction() > 0) {
          CHECK(np.role != cuda::NodeRole::inlined);
          CHECK(np.lanes == spec.limits.max_threads_per_block);
          shared = true;
        }
    }
    CHECK(shared);
    if (gpu_available()) check_on_gpu(g, policy, {random_f32({1, 128, 512}, 7)});
    else CHECK(nvrtc_compile_all(g, s, spec) >= 1);
  }
  // Many outputs keep one thread per point (the grid has the parallelism).
  ModelBuilder rows(DType::f32);
  const OpGraph many = rows.graph(rows.op("ReduceSum", {rows.input("x", {4096, 2048}), rows.weight_i64("axes", {1})}));
  const Schedule s = schedule_with(many, spec, "welder");
  CHECK(cuda::plan_group(many, s.groups[0].group, spec).threads < spec.limits.max_threads_per_block);
}

TEST_CASE("cuda codegen: 1 + erf(z) in an f16 or bf16 expression takes the fast erf, within the tolerance at every f16 value") {
  // The erf GELU's 1 + erf(x / sqrt 2) in a 16-bit node takes prelude.cuh's m_erf_h (absolute
  // error below 6e-7, hidden by the sum's rounding); a bare Erf and f32 expressions keep erff.
  auto source = [](const OpGraph& g) {
    const Schedule s = schedule_with(g, gpu_spec(), "welder");
    std::string all;
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) all += emit_kernel(g, s, i, gpu_spec()).source;
    return all;
  };
  auto single = [](DType dt, const std::string& op) {
    ModelBuilder b(dt);
    return b.graph(b.op(op, {b.input("x", {7, 33})}));
  };
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::string gelu = source(single(dt, "Gelu"));
    CHECK(gelu.find("= tsl::m_erf_h(") != std::string::npos);
    CHECK(gelu.find("= tsl::m_erf(") == std::string::npos);
    const std::string erf = source(single(dt, "Erf"));
    CHECK(erf.find("= tsl::m_erf_h(") == std::string::npos);
    CHECK(erf.find("tsl::m_erf(") != std::string::npos);
  }
  CHECK(source(single(DType::f32, "Gelu")).find("= tsl::m_erf_h(") == std::string::npos);
  // Every finite f16 value in [-10, 10] through an f16 GELU, against the interpreter (fp64 erf).
  std::vector<double> values;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const double v = half_bits_to_float(static_cast<uint16_t>(bits));
    if (std::isfinite(v) && std::abs(v) <= 10) values.push_back(v);
  }
  const int64_t count = static_cast<int64_t>(values.size());
  ModelBuilder b(DType::f16);
  const OpGraph g = b.graph(b.op("Gelu", {b.input("x", {count})}));
  if (gpu_available()) check_on_gpu(g, "welder", {HostTensor(TensorType{DType::f16, {count}}, values)});
  else CHECK(nvrtc_compile_all(g, schedule_with(g, gpu_spec(), "welder"), gpu_spec()) == 1);
}
