// The CUDA backend on a GPU: compiled kernels against the reference interpreter for every operator
// family, odd sizes (1 and primes), f16/bf16/f32/integer dtypes, the global-scratch fallback, the
// status word, and every bundled model under the welder and roller schedules. Without a GPU every
// case prints "[SKIP] no CUDA device" and passes.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>

#include "../temp_dir.h"
#include "cuda_check.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

HostTensor random_of(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  const bool fp = is_float(dt);
  return random_uniform(dt, std::move(shape), seed, fp ? -1.0 : -9.0, fp ? 1.0 : 9.0);
}

/// On a GPU: compiled vs the interpreter under both policies. Without one: the graph is still
/// built, scheduled and every kernel compiled with NVRTC, so the case tests what it can.
void check_op_on_gpu(const std::string& op, const std::vector<HostTensor>& inputs, std::map<std::string, AttrValue> attrs = {},
                     const std::set<int>& constant_inputs = {}) {
  std::vector<HostTensor> model_inputs;
  const OpGraph g = op_graph(op, inputs, std::move(attrs), constant_inputs, &model_inputs);
  const bool gpu = !find_backend("cuda")->unavailable();
  for (const std::string policy : {"welder", "roller"}) {
    INFO(op, " ", inputs[0].type().print(), " (", policy, ")");
    if (gpu) check_on_gpu(g, policy, model_inputs);
    else CHECK(nvrtc_compile_all(g, schedule_with(g, gpu_spec(), policy), gpu_spec()) >= 1);
  }
}

/// Prints the skip line once per case when there is no GPU; the case goes on compiling only.
bool gpu_or_compile_only() {
  if (gpu_available()) return true;
  MESSAGE("[SKIP] no CUDA device: running compile-only (NVRTC) checks of this case");
  return false;
}

}  // namespace

TEST_CASE("cuda run: elementwise, every unary and binary family, odd sizes") {
  gpu_or_compile_only();
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {3, 5, 17}, {127, 131}}) {
    check_op_on_gpu("Add", {random_f32(shape, 1), random_f32({shape.back()}, 2)});
    for (const char* op : {"Exp", "Tanh", "Erf", "Sigmoid", "Relu", "Abs", "Neg", "Floor", "Round", "Sign", "Sin", "Gelu", "Silu"})
      check_op_on_gpu(op, {random_f32(shape, 3)});
    for (const char* op : {"Sub", "Mul", "Div", "Max", "Min", "Pow"}) check_op_on_gpu(op, {random_f32(shape, 4), random_f32(shape, 5)});
  }
  check_op_on_gpu("Sqrt", {materialize_random(TensorType{DType::f32, {37}}, RandomInit{RandomInit::Dist::uniform, 0.1, 4, 1})});
  check_op_on_gpu("Where", {tensor(DType::boolean, {4}, {1, 0, 0, 1}), random_f32({4}, 1), random_f32({4}, 2)});
  check_op_on_gpu("Greater", {random_f32({5, 3}, 1), random_f32({5, 3}, 2)});
  check_op_on_gpu("Clip", {random_f32({33}, 1), tensor(DType::f32, {}, {-0.5}), tensor(DType::f32, {}, {0.25})}, {}, {1, 2});
}

TEST_CASE("cuda run: integer semantics (div, mod, casts with wrapping)") {
  gpu_or_compile_only();
  for (DType dt : {DType::i32, DType::i64, DType::i8}) {
    const HostTensor a = random_of(dt, {41}, 1);
    HostTensor b = random_of(dt, {41}, 2);
    check_op_on_gpu("Mod", {a, b});
    check_op_on_gpu("Mod", {a, b}, {{"fmod", int64_t{1}}});
    check_op_on_gpu("Div", {a, b});
    check_op_on_gpu("Mul", {a, b});
  }
  check_op_on_gpu("Cast", {tensor(DType::f32, {6}, {-1.5, 2.7, 300.0, -129.0, 1e10, NAN})}, {{"to", std::string("i8")}});
  check_op_on_gpu("Cast", {tensor(DType::f32, {4}, {-1.5, 2.7, 255.9, 256.0})}, {{"to", std::string("u8")}});
  check_op_on_gpu("Cast", {random_of(DType::i32, {9}, 3)}, {{"to", std::string("f16")}});
}

