// The row path of the CUDA backend (kernels/cuda/row_plan.h): which groups take it, how a row is
// spread over threads and vectors, why other groups keep the generic kernel, attention's scores
// fused with their softmax (copies folded, a serial reduction per element); its kernels compile
// with NVRTC, and on a GPU match the interpreter for odd row lengths, several row axes, f16, bf16
// and f32, rows longer than a block, and sinks reducing several axes (an NCHW global pool).
#include <doctest/doctest.h>

#include <limits>

#include "cuda_check.h"
#include "../model_builder.h"
#include "tilegraph/normalize.h"
#include "kernels/cuda/kernel_emitter.h"
#include "kernels/cuda/kernel_families.h"
#include "policy/kernel_families.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

HostTensor random_of(DType dt, std::vector<int64_t> shape, uint64_t seed) { return random_uniform(dt, std::move(shape), seed, -2.0, 2.0); }

cuda::GeneratedKernel welder_kernel(const OpGraph& g) {
  const Schedule s = schedule_with(g, gpu_spec(), "welder");
  REQUIRE(s.groups.size() == 1);
  return emit_kernel(g, s, 0, gpu_spec());
}

/// Welder scheduling as the driver runs it, pricing each group as the CUDA backend's kernel family
/// (a row too long for one block's shared memory fuses only when the policy knows it streams).
Schedule welder_with_families(const OpGraph& g) {
  const cuda::CudaKernelFamilies families;
  AnalyticCostModel cost;
  for (const auto& p : policies())
    if (p->name() == "welder") return schedule_with_families(*p, PolicyContext{g, gpu_spec(), cost}, &families);
  FAIL("no welder policy");
  return {};
}

cuda::GeneratedKernel streamed_kernel(const OpGraph& g) {
  const Schedule s = welder_with_families(g);
  REQUIRE(s.groups.size() == 1);
  return emit_kernel(g, s, 0, gpu_spec());
}

OpGraph softmax(DType dt, std::vector<int64_t> shape) {
  return op_graph("Softmax", {random_of(dt, std::move(shape), 1)}, {{"axis", int64_t{-1}}});
}

OpGraph layernorm(DType dt, std::vector<int64_t> shape) {
  const int64_t n = shape.back();
  return op_graph("LayerNormalization", {random_of(dt, shape, 1), random_of(dt, {n}, 2), random_of(dt, {n}, 3)},
                  {{"axis", int64_t{-1}}});
}

/// softmax(Q^T K * scale) with Q and K stored [batch, s, heads, d] (BERT's heads layout): the
/// transposes are in-group copies, the scores a row node with a serial reduction over d.
OpGraph scores_softmax(DType dt, int64_t batch, int64_t heads, int64_t s, int64_t d) {
  ModelBuilder b(dt);
  const std::string q = b.input("q", {batch, s, heads, d});
  const std::string k = b.input("k", {batch, s, heads, d});
  const std::string qt = b.op("Transpose", {q}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const std::string kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  const std::string scaled = b.op("Mul", {b.op("MatMul", {qt, kt}), b.weight("scale", {}, 5)});
  return b.graph(b.op("Softmax", {scaled}, {{"axis", int64_t{-1}}}));
}

OpGraph log_softmax(DType dt, std::vector<int64_t> shape) {
  return op_graph("LogSoftmax", {random_of(dt, std::move(shape), 1)}, {{"axis", int64_t{-1}}});
}

/// softmax(x + mask) where the mask is -inf at columns up to row + k (Trilu of a -inf fill): each
/// row starts with thousands of -inf values, so many threads of the online pass see only -inf
/// for a while (or throughout) before the row's finite maximum.
OpGraph leading_inf_softmax(DType dt, int64_t rows, int64_t n, int64_t k) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", {rows, n});
  const HostTensor fill(TensorType{dt, {1}}, std::vector<double>{-std::numeric_limits<double>::infinity()});
  const std::string full = b.op("ConstantOfShape", {b.weight_i64("mask_shape", {rows, n})}, {{"value", fill}});
  const std::string mask = b.op("Trilu", {full, b.weight_i64("mask_k", {k}, true)}, {{"upper", int64_t{0}}});
  return b.graph(b.op("Softmax", {b.op("Add", {x, mask})}, {{"axis", int64_t{-1}}}));
}

