// The vector path of the CUDA backend (kernels/cuda/vector_plan.h): which elementwise groups take
// it, the vector width, which reads are vector loads, why other groups keep the generic kernel;
// its kernels compile with NVRTC, and on a GPU match the interpreter for chains, broadcasting
// (bias, scalars, a column), transposed reads, casts between widths, integers and booleans, odd
// sizes (every vector width down to 2), windows (depthwise convolutions, max pooling in NHWC,
// padded borders, strides) and sliced windows (column reductions: channels-last global pools).
#include <algorithm>

#include <doctest/doctest.h>

#include "cuda_check.h"
#include "../model_builder.h"
#include "kernels/cuda/kernel_emitter.h"
#include "kernels/cuda/kernel_families.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// gelu(x * a + b) * c over `shape` (the GPU suite's eltwise_chain).
OpGraph chain(DType dt, std::vector<int64_t> shape) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", shape), a = b.input("a", shape), c = b.input("c", shape);
  const std::string bias = b.weight("b", {shape.back()}, 3);  // broadcast along the rows
  const std::string y = b.op("Add", {b.op("Mul", {x, a}), bias});
  return b.graph(b.op("Mul", {b.op("Gelu", {y}), c}));
}

/// relu((x^T + column) * scale): a transposed read, a broadcast column and a scalar (scalar reads).
OpGraph transposed(DType dt, int64_t m, int64_t n) {
  ModelBuilder b(dt);
  const std::string xt = b.op("Transpose", {b.input("x", {n, m})}, {{"perm", std::vector<int64_t>{1, 0}}});
  const std::string sum = b.op("Add", {xt, b.input("col", {m, 1})});
  return b.graph(b.op("Relu", {b.op("Mul", {sum, b.weight("scale", {}, 4)})}));
}

/// f32(sigmoid(x)): a cast from 16 to 32 bits (the vector width from the narrowest dtype).
OpGraph widen(DType dt, std::vector<int64_t> shape) {
  ModelBuilder b(dt);
  return b.graph(b.op("Cast", {b.op("Sigmoid", {b.input("x", shape)})}, {{"to", std::string("f32")}}));
}

/// where(x > t, x * 2, -x) in i32 from f32 inputs: integers and booleans.
OpGraph integers(std::vector<int64_t> shape) {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", shape), t = b.input("t", shape);
  const std::string xi = b.op("Cast", {x}, {{"to", std::string("i32")}});
  const std::string gt = b.op("Greater", {x, t});
  return b.graph(b.op("Where", {gt, b.op("Add", {xi, xi}), b.op("Neg", {xi})}));
}

/// q = packed[:, 1].transpose(1, 0, 2) * scale over a packed [s, 3, h, d] input: a fixed index and
/// a transpose (in-group copies, folded into the read: a vector read along d) before a scalar
/// multiply (exported attention's K scaling).
OpGraph heads(DType dt, int64_t s, int64_t h, int64_t d) {
  ModelBuilder b(dt);
  const std::string k = b.op("Gather", {b.input("packed", {s, 3, h, d}), b.weight_i64("one", {1}, true)}, {{"axis", int64_t{1}}});
  const std::string t = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  return b.graph(b.op("Mul", {t, b.weight("scale", {}, 5)}));
}

/// q = x.view(s, b, h, d).permute(1, 2, 0, 3) * scale over x [s, b, h * d]: a reshape that splits
/// the last dimension and a transpose (copies folded into the read: along d, h * d + j steps whole
/// vectors) before the scaling (exported torchvision attention's Q after the in-projection).
OpGraph split_heads(DType dt, int64_t s, int64_t bt, int64_t h, int64_t d) {
  ModelBuilder b(dt);
  const std::string r = b.op("Reshape", {b.input("x", {s, bt, h * d}), b.weight_i64("shape", {s, bt, h, d})});
  const std::string t = b.op("Transpose", {r}, {{"perm", std::vector<int64_t>{1, 2, 0, 3}}});
  return b.graph(b.op("Mul", {t, b.weight("scale", {}, 5)}));
}

