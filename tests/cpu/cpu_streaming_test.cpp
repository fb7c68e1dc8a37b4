// Streaming stores (kernels/cpu/streaming_stores.h): a group that moves at least the largest
// cache's worth of data stores the outputs no node of the group reads with non-temporal vector
// stores where LLVM proves them aligned, and ordinary stores elsewhere. The plan's rule, both
// sides of the threshold, an output read inside its group, odd sizes and every softmax axis
// against the interpreter, and the marked stores of an emitted object (aligned rows: marked;
// rows of odd length: the ordinary-store fallback).
#include <fstream>

#include <nlohmann/json.hpp>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cpu_check.h"
#include "kernels/cpu/emit_group.h"
#include "kernels/cpu/group_plan.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// The AVX2 spec with caches of 8 KiB (L1), 32 KiB (L2) and 256 KiB (L3), so that small graphs
/// cross the streaming threshold.
HwSpec small_cache_spec() {
  HwSpec spec = cpu_spec("x86-64-avx2-generic");
  for (MemoryLevel& l : spec.memory_levels) {
    if (l.name == "l1d") l.capacity_bytes = 8 * 1024;
    if (l.name == "l2") l.capacity_bytes = 32 * 1024;
    if (l.name == "l3") l.capacity_bytes = 256 * 1024;
  }
  return spec;
}

OpGraph softmax_graph(std::vector<int64_t> shape, int64_t axis) {
  return lower_model(single_op_model("Softmax", {random_f32(std::move(shape), 1)}, {{"axis", axis}}, 1, {}));
}

std::vector<CpuGroupPlan> plans(const OpGraph& g, const Schedule& s, const HwSpec& spec) {
  const int64_t alignment = 64;
  const BufferPlan buffers = plan_buffers(g, s, alignment);
  const cpu::CodegenParams params = cpu::codegen_params(spec);
  std::vector<CpuGroupPlan> out;
  for (int k = 0; k < static_cast<int>(s.groups.size()); ++k)
    out.push_back(plan_cpu_group(g, s, buffers, k, alignment, params.reuse_bytes, params.streaming_bytes));
  return out;
}

int streamed_outputs(const std::vector<CpuGroupPlan>& plans) {
  int n = 0;
  for (const CpuGroupPlan& p : plans)
    for (const CpuNodeBuffer& b : p.buffers) n += b.streamed;
  return n;
}

/// Every welder and roller schedule of `g` for `spec`, compiled and compared with the interpreter.
void check_on(const OpGraph& g, const HwSpec& spec) {
  for (const std::string policy : {"welder", "roller"}) {
    INFO(policy);
    const CompiledCheck c = run_compiled(g, spec, policy, random_inputs(g, 3));
    CHECK_MESSAGE(c.ok, c.message);
  }
}

}  // namespace

TEST_CASE("cpu streaming stores: the threshold is the largest cache of the spec") {
  const HwSpec spec = small_cache_spec();
  const int64_t threshold = cpu::codegen_params(spec).streaming_bytes;
  // The most any level holds: 8 private L2s of 32 KiB, or the 256 KiB L3.
  CHECK(threshold == 256 * 1024);
  CHECK(cpu::codegen_params(cpu_spec("x86-64-avx2-generic")).streaming_bytes == 32 * 1024 * 1024);
  // 64 x 1031 f32 in and out: 528 KB moved, streamed; 4 x 31: 1 KB, not.
  const OpGraph big = softmax_graph({64, 1031}, -1);
  const Schedule sb = schedule_with(big, spec, "welder");
  REQUIRE(sb.groups.size() == 1);
  const CpuGroupPlan pb = plans(big, sb, spec)[0];
  CHECK(pb.buffers.back().streamed);
  for (size_t k = 0; k + 1 < pb.buffers.size(); ++k) CHECK_FALSE(pb.buffers[k].streamed);  // scratch, not memory
  const OpGraph small = softmax_graph({4, 31}, -1);
  CHECK(streamed_outputs(plans(small, schedule_with(small, spec, "welder"), spec)) == 0);
  // The same big graph under the real AVX2 spec (32 MiB L3): not streamed.
  const HwSpec& avx2 = cpu_spec("x86-64-avx2-generic");
  CHECK(streamed_outputs(plans(big, schedule_with(big, avx2, "welder"), avx2)) == 0);
}

