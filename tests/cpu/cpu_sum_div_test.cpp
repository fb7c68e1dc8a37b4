// Rules of the generic nest (kernels/cpu/README.md): float sums accumulate every term in f64
// (f32 runs of every sum were tried and failed the differential test: a layer norm over nearly
// equal values), except sums of terms that are never negative, which accumulate f32 runs of 64
// terms; a term scaled by a power of two at most 1 is summed unscaled and the f64 total scaled; a
// float quotient whose divisor does not change along the innermost loop multiplies by a hoisted
// reciprocal (emit_div_by_invariant, scaled for subnormal divisors). Odd lengths over every axis
// and dtype, a sum that a plain f32 accumulator gets wrong, rows of nearly equal values, where the
// scale is applied and with huge and tiny terms, special divisors and dividends, and where the
// reciprocal is and is not used in the emitted IR.
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cpu_check.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// The emitted (unoptimized) IR of `g`'s only kernel under welder for the AVX2 spec.
std::string emitted_ir(const OpGraph& g) {
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  const Schedule s = schedule_with(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  TempDir dir;
  find_backend("cpu")->emit(g, s, spec, "llvm", dir.path.string());
  std::ifstream in(dir.file("tessel_group_0.ll"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("cpu sums: odd lengths, every axis and float dtype") {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(dtype_name(t));
    // 1, primes, lengths that are not multiples of the vector width, around 1024 and past it.
    for (int64_t n : {1, 7, 127, 1021, 1024, 1025, 2048, 4099}) {
      CAPTURE(n);
      check_op("ReduceSum", {random_uniform(t, {3, n}, 5)}, {{"axes", std::vector<int64_t>{1}}});
    }
    for (int64_t axis : {0, 1, 2}) {
      CAPTURE(axis);
      check_op("ReduceSum", {random_uniform(t, {131, 7, 139}, 6)}, {{"axes", std::vector<int64_t>{axis}}});
    }
    check_op("ReduceSum", {random_uniform(t, {131, 5, 139}, 7)}, {{"axes", std::vector<int64_t>{0, 2}}});
  }
}

TEST_CASE("cpu sums: a long sum a plain f32 accumulator gets wrong") {
  // 2^22 copies of f32(1/3) in one row. Accumulated in f32 by 32 (AVX2) or 64 (AVX-512)
  // vectorized accumulators, each partial sum grows past 2^15 and every add rounds the same way:
  // the total comes out 3.9e-4 (1.9e-4) low, over the f32 tolerance; in f64 it matches.
  const int64_t n = int64_t{1} << 22;
  const HostTensor x(TensorType{DType::f32, {1, n}}, std::vector<double>(static_cast<size_t>(n), 1.0 / 3.0));
  check_op("ReduceSum", {x}, {{"axes", std::vector<int64_t>{1}}});
}

TEST_CASE("cpu sums: a layer norm over nearly equal values") {
  // Rows of 17 values that differ from 0.3 in the last bits (the rows of a padded convolution's
  // output that only the bias reaches look like this): the deviations from the mean are a few ulps,
  // so the mean must be the interpreter's to the last bit, which an f64 sum of the f32 terms gives.
  // What caught f32 sum runs was the differential test's seed 488 (LayerNormalization over 17
  // values, at O0: relative L2 error 1.9e-5); this O3 case passed with them too, it guards the
  // same property where the vectorized code is concerned.
  std::vector<double> x;
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 17; ++c) x.push_back(0.3 + ((c * 7 + r * 3) % 11) * 3e-8 * (r % 3));
  for (int64_t n : {1, 3}) {  // one row per task, and the rows in one task
    CAPTURE(n);
    check_op("LayerNormalization", {f32({6, 17}, x), random_f32({17}, 2), random_f32({17}, 3)}, {{"epsilon", 1e-5}}, 1, {1, 2});
  }
}

TEST_CASE("cpu division by an invariant divisor: special divisors and dividends") {
  // One divisor per row (constant along the innermost loop), every dividend against each.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> divisors = {0.75, -3.0, 0.0, -0.0, inf, -inf, nan, 1e-40, -3e-39, 1.4e-45, 1.2e-38, 3e38, -1e-30};
  const std::vector<double> dividends = {1.0, -2.5, 0.0, -0.0, inf, -inf, nan, 1e-39, -1e-44, 3e38, 1e-30, 7.0, 0.1};
  const int64_t rows = static_cast<int64_t>(divisors.size()), cols = static_cast<int64_t>(dividends.size());
  std::vector<double> a, d;
  for (int64_t r = 0; r < rows; ++r) {
    d.push_back(divisors[static_cast<size_t>(r)]);
    for (int64_t c = 0; c < cols; ++c) a.push_back(dividends[static_cast<size_t>((c + r) % cols)]);
  }
  check_op("Div", {f32({rows, cols}, a), f32({rows, 1}, d)});
  // Random rows of odd length, the divisor broadcast along the last axis or the first.
  check_op("Div", {random_f32({7, 1031}, 1), random_f32({7, 1}, 2)});
  check_op("Div", {random_f32({263, 5}, 3), random_f32({1, 5}, 4)});
}

TEST_CASE("cpu division by an invariant divisor: used only when the divisor is invariant") {
  // x / d[row]: the quotient loop computes one reciprocal (fdiv 1.0, ...) and multiplies.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {64, 1031});
  const std::string row = b.input("d", {64, 1});
  const std::string q = emitted_ir(b.graph(b.op("Div", {x, row})));
  CHECK(count(q, "fdiv float 1.000000e+00") == 1);
  CHECK(count(q, "fdiv") == 1);
  // x / y elementwise and x / d[column]: the divisor changes along the innermost loop, a plain
  // division per element.
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{64, 1031}, {1, 1031}}) {
    ModelBuilder e(DType::f32);
    const std::string ir = emitted_ir(e.graph(e.op("Div", {e.input("x", {64, 1031}), e.input("y", shape)})));
    CHECK(count(ir, "fdiv float 1.000000e+00") == 0);
    CHECK(count(ir, "fdiv float %") == 1);
  }
}

