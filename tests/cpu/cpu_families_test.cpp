// The CPU backend's kernel families (kernels/cpu/kernel_families.h): the policy records them, the
// backend emits the recorded one -- a GEMM forced onto loop nests still matches the interpreter --
// and refuses a family it cannot emit.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "../model_builder.h"
#include "cpu_check.h"
#include "cost_model/cpu_loops.h"
#include "kernels/cpu/kernel_families.h"
#include "policy/check_schedule.h"
#include "policy/kernel_families.h"

namespace tessel::testing {

namespace {

/// Welder's schedule of `g` for `spec`, each group's CPU kernel family recorded.
Schedule welder_with_cpu_families(const OpGraph& g, const HwSpec& spec, const CostModel& cost, const cpu::CpuKernelFamilies& families) {
  for (const auto& p : policies())
    if (p->name() == "welder") return schedule_with_families(*p, PolicyContext{g, spec, cost}, &families);
  FAIL("no welder policy");
  return {};
}

}  // namespace

TEST_CASE("cpu families: recorded by the policy, obeyed by the backend") {
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  ModelBuilder b(DType::f32);
  const std::string y = b.op("MatMul", {b.input("x", {64, 96}), b.weight("w", {96, 80}, 3)});
  const OpGraph g = b.graph(b.op("Relu", {b.op("Add", {y, b.weight("bias", {80}, 4)})}));
  const AnalyticCostModel cost;
  const cpu::CpuKernelFamilies families;
  Schedule s = welder_with_cpu_families(g, spec, cost, families);
  REQUIRE(!s.groups.empty());
  int microkernel = 0;
  for (const ScheduleGroup& sg : s.groups) {
    CHECK((sg.group.kernel.family == "microkernel" || sg.group.kernel.family == "loops"));
    microkernel += sg.group.kernel.family == "microkernel";
  }
  CHECK(microkernel == 1);  // the GEMM's group
  const std::vector<HostTensor> inputs = random_inputs(g, 11);
  const CompiledCheck as_chosen = run_compiled(g, spec, s, inputs);
  CHECK_MESSAGE(as_chosen.ok, as_chosen.message);
  // Every group forced onto loop nests: still correct.
  Schedule loops = s;
  for (ScheduleGroup& sg : loops.groups) sg.group.kernel = KernelChoice{"loops", {}, {}};
  const CompiledCheck forced = run_compiled(g, spec, loops, inputs);
  CHECK_MESSAGE(forced.ok, forced.message);
  // The micro-kernel on a group without a contraction, and a family the CPU does not have.
  for (size_t i = 0; i < s.groups.size(); ++i) {
    if (s.groups[i].group.kernel.family != "loops") continue;
    Schedule bad = s;
    bad.groups[i].group.kernel = KernelChoice{"microkernel", {}, {}};
    CHECK_THROWS_WITH_AS(run_compiled(g, spec, bad, inputs), doctest::Contains("no node is a contraction"), UserError);
  }
  {  // an elementwise graph has no contraction for the micro-kernel
    ModelBuilder e(DType::f32);
    const OpGraph eg = e.graph(e.op("Relu", {e.input("x", {32, 32})}));
    Schedule es;
    for (const auto& p : policies())
      if (p->name() == "welder") es = schedule_with_families(*p, PolicyContext{eg, spec, cost}, &families);
    REQUIRE(es.groups.size() == 1);
    CHECK(es.groups[0].group.kernel.family == "loops");
    CHECK(check_schedule(eg, spec, es, &families).empty());
    es.groups[0].group.kernel = KernelChoice{"microkernel", {}, {}};
    const std::vector<std::string> problems = check_schedule(eg, spec, es, &families);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0] == "group 0: kernel family 'microkernel' cannot emit this group: no node is a contraction the micro-kernel takes");
    CHECK_THROWS_WITH_AS(run_compiled(eg, spec, es, random_inputs(eg, 3)), doctest::Contains("no node is a contraction"),
                         UserError);
  }
  Schedule unknown = s;
  unknown.groups[0].group.kernel.family = "wgmma";
  // compile() refuses it before the backend sees it, naming the group; the backend itself refuses it too.
  CHECK_THROWS_WITH_AS(run_compiled(g, spec, unknown, inputs),
                       doctest::Contains("/groups/0/kernel/family: unknown cpu kernel family \"wgmma\""), UserError);
  CHECK_THROWS_WITH_AS(find_backend("cpu")->compile(g, unknown, spec, CompileOptions{}),
                       doctest::Contains("unknown CPU kernel family"), UserError);
}

