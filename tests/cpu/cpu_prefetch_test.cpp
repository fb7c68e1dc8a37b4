// Software prefetch of the next task's inputs (kernels/cpu/README.md, "Prefetch"): a node that
// reads again a tensor an earlier node of its group read from memory fetches what that earlier
// node will read in the next task, a share before each chunk of its innermost loop. Where the
// prefetches are emitted and where not, and that the chunked loops match the interpreter at chunk
// boundaries, odd sizes, tails and over every axis.
#include <fstream>
#include <sstream>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cpu_check.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// The emitted (unoptimized) IR of every kernel of `g` under welder for the AVX2 spec, one string
/// per group.
std::vector<std::string> emitted_ir(const OpGraph& g) {
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  const Schedule s = schedule_with(g, spec, "welder");
  TempDir dir;
  find_backend("cpu")->emit(g, s, spec, "llvm", dir.path.string());
  std::vector<std::string> out;
  for (size_t k = 0; k < s.groups.size(); ++k) {
    std::ifstream in(dir.file(cat("tessel_group_", k, ".ll")));
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

/// Calls of llvm.prefetch in `ir` (the declaration does not count).
int prefetch_calls(const std::string& ir) {
  int n = 0;
  std::istringstream in(ir);
  std::string line;
  while (std::getline(in, line)) n += line.find("call void @llvm.prefetch") != std::string::npos;
  return n;
}

OpGraph one_op(const std::string& op, std::vector<HostTensor> inputs, std::map<std::string, AttrValue> attrs = {},
               const std::set<int>& constants = {}) {
  return lower_model(single_op_model(op, std::move(inputs), std::move(attrs), 1, constants));
}

}  // namespace

TEST_CASE("cpu prefetch: emitted where a later node reads an input again, not elsewhere") {
  // Softmax (max, sum of exp, quotient in one group): the sum reads x again and fetches the next
  // task's rows of x; the quotient reads the row-reuse buffer, not x.
  {
    const OpGraph g = one_op("Softmax", {random_f32({64, 256}, 1)}, {{"axis", int64_t{-1}}});
    const std::vector<std::string> ir = emitted_ir(g);
    REQUIRE(ir.size() == 1);
    CHECK(prefetch_calls(ir[0]) == 1);
  }
  // Layer norm (mean, variance, output): the variance reads x again; the output reads x a third
  // time and fetches nothing (x is fetched once).
  {
    const OpGraph g = one_op("LayerNormalization", {random_f32({64, 256}, 1), random_f32({256}, 2), random_f32({256}, 3)},
                             {{"epsilon", 1e-5}}, {1, 2});
    const std::vector<std::string> ir = emitted_ir(g);
    REQUIRE(ir.size() == 1);
    CHECK(prefetch_calls(ir[0]) == 1);
  }
  // One node per group reads its input once: nothing to fetch.
  {
    const OpGraph g = one_op("Relu", {random_f32({64, 256}, 1)});
    for (const std::string& ir : emitted_ir(g)) CHECK(prefetch_calls(ir) == 0);
  }
}

TEST_CASE("cpu prefetch: chunked loops at chunk boundaries, odd sizes and tails") {
  // The prefetching loop runs in chunks of 16 vectors (128 f32 lanes under AVX2, 256 under
  // AVX-512): rows shorter than a chunk, one lane either side of one and two chunks, primes.
  for (int64_t n : {1, 7, 127, 128, 129, 255, 256, 257, 1031}) {
    CAPTURE(n);
    check_compiled(one_op("Softmax", {random_f32({37, n}, 4)}, {{"axis", int64_t{-1}}}));
    const OpGraph ln = one_op("LayerNormalization", {random_f32({37, n}, 5), random_f32({n}, 6), random_f32({n}, 7)},
                              {{"epsilon", 1e-5}}, {1, 2});
    check_compiled(ln);
  }
}

TEST_CASE("cpu prefetch: an elementwise re-reader and a reduction over every axis") {
  // x - max(x) along the last axis: the subtraction (no reduction) re-reads x, so its spatial
  // innermost loop is the chunked one.
  for (int64_t n : {5, 129, 300}) {
    CAPTURE(n);
    ModelBuilder m(DType::f32);
    const std::string x = m.input("x", {23, n});
    const std::string mx = m.op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
    const OpGraph g = m.graph(m.op("Sub", {x, mx}));
    check_compiled(g);
    const std::vector<std::string> ir = emitted_ir(g);
    REQUIRE(ir.size() == 1);  // welder fuses the two
    CHECK(prefetch_calls(ir[0]) == 1);
  }
  // Softmax over the first and the middle axis: the next task's box of x is not a run of whole
  // rows (dense or not, the values must not change).
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    check_compiled(one_op("Softmax", {random_f32({9, 131, 17}, 8)}, {{"axis", axis}}));
  }
}
