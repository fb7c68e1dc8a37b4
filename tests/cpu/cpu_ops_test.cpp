// The CPU backend on every op family against the interpreter: odd sizes (1, primes, sizes that are
// not multiples of the vector width), broadcasting, strided / dilated / padded / grouped
// convolutions in both layouts, reductions over each axis, gathers, integer and bool arithmetic,
// casts, f16 and bf16. Each graph is scheduled by welder and roller for the AVX2 and AVX-512
// specs (cpu_check.h) and JIT-compiled for this host.
#include <cmath>
#include <limits>

#include "../model_builder.h"
#include "cpu_check.h"
#include "kernels/cpu/group_plan.h"
#include "kernels/cpu/kernel_families.h"

using namespace tessel;
using namespace tessel::testing;

TEST_CASE("cpu ops: elementwise, odd sizes and broadcasting") {
  for (int64_t n : {1, 7, 13, 31, 67}) {
    CAPTURE(n);
    check_op("Add", {random_f32({3, n}, 1), random_f32({n}, 2)});
    check_op("Mul", {random_f32({n, 1, 5}, 3), random_f32({1, 3, 1}, 4)});
  }
  for (const char* op : {"Relu", "Tanh", "Sigmoid", "Exp", "Abs", "Neg", "Erf", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos",
                         "Atan", "Softsign", "Softplus", "Elu", "Selu", "HardSigmoid", "Not"}) {
    if (std::string(op) == "Not") {
      check_op(op, {random_uniform(DType::boolean, {5, 11}, 5, 0, 2)});
      continue;
    }
    check_op(op, {random_f32({5, 11}, 5)});
  }
  check_op("Sqrt", {random_uniform(DType::f32, {3, 17}, 6, 0.01, 4)});
  check_op("Log", {random_uniform(DType::f32, {3, 17}, 6, 0.01, 4)});
  check_op("Reciprocal", {random_uniform(DType::f32, {3, 17}, 6, 0.5, 4)});
  check_op("Pow", {random_uniform(DType::f32, {4, 9}, 7, 0.1, 2), random_f32({9}, 8)});
  check_op("Div", {random_f32({4, 9}, 7), random_uniform(DType::f32, {4, 9}, 8, 0.5, 2)});
  check_op("Max", {random_f32({4, 9}, 7), random_f32({9}, 8)});
  check_op("Min", {random_f32({4, 9}, 7), random_f32({4, 1}, 8)});
  check_op("Where", {random_uniform(DType::boolean, {4, 9}, 9, 0, 2), random_f32({4, 9}, 10), random_f32({9}, 11)});
  check_op("Greater", {random_f32({4, 9}, 7), random_f32({9}, 8)});
  check_op("Equal", {random_uniform(DType::i64, {4, 9}, 7, -3, 3), random_uniform(DType::i64, {9}, 8, -3, 3)});
}

TEST_CASE("cpu ops: f32 exp, tanh, erf and sigmoid over their whole range") {
  // The CPU backend computes these f32 functions with polynomials (emit_scalar.cpp), not libm:
  // overflow to infinity, underflow through the subnormals to 0, NaN and infinities, tiny
  // arguments (tanh(x) = x, odd symmetry), each range alone so that its largest values do not
  // hide errors in the others under the relative L2 bound.
  const std::vector<std::pair<double, double>> ranges = {{-1e-3, 1e-3}, {-3, 3}, {-20, 20}, {-104, -80}, {80, 89}, {-200, 200}};
  for (const auto& range : ranges) {
    const auto [lo, hi] = range;
    CAPTURE(range.first);
    const HostTensor x = random_uniform(DType::f32, {3, 37}, 21, lo, hi);
    for (const char* op : {"Exp", "Tanh", "Erf", "Sigmoid"}) {
      CAPTURE(op);
      check_op(op, {x});
    }
  }
  const HostTensor special = f32({12}, {NAN, INFINITY, -INFINITY, 0.0, -0.0, 88.72, 88.73, -87.3, -103.0, -103.3, 1e-30, -7.9});
  for (const char* op : {"Exp", "Tanh", "Erf", "Sigmoid"}) {
    CAPTURE(op);
    check_op(op, {special});
  }
}