TEST_CASE("cpu families: f16 and bf16 contractions take the micro-kernel, computed in f32") {
  // Before: loop nests converting each element (LLaMA-7B's 1 x 4096 x 4096 output projection in
  // f16 took 70.7 ms on this project's VM, 3.5 ms on the micro-kernel).
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  const AnalyticCostModel cost;
  const cpu::CpuKernelFamilies families;
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    std::vector<OpGraph> graphs;
    {  // an odd GEMM with a bias and GELU epilogue, and a GEMV
      ModelBuilder b(dt);
      const std::string y = b.op("MatMul", {b.input("x", {37, 200}), b.weight("w", {200, 77}, 3)});
      graphs.push_back(b.graph(b.op("Gelu", {b.op("Add", {y, b.weight("bias", {77}, 4)})})));
      ModelBuilder v(dt);
      graphs.push_back(v.graph(v.op("MatMul", {v.input("x", {1, 512}), v.weight("w", {512, 384}, 5)})));
    }
    {  // an NHWC convolution as implicit GEMM (channels last)
      ModelBuilder c(dt);
      const std::string x = c.input("x", {1, 9, 9, 16});
      const std::string nchw = c.op("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
      graphs.push_back(c.graph(c.op("Conv", {nchw, c.weight("k", {24, 16, 3, 3}, 6)}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})));
    }
    for (const OpGraph& g : graphs) {
      Schedule s;
      for (const auto& p : policies())
        if (p->name() == "welder") s = schedule_with_families(*p, PolicyContext{g, spec, cost}, &families);
      int microkernel = 0;
      for (const ScheduleGroup& sg : s.groups) microkernel += sg.group.kernel.family == "microkernel";
      CHECK(microkernel >= 1);
      const CompiledCheck r = run_compiled(g, spec, s, random_inputs(g, 7));
      CHECK_MESSAGE(r.ok, r.message);
    }
  }
}

TEST_CASE("cpu families: the micro-kernel is priced by its own register blocking, not the schedule's register tile") {
  // The micro-kernel blocks MR rows x NR vectors over its task box (choose_register_blocking),
  // whatever register tile the schedule holds: two schedules that differ only there are priced
  // alike. (The model had priced a schedule's 32 x 2 register tile of an NCHW 3x3 convolution
  // at 9.9 ms of L1 traffic; the kernel took 1.8 ms.)
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  ModelBuilder b(DType::f32);
  const OpGraph g = b.graph(b.op("MatMul", {b.input("x", {256, 512}), b.weight("w", {512, 384}, 3)}));
  const AnalyticCostModel cost;
  const cpu::CpuKernelFamilies families;
  Schedule s = welder_with_cpu_families(g, spec, cost, families);
  REQUIRE(s.groups.size() == 1);
  ScheduledGroup group = s.groups[0].group;
  REQUIRE(group.kernel.family == "microkernel");
  TileConfig& cfg = group.tiles.begin()->second;
  REQUIRE(cfg.levels.size() >= 2);
  REQUIRE(cfg.levels.back().level == "registers");
  // The bytes each level serves (the level above registers is where the blocking shows).
  auto served = [&](const ScheduledGroup& gr) {
    std::vector<double> bytes;
    for (const LevelCost& l : cost.estimate(g, gr, spec).memory) bytes.push_back(l.bytes);
    return bytes;
  };
  const std::vector<double> as_scheduled = served(group);
  const std::vector<int64_t> scheduled_tile = cfg.levels.back().spatial;
  cfg.levels.back().spatial = {1, 2};  // one row, two columns: a register tile the kernel never uses
  CHECK(served(group) == as_scheduled);
  // The loop nests use the schedule's register tile: there it still counts.
  group.kernel = KernelChoice{"loops", {}, {}};
  const std::vector<double> loops_narrow = served(group);
  cfg.levels.back().spatial = scheduled_tile;
  CHECK(served(group) != loops_narrow);
}