TEST_CASE("cuda run: i64 values past 2^53 and at the extremes are exact and wrap as the interpreter's do") {
  gpu_or_compile_only();
  constexpr int64_t kTwoTo53 = int64_t{1} << 53;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const auto ints = [](std::vector<int64_t> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return HostTensor::from_integers(TensorType{DType::i64, {n}}, std::move(values));
  };
  // 2^53 + 1 is not a double; kMax + 1 wraps; kMin / -1 is kMin; x / 0 and x % 0 give 0.
  const HostTensor a = ints({kTwoTo53 + 1, kMax, kMin, kMin, 7, -7, kTwoTo53 + 3, int64_t{1} << 62});
  const HostTensor b = ints({1, 1, -1, 0, 0, 2, -2, 4});
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Max"}) check_op_on_gpu(op, {a, b});
  check_op_on_gpu("ReduceSum", {ints({kTwoTo53, 1, 1, 1, kMax, 2}), i64({1}, {0})}, {{"keepdims", int64_t{0}}}, {1});
  check_op_on_gpu("Cast", {tensor(DType::f32, {6}, {-1.5, 1e30, -1e30, 9.0e15, NAN, 3.0})}, {{"to", std::string("i64")}});
  check_op_on_gpu("Cast", {a}, {{"to", std::string("f32")}});
}

TEST_CASE("cuda run: i64 constants past 2^53 are exact literals (a pad value, a body constant, INT64_MIN)") {
  const bool gpu = gpu_or_compile_only();
  constexpr int64_t kTwoTo53 = int64_t{1} << 53, kTwoTo62 = int64_t{1} << 62;
  const auto ints = [](std::vector<int64_t> shape, std::vector<int64_t> values) {
    return HostTensor::from_integers(TensorType{DType::i64, std::move(shape)}, std::move(values));
  };
  // A constant of a kernel was a double: 2^62 + 1 became the literal 4611686018427387904LL.
  const std::vector<HostTensor> pad_inputs = {ints({5}, {3, -1, kTwoTo53 + 1, 0, 7}), ints({2}, {1, 2}), ints({}, {kTwoTo62 + 1})};
  check_op_on_gpu("Pad", pad_inputs, {}, {1, 2});
  const OpGraph padded = op_graph("Pad", pad_inputs, {}, {1, 2});
  for (const std::string policy : {"welder", "roller"}) {
    CAPTURE(policy);
    CHECK(last_kernel(padded, policy).source.find("4611686018427387905LL") != std::string::npos);
  }
  // An add of a scalar weight reads the weight from memory: its value is exact in the tensor.
  check_op_on_gpu("Add", {ints({9}, {0, 1, -1, kTwoTo53, kTwoTo62, 5, 6, 7, 8}), ints({}, {kTwoTo53 + 1})}, {}, {1});
  // A ConstantOfShape kept as a node (folding off) holds its fill in the body.
  LowerOptions keep_nodes;
  keep_nodes.fold_limit_elements = 0;
  const std::vector<std::pair<int64_t, std::string>> fills = {{kTwoTo53 + 1, "9007199254740993LL"},
                                                              {std::numeric_limits<int64_t>::min(), "(-9223372036854775807LL - 1)"}};
  for (const auto& entry : fills) {
    // (Not a structured binding: clang does not let CAPTURE's lambda capture one.)
    const int64_t fill = entry.first;
    const std::string& literal = entry.second;
    CAPTURE(fill);
    const OpGraph g = lower_model(single_op_model("ConstantOfShape", {ints({1}, {37})}, {{"value", ints({1}, {fill})}}, 1, {0}), keep_nodes);
    REQUIRE(g.num_nodes() == 1);
    for (const std::string policy : {"welder", "roller"}) {
      CAPTURE(policy);
      CHECK(last_kernel(g, policy).source.find(literal) != std::string::npos);
      if (gpu) check_on_gpu(g, policy);
      else CHECK(nvrtc_compile_all(g, schedule_with(g, gpu_spec(), policy), gpu_spec()) >= 1);
    }
  }
}