TEST_CASE("cpu streaming stores: an output a later node of its group reads is not streamed") {
  // e = exp(x) is a model output and also read by e * x in the same group (when welder fuses
  // them): it stays an ordinary store, the product streams.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {96, 1024});
  const std::string e = b.op("Exp", {x});
  const std::string p = b.op("Mul", {e, x});
  const OpGraph g = b.graph(std::vector<std::string>{e, p});
  const HwSpec spec = small_cache_spec();
  const Schedule s = schedule_with(g, spec, "welder");
  for (const CpuGroupPlan& plan : plans(g, s, spec))
    for (size_t k = 0; k < plan.nodes.size(); ++k) {
      const CpuNodeBuffer& buf = plan.buffers[k];
      bool read_here = false;
      for (NodeId c : g.consumers(buf.tensor)) read_here |= plan.position(c) >= 0;
      CAPTURE(g.tensor(buf.tensor).name);
      if (read_here || buf.in_scratch) CHECK_FALSE(buf.streamed);
      else CHECK(buf.streamed);  // 786 KB moved by any group here, over the 256 KiB threshold
    }
  check_on(g, spec);
}

TEST_CASE("cpu streaming stores: odd sizes and every axis match the interpreter") {
  const HwSpec spec = small_cache_spec();
  // Rows that are multiples of the vector width (aligned: non-temporal stores), primes and
  // lengths that are not (ordinary stores for the unaligned rows and every tail), a single row,
  // a single column.
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {128, 1024}, {67, 1031}, {1, 70001}, {70001, 1}, {257, 264}, {31, 2053}}) {
    CAPTURE(shape[0]);
    CAPTURE(shape[1]);
    const OpGraph g = softmax_graph(shape, -1);
    CHECK(streamed_outputs(plans(g, schedule_with(g, spec, "welder"), spec)) >= 1);
    check_on(g, spec);
  }
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    check_on(softmax_graph({17, 64, 67}, axis), spec);
  }
  // Layer norm and an elementwise group, both over the threshold.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {193, 520});
  const OpGraph ln = b.graph(b.op("LayerNormalization", {x, b.weight("s", {520}, 2), b.weight("c", {520}, 3)},
                                  {{"axis", int64_t{-1}}, {"epsilon", 1e-5}}));
  check_on(ln, spec);
  ModelBuilder e(DType::f32);
  const OpGraph add = e.graph(e.op("Add", {e.op("Mul", {e.input("a", {999, 263}), e.input("b", {999, 263})}), e.input("c", {263})}));
  CHECK(streamed_outputs(plans(add, schedule_with(add, spec, "welder"), spec)) >= 1);
  check_on(add, spec);
}

TEST_CASE("cpu streaming stores: marked in the object where aligned, ordinary stores otherwise") {
  const HwSpec spec = small_cache_spec();
  const std::unique_ptr<Backend> cpu = find_backend("cpu");
  struct Case {
    std::vector<int64_t> shape;
    bool streamed, marked;
  };
  // 1024-wide rows start at multiples of 8 floats: the vector stores are provably 32-byte
  // aligned. 1031-wide rows do not: streamed in the plan, but no store qualifies. 4 x 31: below
  // the threshold.
  for (const Case& c : std::vector<Case>{{{64, 1024}, true, true}, {{64, 1031}, true, false}, {{4, 31}, false, false}}) {
    CAPTURE(c.shape[1]);
    const OpGraph g = softmax_graph(c.shape, -1);
    const Schedule s = schedule_with(g, spec, "welder");
    TempDir obj, ll;
    cpu->emit(g, s, spec, "obj", obj.path.string());
    std::ifstream in(obj.file("manifest.json"));
    const nlohmann::json manifest = nlohmann::json::parse(in);
    int streamed = 0, marked = 0;
    for (const nlohmann::json& k : manifest["kernels"]) {
      streamed += static_cast<int>(k["streamed_outputs"].size());
      marked += k["nontemporal_stores"].get<int>();
    }
    CHECK((streamed > 0) == c.streamed);
    CHECK((marked > 0) == c.marked);
    // The IR as emitted lists the streamed scopes and ends the kernel with a fence.
    cpu->emit(g, s, spec, "llvm", ll.path.string());
    const std::string ir = tessel::testing::read_text(ll.file("tessel_group_0.ll"));
    CHECK((ir.find("!tessel.streaming_scopes") != std::string::npos) == c.streamed);
    CHECK((ir.find("fence seq_cst") != std::string::npos) == c.streamed);
  }
}
