// Row reuse (kernels/cpu/row_reuse.h): a fused softmax evaluates exp(x - max) once per element --
// the row sum stores it, the quotient loads it -- and the result still matches the interpreter:
// odd row lengths, softmax over a leading or middle axis, rows whose buffer does not fit the
// budget (the fallback recomputes), the masked and scaled softmax of attention, the BERT layer.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cpu_check.h"
#include "kernels/cpu/emit_group.h"
#include "kernels/cpu/group_plan.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

OpGraph softmax_graph(std::vector<int64_t> shape, int64_t axis) {
  return lower_model(single_op_model("Softmax", {random_f32(std::move(shape), 1)}, {{"axis", axis}}, 1, {}));
}

/// Every group's plan, with the row-reuse budget the backend derives from `spec`.
std::vector<CpuGroupPlan> plans(const OpGraph& g, const Schedule& s, const HwSpec& spec) {
  const int64_t alignment = 64;
  const BufferPlan buffers = plan_buffers(g, s, alignment);
  std::vector<CpuGroupPlan> out;
  for (int k = 0; k < static_cast<int>(s.groups.size()); ++k)
    out.push_back(plan_cpu_group(g, s, buffers, k, alignment, cpu::codegen_params(spec).reuse_bytes,
                                  cpu::codegen_params(spec).streaming_bytes));
  return out;
}

/// Compiles `g` with `schedule` for `spec`, runs it and compares with the interpreter.
/// Hands `schedule` to the cpu backend directly: the tests edit tiles and shrink caches on purpose,
/// past what check_schedule accepts, to reach the backend's fallbacks.
void check_with(const OpGraph& g, const Schedule& schedule, const HwSpec& spec) {
  const CompiledCheck c = run_compiled(g, spec, schedule, random_inputs(g, 5), /*backend_only=*/true);
  CHECK_MESSAGE(c.ok, c.message);
}