TEST_CASE("cpu ops: integer and bool arithmetic, casts") {
  // Integer division and modulo with zero and negative divisors, both signs of the dividend.
  const HostTensor a = tensor(DType::i32, {8}, {7, -7, 7, -7, 0, 5, -2147483648.0, 9});
  const HostTensor b = tensor(DType::i32, {8}, {2, 2, -2, -2, 3, 0, -1, 4});
  check_op("Div", {a, b});
  check_op("Mod", {a, b});
  check_op("Mod", {a, b}, {{"fmod", int64_t{1}}});
  check_op("Add", {random_uniform(DType::i8, {19}, 1, -128, 127), random_uniform(DType::i8, {19}, 2, -128, 127)});
  check_op("Mul", {random_uniform(DType::u8, {19}, 1, 0, 255), random_uniform(DType::u8, {19}, 2, 0, 255)});
  check_op("Sub", {random_uniform(DType::i64, {3, 19}, 1, -1000, 1000), random_uniform(DType::i64, {19}, 2, -1000, 1000)});
  check_op("And", {random_uniform(DType::boolean, {19}, 1, 0, 2), random_uniform(DType::boolean, {19}, 2, 0, 2)});
  check_op("Xor", {random_uniform(DType::boolean, {19}, 1, 0, 2), random_uniform(DType::boolean, {19}, 2, 0, 2)});
  // Float -> integer truncates and wraps; NaN -> 0; -> bool is "non-zero".
  const HostTensor f = f32({9}, {-1.7, 2.5, 300, -300, 1e10, -0.5, NAN, 127.9, 0});
  for (int64_t to : {2 /*u8*/, 3 /*i8*/, 6 /*i32*/, 7 /*i64*/, 9 /*bool*/, 10 /*f16*/, 11 /*f64*/, 16 /*bf16*/}) {
    CAPTURE(to);
    check_op("Cast", {f}, {{"to", to}});
  }
  check_op("Cast", {random_uniform(DType::i64, {13}, 3, -300, 300)}, {{"to", int64_t{3}}});
  check_op("Cast", {random_uniform(DType::boolean, {13}, 3, 0, 2)}, {{"to", int64_t{1}}});
}

TEST_CASE("cpu ops: i64 arithmetic and reductions past 2^53 wrap, as the interpreter's exact integers do") {
  // (The interpreter once computed in doubles and saturated: 2^62 * 4 was INT64_MAX there, 0 here.)
  constexpr int64_t kTwoTo53 = int64_t{1} << 53, kTwoTo62 = int64_t{1} << 62;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const auto ints = [](std::vector<int64_t> shape, std::vector<int64_t> values) {
    return HostTensor::from_integers(TensorType{DType::i64, std::move(shape)}, std::move(values));
  };
  const HostTensor a = ints({7}, {kMax, kMin, kTwoTo62, kTwoTo53 + 1, -7, kMin, 9});
  const HostTensor b = ints({7}, {1, 1, 4, 2, 0, -1, -4});
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min"}) check_op(op, {a, b});
  check_op("Mod", {a, b}, {{"fmod", int64_t{1}}});
  check_op("Neg", {a});
  check_op("Abs", {a});
  // i32 products of 62 bits: the low 32 bits were lost in a double.
  check_op("Mul", {tensor(DType::i32, {3}, {2147483647, -2147483648.0, 46341}), tensor(DType::i32, {3}, {2147483647, -1, 46343})});
  const HostTensor x = ints({2, 4}, {kTwoTo62, kTwoTo62, kTwoTo62, kTwoTo62, kTwoTo53, 1, 2, -kTwoTo53});
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}) {
    CAPTURE(op);
    check_op(op, {x}, {{"axes", std::vector<int64_t>{1}}});
  }
  check_op("ArgMax", {ints({2, 3}, {kTwoTo53, kTwoTo53 + 1, kTwoTo53 - 1, 5, 3, 5})}, {{"axis", int64_t{1}}});
  check_op("Cast", {ints({3}, {kTwoTo53 + 1, kMax, kMin})}, {{"to", int64_t{11}}});  // to f64: rounded once
}

TEST_CASE("cpu ops: f16 and bf16") {
  for (DType t : {DType::f16, DType::bf16}) {
    CAPTURE(dtype_name(t));
    check_op("Add", {random_uniform(t, {5, 33}, 1), random_uniform(t, {33}, 2)});
    check_op("Softmax", {random_uniform(t, {5, 33}, 3)}, {{"axis", int64_t{-1}}});
    check_op("MatMul", {random_uniform(t, {7, 19}, 4), random_uniform(t, {19, 11}, 5)});
    check_op("ReduceSum", {random_uniform(t, {5, 33}, 6)}, {{"axes", std::vector<int64_t>{1}}});
  }
}