/// The largest value of each row (ReduceMax over the last axis): a per-row sink.
OpGraph row_max(DType dt, std::vector<int64_t> shape, bool keepdims) {
  return op_graph("ReduceMax", {random_of(dt, std::move(shape), 1), i64({1}, {-1})}, {{"keepdims", int64_t{keepdims}}}, {1});
}

/// GroupNorm's statistics as exporters write them: x [b, c, h, w] reshaped to [b, groups, rest],
/// normalized along the last axis, reshaped back.
OpGraph grouped_norm(DType dt, std::vector<int64_t> shape, int64_t groups) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", shape);
  const std::string grouped = b.op("Reshape", {x, b.weight_i64("to_groups", {shape[0], groups, -1})});
  const std::string norm = b.op("Softmax", {grouped}, {{"axis", int64_t{-1}}});
  std::vector<int64_t> back(shape.begin(), shape.end());
  return b.graph(b.op("Reshape", {norm, b.weight_i64("to_x", back)}));
}

/// GlobalAveragePool of NCHW x: a sink reducing H and W, contiguous in x (a merged row of H W).
OpGraph global_pool(DType dt, std::vector<int64_t> shape) { return op_graph("GlobalAveragePool", {random_of(dt, std::move(shape), 1)}); }

/// The maximum over the last two axes of [b, r, c] without keepdims.
OpGraph max_last_two(DType dt, std::vector<int64_t> shape) {
  return op_graph("ReduceMax", {random_of(dt, std::move(shape), 1), i64({2}, {1, 2})}, {{"keepdims", int64_t{0}}}, {1});
}

/// How many infinities each row of x holds (IsInf, Cast to i64, ReduceSum over the last axis,
/// keepdims):
/// T5's overflow check in fp16, split into rows by the normalize stage (rewrite 2b).
OpGraph inf_count(DType dt, std::vector<int64_t> shape) {
  ModelBuilder b(dt);
  const std::string c = b.op("Cast", {b.op("IsInf", {b.input("x", std::move(shape))})}, {{"to", std::string("i64")}});
  return b.graph(b.op("ReduceSum", {c, b.weight_i64("axes", {-1})}, {{"keepdims", int64_t{1}}}));
}

/// x with every 7th element +inf or -inf.
HostTensor with_infinities(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor x = random_of(dt, std::move(shape), seed);
  std::vector<double> v = x.values();
  for (size_t i = 0; i < v.size(); i += 7) v[i] = (i / 7) % 2 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  return HostTensor(x.type(), std::move(v));
}

}  // namespace