TEST_CASE("cpu families: the micro-kernel's register blocking is a decision the schedule records, the model prices and the emitter follows") {
  // choose() records MR x NR per contraction (mr0, nr0); a recorded blocking other than the
  // derived one is priced as such, emitted as such (the LLVM IR changes, the result still matches
  // the interpreter), and refused when it does not fit the registers or names no contraction.
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  ModelBuilder b(DType::f32);
  const std::string y = b.op("MatMul", {b.input("x", {96, 160}), b.weight("w", {160, 128}, 3)});
  const OpGraph g = b.graph(b.op("Relu", {y}));
  const AnalyticCostModel cost;
  const cpu::CpuKernelFamilies families;
  Schedule s = welder_with_cpu_families(g, spec, cost, families);
  REQUIRE(s.groups.size() == 1);
  const ScheduledGroup& group = s.groups[0].group;
  REQUIRE(group.kernel.family == "microkernel");
  REQUIRE(group.kernel.params.count("mr0"));
  REQUIRE(group.kernel.params.count("nr0"));
  const int64_t mr = group.kernel.params.at("mr0"), nr = group.kernel.params.at("nr0");
  CHECK(mr >= 1);
  CHECK(nr >= 1);
  CHECK(mr * nr + nr + 1 <= cpu::vector_registers(spec));  // (the GEMM has an m axis)
  CHECK_FALSE(families.check(g, group, spec));
  // Another blocking (one row, one vector): priced apart from the derived one, and run.
  Schedule narrow = s;
  narrow.groups[0].group.kernel.params["mr0"] = 1;
  narrow.groups[0].group.kernel.params["nr0"] = 1;
  CHECK_FALSE(families.check(g, narrow.groups[0].group, spec));
  auto l1_bytes = [&](const ScheduledGroup& gr) {
    double bytes = 0;
    for (const LevelCost& l : cost.estimate(g, gr, spec).memory) bytes = std::max(bytes, l.bytes);
    return bytes;
  };
  CHECK(l1_bytes(narrow.groups[0].group) > l1_bytes(group));
  CHECK(emitted_ir(g, narrow, spec) != emitted_ir(g, s, spec));
  const std::vector<HostTensor> inputs = random_inputs(g, 5);
  const CompiledCheck ran = run_compiled(g, spec, narrow, inputs);
  CHECK_MESSAGE(ran.ok, ran.message);
  // Without a record (an older schedule): the derived blocking, the same code as recorded.
  Schedule unrecorded = s;
  unrecorded.groups[0].group.kernel.params.erase("mr0");
  unrecorded.groups[0].group.kernel.params.erase("nr0");
  CHECK(emitted_ir(g, unrecorded, spec) == emitted_ir(g, s, spec));
  // Refused: more accumulators than registers, half a record, a contraction the group lacks.
  ScheduledGroup bad = group;
  bad.kernel.params["mr0"] = 8;
  bad.kernel.params["nr0"] = 8;
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("vector registers") != std::string::npos);
  bad = group;
  bad.kernel.params.erase("nr0");
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("without nr0") != std::string::npos);
  bad = group;
  bad.kernel.params["mr1"] = 1;
  bad.kernel.params["nr1"] = 1;
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("records mr1") != std::string::npos);
  bad = group;
  bad.kernel.params["mr99999999999"] = 1;  // (an index past an int: refused, not thrown)
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("records mr99999999999") != std::string::npos);
  bad = group;
  bad.kernel.params["mr0"] = int64_t{1} << 32;  // (1 once narrowed to an int)
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("is not in 1..") != std::string::npos);
  bad = group;
  bad.kernel.family = "loops";
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("only the micro-kernel uses") != std::string::npos);
  // The tuner's variants: the derived blocking first, then its neighbours, each legal and distinct.
  const std::vector<KernelChoice> variants = families.variants(g, group, spec);
  REQUIRE(variants.size() >= 2);  // (neighbours past the 8 x 16 task box are left out: they clamp to another)
  CHECK(variants[0].params == group.kernel.params);
  std::set<std::pair<int64_t, int64_t>> blockings;
  for (const KernelChoice& v : variants) {
    ScheduledGroup probe = group;
    probe.kernel = v;
    CHECK_FALSE(families.check(g, probe, spec));
    blockings.insert({v.params.at("mr0"), v.params.at("nr0")});
  }
  CHECK(blockings.size() == variants.size());
}