TEST_CASE("cpu ops: matmul shapes") {
  // Sizes around the register blocks: 1, primes, non-multiples of the vector width, batches.
  for (const std::array<int64_t, 3>& mkn : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {1, 17, 9}, {13, 37, 29}, {6, 16, 24}, {31, 5, 67}, {64, 130, 48}}) {
    CAPTURE(mkn[0]);
    CAPTURE(mkn[1]);
    CAPTURE(mkn[2]);
    const auto [m, k, n] = mkn;
    check_op("MatMul", {random_f32({m, k}, 1), random_f32({k, n}, 2)});
  }
  check_op("MatMul", {random_f32({3, 7, 11}, 1), random_f32({11, 17}, 2)});          // broadcast B
  check_op("MatMul", {random_f32({2, 1, 7, 11}, 1), random_f32({3, 11, 9}, 2)});     // broadcast batch
  check_op("MatMul", {random_f32({17}, 1), random_f32({17, 23}, 2)});                // vector x matrix
  check_op("MatMul", {random_f32({5, 17}, 1), random_f32({17}, 2)});                 // matrix x vector
  check_op("Gemm", {random_f32({11, 19}, 1), random_f32({23, 19}, 2), random_f32({23}, 3)},
           {{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}});
  check_op("MatMul", {random_uniform(DType::f64, {9, 21}, 1), random_uniform(DType::f64, {21, 13}, 2)});
}

TEST_CASE("cpu ops: dense NHWC convolutions with HWIO and OHWI weights on the micro-kernel") {
  // The micro-kernel walks the reduction axes by B's step, largest outermost: (kh, kw, c) for
  // HWIO weights, whose node axes are (c, kh, kw). Runs of 256 points cut c (c = 300), odd
  // channel counts, padding, strides and dilation.
  struct Conv {
    int64_t c, m, k, stride, dilation;
  };
  for (const Conv& v : std::vector<Conv>{{3, 8, 3, 1, 1}, {17, 33, 3, 2, 1}, {300, 20, 3, 1, 2}, {40, 16, 1, 1, 1}, {9, 70, 5, 2, 1}}) {
    for (const std::string layout : {"HWIO", "OHWI"}) {
      CAPTURE(v.c);
      CAPTURE(v.m);
      CAPTURE(layout);
      const HostTensor x = random_f32({1, 8, 10, v.c}, 1);
      const HostTensor w = layout == "HWIO" ? random_f32({v.k, v.k, v.c, v.m}, 2) : random_f32({v.m, v.k, v.k, v.c}, 2);
      const int64_t p = v.dilation * (v.k - 1) / 2;
      check_op("Conv", {x, w},
               {{"strides", std::vector<int64_t>{v.stride, v.stride}}, {"pads", std::vector<int64_t>{p, p, p, p}},
                {"dilations", std::vector<int64_t>{v.dilation, v.dilation}}, {"layout", std::string("NHWC")},
                {"weight_layout", layout}},
               1, {1});
    }
  }
}