TEST_CASE("cuda row: a sink reducing its input's last dimensions is one row of their product") {
  // An NCHW global average pool over 28 x 28: 32 rows of 784, vectors of 8 halves.
  const cuda::GeneratedKernel k = welder_kernel(global_pool(DType::f16, {4, 8, 28, 28}));
  REQUIRE(k.path == "row");
  CHECK(k.rows->n == 784);
  CHECK(k.rows->rows == 32);
  CHECK(k.rows->row_extents == std::vector<int64_t>{4, 8});
  CHECK(k.rows->vec == 8);
  CHECK(k.rows->nodes.back().reads[0].type.shape == std::vector<int64_t>{4, 8, 784});
  // Without keepdims, odd sizes: scalar accesses.
  const cuda::GeneratedKernel odd = welder_kernel(max_last_two(DType::f32, {6, 13, 11}));
  REQUIRE(odd.path == "row");
  CHECK(odd.rows->n == 143);
  CHECK(odd.rows->vec == 1);
  // Axes read in another order (a transpose before the pool) are not one contiguous row.
  ModelBuilder b(DType::f16);
  const std::string t = b.op("Transpose", {b.input("x", {2, 4, 16, 32})}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  const cuda::GeneratedKernel swapped = welder_kernel(b.graph(b.op("GlobalAveragePool", {t})));
  CHECK(swapped.path != "row");
  CHECK(swapped.row_reason.find("not read as its input's last dimensions in order") != std::string::npos);
  // Fewer columns than a warp: the generic kernel, as for one axis.
  CHECK(welder_kernel(global_pool(DType::f16, {4, 8, 5, 5})).path != "row");
}

TEST_CASE("cuda row: a reshape of the whole input is a view: folded into the row kernel's reads") {
  const OpGraph g = grouped_norm(DType::f16, {2, 8, 6, 10}, 4);  // rows of 2 x 60
  const cuda::GeneratedKernel k = streamed_kernel(g);
  REQUIRE(k.path == "row");
  CHECK(k.rows->rows == 8);
  CHECK(k.rows->n == 120);
  CHECK(k.rows->nodes.front().kind == cuda::RowKind::copy);
  CHECK(k.rows->vec == 8);
  // The input read as [2, 4, 120]: row b, g starts at (b 4 + g) 120.
  CHECK(k.source.find("(tsl_b0) * 480LL + (tsl_b1) * 120LL + (tsl_col0) * 1LL") != std::string::npos);
}

TEST_CASE("cuda row: attention scores fused with their softmax: copies folded, Q K^T summed per element") {
  const OpGraph g = scores_softmax(DType::f16, 2, 3, 40, 64);
  const Schedule s = schedule_with(g, gpu_spec(), "welder");
  REQUIRE(s.groups.size() == 1);
  const cuda::GeneratedKernel k = emit_kernel(g, s, 0, gpu_spec());
  REQUIRE(k.path == "row");
  int copies = 0, rows = 0;
  for (const cuda::RowNode& rn : k.rows->nodes) {
    copies += rn.kind == cuda::RowKind::copy;
    rows += rn.kind == cuda::RowKind::row;
  }
  CHECK(copies == 2);  // both transposes
  CHECK(rows == 3);    // scores, scaled, probs
  CHECK(k.rows->rows == 2 * 3 * 40);
  // The reduction over d reads q and k 8 halves at a time through the composed maps.
  CHECK(k.source.find("tsl::row_load<unsigned short, 8>(tsl_w") != std::string::npos);
  CHECK(nvrtc_compile_all(g, s, gpu_spec()) == 1);
}

TEST_CASE("cuda row: softmax and layer norm groups take the row path, one row in registers") {
  const cuda::GeneratedKernel sm = welder_kernel(softmax(DType::f16, {64, 4096}));
  REQUIRE(sm.path == "row");
  REQUIRE(sm.rows);
  CHECK(sm.rows->rows == 64);
  CHECK(sm.rows->n == 4096);
  CHECK(sm.rows->vec == 8);  // 16-byte vectors of f16
  CHECK(sm.rows->lanes == 256);
  CHECK(sm.rows->chunks == 2);
  CHECK(sm.plan.threads == 256);
  CHECK(sm.plan.blocks == 64);
  // The input row is loaded once and reused by the max, the sum and the output.
  CHECK(sm.source.find("tsl_g1[") == std::string::npos);
  CHECK(sm.source.find("tsl::row_store<unsigned short, 8>") != std::string::npos);

  // f32 rows of 768 (BERT): 4-element vectors, 128 lanes... 96 lanes rounded up; two rows per block.
  const cuda::GeneratedKernel ln = welder_kernel(layernorm(DType::f32, {5, 768}));
  REQUIRE(ln.path == "row");
  CHECK(ln.rows->vec == 4);
  CHECK(ln.rows->lanes == 128);
  CHECK(ln.rows->chunks == 2);
  CHECK(ln.rows->rows_per_block == 2);
  CHECK(ln.plan.blocks == 3);
  // A short row of scalar accesses: one warp, several accesses per lane (ViT's 197 scores).
  const cuda::GeneratedKernel vit = welder_kernel(softmax(DType::f16, {6, 197}));
  REQUIRE(vit.path == "row");
  CHECK(vit.rows->vec == 1);
  CHECK(vit.rows->lanes == 32);
  CHECK(vit.rows->chunks == 7);
  CHECK(vit.rows->rows_per_block == 8);
  // A layer norm of 1280 halves (SD UNet, Whisper) stays in registers: 160 vectors over 128 lanes.
  const cuda::GeneratedKernel wide = welder_kernel(layernorm(DType::f16, {6, 1280}));
  REQUIRE(wide.path == "row");
  CHECK_FALSE(wide.rows->streamed);
  CHECK(wide.rows->lanes == 128);

  // An odd row length: scalar accesses, the last chunk partly past the row.
  const cuda::GeneratedKernel odd = welder_kernel(softmax(DType::f32, {7, 33}));
  REQUIRE(odd.path == "row");
  CHECK(odd.rows->vec == 1);
  CHECK(odd.rows->lanes == 32);
  CHECK(odd.rows->chunks == 2);
  CHECK(odd.source.find("tsl_col0 < 33LL") != std::string::npos);

  // Several row axes: rows are the product of all axes but the last.
  const cuda::GeneratedKernel three = welder_kernel(softmax(DType::f16, {2, 3, 40}));
  REQUIRE(three.path == "row");
  CHECK(three.rows->rows == 6);
  CHECK(three.rows->vec == 8);
}

TEST_CASE("cuda row: groups outside the row path say why") {
  auto reason = [](const OpGraph& g, const std::string& policy = "welder") {
    const Schedule s = schedule_with(g, gpu_spec(), policy);
    const cuda::GeneratedKernel k = emit_kernel(g, s, static_cast<int>(s.groups.size()) - 1, gpu_spec());
    CHECK(k.path != "row");  // elementwise groups take the vector path (cuda_vector_test.cpp)
    CHECK(k.source.find("row kernel not used: " + k.row_reason) != std::string::npos);
    return k.row_reason;
  };
  CHECK(reason(op_graph("Tanh", {random_f32({8, 64}, 1)})).find("no node reduces a row") != std::string::npos);
  // Roller's softmax is one kernel per node; the last one only divides.
  CHECK(reason(softmax(DType::f32, {4, 64}), "roller").find("no node reduces a row") != std::string::npos);
  // A reduction over the first axis is not a row reduction.
  CHECK(reason(op_graph("Softmax", {random_f32({6, 10}, 1)}, {{"axis", int64_t{0}}})).find("neither elementwise") != std::string::npos);
  // A row too long for registers is streamed, unless a row node reduces serially per element (it
  // would be recomputed in every pass): with one thread per block, a row of 40 f16 scores needs 40
  // elements per thread.
  const OpGraph g = scores_softmax(DType::f16, 2, 3, 40, 64);
  const Schedule s = schedule_with(g, gpu_spec(), "welder");
  REQUIRE(s.groups.size() == 1);
  HwSpec narrow = gpu_spec();
  narrow.limits.max_threads_per_block = 1;
  const cuda::GroupPlan generic = cuda::plan_group(g, s.groups[0].group, narrow);
  const cuda::RowMatch m = cuda::plan_rows(g, s.groups[0].group, generic, narrow);
  CHECK_FALSE(m.plan);
  CHECK(m.reason.find("needs 40 registers per thread") != std::string::npos);
  CHECK(m.reason.find("reduces serially per element") != std::string::npos);
  // A row's maximum over 7 values: one thread per row (the generic kernel) is faster.
  const OpGraph short_rows = row_max(DType::f16, {64, 7}, true);
  const Schedule ss = schedule_with(short_rows, gpu_spec(), "welder");
  const cuda::GeneratedKernel k = emit_kernel(short_rows, ss, 0, gpu_spec());
  CHECK(k.path != "row");
  CHECK(k.row_reason.find("reduces rows of 7, fewer than a warp's 32 threads") != std::string::npos);
  // Integer rows are summed (exact in 64 bits, in any order), not multiplied.
  const OpGraph ints = op_graph("ReduceProd", {i64({4, 64}, std::vector<double>(256, 1.0)), i64({1}, {-1})}, {}, {1});
  const cuda::GeneratedKernel ik = emit_kernel(ints, schedule_with(ints, gpu_spec(), "welder"), 0, gpu_spec());
  CHECK(ik.path != "row");
  CHECK(ik.row_reason.find("reduces rows of i64 other than by a sum, max or min") != std::string::npos);
  const OpGraph sums = op_graph("ReduceSum", {i64({4, 64}, std::vector<double>(256, 1.0)), i64({1}, {-1})}, {}, {1});
  CHECK(emit_kernel(sums, schedule_with(sums, gpu_spec(), "welder"), 0, gpu_spec()).path == "row");
  const OpGraph infs = inf_count(DType::f16, {8, 128, 512});
  const Schedule fs = welder_with_families(infs);
  REQUIRE(fs.groups.size() == 1);  // IsInf and Cast are row nodes of the row kernel
  const cuda::GeneratedKernel fk = emit_kernel(infs, fs, 0, gpu_spec());
  CHECK(fk.path == "row");
  // Fewer rows than SMs: a float row splits over a cluster, an integer one does not (a cluster's
  // parts combine floats only).
  for (const bool integer : {true, false}) {
    INFO("integer rows: ", integer);
    const OpGraph few = integer ? inf_count(DType::f16, {3, 100000})
                                : op_graph("ReduceSum", {random_of(DType::f16, {3, 100000}, 1), i64({1}, {-1})}, {}, {1});
    const Schedule ws = welder_with_families(few);
    const cuda::GeneratedKernel k = emit_kernel(few, ws, static_cast<int>(ws.groups.size()) - 1, gpu_spec());
    REQUIRE(k.rows);
    CHECK((k.rows->splits > 1) == !integer);
  }
}


/// Rows that take the streamed form, and row maxima as sinks (held and streamed).
std::vector<OpGraph> long_rows() {
  std::vector<OpGraph> out;
  out.push_back(softmax(DType::f16, {64, 50257}));
  out.push_back(softmax(DType::bf16, {40, 50257}));
  out.push_back(softmax(DType::f32, {48, 40001}));
  out.push_back(layernorm(DType::bf16, {64, 65536}));
  out.push_back(row_max(DType::f16, {16, 32000}, false));
  out.push_back(row_max(DType::bf16, {6, 50257}, true));
  out.push_back(row_max(DType::f32, {5, 70000}, false));
  out.push_back(grouped_norm(DType::f16, {2, 8, 6, 10}, 4));
  out.push_back(grouped_norm(DType::bf16, {2, 320, 16, 16}, 32));
  out.push_back(log_softmax(DType::f16, {7, 50257}));
  out.push_back(log_softmax(DType::f32, {3, 33003}));
  out.push_back(layernorm(DType::bf16, {5, 40001}));
  out.push_back(softmax(DType::f16, {8, 50257}));
  out.push_back(softmax(DType::bf16, {2, 256000}));
  return out;
}

/// Online softmaxes whose rows start with -inf (the mask's kernel runs before the row kernel).
std::vector<OpGraph> leading_inf_rows() {
  return {leading_inf_softmax(DType::f16, 8, 50257, 5000), leading_inf_softmax(DType::f32, 150, 40001, 3000)};
}

TEST_CASE("cuda row: rows longer than registers hold are streamed, a pass per reduction and per stored node") {
  // GPT-2's vocabulary softmax: rows of 50257 halves, one block per row. The length is odd, so
  // each row's vectors start at its first aligned column (shifted), the few columns outside
  // them one at a time.
  const cuda::GeneratedKernel sm = streamed_kernel(softmax(DType::f16, {64, 50257}));
  REQUIRE(sm.path == "row");
  CHECK(sm.rows->streamed);
  CHECK(sm.rows->shifted);
  CHECK(sm.rows->vec == 8);
  CHECK(sm.rows->lanes == 1024);
  CHECK(sm.rows->rows_per_block == 1);
  // 64 rows on 132 SMs: each row split over a cluster of 2 blocks.
  CHECK(sm.rows->splits == 2);
  CHECK(sm.rows->chunks == 4);   // ceil(ceil(50257 / 8) / (1024 x 2))
  CHECK(sm.plan.cluster_blocks == 2);
  // The max and the sum of exponentials in one online pass, then the output.
  CHECK(sm.rows->passes == 2);
  CHECK(sm.rows->online_max >= 0);
  CHECK(sm.rows->online_sum > sm.rows->online_max);
  CHECK(sm.source.find("streamed: the row walked in 2 passes") != std::string::npos);
  CHECK(sm.source.find("sum of exponentials in one pass (online)") != std::string::npos);
  CHECK(sm.source.find("if (tsl_mn != tsl_m) tsl_acc") != std::string::npos);
  CHECK(sm.source.find("const long long tsl_h = (8LL - (tsl_row * 50257LL) % 8LL) % 8LL;") != std::string::npos);
  CHECK(sm.source.find("tsl::row_load<unsigned short, 8>(tsl_g0 + 0") != std::string::npos);
  CHECK(sm.source.find("tsl::row_store<unsigned short, 8>(") != std::string::npos);
  CHECK(sm.source.find("if (tsl_active && tsl_lane < tsl_rest)") != std::string::npos);
  // A layer norm's scale and bias [n] are the same for every row (not the rows' layout): read one
  // element at a time inside the vectors of x.
  const cuda::GeneratedKernel odd_ln = streamed_kernel(layernorm(DType::bf16, {5, 40001}));
  REQUIRE(odd_ln.path == "row");
  CHECK(odd_ln.rows->shifted);
  CHECK(odd_ln.source.find("tsl::row_load<unsigned short, 8>(tsl_g0 + 0") != std::string::npos);
  CHECK(odd_ln.source.find("tsl_g1") == std::string::npos);
  CHECK(odd_ln.rows->online_max == -1);  // a mean and a variance: nothing to merge
  CHECK(odd_ln.rows->passes == 3);
  // Whole vectors need no shift.
  CHECK_FALSE(streamed_kernel(softmax(DType::f16, {4, 50256})).rows->shifted);
  // An aligned long row: 16-byte vectors per chunk, loaded again in each pass.
  const cuda::GeneratedKernel ln = streamed_kernel(layernorm(DType::bf16, {64, 65536}));
  REQUIRE(ln.path == "row");
  CHECK(ln.rows->streamed);
  CHECK(ln.rows->vec == 8);
  CHECK(ln.rows->chunks == 4);  // 8192 vectors over 2 blocks of 1024 threads
  // A decoding step's 8 rows: a cluster of 8 blocks per row, 256 threads each (2 vector accesses
  // per thread at least); the cluster combines the reductions through distributed shared memory.
  const cuda::GeneratedKernel few = streamed_kernel(softmax(DType::f16, {8, 50257}));
  REQUIRE(few.path == "row");
  CHECK(few.rows->splits == 8);
  CHECK(few.rows->lanes == 256);
  CHECK(few.rows->blocks == 64);
  CHECK(few.source.find("tsl::mma::cluster_load(tsl_part_v, tsl_r)") != std::string::npos);
  CHECK(few.source.find("__cluster_dims__(8, 1, 1)") != std::string::npos);
  // Rows starting with -inf: the online sum restarts at 0 when the maximum leaves -inf (its
  // terms exp(-inf - -inf) would be NaN), and a thread that saw only -inf adds 0.
  {
    const OpGraph g = leading_inf_softmax(DType::f16, 8, 50257, 5000);
    const Schedule s = welder_with_families(g);
    int online = 0;
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
      const cuda::GeneratedKernel k = emit_kernel(g, s, i, gpu_spec());
      if (k.path != "row" || !k.rows->streamed) continue;
      ++online;
      CHECK(k.rows->online_max >= 0);
      CHECK(k.source.find("(tsl_m == -tsl::inf_f32() ? static_cast<float>(0) : tsl_acc") != std::string::npos);
    }
    CHECK(online == 1);
  }
  // The recorded row family names shifted, online and splits only when they are not the default,
  // so schedules saved before those forms still match a held row's plan.
  const std::map<std::string, int64_t> held = cuda::family_params(*streamed_kernel(softmax(DType::f16, {64, 4096})).rows);
  CHECK(held.size() == 7);
  CHECK(held.count("splits") == 0);
  // As many rows as SMs: no split.
  CHECK(streamed_kernel(softmax(DType::f16, {200, 50257})).rows->splits == 1);
  CHECK(ln.source.find("tsl::row_load<unsigned short, 8>(tsl_g0 + 0") != std::string::npos);
  // A row's maximum as the sink, in registers when it fits and streamed when not; with or
  // without keepdims.
  for (bool keep : {false, true}) {
    const cuda::GeneratedKernel held = streamed_kernel(row_max(DType::f16, {16, 32000}, keep));
    REQUIRE(held.path == "row");
    CHECK_FALSE(held.rows->streamed);
    CHECK(held.rows->per_row_sink());
    CHECK(held.rows->rows == 16);
    const cuda::GeneratedKernel streamed = streamed_kernel(row_max(DType::bf16, {6, 50257}, keep));
    REQUIRE(streamed.path == "row");
    CHECK(streamed.rows->streamed);
    CHECK(streamed.rows->passes == 1);
  }
}