TEST_CASE("cuda run: f16 and bf16 (computed in f32, rounded on store)") {
  gpu_or_compile_only();
  for (DType dt : {DType::f16, DType::bf16}) {
    check_op_on_gpu("Add", {random_of(dt, {3, 19}, 1), random_of(dt, {19}, 2)});
    check_op_on_gpu("Gelu", {random_of(dt, {5, 23}, 3)});
    check_op_on_gpu("MatMul", {random_of(dt, {17, 40}, 4), random_of(dt, {40, 24}, 5)});
    check_op_on_gpu("MatMul", {random_of(dt, {64, 128}, 4), random_of(dt, {128, 96}, 5)});
    check_op_on_gpu("Softmax", {random_of(dt, {6, 77}, 6)}, {{"axis", int64_t{-1}}});
    check_op_on_gpu("LayerNormalization", {random_of(dt, {4, 96}, 7), random_of(dt, {96}, 8), random_of(dt, {96}, 9)},
                    {{"axis", int64_t{-1}}});
  }
}

TEST_CASE("cuda run: contractions (matmul, batched, conv with padding, stride, dilation, groups)") {
  gpu_or_compile_only();
  check_op_on_gpu("MatMul", {random_f32({1, 1}, 1), random_f32({1, 1}, 2)});
  check_op_on_gpu("MatMul", {random_f32({13, 37}, 1), random_f32({37, 29}, 2)});
  check_op_on_gpu("MatMul", {random_f32({2, 3, 31, 7}, 1), random_f32({2, 3, 7, 11}, 2)});
  check_op_on_gpu("MatMul", {random_f32({64, 256}, 1), random_f32({256, 192}, 2)});
  check_op_on_gpu("Gemm", {random_f32({9, 5}, 1), random_f32({7, 5}, 2), random_f32({7}, 3)}, {{"transB", int64_t{1}}}, {1, 2});
  check_op_on_gpu("Conv", {random_f32({2, 3, 11, 11}, 1), random_f32({5, 3, 3, 3}, 2)},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}}, {1});
  check_op_on_gpu("Conv", {random_f32({1, 4, 9, 9}, 1), random_f32({4, 1, 3, 3}, 2)},
                  {{"group", int64_t{4}}, {"dilations", std::vector<int64_t>{2, 2}}}, {1});
}