TEST_CASE("cpu ops: NCHW depthwise convolutions run as lane reductions along their rows") {
  // emit_lane_reduction's unrolled form along the output's width: reads checked along the row
  // are guarded (masked loads), a strided row's interior runs without them and its border points
  // one by one, rows not a whole number of vectors run predicated. Widths below, at and past a vector
  // (and below kMinUnrolledLaneRow: the generic nest), strides 1 and 2, dilation, asymmetric pads,
  // a channel multiplier of 2, odd sizes.
  struct Conv {
    int64_t c, m, h, w, k, stride, dilation;
    std::vector<int64_t> pads;
  };
  for (const Conv& v : std::vector<Conv>{{3, 3, 9, 14, 3, 1, 1, {1, 1, 1, 1}},   {5, 5, 11, 7, 5, 1, 1, {2, 2, 2, 2}},
                                         {4, 4, 8, 31, 3, 2, 1, {1, 1, 1, 1}},   {6, 6, 9, 56, 5, 2, 1, {2, 2, 2, 2}},
                                         {2, 2, 7, 40, 3, 1, 2, {2, 0, 1, 3}},   {3, 6, 6, 17, 3, 1, 1, {0, 1, 2, 0}},
                                         {4, 4, 5, 6, 7, 2, 1, {3, 3, 3, 3}},    {2, 2, 6, 3, 3, 1, 1, {1, 1, 1, 1}},
                                         {3, 3, 10, 33, 1, 2, 1, {0, 0, 0, 0}}}) {
    CAPTURE(v.w);
    CAPTURE(v.k);
    CAPTURE(v.stride);
    const HostTensor x = random_f32({2, v.c, v.h, v.w}, 1);
    const HostTensor w = random_f32({v.m, 1, v.k, v.k}, 2);
    const HostTensor b = random_f32({v.m}, 3);
    std::map<std::string, AttrValue> attrs{{"strides", std::vector<int64_t>{v.stride, v.stride}}, {"pads", v.pads},
                                           {"dilations", std::vector<int64_t>{v.dilation, v.dilation}}, {"group", v.c}};
    const OpGraph g = lower_model(single_op_model("Conv", {x, w, b}, attrs, 1, {1, 2}));
    bool lane = false, contraction = false;
    int64_t out_w = 0;
    for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) {
      if (g.node(n).num_reduction() == 0) continue;
      out_w = g.node(n).axes()[g.node(n).num_spatial() - 1].extent;
      lane |= cpu::lane_reduction_fits(g.node(n), 16);
      contraction |= cpu::matches_contraction(g.node(n));
    }
    CHECK(lane == (out_w >= cpu::kMinUnrolledLaneRow));
    // The loop nests where the micro-kernel does not take the node (a strided read is not its B),
    // or takes it with no row sharing B (multiplier 1: with 2, an input channel's two output
    // channels share its vectors) over rows that fit in a vector (16 lanes here).
    const Schedule sch = schedule_with(g, cpu_spec("x86-64-avx512-server"), "welder");
    bool loops = true;
    for (const ScheduleGroup& group : sch.groups)
      loops &= cpu::CpuKernelFamilies().choose(g, group.group, cpu_spec("x86-64-avx512-server")).family == "loops";
    CHECK(loops == (!contraction || (v.m == v.c && lane && out_w <= 16)));
    if (loops && lane) {
      // The form the loop nest took: guarded reads where the row's ends are padded, a masked
      // (predicated) row where it is not a whole number of vectors and not strided.
      const std::string ir = emitted_ir(g, sch, cpu_spec("x86-64-avx512-server"));
      CHECK((ir.find("guarded_read") != std::string::npos) == (v.pads[1] + v.pads[3] > 0));
      CHECK((ir.find("llvm.loop.vectorize.predicate.enable") != std::string::npos) == (v.stride == 1 && out_w % 16 != 0));
    }
    check_op("Conv", {x, w, b}, attrs, 1, {1, 2});
  }
}

TEST_CASE("cpu ops: one row against a transposed B is a dot product in runs, not the micro-kernel") {
  // Decode attention's Q K^T: B (K) read across its rows. With one row of A the micro-kernel
  // refuses it (every vector of B would be gathered lane by lane) and the generic nest sums the
  // products in f32 runs of kRunTerms (products_in_runs); with two rows it keeps it. K of 300
  // spans two runs.
  for (const int64_t m : {1, 2}) {
    for (const int64_t k : {7, 64, 300}) {
      CAPTURE(m);
      CAPTURE(k);
      const std::vector<HostTensor> in = {random_f32({m, k}, 1), random_f32({37, k}, 2)};
      const OpGraph g = lower_model(single_op_model("Gemm", in, {{"transB", int64_t{1}}}, 1, {}));
      bool contraction = false, runs = false;
      for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) {
        contraction |= cpu::matches_contraction(g.node(n));
        runs |= cpu::products_in_runs(g.node(n));
      }
      CHECK(contraction == (m > 1));
      CHECK(runs);
      check_compiled(g, in);
    }
  }
}