TEST_CASE("cuda row: row kernels compile with NVRTC for sm_90a") {
  const HwSpec& spec = gpu_spec();
  for (const OpGraph& g : {softmax(DType::f16, {64, 4096}), softmax(DType::f32, {7, 33}), softmax(DType::bf16, {3, 5, 96}),
                           layernorm(DType::f16, {9, 1000}), layernorm(DType::f32, {5, 768}),
                           scores_softmax(DType::f32, 1, 2, 33, 20), scores_softmax(DType::bf16, 2, 1, 17, 7),
                           global_pool(DType::f16, {4, 8, 28, 28}), max_last_two(DType::f32, {6, 13, 11}),
                           inf_count(DType::f16, {8, 128, 512}), inf_count(DType::bf16, {3, 1000})}) {
    const Schedule s = schedule_with(g, spec, "welder");
    CHECK(nvrtc_compile_all(g, s, spec) >= 1);
  }
  for (const OpGraph& g : long_rows()) CHECK(nvrtc_compile_all(g, welder_with_families(g), spec) == 1);
  for (const OpGraph& g : leading_inf_rows()) CHECK(nvrtc_compile_all(g, welder_with_families(g), spec) >= 1);
}

TEST_CASE("cuda row run: row kernels match the interpreter") {
  if (!gpu_available()) {
    MESSAGE("[SKIP] no CUDA device: the row kernels were compiled by the case above");
    return;
  }
  for (const OpGraph& g : {softmax(DType::f16, {64, 4096}), softmax(DType::f32, {7, 33}), softmax(DType::bf16, {3, 5, 96}),
                           softmax(DType::f16, {5, 11000}), layernorm(DType::f16, {9, 1000}), layernorm(DType::f32, {5, 768}),
                           layernorm(DType::f32, {300, 31}), scores_softmax(DType::f16, 2, 3, 40, 64),
                           scores_softmax(DType::f32, 1, 2, 33, 20), scores_softmax(DType::bf16, 2, 1, 17, 7),
                           global_pool(DType::f16, {4, 8, 28, 28}), global_pool(DType::bf16, {2, 3, 64, 64}),
                           max_last_two(DType::f32, {6, 13, 11})}) {
    INFO(g.tensor(g.inputs()[0]).type.print());
    check_on_gpu(g, "welder", gpu_test_inputs(g, 7));
  }
  // Integer rows: infinities counted per row; and T5's overflow check as the normalize stage
  // gives it to the GPU (rewrite 2b: the whole activation's count as rows, then their sum).
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 128, 512}, std::vector<int64_t>{3, 1000}}) {
    const OpGraph g = inf_count(DType::f16, shape);
    INFO(g.tensor(g.inputs()[0]).type.print(), " (infinities counted)");
    check_schedule_on_gpu(g, gpu_spec(), welder_with_families(g), {with_infinities(DType::f16, shape, 3)});
  }
  {
    std::vector<double> v(4200);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 100003) - 5e4;
    const HostTensor x = i64({6, 700}, std::move(v));
    const OpGraph g = op_graph("ReduceMax", {x, i64({1}, {-1})}, {}, {1});
    INFO("i64 row maxima");
    check_on_gpu(g, "welder", {x});
  }
  {
    ModelBuilder b(DType::f16);
    const std::string h = b.input("h", {8, 128, 512});
    const std::string count = b.op("ReduceSum", {b.op("Cast", {b.op("IsInf", {h})}, {{"to", std::string("i64")}})}, {{"keepdims", int64_t{0}}});
    const std::string bound = b.op("Where", {b.op("Greater", {count, b.weight_i64("zero", {0}, true)}), b.weight("lo", {}, 1, 100, 101),
                                             b.weight("hi", {}, 2, 200, 201)});
    const ModelDef m = b.model({b.op("Clip", {h, b.op("Neg", {bound}), bound})});
    NormalizeOptions options;
    options.split_full_reductions = true;
    NormalizeReport report;
    const OpGraph g = lower_model(normalize_model(m, lower_model(m), options, &report));
    REQUIRE(report.reductions_split == 1);
    INFO("T5's overflow check, split");
    for (const bool infinite : {true, false})
      check_schedule_on_gpu(g, gpu_spec(), welder_with_families(g),
                            {infinite ? with_infinities(DType::f16, {8, 128, 512}, 5) : random_of(DType::f16, {8, 128, 512}, 5)});
  }
  for (const OpGraph& g : long_rows()) {
    INFO(g.tensor(g.inputs()[0]).type.print(), " (streamed)");
    const Schedule s = welder_with_families(g);
    REQUIRE(s.groups.size() == 1);
    check_schedule_on_gpu(g, gpu_spec(), s, gpu_test_inputs(g, 7));
  }
  for (const OpGraph& g : leading_inf_rows()) {
    INFO(g.tensor(g.inputs()[0]).type.print(), " (streamed, leading -inf)");
    check_schedule_on_gpu(g, gpu_spec(), welder_with_families(g), gpu_test_inputs(g, 7));
  }
}