TEST_CASE("cpu sums: a scale by a power of two at most 1 multiplies the f64 total") {
  // A mean over 1024 terms sums x * 2^-10: the emitted loop sums x and the total is scaled once
  // (an f64 multiply after the loop), for the mean and the variance of a layer norm alike. Over 17
  // terms the scale 1/17 is no power of two: every term is multiplied in f32, as the interpreter
  // rounds it.
  auto layer_norm_ir = [](int64_t n) {
    ModelBuilder b(DType::f32);
    const std::string x = b.input("x", {64, n});
    return emitted_ir(b.graph(b.op("LayerNormalization", {x, b.weight("s", {n}, 1), b.weight("c", {n}, 2)}, {{"epsilon", 1e-5}})));
  };
  const std::string pow2 = layer_norm_ir(1024);
  CHECK(count(pow2, "fmul double") == 2);
  CHECK(count(pow2, "fmul float") == 3);  // the variance's square, the output's two products
  const std::string odd = layer_norm_ir(17);
  CHECK(count(odd, "fmul double") == 0);
  // (The 17-term sums are written out term by term and added as a tree: the mean's 17 scaled
  // terms, the variance's 17 and its squares, the output's two products.)
  CHECK(count(odd, "fmul float") >= 5);
}

TEST_CASE("cpu sums: power-of-two scales against the interpreter, huge and tiny terms") {
  for (int64_t n : {1, 2, 4, 16, 17, 64, 1000, 1024, 2048}) {
    CAPTURE(n);
    check_op("ReduceMean", {random_f32({5, n}, 11)}, {{"axes", std::vector<int64_t>{1}}});
    check_op("LayerNormalization", {random_f32({5, n}, 12), random_f32({n}, 13), random_f32({n}, 14)}, {{"epsilon", 1e-5}}, 1, {1, 2});
  }
  // Terms near the largest float (x * 2^-k does not overflow in f32 either), and terms whose f32
  // products would be subnormal: the f64 total then differs from the interpreter's by under
  // 2^-149 per term, within the f32 tolerance.
  std::vector<double> huge, tiny;
  for (int i = 0; i < 3 * 64; ++i) {
    huge.push_back((i % 2 ? -1 : 1) * 3.3e38 * (1 - (i % 7) * 0.01));
    tiny.push_back((i % 3 ? 1 : -1) * 1e-36 * (1 + (i % 5)));
  }
  check_op("ReduceMean", {f32({3, 64}, huge)}, {{"axes", std::vector<int64_t>{1}}});
  check_op("ReduceMean", {f32({3, 64}, tiny)}, {{"axes", std::vector<int64_t>{1}}});
  check_op("LayerNormalization", {f32({3, 64}, tiny), random_f32({64}, 2), random_f32({64}, 3)}, {{"epsilon", 1e-5}}, 1, {1, 2});
}