/// relu of x [b, h, s, d] permuted to [s, b, h, d], merged to [s * b, h * d]: a sink that reshapes
/// its output (exported attention's output before its projection).
OpGraph merged(DType dt, int64_t bt, int64_t h, int64_t s, int64_t d) {
  ModelBuilder b(dt);
  const std::string t = b.op("Transpose", {b.input("x", {bt, h, s, d})}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
  return b.graph(b.op("Reshape", {b.op("Relu", {t}), b.weight_i64("shape", {s * bt, h * d})}));
}

/// relu(depthwise_conv(x) + bias) in NHWC: x [n, h, w, c], a k x k window per channel with stride
/// `stride` and `pad` zeros on each side (a window: the vector kernel reduces it per channel vector).
/// With `hwio`, the weights are [k, k, 1, c] (weight_layout "HWIO", as the normalize stage lays out
/// a depthwise convolution's weights): a vector of channels' weights per tap.
OpGraph depthwise(DType dt, int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t stride, int64_t pad,
                  bool hwio = false) {
  ModelBuilder b(dt);
  std::map<std::string, AttrValue> attrs = {{"layout", std::string("NHWC")}, {"group", c},
                                            {"strides", std::vector<int64_t>{stride, stride}},
                                            {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  if (hwio) attrs["weight_layout"] = std::string("HWIO");
  const std::vector<int64_t> wshape = hwio ? std::vector<int64_t>{k, k, 1, c} : std::vector<int64_t>{c, k, k, 1};
  const std::string y = b.op("Conv", {b.input("x", {n, h, w, c}), b.weight("w", wshape, 6), b.weight("bias", {c}, 7)}, attrs);
  return b.graph(b.op("Relu", {y}));
}

/// relu(grouped_conv(x) + bias) in NHWC with OHWI weights [m, k, k, c / groups]: a grouped window
/// (its domain (n, h, w, g, mg) splits the channels m, its group's c / groups input channels summed
/// along the last index of x and w).
/// With `hwio`, the weights are [k, k, c / groups, m] (weight_layout "HWIO", as the normalize stage
/// lays them out): per input channel, a vector of the elements' weights.
OpGraph grouped(DType dt, int64_t n, int64_t h, int64_t w, int64_t c, int64_t m, int64_t groups, int64_t k,
                int64_t stride, int64_t pad, bool hwio = false) {
  ModelBuilder b(dt);
  std::map<std::string, AttrValue> attrs = {{"layout", std::string("NHWC")}, {"group", groups},
                                            {"strides", std::vector<int64_t>{stride, stride}},
                                            {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  if (hwio) attrs["weight_layout"] = std::string("HWIO");
  const std::vector<int64_t> wshape = hwio ? std::vector<int64_t>{k, k, c / groups, m} : std::vector<int64_t>{m, k, k, c / groups};
  const std::string y = b.op("Conv", {b.input("x", {n, h, w, c}), b.weight("w", wshape, 6), b.weight("bias", {m}, 7)}, attrs);
  return b.graph(b.op("Relu", {y}));
}

/// MaxPool 3x3, stride 2, pad 1 in NHWC (ResNet's stem pooling): the pad value is the lowest.
OpGraph max_pool_nhwc(DType dt, int64_t n, int64_t h, int64_t c) {
  ModelBuilder b(dt);
  return b.graph(b.op("MaxPool", {b.input("x", {n, h, h, c})},
                      {{"layout", std::string("NHWC")}, {"kernel_shape", std::vector<int64_t>{3, 3}},
                       {"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
}

/// relu(mean over the pixels of channels-last x [n, h, w, c]) kept as [n, 1, 1, c]: a column
/// reduction (an SE block's squeeze), every channel vector reduced over h w taps.
OpGraph column_mean(DType dt, int64_t n, int64_t h, int64_t w, int64_t c) {
  ModelBuilder b(dt);
  const std::string m = b.op("ReduceMean", {b.input("x", {n, h, w, c})},
                             {{"axes", std::vector<int64_t>{1, 2}}, {"keepdims", int64_t{1}}});
  return b.graph(b.op("Relu", {m}));
}

/// ResNet's head in channels-last: the global average pool, transposed to [n, c, 1, 1] and
/// flattened to [n, c] (nodes whose domains differ from the sink's by axes of extent 1).
OpGraph pool_head(DType dt, int64_t n, int64_t h, int64_t c) {
  ModelBuilder b(dt);
  const std::string m = b.op("ReduceMean", {b.input("x", {n, h, h, c})},
                             {{"axes", std::vector<int64_t>{1, 2}}, {"keepdims", int64_t{1}}});
  return b.graph(b.op("Flatten", {b.op("Transpose", {m}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}})}));
}

/// max over axis 1 of [b, r, c]: a column reduction of r points per output.
OpGraph column_max(DType dt, int64_t batch, int64_t r, int64_t c) {
  ModelBuilder b(dt);
  return b.graph(b.op("ReduceMax", {b.input("x", {batch, r, c})}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}));
}

/// `op` (MaxPool or AveragePool) k x k, stride s, pad p over NCHW x [n, c, h, h]: a window sliding
/// along the innermost dimension (W at s w + k), read a scalar per element.
OpGraph pool_nchw(const std::string& op, DType dt, int64_t n, int64_t c, int64_t h, int64_t k, int64_t s, int64_t p) {
  ModelBuilder b(dt);
  return b.graph(b.op(op, {b.input("x", {n, c, h, h})},
                      {{"kernel_shape", std::vector<int64_t>{k, k}}, {"strides", std::vector<int64_t>{s, s}},
                       {"pads", std::vector<int64_t>{p, p, p, p}}}));
}

/// LLaMA's rotary embedding over x [t, h, d]: x * cos + rotate_half(x) * sin, rotate_half(x) =
/// Concat(-x[..., d/2:], x[..., :d/2]) -- a negation over half the domain and copies read out of
/// bounds by the Concat, recomputed where read (VectorRead::inlined).
OpGraph rope(DType dt, int64_t t, int64_t h, int64_t d) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", {t, h, d}), cos = b.input("cos", {t, 1, d}), sin = b.input("sin", {t, 1, d});
  const std::string axes = b.weight_i64("axes", {2});
  const std::string x1 = b.op("Slice", {x, b.weight_i64("s0", {0}), b.weight_i64("e0", {d / 2}), axes});
  const std::string x2 = b.op("Slice", {x, b.weight_i64("s1", {d / 2}), b.weight_i64("e1", {d}), axes});
  const std::string rot = b.op("Concat", {b.op("Neg", {x2}), x1}, {{"axis", int64_t{2}}});
  return b.graph(b.op("Add", {b.op("Mul", {x, cos}), b.op("Mul", {rot, sin})}));
}

/// relu(s[:, 1:] - s[:, :-1]) with s = sigmoid(x) over x [m, n]: a difference of neighbours; s's
/// domain is not the sink's [m, n - 1], so both slices recompute it (at the next column and at
/// the sink's own).
OpGraph shifted(DType dt, int64_t m, int64_t n) {
  ModelBuilder b(dt);
  const std::string x = b.op("Sigmoid", {b.input("x", {m, n})});
  const std::string axes = b.weight_i64("axes", {1});
  const std::string hi = b.op("Slice", {x, b.weight_i64("s0", {1}), b.weight_i64("e0", {n}), axes});
  const std::string lo = b.op("Slice", {x, b.weight_i64("s1", {0}), b.weight_i64("e1", {n - 1}), axes});
  return b.graph(b.op("Relu", {b.op("Sub", {hi, lo})}));
}

/// y = Pad(-sigmoid(x[:, n/2:]), right n/2, value 3) + x over x [m, n]: a recomputed negation that
/// reads a recomputed sigmoid (nesting), and a pad value other than 0 where the Pad reads outside
/// the negation's domain.
OpGraph nested(DType dt, int64_t m, int64_t n) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", {m, n});
  const std::string half = b.op("Slice", {x, b.weight_i64("s0", {n / 2}), b.weight_i64("e0", {n}), b.weight_i64("axes", {1})});
  const std::string neg = b.op("Neg", {b.op("Sigmoid", {half})});
  const std::string padded = b.op("Pad", {neg, b.weight_i64("pads", {0, 0, 0, n / 2}), b.scalar("value", 3.0)});
  return b.graph(b.op("Add", {padded, x}));
}

using VectorCase = GraphCase;

std::vector<VectorCase> vector_cases() {
  std::vector<VectorCase> out;
  auto add = [&](std::string name, OpGraph g) { out.push_back({std::move(name), std::move(g)}); };
  add("chain f16 3x1000", chain(DType::f16, {3, 1000}));
  add("chain bf16 4096", chain(DType::bf16, {4096}));
  add("chain f32 5x7x12", chain(DType::f32, {5, 7, 12}));
  add("chain f16 9x6 (vector of 2)", chain(DType::f16, {9, 6}));
  add("transposed f16 33x40", transposed(DType::f16, 33, 40));
  add("widen f16 -> f32 17x24", widen(DType::f16, {17, 24}));
  add("integers 31x8", integers({31, 8}));
  add("heads f16 s197 h3 d64 (fixed index and transpose folded)", heads(DType::f16, 197, 3, 64));
  add("heads bf16 s5 h2 d6", heads(DType::bf16, 5, 2, 6));
  add("merged f16 2x3x197x64 (reshaping sink)", merged(DType::f16, 2, 3, 197, 64));
  add("split heads f16 s197 b2 h3 d64 (split reshape and transpose folded)", split_heads(DType::f16, 197, 2, 3, 64));
  add("split heads f32 s5 b3 h2 d6", split_heads(DType::f32, 5, 3, 2, 6));
  add("depthwise f16 3x3 stride 1 pad 1, 2x13x11x48", depthwise(DType::f16, 2, 13, 11, 48, 3, 1, 1));
  add("depthwise bf16 5x5 stride 2 pad 2, 1x15x15x40", depthwise(DType::bf16, 1, 15, 15, 40, 5, 2, 2));
  add("depthwise f32 7x7 stride 1 pad 3, 1x9x9x6 (vector of 2)", depthwise(DType::f32, 1, 9, 9, 6, 7, 1, 3));
  add("depthwise f16 HWIO weights 7x7 pad 3, 2x10x9x64", depthwise(DType::f16, 2, 10, 9, 64, 7, 1, 3, true));
  add("max pool f16 3x3 stride 2 pad 1, 2x17x64", max_pool_nhwc(DType::f16, 2, 17, 64));
  add("grouped f16 3x3 pad 1, 8 groups of 4 -> 4, 2x9x7x32", grouped(DType::f16, 2, 9, 7, 32, 32, 8, 3, 1, 1));
  // (Groups whose channels are whole 16-byte chunks and whose weights' group columns start
  // 16-byte aligned take the tensor cores, cuda_mma_test.cpp: the HWIO ones below have 6 or 10
  // output channels per group.)
  add("grouped f16 HWIO 3x3 stride 2 pad 1, 4 groups of 8 -> 6, 1x11x11x32", grouped(DType::f16, 1, 11, 11, 32, 24, 4, 3, 2, 1, true));
  add("grouped bf16 HWIO 3x3 pad 1, 2 groups of 24 -> 10 (channel vectors of 8, 3 steps)",
      grouped(DType::bf16, 1, 6, 5, 48, 20, 2, 3, 1, 1, true));
  add("grouped f32 1x1, 3 groups of 6 -> 2 (channel vectors of 2, vector of 2)", grouped(DType::f32, 2, 4, 5, 18, 6, 3, 1, 1, 0));
  add("grouped f16 3x3 pad 1, 16 groups of 2 -> 1 (one output channel per group)", grouped(DType::f16, 1, 5, 6, 32, 16, 16, 3, 1, 1));
  add("grouped f16 5x5 pad 2, depthwise multiplier 2 (1 -> 2 per group)", grouped(DType::f16, 1, 7, 6, 16, 32, 16, 5, 1, 2));
  add("grouped f16 3x3 pad 1, 4 groups of 3 -> 4 (odd channels: scalar channel steps)", grouped(DType::f16, 1, 5, 5, 12, 16, 4, 3, 1, 1));
  add("grouped f16 HWIO 3x3 pad 1, 2 groups of 72 -> 6 (channel loop partly unrolled)", grouped(DType::f16, 1, 4, 4, 144, 12, 2, 3, 1, 1, true));
  add("grouped f16 HWIO 3x3 pad 1, 8 groups of 4 -> 4, 2x9x7x32", grouped(DType::f16, 2, 9, 7, 32, 32, 8, 3, 1, 1, true));
  add("grouped bf16 HWIO 3x3 stride 2 pad 1, 4 groups of 8 -> 10, 1x11x11x32", grouped(DType::bf16, 1, 11, 11, 32, 40, 4, 3, 2, 1, true));
  add("grouped f32 HWIO 1x1, 3 groups of 6 -> 2", grouped(DType::f32, 2, 4, 5, 18, 6, 3, 1, 1, 0, true));
  add("grouped f16 HWIO 3x3 pad 1, 4 groups of 3 -> 4 (odd channels)", grouped(DType::f16, 1, 5, 5, 12, 16, 4, 3, 1, 1, true));
  add("column mean f16 2x56x56x48 (sliced window of 3136 taps, clusters of 4 blocks)", column_mean(DType::f16, 2, 56, 56, 48));
  add("column mean f32 1x64x64x16 (f64 accumulators, clusters)", column_mean(DType::f32, 1, 64, 64, 16));
  add("column mean bf16 20x40x40x64 (sliced, clusters of 2)", column_mean(DType::bf16, 20, 40, 40, 64));
  add("column mean bf16 64x20x20x96 (sliced, no clusters)", column_mean(DType::bf16, 64, 20, 20, 96));
  add("column mean f32 3x7x9x40 (few vectors: sliced, 63 taps)", column_mean(DType::f32, 3, 7, 9, 40));
  add("column mean bf16 1x23x29x200 (667 taps, not a multiple of the slices)", column_mean(DType::bf16, 1, 23, 29, 200));
  add("pool head f16 2x7x2048 (transpose and flatten of unit axes)", pool_head(DType::f16, 2, 7, 2048));
  add("pool head f32 5x7x256 (vectors of 4)", pool_head(DType::f32, 5, 7, 256));
  add("column max bf16 4x300x64", column_max(DType::bf16, 4, 300, 64));
  add("depthwise f16 5x5 pad 2, 1x9x9x16 (few vectors: a sliced window)", depthwise(DType::f16, 1, 9, 9, 16, 5, 1, 2));
  add("column mean f16 1x64x64x40 (clusters, the last group's lanes partly idle)", column_mean(DType::f16, 1, 64, 64, 40));
  add("grouped f16 HWIO 5x5 pad 2, 4 groups of 8 -> 10, 1x11x11x32 (few vectors, not sliced)",
      grouped(DType::f16, 1, 11, 11, 32, 40, 4, 5, 1, 2, true));
  add("max pool NCHW f16 3x3 stride 2 pad 1, 2x3x36 (vectors of 2 along W = 18)", pool_nchw("MaxPool", DType::f16, 2, 3, 36, 3, 2, 1));
  add("max pool NCHW bf16 3x3 stride 2 pad 1, 1x4x32", pool_nchw("MaxPool", DType::bf16, 1, 4, 32, 3, 2, 1));
  add("max pool NCHW f16 3x3 stride 2 pad 1, 2x3x48 (spans of 3 chunks per row of taps)", pool_nchw("MaxPool", DType::f16, 2, 3, 48, 3, 2, 1));
  add("average pool NCHW bf16 3x3 stride 1 pad 1, 1x5x16 (spans)", pool_nchw("AveragePool", DType::bf16, 1, 5, 16, 3, 1, 1));
  add("max pool NCHW f16 5x5 stride 2 pad 2, 1x2x40 (spans)", pool_nchw("MaxPool", DType::f16, 1, 2, 40, 5, 2, 2));
  add("average pool NCHW f32 2x2 stride 2, 2x5x28", pool_nchw("AveragePool", DType::f32, 2, 5, 28, 2, 2, 0));
  add("rope f16 t33 h4 d128 (rotate_half recomputed)", rope(DType::f16, 33, 4, 128));
  add("rope bf16 t7 h3 d64", rope(DType::bf16, 7, 3, 64));
  add("rope f32 t5 h2 d12 (halves of 6, vectors of 4: a scalar per element)", rope(DType::f32, 5, 2, 12));
  add("shifted f16 9x65 (a node recomputed at the next column)", shifted(DType::f16, 9, 65));
  add("nested f16 9x128 (recomputed by vectors, pad 3)", nested(DType::f16, 9, 128));
  add("nested f32 5x12 (recomputed a scalar per element, pad 3)", nested(DType::f32, 5, 12));
  return out;
}

/// The kernel of the last group of welder's schedule (the one writing the output).
cuda::GeneratedKernel welder_kernel(const OpGraph& g) { return last_kernel(g, "welder"); }

}  // namespace

TEST_CASE("cuda vector: elementwise groups take the vector path, 16 bytes of the narrowest dtype per thread") {
  const cuda::GeneratedKernel k = welder_kernel(chain(DType::f16, {3, 1000}));
  REQUIRE(k.path == "vector");
  REQUIRE(k.vector);
  CHECK(k.vector->vec == 8);
  CHECK(k.vector->nodes.size() == 4);
  int vector_reads = 0;
  for (const auto& reads : k.vector->reads)
    for (const cuda::VectorRead& r : reads) vector_reads += r.vector;
  CHECK(vector_reads == 4);  // x, a, c and the bias (its one axis is the last)
  CHECK(k.source.find("tsl::row_load<unsigned short, 8>") != std::string::npos);
  CHECK(k.source.find("tsl::row_store<unsigned short, 8>") != std::string::npos);
  CHECK(k.plan.threads == k.vector->threads);
  CHECK(k.plan.blocks == k.vector->blocks);

  CHECK(welder_kernel(chain(DType::f32, {5, 7, 12})).vector->vec == 4);
  CHECK(welder_kernel(chain(DType::f16, {9, 6})).vector->vec == 2);
  // f16 in, f32 out: eight elements (16 bytes of f16) per thread, two 16-byte stores.
  CHECK(welder_kernel(widen(DType::f16, {17, 24})).vector->vec == 8);

  // The transposed read is a scalar read, the column a broadcast (scalar) read.
  const cuda::GeneratedKernel t = welder_kernel(transposed(DType::f16, 33, 40));
  REQUIRE(t.path == "vector");
  for (const auto& reads : t.vector->reads)
    for (const cuda::VectorRead& r : reads) CHECK_FALSE(r.vector);
}

TEST_CASE("cuda vector: in-group copies fold into the reads, a reshaping sink stores in place") {
  // Gather and Transpose are not computed: the multiply reads the packed input at the composed map,
  // 8 f16 along d at a time.
  const cuda::GeneratedKernel k = welder_kernel(heads(DType::f16, 197, 3, 64));
  REQUIRE(k.path == "vector");
  CHECK(k.vector->nodes.size() == 1);
  REQUIRE(k.vector->reads[0].size() == 2);
  CHECK(k.vector->reads[0][0].vector);
  CHECK(k.vector->reads[0][0].read.type.shape == std::vector<int64_t>{197, 3, 3, 64});
  const cuda::GeneratedKernel r = welder_kernel(merged(DType::f16, 2, 3, 197, 64));
  CHECK(r.path == "vector");
  // A reshape that splits a dimension folds like a transpose: the multiply reads x itself, 8 f16
  // along d at a time (the head's offset h * 64 is a whole number of vectors).
  const cuda::GeneratedKernel q = welder_kernel(split_heads(DType::f16, 197, 2, 3, 64));
  REQUIRE(q.path == "vector");
  CHECK(q.vector->nodes.size() == 1);
  CHECK(q.vector->reads[0][0].read.type.shape == std::vector<int64_t>{197, 2, 192});
  CHECK(q.vector->reads[0][0].vector);
}

TEST_CASE("cuda vector: values at other points are recomputed where they are read (rotary embeddings)") {
  // rotate_half: the negation (another domain) and the first half's copy (read out of bounds by
  // the Concat) are recomputed, each read guarded by its domain; x, cos and sin are vector reads.
  const cuda::GeneratedKernel k = welder_kernel(rope(DType::f16, 33, 4, 128));
  REQUIRE(k.path == "vector");
  CHECK(k.vector->vec == 8);
  REQUIRE(k.vector->inlined.size() == 2);
  int vector_reads = 0, recomputed = 0;
  for (const auto& reads : k.vector->reads)
    for (const cuda::VectorRead& r : reads) {
      vector_reads += r.vector;
      recomputed += r.inlined >= 0;
    }
  CHECK(vector_reads == 3);
  CHECK(recomputed == 2);
  CHECK(k.source.find("recomputed here: neg(in0)") != std::string::npos);
  CHECK(print_vector_plan(*k.vector).find("2 values recomputed where read") != std::string::npos);
  // The negation (one operation) at every point of the sink; the copy computes nothing. Recorded
  // in the schedule and charged by the cost model.
  CHECK(k.vector->recomputed_flops == doctest::Approx(33.0 * 4 * 128));
  {
    const OpGraph rg = rope(DType::f16, 33, 4, 128);
    const Schedule rs = with_families(rg, gpu_spec(), "welder");
    const ScheduleGroup& last = rs.groups.back();
    REQUIRE(last.group.kernel.family == "vector");
    CHECK(last.group.kernel.params.at("recomputed_flops") == 33 * 4 * 128);
    double own = 0;
    for (NodeId n : last.group.nodes) own += static_cast<double>(rg.node(n).flops());
    CHECK(last.predicted.flops == doctest::Approx(own + 33.0 * 4 * 128));
  }
  // The halves start at whole vectors (64 of 8): each recomputed read is a guarded vector load at
  // the vector's first element. Halves of 6 f32 (vectors of 4) are read a scalar per element.
  for (const cuda::VectorInline& in : k.vector->inlined) CHECK(in.vector);
  CHECK(k.source.find("tsl_rr") != std::string::npos);
  const cuda::GeneratedKernel odd = welder_kernel(rope(DType::f32, 5, 2, 12));
  REQUIRE(odd.path == "vector");
  REQUIRE(odd.vector->vec == 4);
  REQUIRE_FALSE(odd.vector->inlined.empty());
  for (const cuda::VectorInline& in : odd.vector->inlined) CHECK_FALSE(in.vector);
  // A node of the sink's domain read at the next column: computed at its point for one read,
  // recomputed at the other's.
  const cuda::GeneratedKernel sh = welder_kernel(shifted(DType::f16, 9, 65));
  REQUIRE(sh.path == "vector");
  CHECK(sh.vector->inlined.size() == 2);
  // Nested: the negation reads the sigmoid, itself recomputed; by vectors where the halves align.
  for (const int64_t n : {128, 12}) {
    const cuda::GeneratedKernel ne = welder_kernel(nested(n == 128 ? DType::f16 : DType::f32, 9, n));
    REQUIRE(ne.path == "vector");
    REQUIRE(ne.vector->inlined.size() == 2);
    bool reads_recomputed = false;
    for (const cuda::VectorInline& in : ne.vector->inlined) {
      CHECK(in.vector == (n == 128));
      for (const cuda::VectorRead& r : in.reads) reads_recomputed |= r.inlined >= 0;
    }
    CHECK(reads_recomputed);
  }
  // Not recomputed: a value read transposed by a vector of the other layout (a warp's loads would
  // scatter: NHWC silu stored as NCHW), or a computed broadcast (an SE gate's sigmoid per channel,
  // read at every pixel). Each stays in a kernel of its own.
  auto recomputes = [](const OpGraph& g) {
    const Schedule s = schedule_with(g, gpu_spec(), "welder");
    std::string why;
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
      const cuda::GeneratedKernel e = emit_kernel(g, s, i, gpu_spec());
      if (e.vector && !e.vector->inlined.empty()) return std::string("recomputed");
      why += e.vector_reason;
    }
    return why;
  };
  {
    ModelBuilder tb(DType::f16);
    const std::string si = tb.op("Sigmoid", {tb.input("x", {4, 14, 14, 96})});
    const std::string silu = tb.op("Mul", {tb.input("x2", {4, 14, 14, 96}), si});
    const std::string scattered = recomputes(tb.graph(tb.op("Transpose", {silu}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}})));
    CHECK(scattered.find("scatter") != std::string::npos);
    ModelBuilder gb(DType::f16);
    const std::string gate = gb.op("Sigmoid", {gb.input("g", {32, 240, 1, 1})});
    const std::string why = recomputes(gb.graph(gb.op("Mul", {gb.input("x", {32, 240, 28, 28}), gate})));
    CHECK(why.find("points per value") != std::string::npos);
  }
  // A window is never recomputed: a depthwise convolution whose halves are added (read at two
  // points) leaves the vector kernel (it is not the sink's domain and reduces).
  ModelBuilder b(DType::f16);
  const std::string y = b.op("Conv", {b.input("x", {1, 6, 6, 16}), b.weight("w", {16, 3, 3, 1}, 6)},
                             {{"layout", std::string("NHWC")}, {"group", int64_t{16}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  const std::string axes = b.weight_i64("axes", {3});
  const std::string hi = b.op("Slice", {y, b.weight_i64("s0", {8}), b.weight_i64("e0", {16}), axes});
  const std::string lo = b.op("Slice", {y, b.weight_i64("s1", {0}), b.weight_i64("e1", {8}), axes});
  const OpGraph g = b.graph(b.op("Add", {hi, lo}));
  const Schedule s = schedule_with(g, gpu_spec(), "welder");
  int with_conv = 0;
  for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
    const std::vector<NodeId>& nodes = s.groups[i].group.nodes;
    if (nodes.size() < 2 || std::none_of(nodes.begin(), nodes.end(), [&](NodeId n) { return g.node(n).num_reduction() > 0; }))
      continue;
    ++with_conv;  // the convolution fused with its readers: not a vector kernel, and why
    const cuda::GeneratedKernel e = emit_kernel(g, s, i, gpu_spec());
    CHECK(e.path != "vector");
    CHECK(e.vector_reason.find("another domain") != std::string::npos);
  }
  CHECK(with_conv == 1);
}

TEST_CASE("cuda vector: depthwise convolutions and poolings in NHWC are windows of the vector kernel") {
  // The window's input is read 8 channels at a time, guarded at the padded border; its weights one
  // element per channel; the bias and the relu run on the window's values.
  const cuda::GeneratedKernel k = welder_kernel(depthwise(DType::f16, 2, 13, 11, 48, 3, 1, 1));
  REQUIRE(k.path == "vector");
  CHECK(k.vector->vec == 8);
  REQUIRE(k.vector->reads[0].size() == 2);
  CHECK(k.vector->reads[0][0].guarded);
  CHECK_FALSE(k.vector->reads[0][1].guarded);
  CHECK(k.source.find("(a window)") != std::string::npos);
  // Weights [k, k, 1, c]: a vector load per tap too.
  const cuda::GeneratedKernel hwio = welder_kernel(depthwise(DType::f16, 2, 10, 9, 64, 7, 1, 3, true));
  REQUIRE(hwio.path == "vector");
  CHECK(hwio.vector->reads[0][0].guarded);
  CHECK(hwio.vector->reads[0][1].guarded);
  const cuda::GeneratedKernel pool = welder_kernel(max_pool_nhwc(DType::f16, 2, 17, 64));
  REQUIRE(pool.path == "vector");
  CHECK(pool.vector->reads[0][0].guarded);
  // A product of two inputs over more points than a window keeps another family, and says so
  // (a pooling of one input over as many is sliced instead).
  const cuda::GeneratedKernel wide = welder_kernel(depthwise(DType::f16, 1, 40, 40, 16, 17, 1, 8));
  CHECK(wide.path != "vector");
  CHECK(wide.vector_reason.find("more than a window") != std::string::npos);
  // A small window over few vectors is sliced (the SMs would idle), a grouped one never: its
  // emitter sums every tap in one thread.
  const cuda::GeneratedKernel few = welder_kernel(depthwise(DType::f16, 1, 9, 9, 16, 5, 1, 2));
  REQUIRE(few.path == "vector");
  CHECK(few.vector->slices > 1);
  const cuda::GeneratedKernel grouped_few = welder_kernel(grouped(DType::f16, 1, 11, 11, 32, 40, 4, 5, 1, 2, true));
  REQUIRE(grouped_few.path == "vector");
  CHECK(grouped_few.vector->slices == 1);
  CHECK(grouped_few.vector->threads == cuda::kVectorBlockThreads);
}

TEST_CASE("cuda vector: an NCHW pooling slides its window along the innermost dimension, each row's span loaded once") {
  const cuda::GeneratedKernel k = welder_kernel(pool_nchw("MaxPool", DType::f16, 2, 8, 112, 3, 2, 1));
  REQUIRE(k.path == "vector");
  CHECK(k.vector->vec == 8);  // 8 outputs along W (56 of them) per thread
  for (const auto& reads : k.vector->reads)
    for (const cuda::VectorRead& r : reads) {
      CHECK_FALSE(r.vector);
      CHECK_FALSE(r.guarded);
    }
  CHECK(k.vector->channel_axis[0] == -1);
  // The row kernel does not take a window as a merged row.
  CHECK(k.row_reason.find("reduces over a window") != std::string::npos);
  // Per row of taps, the 17 elements the 8 outputs' 3 taps read (2 w - 1 .. 2 w + 15) come in
  // three aligned chunks of 8 from 2 w - 8, the padding's -inf where a chunk leaves the row; each
  // tap of each element then reads its register.
  REQUIRE(k.vector->reads[0].size() == 1);
  const cuda::VectorSpan& span = k.vector->reads[0][0].span;  // chosen by the plan
  CHECK(span.chunks == 3);
  CHECK(span.lead == 7);
  CHECK(span.stride == 2);
  CHECK(k.source.find("3 chunks of 8 from 8 before 2 x the vector's first element") != std::string::npos);
  CHECK(k.source.find("[7 + 2 * tsl_e + 1 * static_cast<int>(tsl_k5)]") != std::string::npos);
  // Outputs along W in vectors of 2 (W = 18): 2 x 2 = 4 elements, not whole 16-byte chunks of
  // the input: a scalar read per element and tap, as before.
  const cuda::GeneratedKernel odd = welder_kernel(pool_nchw("MaxPool", DType::f16, 2, 3, 36, 3, 2, 1));
  REQUIRE(odd.path == "vector");
  CHECK(odd.source.find("tsl_span") == std::string::npos);
  CHECK(odd.vector->reads[0][0].span.chunks == 0);
  // No padding (ResNet-D's 2x2 average pool): the span starts at 2 w itself, two chunks.
  const cuda::GeneratedKernel unpadded = welder_kernel(pool_nchw("AveragePool", DType::f16, 1, 4, 32, 2, 2, 0));
  REQUIRE(unpadded.path == "vector");
  CHECK(unpadded.source.find("2 chunks of 8 from 0 before 2 x the vector's first element") != std::string::npos);
  CHECK(unpadded.source.find("[0 + 2 * tsl_e + 1 * static_cast<int>(tsl_k5)]") != std::string::npos);
}

TEST_CASE("cuda vector: column reductions are sliced windows, domains may differ by axes of extent 1") {
  // 32 x 144 channels over 56 x 56 pixels: 576 vectors of 8, 3136 taps each -- sliced, the taps
  // split over the slices of a block and combined through shared memory.
  const cuda::GeneratedKernel k = welder_kernel(column_mean(DType::f16, 32, 56, 56, 144));
  REQUIRE(k.path == "vector");
  const cuda::VectorPlan& p = *k.vector;
  CHECK(p.vec == 8);
  CHECK(p.slices >= cuda::kVectorMinSlices);
  CHECK(p.lanes >= cuda::kVectorMinLanes);
  CHECK(p.parts == 1);  // 144 blocks: enough for the SMs
  CHECK(p.threads == p.lanes * p.slices);
  CHECK(p.blocks == (32 * 144 / 8 + p.lanes - 1) / p.lanes);
  CHECK(k.plan.threads == p.threads);
  CHECK(p.acc_bytes == 4);  // f16 windows accumulate in float
  CHECK(k.plan.reduce_scratch_bytes == int64_t{p.threads} * p.vec * 4);
  CHECK(k.source.find("tsl_t += " + std::to_string(p.slices)) != std::string::npos);
  CHECK(k.source.find("for (unsigned tsl_h = 32u; tsl_h > 0; tsl_h /= 2)") != std::string::npos);  // the tree over 64 slices
  CHECK(p.slices == 64);
  CHECK(cuda::family_params(p).at("slices") == p.slices);
  // 2 x 48 channels: 12 vectors, 3 blocks of 4 -- fewer than the SMs, so blocks of the most
  // threads and clusters of blocks sharing the taps (4: each block still sums 2+ taps per thread).
  const cuda::GeneratedKernel c = welder_kernel(column_mean(DType::f16, 2, 56, 56, 48));
  REQUIRE(c.path == "vector");
  const cuda::VectorPlan& q = *c.vector;
  CHECK(q.threads == gpu_spec().limits.max_threads_per_block);
  CHECK(q.parts == 4);
  CHECK(q.blocks == 3 * 4);
  CHECK(c.plan.cluster_blocks == 4);
  CHECK(q.combine_bytes() <= cuda::kStaticSmemBytes);
  CHECK(c.source.find("__cluster_dims__(4, 1, 1)") != std::string::npos);
  CHECK(c.source.find("cluster_load") != std::string::npos);
  CHECK(cuda::family_params(q).at("parts") == 4);
  // f32 accumulates in f64: half the slices, the combine within static shared memory.
  const cuda::GeneratedKernel wide = welder_kernel(column_mean(DType::f32, 1, 64, 64, 16));
  REQUIRE(wide.path == "vector");
  CHECK(wide.vector->acc_bytes == 8);
  CHECK(wide.vector->combine_bytes() <= cuda::kStaticSmemBytes);
  CHECK(wide.vector->parts > 1);
  // Few taps per slice: slices halved until each sums at least two.
  const cuda::GeneratedKernel few = welder_kernel(column_mean(DType::f32, 3, 7, 9, 40));
  REQUIRE(few.path == "vector");
  CHECK(few.vector->slices <= 32);
  // Vectors for a wave of blocks and a small window: one thread per vector, no slices.
  const cuda::GeneratedKernel many = welder_kernel(pool_head(DType::f32, 1024, 7, 256));
  REQUIRE(many.path == "vector");
  CHECK(many.vector->slices == 1);
  CHECK(cuda::family_params(*many.vector).count("slices") == 0);
  // The pool head: the mean's domain [n, 1, 1, c] and the sink's [n, c] (a flatten of the
  // transposed [n, c, 1, 1]) -- one kernel, the transpose folded, vectors along c.
  const cuda::GeneratedKernel head = welder_kernel(pool_head(DType::f16, 2, 7, 2048));
  REQUIRE(head.path == "vector");
  CHECK(head.vector->extents == std::vector<int64_t>{2, 2048});
  CHECK(head.vector->vec == 8);
  // A domain that differs by more than axes of extent 1 is still refused.
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {4, 6, 8});
  const std::string m = b.op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  const cuda::GeneratedKernel other = welder_kernel(b.graph(b.op("Sub", {x, m})));
  CHECK(other.path != "vector");
}

TEST_CASE("cuda vector: grouped convolutions are grouped windows, their channels read a vector at a time") {
  // 8 groups of 4 -> 4: the conv's domain (n, h, w, g, mg) splits the sink's channels; the vector
  // of 4 output channels shares a group, each step reads 4 input channels of x (shared) and of
  // each element's weight row.
  const cuda::GeneratedKernel k = welder_kernel(grouped(DType::f16, 2, 9, 7, 32, 32, 8, 3, 1, 1));
  INFO(k.vector_reason);
  REQUIRE(k.path == "vector");
  const cuda::VectorPlan& p = *k.vector;
  CHECK(p.vec == 4);
  const auto conv = std::find_if(p.split.begin(), p.split.end(), [](int64_t s) { return s > 0; });
  REQUIRE(conv != p.split.end());
  const size_t at = static_cast<size_t>(conv - p.split.begin());
  CHECK(*conv == 4);
  CHECK(p.channel_axis[at] >= 0);
  CHECK(p.channel_vec[at] == 4);
  CHECK(k.source.find("tsl_c += 4") != std::string::npos);
  // Weights [kh, kw, Cg, M]: per input channel, one vector of the 4 elements' weights (guarded).
  const cuda::GeneratedKernel h = welder_kernel(grouped(DType::f16, 2, 9, 7, 32, 32, 8, 3, 1, 1, true));
  REQUIRE(h.path == "vector");
  CHECK(h.vector->vec == 4);
  bool element_read = false;
  for (const std::vector<cuda::VectorRead>& rs : h.vector->reads)
    for (const cuda::VectorRead& r : rs) element_read |= r.guarded;
  CHECK(element_read);
  // Groups of 24 bf16 channels: vectors of 8, three steps; 3 channels per group: one at a time.
  // (10 output channels per group of HWIO weights: groups not 16-byte aligned for the tensor
  // cores' implicit GEMM per group, cuda_mma_test.cpp.)
  const cuda::GeneratedKernel wide = welder_kernel(grouped(DType::bf16, 1, 6, 5, 48, 20, 2, 3, 1, 1, true));
  REQUIRE(wide.path == "vector");
  CHECK(wide.source.find("tsl_c += 8") != std::string::npos);
  const cuda::GeneratedKernel odd = welder_kernel(grouped(DType::f16, 1, 5, 5, 12, 16, 4, 3, 1, 1));
  REQUIRE(odd.path == "vector");
  CHECK(odd.source.find("tsl_c += 1") != std::string::npos);
  // A dense convolution sums channels of no group: not a window (here, in f64, generic; in f32 the
  // simt family takes it, in f16 the tensor-core families).
  ModelBuilder b(DType::f64);
  const OpGraph dense_graph = b.graph(b.op("Conv", {b.input("x", {1, 6, 6, 16}), b.weight("w", {8, 3, 3, 16}, 6)},
                                          {{"layout", std::string("NHWC")}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  const cuda::GeneratedKernel dense = welder_kernel(dense_graph);
  CHECK(dense.path == "generic");
  CHECK(dense.vector_reason.find("sums over channels of no group") != std::string::npos);
  // An NCHW convolution's input is read along W at w o + k: not whole blocks of channels (here
  // unpadded, so every index stays inside): not a grouped window, dense or grouped.
  for (const int64_t groups : {int64_t{1}, int64_t{4}}) {
    INFO("NCHW, groups ", groups);
    ModelBuilder nb(DType::f16);
    const OpGraph nchw = nb.graph(nb.op("Conv", {nb.input("x", {1, 16, 8, 8}), nb.weight("w", {8, 16 / groups, 3, 3}, 6)},
                                        {{"group", groups}}));
    const cuda::GeneratedKernel k2 = welder_kernel(nchw);
    CHECK(k2.path != "vector");
    CHECK(k2.vector_reason.find("a contraction, not a window") != std::string::npos);
  }
}

TEST_CASE("cuda vector: a window's index arithmetic is 32-bit only where every offset it computes fits") {
  // A small depthwise convolution: 32-bit coordinates and offsets.
  const cuda::GeneratedKernel small = welder_kernel(depthwise(DType::f16, 2, 13, 11, 48, 3, 1, 1));
  REQUIRE(small.path == "vector");
  CHECK(small.source.find("const int tsl_n") != std::string::npos);
  // A tiny input under a huge padding (2^27 zeros, stride 2^20): the padded taps' offsets reach
  // 2^33 elements though the tensor holds 128, so the window computes in 64 bits.
  ModelBuilder b(DType::f16);
  const std::string y = b.op("Conv", {b.input("x", {1, 4, 4, 8}), b.weight("w", {1, 1, 1, 8}, 6)},
                             {{"layout", std::string("NHWC")}, {"weight_layout", std::string("HWIO")}, {"group", int64_t{8}},
                              {"strides", std::vector<int64_t>{int64_t{1} << 20, int64_t{1} << 20}},
                              {"pads", std::vector<int64_t>{int64_t{1} << 27, int64_t{1} << 27, int64_t{1} << 27, int64_t{1} << 27}}});
  const cuda::GeneratedKernel huge = welder_kernel(b.graph(y));
  REQUIRE(huge.path == "vector");
  CHECK(huge.source.find("const int tsl_n") == std::string::npos);
  CHECK(huge.source.find("for (long long tsl_k") != std::string::npos);
}

TEST_CASE("cuda vector: groups outside the path keep the generic kernel and say why") {
  // An odd last axis has no vector width.
  const cuda::GeneratedKernel odd = welder_kernel(chain(DType::f16, {4, 7}));
  CHECK(odd.path == "generic");
  CHECK(odd.vector_reason.find("not a multiple of two") != std::string::npos);
  CHECK(odd.source.find("vector kernel not used: " + odd.vector_reason) != std::string::npos);
  // A reduction is not elementwise (here the row path takes it).
  const cuda::GeneratedKernel sm =
      welder_kernel(op_graph("Softmax", {random_f32({4, 32}, 1)}, {{"axis", int64_t{-1}}}));
  CHECK(sm.path == "row");
}

TEST_CASE("cuda vector: kernels of every case compile with NVRTC for sm_90a (welder and roller)") {
  for (const VectorCase& c : vector_cases())
    for (const std::string policy : {"welder", "roller"}) {
      INFO(c.name, " (", policy, ")");
      const Schedule s = schedule_with(c.graph, gpu_spec(), policy);
      int vector = 0;
      for (int i = 0; i < static_cast<int>(s.groups.size()); ++i)
        vector += emit_kernel(c.graph, s, i, gpu_spec()).path == "vector";
      CHECK(vector >= 1);
      CHECK(nvrtc_compile_all(c.graph, s, gpu_spec()) >= 1);
    }
}

TEST_CASE("cuda vector run: vector kernels match the interpreter (chains, broadcasts, transposes, casts, integers)") {
  check_cases_on_gpu(vector_cases());
}