TEST_CASE("cuda run: reductions, softmax, layernorm, pooling, argmax") {
  gpu_or_compile_only();
  check_op_on_gpu("Softmax", {random_f32({7, 33}, 1)}, {{"axis", int64_t{-1}}});
  check_op_on_gpu("Softmax", {random_f32({3, 4099}, 1)}, {{"axis", int64_t{-1}}});
  check_op_on_gpu("LayerNormalization", {random_f32({5, 768}, 1), random_f32({768}, 2), random_f32({768}, 3)}, {{"axis", int64_t{-1}}});
  check_op_on_gpu("ReduceSum", {random_f32({4, 6, 5}, 1), i64({1}, {1})}, {{"keepdims", int64_t{0}}}, {1});
  check_op_on_gpu("ReduceMean", {random_f32({1, 100003}, 1), i64({1}, {1})}, {}, {1});
  check_op_on_gpu("ReduceMax", {random_f32({2, 9, 13}, 1), i64({2}, {0, 2})}, {}, {1});
  check_op_on_gpu("ReduceProd", {random_f32({3, 7}, 1), i64({1}, {1})}, {}, {1});
  check_op_on_gpu("ArgMax", {random_f32({5, 9}, 1)}, {{"axis", int64_t{1}}});
  check_op_on_gpu("MaxPool", {random_f32({1, 2, 7, 7}, 1)},
                  {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  check_op_on_gpu("AveragePool", {random_f32({2, 3, 8, 8}, 1)},
                  {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  check_op_on_gpu("GlobalAveragePool", {random_f32({2, 5, 7, 7}, 1)});
}

TEST_CASE("cuda run: data movement (transpose, reshape, concat, slice, pad, gather)") {
  gpu_or_compile_only();
  check_op_on_gpu("Transpose", {random_f32({2, 3, 5}, 1)}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  check_op_on_gpu("Reshape", {random_f32({2, 3, 5}, 1), i64({2}, {5, 6})}, {}, {1});
  check_op_on_gpu("Concat", {random_f32({2, 3}, 1), random_f32({2, 5}, 2)}, {{"axis", int64_t{1}}});
  check_op_on_gpu("Slice", {random_f32({9, 8}, 1), i64({1}, {1}), i64({1}, {8}), i64({1}, {0}), i64({1}, {3})}, {}, {1, 2, 3, 4});
  check_op_on_gpu("Pad", {random_f32({3, 4}, 1), i64({4}, {1, 2, 0, 1}), tensor(DType::f32, {}, {0.5})}, {}, {1, 2});
  check_op_on_gpu("Gather", {random_f32({10, 4}, 1), i64({3}, {2, -1, 9})}, {{"axis", int64_t{0}}});
}

TEST_CASE("cuda run: an out-of-range gather index is a user error") {
  if (!gpu_available()) return;
  std::vector<HostTensor> model_inputs;
  const OpGraph g = op_graph("Gather", {random_f32({10, 4}, 1), i64({3}, {2, 0, 9})}, {{"axis", int64_t{0}}}, {}, &model_inputs);
  model_inputs[1] = i64({3}, {2, 10, 0});
  const HwSpec& spec = gpu_spec();
  const auto exe = find_backend("cuda")->compile(g, schedule_with(g, spec, "roller"), spec, CompileOptions{});
  CHECK_THROWS_AS(exe->run(model_inputs), UserError);
}

TEST_CASE("cuda run: run_on_queue reads and writes the caller's buffers on the caller's stream") {
  if (!gpu_available()) return;
  // A GEMM whose activation is read through a TMA map (the wgmma family on this spec): the map is
  // encoded again for each new address of the caller's input.
  std::vector<HostTensor> model_inputs;
  const OpGraph g = op_graph("MatMul", {random_of(DType::f16, {256, 512}, 1), random_of(DType::f16, {512, 384}, 2)}, {}, {1},
                             &model_inputs);
  const HwSpec& spec = gpu_spec();
  const auto exe = find_backend("cuda")->compile(g, schedule_with(g, spec, "welder"), spec, CompileOptions{});
  const std::unique_ptr<DeviceContext> ctx = find_backend("cuda")->device_context(0);
  const TensorType& in_type = g.tensor(g.inputs()[0]).type;
  const TensorType& out_type = g.tensor(g.outputs()[0]).type;
  const auto bytes = [](const TensorType& t) { return t.num_elements() * dtype_bytes(t.dtype); };
  for (uint64_t seed : {5, 6}) {
    INFO("caller's buffers ", seed);
    const std::vector<HostTensor> inputs{random_of(DType::f16, {256, 512}, seed)};
    const uint64_t in = ctx->alloc(bytes(in_type)), out = ctx->alloc(bytes(out_type));
    ctx->upload(in, inputs[0]);
    exe->run_on_queue({in}, {out}, ctx->side_stream());  // a stream that is neither the executable's nor the default
    exe->wait_queued();
    const HostTensor got = ctx->download(out, out_type);
    const CompareResult r = compare_compiled(got, interpret(g, inputs)[0], computed_precision(g, g.outputs()[0]));
    INFO(r.message);
    CHECK(r.ok);
  }
  // Its own buffers again afterwards.
  const std::vector<HostTensor> again = exe->run(model_inputs);
  CHECK(compare_compiled(again[0], interpret(g, model_inputs)[0], computed_precision(g, g.outputs()[0])).ok);

  // A kernel's error is raised once the queued run is done.
  std::vector<HostTensor> gather_inputs;
  const OpGraph gg = op_graph("Gather", {random_f32({10, 4}, 1), i64({3}, {2, 0, 9})}, {{"axis", int64_t{0}}}, {}, &gather_inputs);
  const auto gexe = find_backend("cuda")->compile(gg, schedule_with(gg, spec, "roller"), spec, CompileOptions{});
  std::vector<uint64_t> gin;
  for (size_t i = 0; i < gg.inputs().size(); ++i) {
    gin.push_back(ctx->alloc(bytes(gg.tensor(gg.inputs()[i]).type)));
    ctx->upload(gin.back(), i == 1 ? i64({3}, {2, 10, 0}) : gather_inputs[i]);
  }
  const uint64_t gout = ctx->alloc(bytes(gg.tensor(gg.outputs()[0]).type));
  gexe->run_on_queue(gin, {gout}, ctx->stream());
  CHECK_THROWS_AS(gexe->wait_queued(), UserError);
}

TEST_CASE("cuda run: a pool too large for shared memory moves to global scratch") {
  if (!gpu_available()) return;
  const OpGraph g = op_graph("LayerNormalization", {random_f32({6, 1000}, 1), random_f32({1000}, 2), random_f32({1000}, 3)},
                             {{"axis", int64_t{-1}}});
  HwSpec tight = gpu_spec();
  const Schedule schedule = schedule_with(g, tight, "welder");
  tight.limits.smem_per_block_bytes = 64;  // everything staged goes to device memory
  const auto exe = find_backend("cuda")->compile(g, schedule, tight, CompileOptions{});
  const std::vector<HostTensor> inputs = gpu_test_inputs(g, 3);
  const std::vector<HostTensor> got = exe->run(inputs);
  const CompareResult r = compare_compiled(got[0], interpret(g, inputs)[0]);
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("cuda run: timing, peak memory and launches") {
  if (!gpu_available()) return;
  const OpGraph g = bundled_model("bert_base_layer");
  const HwSpec& spec = gpu_spec();
  const Schedule s = schedule_with(g, spec, "welder");
  TempDir cache;
  CompileOptions options;
  options.cache_dir = cache.file("cache");
  const auto exe = find_backend("cuda")->compile(g, s, spec, options);
  CHECK(exe->compile_stats().cache_hits == 0);
  CHECK(exe->launches_per_run() == static_cast<int>(s.groups.size()));
  CHECK(exe->peak_memory_bytes() > 0);
  TimingOptions launches;  // the launches one by one between the events
  launches.warmup = 2;
  launches.repeats = 5;
  launches.graph = false;
  const std::vector<double> t = exe->time(gpu_test_inputs(g, 5), launches);
  REQUIRE(t.size() == 5);
  for (double v : t) CHECK(v > 0);
  // A second compile of the same schedule is served by the cache.
  const auto again = find_backend("cuda")->compile(g, s, spec, options);
  CHECK(again->compile_stats().cache_hits >= 1);
  // The default: the captured CUDA graph replays the same launches; and with the L2 flushed.
  TimingOptions graph;
  graph.warmup = 1;
  graph.repeats = 3;
  const std::vector<double> tg = again->time(gpu_test_inputs(g, 5), graph);
  CHECK(tg.size() == 3);
  graph.cold_cache = true;
  const std::vector<double> cold = again->time(gpu_test_inputs(g, 5), graph);
  REQUIRE(cold.size() == 3);
  for (double v : cold) CHECK(v > 0);
  // Still the same results after timing (the flush buffer is not the arena).
  const std::vector<HostTensor> after = again->run(gpu_test_inputs(g, 5));
  CHECK(!after.empty());
}

TEST_CASE("cuda run: every bundled model matches the interpreter (welder and roller)") {
  if (!gpu_available()) return;
  const HwSpec& spec = gpu_spec();
  for (const std::string& model : bundled_models()) {
    const OpGraph g = bundled_model(model);
    const std::vector<HostTensor> inputs = gpu_test_inputs(g, 17);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<HostTensor> expected = interpret(g, inputs);
    for (const std::string policy : {"welder", "roller"}) {
      const auto exe = find_backend("cuda")->compile(g, schedule_with(g, spec, policy), spec, CompileOptions{});
      const std::vector<HostTensor> got = exe->run(inputs);
      for (size_t o = 0; o < expected.size(); ++o) {
        const CompareResult r = compare_compiled(got[o], expected[o], computed_precision(g, g.outputs()[o]));
        INFO(model, " (", policy, ") output ", o, ": ", r.message);
        CHECK(r.ok);
      }
    }
    std::cout << "  " << model << ": checked in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  }
}