TEST_CASE("cpu ops: convolutions") {
  struct Conv {
    int64_t c, m, h, k, stride, pad, dilation, groups;
  };
  for (const Conv& v : std::vector<Conv>{{3, 8, 9, 3, 1, 1, 1, 1}, {4, 6, 11, 3, 2, 1, 1, 1}, {4, 4, 10, 3, 1, 2, 2, 1},
                                         {6, 9, 7, 1, 1, 0, 1, 3}, {8, 8, 13, 3, 2, 0, 1, 8}, {5, 17, 5, 5, 1, 2, 1, 1}}) {
    CAPTURE(v.c);
    CAPTURE(v.stride);
    CAPTURE(v.groups);
    const HostTensor x = random_f32({2, v.c, v.h, v.h + 2}, 1);
    const HostTensor w = random_f32({v.m, v.c / v.groups, v.k, v.k}, 2);
    const HostTensor b = random_f32({v.m}, 3);
    std::map<std::string, AttrValue> attrs{{"strides", std::vector<int64_t>{v.stride, v.stride}},
                                           {"pads", std::vector<int64_t>{v.pad, v.pad, v.pad, v.pad}},
                                           {"dilations", std::vector<int64_t>{v.dilation, v.dilation}},
                                           {"group", v.groups}};
    check_op("Conv", {x, w, b}, attrs, 1, {1, 2});
  }
  check_op("ConvTranspose", {random_f32({1, 4, 5, 5}, 1), random_f32({4, 3, 3, 3}, 2)},
           {{"strides", std::vector<int64_t>{2, 2}}}, 1, {1});
}

TEST_CASE("cpu ops: NHWC depthwise and grouped convolutions with HWIO weights take the lane reduction") {
  // emit_lane_reduction: up to kUnrolledLaneTerms taps written out inside the channels' loop (3x3
  // to 7x7), more (9x9: 81) outside it with the channels in chunks of 4 vectors (32 lanes on
  // AVX2, 64 on AVX-512): channel counts below, at and past a vector and a chunk, strides,
  // dilations, asymmetric pads, a bias, and a grouped convolution (its x does not move along the
  // output channel within a group, its HWIO weights do).
  struct Conv {
    int64_t c, groups, k, stride, dilation;
    std::vector<int64_t> pads;
  };
  for (const Conv& v : std::vector<Conv>{{1, 1, 3, 1, 1, {1, 1, 1, 1}},   {5, 5, 3, 2, 1, {1, 0, 1, 2}},
                                         {16, 16, 5, 1, 2, {4, 4, 4, 4}}, {17, 17, 7, 1, 1, {3, 3, 3, 3}},
                                         {70, 70, 3, 2, 1, {1, 1, 1, 1}}, {130, 130, 3, 1, 1, {0, 1, 2, 0}},
                                         {24, 8, 3, 1, 1, {1, 1, 1, 1}},  {64, 4, 3, 1, 1, {1, 1, 1, 1}},
                                         {40, 40, 9, 1, 1, {4, 4, 4, 4}}, {70, 70, 9, 2, 1, {3, 4, 4, 3}}}) {
    CAPTURE(v.c);
    CAPTURE(v.groups);
    CAPTURE(v.k);
    const int64_t cg = v.c / v.groups;
    const HostTensor x = random_f32({2, 9, 11, v.c}, 1);
    const HostTensor w = random_f32({v.k, v.k, cg, v.c}, 2);  // HWIO
    const HostTensor b = random_f32({v.c}, 3);
    std::map<std::string, AttrValue> attrs{{"strides", std::vector<int64_t>{v.stride, v.stride}}, {"pads", v.pads},
                                           {"dilations", std::vector<int64_t>{v.dilation, v.dilation}}, {"group", v.groups},
                                           {"layout", std::string("NHWC")}, {"weight_layout", std::string("HWIO")}};
    const OpGraph g = lower_model(single_op_model("Conv", {x, w, b}, attrs, 1, {1, 2}));
    bool lane = false;
    for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) lane |= cpu::lane_reduction_fits(g.node(n), 1);
    CHECK(lane);  // grouped too: the output channel within the group is the innermost axis, x does not move along it
    bool wide = false;  // the unrolled form (up to kUnrolledLaneTerms taps) down to kMinUnrolledLaneRow channels
    for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) wide |= cpu::lane_reduction_fits(g.node(n), 8);
    const int64_t row = cg == 1 ? v.c : v.c / v.groups;  // a grouped one's innermost axis: the group's channels
    CHECK(wide == (v.k * v.k * cg <= cpu::kUnrolledLaneTerms ? row >= cpu::kMinUnrolledLaneRow : row >= 8));
    check_op("Conv", {x, w, b}, attrs, 1, {1, 2});
  }
  // A mean over a middle axis reads the innermost axis contiguously too; its terms are x * (1/n),
  // which must each reach the f64 total (reduce_point): past kRunTerms terms a lane reduction
  // summed in f64 (a channels-last global pool: 3136 terms), shorter ones the generic nest.
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{2, 17, 40}, {2, 3136, 24}, {1, 300, 5}, {1, 300, 16}, {3, 257, 9}}) {
    CAPTURE(shape[1]);
    HostTensor x = random_f32(shape, 4);
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(x[i] + 100.0);
    const std::map<std::string, AttrValue> axes{{"axes", std::vector<int64_t>{1}}};
    const OpGraph mean = lower_model(single_op_model("ReduceMean", {x}, axes, 1, {}));
    bool lane = false, f64 = false;
    for (NodeId n = 0; n < static_cast<NodeId>(mean.num_nodes()); ++n) {
      lane |= cpu::lane_reduction_fits(mean.node(n), 8);
      f64 |= cpu::lane_reduction_fits(mean.node(n), 8) && cpu::lane_reduction_in_f64(mean.node(n));
    }
    CHECK(lane == (shape[2] >= 8 && shape[1] > 256));
    CHECK(f64 == lane);
    check_op("ReduceMean", {x}, axes, 1, {});
  }
}