TEST_CASE("cpu sums: terms that are never negative accumulate in f32 runs") {
  // Squares, exp and abs are >= 0 whatever the input: their sums add f32 runs (a reassociable f32
  // add per term); a sum of the input itself, or of a difference, adds every term in f64.
  auto reduce_ir = [](const std::string& op) {
    ModelBuilder b(DType::f32);
    return emitted_ir(b.graph(b.op(op, {b.input("x", {8, 1031})}, {{"axes", std::vector<int64_t>{1}}})));
  };
  CHECK(count(reduce_ir("ReduceSumSquare"), "fadd reassoc float") == 1);
  CHECK(count(reduce_ir("ReduceL1"), "fadd reassoc float") == 1);
  CHECK(count(reduce_ir("ReduceLogSumExp"), "fadd reassoc float") == 1);
  CHECK(count(reduce_ir("ReduceSum"), "fadd reassoc float") == 0);
  CHECK(count(reduce_ir("ReduceMean"), "fadd reassoc float") == 0);
}

TEST_CASE("cpu sums in runs: run boundaries, every axis, special values, long sums") {
  for (int64_t n : {1, 63, 64, 65, 127, 128, 129, 1025, 4099}) {
    CAPTURE(n);
    check_op("ReduceSumSquare", {random_f32({3, n}, 21)}, {{"axes", std::vector<int64_t>{1}}});
    check_op("ReduceLogSumExp", {random_f32({3, n}, 22)}, {{"axes", std::vector<int64_t>{1}}});
  }
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    check_op("ReduceSumSquare", {random_f32({67, 5, 131}, 23)}, {{"axes", std::vector<int64_t>{axis}}});
  }
  // A run that overflows f32 (4 squares of 1e19: 4e38) gives infinity, as the f64 total rounded to
  // f32 does; a NaN term and an infinite one propagate; zeros and subnormal squares add exactly.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> x(4 * 70, 0.5);
  for (int i = 0; i < 4; ++i) x[static_cast<size_t>(i * 7)] = 1e19;
  x[70 + 3] = nan;
  x[140 + 69] = -inf;
  for (int i = 0; i < 70; ++i) x[static_cast<size_t>(210 + i)] = i % 2 ? 0.0 : 1e-23;
  check_op("ReduceSumSquare", {f32({4, 70}, x)}, {{"axes", std::vector<int64_t>{1}}});
  // 2^22 squares of f32(sqrt(1/3)) in one row: a plain f32 accumulator drifts past the tolerance
  // (as for the sum above); runs of 64 added in f64 do not.
  const int64_t n = int64_t{1} << 22;
  const HostTensor big(TensorType{DType::f32, {1, n}}, std::vector<double>(static_cast<size_t>(n), std::sqrt(1.0 / 3.0)));
  check_op("ReduceSumSquare", {big}, {{"axes", std::vector<int64_t>{1}}});
}

