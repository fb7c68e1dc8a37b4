// The shared runtime pieces: the arena plan (lifetimes, sharing, what stays out of memory) and
// packed tensors (each dtype's storage, round trip through HostTensor).
#include <doctest/doctest.h>

#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "kernels/buffer_plan.h"
#include "kernels/packed_tensor.h"
#include "policy/roller.h"
#include "policy/welder.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;

namespace {

// x -> a = x + 1 -> b = a * 2 -> c = b - 3 -> d = c / 4, all 1024 f32: with one group per node,
// each intermediate lives from its producer to its consumer only.
OpGraph chain_graph() {
  ModelDef m;
  m.name = "chain";
  m.inputs = {{"x", {DType::f32, {1024}}}};
  m.weights = {{"k", {DType::f32, {}}, RandomInit{RandomInit::Dist::uniform, 1.0, 2.0, 1}}};
  const char* ops[] = {"Add", "Mul", "Sub", "Div"};
  std::string prev = "x";
  for (int i = 0; i < 4; ++i) {
    const std::string out = std::string(1, static_cast<char>('a' + i));
    m.ops.push_back(OpDef{out, ops[i], {prev, "k"}, {out}, {}, ""});
    prev = out;
  }
  m.outputs = {prev};
  return lower_model(m);
}

const HwSpec& h100() {
  static const HwSpec spec = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json");
  return spec;
}

}  // namespace

TEST_CASE("buffer plan: intermediates of unfused groups share the arena by lifetime") {
  const OpGraph g = chain_graph();
  const AnalyticCostModel cost;
  const Schedule s = RollerPolicy().schedule(PolicyContext{g, h100(), cost});
  REQUIRE(s.groups.size() == 4);
  const BufferPlan plan = plan_buffers(g, s, 256);
  // a, b, c and the output d take 4 KiB each. a lives in groups 0-1, b in 1-2, c in 2-3 and d
  // from 3 to the end: a and c can share a slot, b and d another, 8 KiB in all instead of 16.
  REQUIRE(plan.slots.size() == 4);
  CHECK(plan.unshared_bytes == 4 * 4096);
  CHECK(plan.arena_bytes == 2 * 4096);
  for (const BufferSlot& s1 : plan.slots) {
    CHECK(s1.offset % 256 == 0);
    for (const BufferSlot& s2 : plan.slots) {
      if (&s1 == &s2) continue;
      const bool live_together = s1.first_group <= s2.last_group && s2.first_group <= s1.last_group;
      const bool overlap = s1.offset < s2.offset + s2.bytes && s2.offset < s1.offset + s1.bytes;
      CHECK_FALSE((live_together && overlap));
    }
  }
  const BufferSlot* out = plan.find(g.outputs()[0]);
  REQUIRE(out);
  CHECK(out->last_group == 4);  // graph outputs live to the end
  CHECK(plan.find(g.inputs()[0]) == nullptr);
}

TEST_CASE("buffer plan: intermediates kept inside a fused group take no arena space") {
  const OpGraph g = chain_graph();
  const AnalyticCostModel cost;
  const Schedule s = WelderPolicy().schedule(PolicyContext{g, h100(), cost});
  REQUIRE(s.groups.size() == 1);
  const BufferPlan plan = plan_buffers(g, s, 256);
  REQUIRE(plan.slots.size() == 1);
  CHECK(plan.slots[0].tensor == g.outputs()[0]);
  CHECK(plan.arena_bytes == 4096);
}

TEST_CASE("packed tensors: every dtype's storage round-trips") {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i8, DType::u8,
                  DType::boolean}) {
    CAPTURE(dtype_name(t));
    const HostTensor a({t, {5}}, {0.0, 1.0, -2.0, 3.5, 100.0});
    const std::vector<uint8_t> bytes = pack_tensor(a);
    CHECK(bytes.size() == static_cast<size_t>(5 * dtype_bytes(t)));
    const HostTensor b = unpack_tensor(a.type(), bytes.data());
    CHECK(b.values() == a.values());
  }
  // f16 bit patterns: 1.0 is 0x3c00, -2.0 is 0xc000 (little-endian storage).
  const std::vector<uint8_t> h = pack_tensor(HostTensor({DType::f16, {2}}, {1.0, -2.0}));
  CHECK(h == std::vector<uint8_t>{0x00, 0x3c, 0x00, 0xc0});
}