TEST_CASE("cpu ops: padded convolutions: border vectors of B, widths around the vector width") {
  // The micro-kernel loads a vector of B that leaves the input (a padded border) as one masked
  // load of the lanes in range, the pad value in the others: every lane position of the first and
  // last vectors of a row, with asymmetric pads and dilation, for widths below, at and past 8 and
  // 16 lanes (the AVX2 and AVX-512 specs), and rows of the image's top and bottom borders.
  struct Case {
    int64_t width, kernel, dilation;
    std::vector<int64_t> pads;  // top, left, bottom, right
  };
  for (const Case& v : std::vector<Case>{{5, 3, 1, {1, 1, 1, 1}},  {8, 3, 1, {1, 1, 1, 1}},  {15, 3, 1, {0, 2, 1, 0}},
                                         {16, 3, 2, {2, 2, 2, 2}}, {17, 3, 1, {1, 0, 0, 2}}, {33, 5, 1, {2, 3, 1, 1}},
                                         {56, 3, 1, {1, 1, 1, 1}}, {40, 3, 3, {3, 1, 2, 3}}}) {
    CAPTURE(v.width);
    CAPTURE(v.kernel);
    CAPTURE(v.dilation);
    const HostTensor x = random_f32({1, 6, 7, v.width}, 1);
    const HostTensor w = random_f32({12, 6, v.kernel, v.kernel}, 2);
    check_op("Conv", {x, w},
             {{"pads", v.pads}, {"dilations", std::vector<int64_t>{v.dilation, v.dilation}}}, 1, {1});
  }
}

TEST_CASE("cpu ops: reductions over each axis, pooling, normalization") {
  const HostTensor x = random_f32({3, 7, 13}, 1);
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL2", "ReduceLogSumExp"})
      check_op(op, {x}, {{"axes", std::vector<int64_t>{axis}}});
    check_op("ArgMax", {x}, {{"axis", axis}});
    check_op("ArgMin", {x}, {{"axis", axis}, {"keepdims", int64_t{0}}});
    check_op("Softmax", {x}, {{"axis", axis}});
    check_op("CumSum", {x, i64({}, {static_cast<double>(axis)})}, {}, 1, {1});
  }
  check_op("ReduceSum", {x}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}});
  check_op("ReduceMax", {random_f32({1}, 4)});
  check_op("LayerNormalization", {random_f32({4, 37}, 1), random_f32({37}, 2), random_f32({37}, 3)}, {{"epsilon", 1e-5}}, 1, {1, 2});
  check_op("MaxPool", {random_f32({1, 3, 9, 11}, 1)},
           {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  check_op("AveragePool", {random_f32({1, 3, 9, 11}, 1)},
           {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"strides", std::vector<int64_t>{1, 2}}});
  check_op("GlobalAveragePool", {random_f32({2, 5, 7, 3}, 1)});
}