TEST_CASE("cpu sums: a short contiguous row is kept rolled so that LLVM vectorizes it") {
  // A global average pool over 32 x 32 (NCHW): each 32-term row would be unrolled whole into one
  // chain of f64 adds (LLVM's SLP vectorizer leaves it scalar); marked llvm.loop.unroll.disable it
  // is vectorized at the hinted width instead (DeepLabv3's ASPP pool 1.77x, ResNet's 49-term
  // row means 2.47x on the 2-core VM, interleaved A/B). Not a 3-tap max pool window (a rolled
  // 3-trip loop stays scalar), not a row read with a stride (channels-last), not a long row.
  auto mean_hw = [](std::vector<int64_t> shape, std::vector<int64_t> axes) {
    ModelBuilder b(DType::f32);
    return b.graph(b.op("ReduceMean", {b.input("x", std::move(shape))}, {{"axes", std::move(axes)}, {"keepdims", int64_t{0}}}));
  };
  CHECK(count(emitted_ir(mean_hw({2, 64, 7, 49}, {3})), "llvm.loop.unroll.disable") >= 1);
  CHECK(count(emitted_ir(mean_hw({2, 64, 7, 7}, {2, 3})), "llvm.loop.unroll.disable") >= 1);  // one row of 49 (below)
  CHECK(count(emitted_ir(mean_hw({2, 32, 32, 64}, {1, 2})), "llvm.loop.unroll.disable") == 0);   // channels-last
  CHECK(count(emitted_ir(mean_hw({2, 64, 4, 4096}, {3})), "llvm.loop.unroll.disable") == 0);     // a long row
  ModelBuilder b(DType::f32);
  const OpGraph pool = b.graph(b.op("MaxPool", {b.input("x", {1, 16, 33, 33})},
                                    {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}}));
  CHECK(count(emitted_ir(pool), "llvm.loop.unroll.disable") == 0);
  // And the rolled rows give the interpreter's means: odd lengths around the bounds, f16 too.
  for (DType t : {DType::f32, DType::f16})
    for (int64_t w : {16, 17, 31, 32, 49, 63, 64, 65}) {
      CAPTURE(w);
      check_op("ReduceMean", {random_uniform(t, {3, 5, 7, w}, 11)}, {{"axes", std::vector<int64_t>{2, 3}}});
      check_op("ReduceSum", {random_uniform(t, {3, 5, w}, 12)}, {{"axes", std::vector<int64_t>{2}}});
    }
}