TEST_CASE("cpu families: B's prefetch distance is a decision the schedule records and the emitter follows") {
  // choose() records pf0 for a contraction whose B outgrows the private caches (a 1024 x 2048 f32
  // weight, 8 MB), none for a small one; the emitter prefetches at the recorded distance, not at
  // all for pf0 = 0 (a tuner's variant), and as derived where nothing is recorded.
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  const AnalyticCostModel cost;
  const cpu::CpuKernelFamilies families;
  auto gemv_like = [](int64_t k, int64_t n) {
    ModelBuilder b(DType::f32);
    return b.graph(b.op("MatMul", {b.input("x", {4, k}), b.weight("w", {k, n}, 7)}));
  };
  auto prefetches = [](const std::string& ir) {
    int n = 0;
    for (size_t at = ir.find("call void @llvm.prefetch"); at != std::string::npos; at = ir.find("call void @llvm.prefetch", at + 1)) ++n;
    return n;
  };
  const OpGraph small = gemv_like(160, 128);
  CHECK(welder_with_cpu_families(small, spec, cost, families).groups[0].group.kernel.params.count("pf0") == 0);
  const OpGraph g = gemv_like(1024, 2048);
  Schedule s = welder_with_cpu_families(g, spec, cost, families);
  REQUIRE(s.groups.size() == 1);
  const ScheduledGroup& group = s.groups[0].group;
  REQUIRE(group.kernel.params.count("pf0"));
  CHECK(group.kernel.params.at("pf0") == cpu::kPrefetchAheadBytes);
  const std::string recorded = emitted_ir(g, s, spec);
  CHECK(prefetches(recorded) > 0);
  Schedule unrecorded = s;
  unrecorded.groups[0].group.kernel.params.erase("pf0");
  CHECK(emitted_ir(g, unrecorded, spec) == recorded);
  Schedule off = s;
  off.groups[0].group.kernel.params["pf0"] = 0;
  CHECK_FALSE(families.check(g, off.groups[0].group, spec));
  CHECK(prefetches(emitted_ir(g, off, spec)) == 0);
  const CompiledCheck ran = run_compiled(g, spec, off, random_inputs(g, 9));
  CHECK_MESSAGE(ran.ok, ran.message);
  // The tuner's variants offer it switched off; a negative distance is refused.
  const std::vector<KernelChoice> variants = families.variants(g, group, spec);
  CHECK(std::any_of(variants.begin(), variants.end(), [](const KernelChoice& v) { return v.params.count("pf0") && v.params.at("pf0") == 0; }));
  ScheduledGroup bad = group;
  bad.kernel.params["pf0"] = -1;
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("negative") != std::string::npos);
  bad = group;
  bad.kernel.params["pf1"] = 0;
  REQUIRE(families.check(g, bad, spec));
  CHECK(families.check(g, bad, spec)->find("records pf1") != std::string::npos);
}

}  // namespace tessel::testing