TEST_CASE("cpu ops: shape ops and gathers") {
  const HostTensor x = random_f32({4, 6, 5}, 1);
  check_op("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  check_op("Reshape", {x, i64({3}, {0, -1, 2})}, {}, 1, {1});
  check_op("Concat", {x, random_f32({4, 3, 5}, 2)}, {{"axis", int64_t{1}}});
  check_op("Slice", {x, i64({2}, {1, 4}), i64({2}, {-1, 0}), i64({2}, {1, 2}), i64({2}, {2, -1})}, {}, 1, {1, 2, 3, 4});
  check_op("Pad", {random_f32({3, 5}, 1), i64({4}, {1, 2, 0, 3}), f32({}, {9})}, {}, 1, {1, 2});
  check_op("Expand", {random_f32({3, 1}, 1), i64({3}, {2, 3, 4})}, {}, 1, {1});
  check_op("Tile", {random_f32({2, 3}, 1), i64({2}, {3, 2})}, {}, 1, {1});
  // Gathers: negative indices count from the end; an embedding lookup.
  check_op("Gather", {random_f32({7, 5}, 1), i64({2, 3}, {6, 0, -1, 3, 2, -7})});
  check_op("Gather", {random_f32({3, 7, 5}, 1), i64({4}, {1, -2, 0, 4})}, {{"axis", int64_t{1}}});
  check_op("Gather", {random_f32({101, 13}, 1), i64({9}, {100, 0, 50, 7, 7, 99, -1, 3, 64})}, {}, 1, {0});
}

TEST_CASE("cpu ops: a gather index out of range is a UserError, as in the interpreter") {
  const OpGraph g = lower_model(single_op_model("Gather", {random_f32({7, 5}, 1), i64({2}, {1, 7})}, {}, 1, {}));
  const std::vector<HostTensor> in{random_f32({7, 5}, 1), i64({2}, {1, 7})};
  CHECK_THROWS_AS(interpret(g, in), UserError);
  CHECK_THROWS_AS(run_compiled(g, cpu_spec("x86-64-avx2-generic"), "welder", in), UserError);
}

TEST_CASE("cpu ops: a contraction whose rows exceed one chunk of totals") {
  // The micro-kernel keeps a column block's f64 totals for at most pack_bytes (half the largest
  // private cache) worth of rows and walks taller boxes in chunks. Shrinking the private caches of
  // the spec the kernel is compiled for (the schedule stays the AVX2 one) makes a 150-row task box
  // span several chunks, including a short last one.
  const OpGraph g = lower_model(single_op_model("MatMul", {random_f32({150, 140}, 1), random_f32({140, 40}, 2)}, {}, 1, {}));
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  Schedule schedule = schedule_with(g, spec, "welder");
  for (ScheduleGroup& e : schedule.groups)
    for (auto& [node, cfg] : e.group.tiles) cfg.levels.front().spatial = {150, 40};  // one task: the whole output
  HwSpec small = spec;
  for (MemoryLevel& l : small.memory_levels)
    if (l.scope == MemoryScope::core && l.cache) l.capacity_bytes = 4096;  // totals chunks of 2048 B: 8 rows
  const CompiledCheck c = run_compiled(g, small, schedule, random_inputs(g, 3), /*backend_only=*/true);  // tiles edited
  CHECK_MESSAGE(c.ok, c.message);
}

TEST_CASE("cpu ops: a producer read twice in a group is inlined only when its body is cheap") {
  // e = op(x); y = e * e: inlining e makes the product evaluate e's body once per read. For ReLU
  // (a max) that is cheaper than a scratch store and load; for exp it is not, so exp is stored once.
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  for (const std::pair<std::string, bool>& case_ : std::vector<std::pair<std::string, bool>>{{"Relu", true}, {"Exp", false}}) {
    CAPTURE(case_.first);
    const auto& [op, inlined] = case_;
    ModelBuilder b(DType::f32);
    const std::string e = b.op(op, {b.input("x", {64, 256})});
    const OpGraph g = b.graph(b.op("Mul", {e, e}));
    const Schedule s = schedule_with(g, spec, "welder");
    REQUIRE(s.groups.size() == 1);
    const int64_t alignment = 64;
    const CpuGroupPlan plan = plan_cpu_group(g, s, plan_buffers(g, s, alignment), 0, alignment, 0, 0);
    REQUIRE(plan.buffers.size() == 2);
    CHECK(plan.buffers[0].in_scratch);
    CHECK(plan.buffers[0].inlined == inlined);
    CHECK((plan.scratch_bytes > 0) == !inlined);
    check_compiled(g);
  }
}