/// Calls of the f32 exp in `path` (the IR as emitted, before the optimizer): the kernel evaluates
/// exp through the module's `tessel_expf` (emit_scalar.cpp), once per call site, and nothing else
/// in a softmax calls it.
int exp_evaluations(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find("call ") != std::string::npos && line.find("@tessel_expf(") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("cpu row reuse: a fused softmax evaluates exp once per element") {
  const OpGraph g = softmax_graph({64, 256}, -1);
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  const Schedule s = schedule_with(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  const CpuGroupPlan plan = plans(g, s, spec)[0];
  REQUIRE(plan.nodes.size() == 3);  // max, sum of exp, quotient
  REQUIRE(plan.reuses.size() == 1);
  const CpuRowReuse& r = plan.reuses[0];
  CHECK(r.source == 1);
  CHECK(print_expr(r.value) == "exp(sub(in0, in1))");
  REQUIRE(r.readers.size() == 1);
  CHECK(r.readers[0].position == 2);
  CHECK(r.extents.back() == 256);  // a whole row per spatial point
  // The emitted IR evaluates exp once (without row reuse: once in the row sum, again in the
  // quotient), and the manifest lists the reuse.
  TempDir dir;
  find_backend("cpu")->emit(g, s, spec, "llvm", dir.path.string());
  CHECK(exp_evaluations(dir.file("tessel_group_0.ll")) == 1);
  std::ifstream in(dir.file("manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const nlohmann::json& reuse = manifest["kernels"][0]["row_reuse"];
  REQUIRE(reuse.size() == 1);
  CHECK(reuse[0]["source"] == g.node(plan.nodes[1]).name());
  CHECK(reuse[0]["readers"][0] == g.node(plan.nodes[2]).name());
  check_compiled(g);
}

TEST_CASE("cpu row reuse: softmax with odd row lengths and over every axis") {
  // Rows of 1, primes, lengths that are not multiples of the vector width, one longer than 1024.
  for (int64_t n : {1, 2, 7, 13, 31, 67, 257, 1031}) {
    CAPTURE(n);
    const OpGraph g = softmax_graph({5, n}, -1);
    const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
    CHECK(plans(g, schedule_with(g, spec, "welder"), spec)[0].reuses.size() == 1);
    check_compiled(g);
  }
  // The reduction axis first or in the middle: phi maps the reader's leading / middle axis onto
  // the row sum's reduction axis.
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    const OpGraph g = softmax_graph({3, 7, 13}, axis);
    const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
    const Schedule s = schedule_with(g, spec, "welder");
    int reuses = 0;
    for (const CpuGroupPlan& p : plans(g, s, spec)) reuses += static_cast<int>(p.reuses.size());
    CHECK(reuses == (s.groups.size() == 1 ? 1 : 0));  // only when the three nodes are fused
    check_compiled(g);
  }
}

TEST_CASE("cpu row reuse: a buffer that does not fit falls back to recomputing") {
  // Tasks of 16 rows of 1000: a 64,000-byte buffer. Under the AVX2 spec's budget (half its
  // 512 KiB L2) the values are stored; with private caches of 64 KiB (budget 32 KiB) the quotient
  // evaluates exp again. Both match the interpreter.
  const OpGraph g = softmax_graph({40, 1000}, -1);
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  Schedule s = schedule_with(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  for (auto& [node, cfg] : s.groups[0].group.tiles)
    if (node == s.groups[0].group.nodes.back()) cfg.levels.front().spatial = {16, 1000};  // 3 tasks, the last of 8 rows
  HwSpec small = spec;
  for (MemoryLevel& l : small.memory_levels)
    if (l.scope == MemoryScope::core && l.cache) l.capacity_bytes = 64 * 1024;
  const CpuGroupPlan fits = plans(g, s, spec)[0];
  REQUIRE(fits.reuses.size() == 1);
  CHECK(fits.reuses[0].extents == std::vector<int64_t>{16, 1, 1000});
  CHECK(plans(g, s, small)[0].reuses.empty());
  check_with(g, s, spec);
  check_with(g, s, small);
}

TEST_CASE("cpu row reuse: masked, scaled softmax as in attention") {
  // P = softmax(Q K^T * scale + mask) V, with odd sizes: the scale and the mask are inlined into
  // the max, the row sum and the quotient; the row sum stores exp(scores - max).
  for (int64_t seq : {1, 17, 45}) {
    CAPTURE(seq);
    ModelBuilder b(DType::f32);
    const std::string q = b.input("q", {2, 3, seq, 8});
    const std::string kt = b.input("kt", {2, 3, 8, seq});
    const std::string v = b.input("v", {2, 3, seq, 8});
    const std::string scale = b.weight("scale", {1}, 3);
    const std::string mask = b.input("mask", {1, 1, 1, seq});
    const std::string scores = b.op("Add", {b.op("Mul", {b.op("MatMul", {q, kt}), scale}), mask});
    const OpGraph g = b.graph(b.op("MatMul", {b.op("Softmax", {scores}, {{"axis", int64_t{-1}}}), v}));
    const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
    const Schedule s = schedule_with(g, spec, "welder");
    int reuses = 0;
    for (const CpuGroupPlan& p : plans(g, s, spec))
      for (const CpuRowReuse& r : p.reuses) {
        ++reuses;
        CHECK(print_expr(r.value).find("exp") == 0);
      }
    CHECK(reuses == 1);
    check_compiled(g);
  }
}

TEST_CASE("cpu row reuse: the BERT-base layer's attention softmax") {
  // Correctness of the whole layer is cpu_models_test's; here: its softmax group stores exp once.
  const OpGraph g = lower_model(load_model(std::string(TESSEL_SOURCE_DIR) + "/experiments/models/bert_base_layer.json"));
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  int reuses = 0;
  for (const CpuGroupPlan& p : plans(g, schedule_with(g, spec, "welder"), spec))
    for (const CpuRowReuse& r : p.reuses) {
      ++reuses;
      CHECK(print_expr(r.value).find("exp") == 0);
    }
  CHECK(reuses == 1);
}