TEST_CASE("cpu sums: reduction axes read as one contiguous run are one row, short sums are trees, and channels-last pools keep their sums in registers") {
  auto mean_hw = [](std::vector<int64_t> shape, std::vector<int64_t> axes) {
    ModelBuilder b(DType::f32);
    return b.graph(b.op("ReduceMean", {b.input("x", std::move(shape))}, {{"axes", std::move(axes)}, {"keepdims", int64_t{0}}}));
  };
  // A channels-first window (7 x 7, 32 x 32, 56 x 56) is one loop over its contiguous terms, the
  // reads' offsets the loop's index (no division back into rows and columns: LLVM made those
  // gathers); up to 64 terms it is kept rolled, as a short row.
  for (const std::vector<int64_t>& hw : {std::vector<int64_t>{7, 7}, {32, 32}, {56, 56}}) {
    CAPTURE(hw[0]);
    const std::string ir = emitted_ir(mean_hw({2, 16, hw[0], hw[1]}, {2, 3}));
    CHECK(count(ir, "urem") == 0);
    CHECK(count(ir, "udiv") == 0);
    CHECK((count(ir, "llvm.loop.unroll.disable") >= 1) == (hw[0] * hw[1] <= 64));
  }
  // Fewer than two vectors of terms (a 3 x 5 window, a 17-term row): each term written out and
  // the f64 terms added as a tree, not one add after another.
  const std::string tree = emitted_ir(mean_hw({2, 16, 3, 5}, {2, 3}));
  CHECK(count(tree, "fadd reassoc double") >= 14);
  // Every form against the interpreter: windows around the bounds, sums and maxima, channels-first
  // and channels-last, channel counts around the lane reduction's chunks and vectors.
  for (const std::vector<int64_t>& hw : {std::vector<int64_t>{1, 5}, {3, 5}, {7, 7}, {2, 16}, {5, 13}, {32, 32}, {9, 57}}) {
    CAPTURE(hw[0]);
    CAPTURE(hw[1]);
    check_op("ReduceMean", {random_f32({2, 6, hw[0], hw[1]}, 31)}, {{"axes", std::vector<int64_t>{2, 3}}});
    check_op("ReduceSum", {random_f32({3, hw[0], hw[1]}, 32)}, {{"axes", std::vector<int64_t>{1, 2}}});
    check_op("ReduceMax", {random_f32({2, 6, hw[0], hw[1]}, 33)}, {{"axes", std::vector<int64_t>{2, 3}}});
    check_op("GlobalAveragePool", {random_f32({2, 5, hw[0], hw[1]}, 34)}, {});
  }
  for (int64_t c : {16, 17, 48, 64, 65, 144, 200}) {
    CAPTURE(c);
    check_op("ReduceMean", {random_f32({2, 9, 40, c}, 35)}, {{"axes", std::vector<int64_t>{1, 2}}});
  }
  // Through a producer fused and inlined into the pool (a scale along the window's last axis, a
  // difference with a per-row statistic): the producer is evaluated at points of its own domain
  // (the block's indices by division, not the linear index).
  for (const std::vector<int64_t>& hw : {std::vector<int64_t>{7, 7}, {32, 32}}) {
    CAPTURE(hw[0]);
    ModelBuilder b(DType::f32);
    const std::string x = b.input("x", {2, 6, hw[0], hw[1]});
    const OpGraph scaled = b.graph(b.op("ReduceMean", {b.op("Mul", {x, b.input("m", {hw[1]})})},
                                        {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}}));
    check_compiled(scaled);
    CHECK(count(emitted_ir(scaled), "urem") + count(emitted_ir(scaled), "udiv") > 0);
    ModelBuilder c(DType::f32);
    const std::string y = c.input("y", {2, 6, hw[0], hw[1]});
    check_compiled(c.graph(c.op("ReduceSum", {c.op("Sub", {y, c.input("r", {2, 6, hw[0], 1})})},
                                {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}})));
  }
  // A channels-last mean over many points: whole chunks and whole vectors of channels walk their
  // lanes with constant trip counts (the sums in registers), the last few lanes the array.
  const std::string nhwc = emitted_ir(mean_hw({2, 56, 56, 144}, {1, 2}));
  CHECK(count(nhwc, "lane_tail") >= 1);
}

TEST_CASE("cpu rows: an elementwise row is one vector an iteration, a reduction keeps LLVM's interleaving") {
  // llvm.loop.interleave.count 1 on an elementwise node's innermost loop (KernelEmitter::
  // RowMark::one_vector): LLVM's default of four vectors an iteration ran rows shorter than 64 f32
  // elements in its scalar remainder loop. A reduction's loop keeps the default (its independent
  // accumulators).
  ModelBuilder b(DType::f32);
  const OpGraph relu = b.graph(b.op("Relu", {b.input("x", {64, 112})}));
  CHECK(count(emitted_ir(relu), "llvm.loop.interleave.count") == 1);
  ModelBuilder r(DType::f32);
  const OpGraph sum = r.graph(r.op("ReduceSum", {r.input("x", {64, 4096})}, {{"axes", std::vector<int64_t>{1}}}));
  CHECK(count(emitted_ir(sum), "llvm.loop.interleave.count") == 0);
  check_op("Relu", {random_uniform(DType::f32, {3, 17, 16}, 13)});
  check_op("Relu", {random_uniform(DType::f16, {5, 112}, 14)});
}
