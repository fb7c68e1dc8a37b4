// The normalize stage (tilegraph/normalize.h): the view clean-ups around attention,
// BatchNormalization folding and channels-last convolutions keep what the model computes -- each
// rewritten model is interpreted and compared with the model as imported -- and rewrite what they
// promise.
#include <cmath>

#include <doctest/doctest.h>

#include "../model_builder.h"
#include "../schedule_util.h"
#include "../test_util.h"
#include "driver/compile.h"
#include "tilegraph/compare.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/normalize.h"

namespace tessel::testing {
namespace {

/// conv -> BN, with per-channel BN parameters (variance in [0.5, 1.5)).
std::string conv_bn(ModelBuilder& b, const std::string& x, const std::string& name, int64_t cin, int64_t cout, int64_t k,
                    int64_t stride, bool bias, uint64_t seed) {
  std::vector<std::string> in = {x, b.weight(name + "_w", {cout, cin, k, k}, seed)};
  if (bias) in.push_back(b.weight(name + "_b", {cout}, seed + 1));
  const std::string y = b.op("Conv", in, {{"kernel_shape", std::vector<int64_t>{k, k}},
                                          {"pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2}},
                                          {"strides", std::vector<int64_t>{stride, stride}}});
  return b.op("BatchNormalization", {y, b.weight(name + "_g", {cout}, seed + 2, 0.5, 1.5), b.weight(name + "_beta", {cout}, seed + 3),
                                     b.weight(name + "_mean", {cout}, seed + 4), b.weight(name + "_var", {cout}, seed + 5, 0.5, 1.5)},
              {{"epsilon", 1e-3}});
}

/// A small NCHW CNN: convolutions with BN (one without a conv before it's BN), ReLU, PRelu, max and
/// average pooling, a residual add, a concat along the channels, global pooling and a classifier.
ModelDef small_cnn() {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {2, 3, 12, 12});
  std::string h = b.op("Relu", {conv_bn(b, x, "c1", 3, 8, 3, 1, false, 10)});
  h = b.op("MaxPool", {h}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  const std::string r = conv_bn(b, h, "c2", 8, 8, 3, 1, true, 20);
  h = b.op("PRelu", {b.op("Add", {r, h}), b.weight("slope", {8, 1, 1}, 30, 0.1, 0.3)});
  const std::string side = b.op("Conv", {h, b.weight("c3_w", {4, 8, 1, 1}, 40)}, {{"kernel_shape", std::vector<int64_t>{1, 1}}});
  h = b.op("Concat", {h, side}, {{"axis", int64_t{1}}});  // 12 channels
  h = b.op("AveragePool", {h}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  h = b.op("BatchNormalization", {h, b.weight("bn_g", {12}, 50, 0.5, 1.5), b.weight("bn_b", {12}, 51), b.weight("bn_m", {12}, 52),
                                  b.weight("bn_v", {12}, 53, 0.5, 1.5)});
  h = b.op("Flatten", {b.op("GlobalAveragePool", {h})});
  return b.model({b.op("Gemm", {h, b.weight("fc", {12, 5}, 60)})});
}

void check_same_outputs(const ModelDef& original, const ModelDef& normalized, uint64_t seed) {
  const OpGraph a = lower_model(original), b = lower_model(normalized);
  std::vector<HostTensor> inputs;
  for (TensorId t : a.inputs()) inputs.push_back(random_uniform(a.tensor(t).type.dtype, a.tensor(t).type.shape, seed++));
  const std::vector<HostTensor> want = interpret(a, inputs), got = interpret(b, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].shape() == want[i].shape());
    const CompareResult r = compare_tensors(got[i], want[i]);
    CHECK_MESSAGE(r.ok, "output ", i, ": ", r.message);
  }
}


/// `model` through compile() for shipped spec `spec` (its backend) up to stage `last`.
Compilation compiled_for(const ModelDef& model, const std::string& spec, Stage last) {
  CompileRequest r;
  r.model = &model;
  r.backend.clear();
  r.spec = shipped_spec(spec);
  r.last = last;
  return compile(r);
}

/// `model` compiled for the H100 spec up to the schedule: how many groups take each kernel family.
std::map<std::string, int> h100_families(const ModelDef& model) {
  std::map<std::string, int> n;
  for (const ScheduleGroup& g : compiled_for(model, "nvidia-h100-sxm", Stage::schedule).schedule.groups) ++n[g.group.kernel.family];
  return n;
}
int tensor_core_groups(std::map<std::string, int> families) { return families["mma"] + families["wgmma"]; }

/// Self-attention as PyTorch's TorchScript exporter writes nn.MultiheadAttention(batch_first=True)
/// (torchvision's ViT): the tokens transposed to [S, B, E], one packed input projection, the
/// unflatten / unsqueeze / transpose / squeeze of the packed Q, K, V, a Gather of each, views
/// through [S, B * H, d] to [B, H, S, d], sqrt(scale) on Q and on the transposed K, the output
/// transposed and merged for the output projection (a Gemm), viewed and transposed back.
ModelDef torch_mha(DType dt, int64_t B, int64_t S, int64_t H, int64_t d) {
  ModelBuilder b(dt);
  const int64_t E = H * d;
  const std::string x = b.input("x", {B, S, E});
  auto perm = [](std::vector<int64_t> p) { return std::map<std::string, AttrValue>{{"perm", p}}; };
  std::string t = b.op("Transpose", {x}, perm({1, 0, 2}));
  t = b.op("Add", {b.op("MatMul", {t, b.weight("w_in", {E, 3 * E}, 1, -0.2, 0.2)}), b.weight("b_in", {3 * E}, 2, -0.1, 0.1)});
  t = b.op("Reshape", {t, b.weight_i64("unflatten", {S, B, 3, E})});
  t = b.op("Unsqueeze", {t, b.weight_i64("axes0", {0})});
  t = b.op("Transpose", {t}, perm({3, 1, 2, 0, 4}));
  t = b.op("Squeeze", {t, b.weight_i64("axes3", {3})});  // [3, S, B, E]
  std::vector<std::string> qkv;
  for (int i = 0; i < 3; ++i) {
    std::string h = b.op("Gather", {t, b.weight_i64(cat("index", i), {i}, true)}, {{"axis", int64_t{0}}});
    h = b.op("Reshape", {h, b.weight_i64(cat("sbh", i), {S, B * H, d})});
    h = b.op("Transpose", {h}, perm({1, 0, 2}));
    qkv.push_back(b.op("Reshape", {h, b.weight_i64(cat("bhsd", i), {B, H, S, d})}));
  }
  const std::string root_scale = b.weight("root_scale", {}, 3, 0.3, 0.4);
  const std::string q = b.op("Mul", {qkv[0], root_scale});
  const std::string k = b.op("Mul", {b.op("Transpose", {qkv[1]}, perm({0, 1, 3, 2})), root_scale});
  const std::string p = b.op("Softmax", {b.op("MatMul", {q, k})}, {{"axis", int64_t{-1}}});
  std::string o = b.op("Transpose", {b.op("MatMul", {p, qkv[2]})}, perm({2, 0, 1, 3}));
  o = b.op("Reshape", {o, b.weight_i64("merge", {S * B, E})});
  o = b.op("Gemm", {o, b.weight("w_out", {E, E}, 4, -0.2, 0.2), b.weight("b_out", {E}, 5, -0.1, 0.1)}, {{"transB", int64_t{1}}});
  o = b.op("Transpose", {b.op("Reshape", {o, b.weight_i64("sbe", {S, B, E})})}, perm({1, 0, 2}));
  return b.model({b.op("Add", {o, x})});
}

/// A scalar weight of the builder's dtype with value v.
std::string scalar(ModelDef& m, const std::string& name, double v) {
  const TensorType type{m.inputs.front().type.dtype, {}};
  m.weights.push_back({name, type, std::make_shared<const HostTensor>(type, std::vector<double>{v})});
  return name;
}

/// MatMul + bias, then x * 0.5 * (1 + erf(x / sqrt 2)) as exporters write it: `order` 0 is
/// torch's Div, Erf, Add, Mul(x, .), Mul(., 0.5); 1 multiplies by 1 / sqrt 2 and takes x * 0.5
/// first. `leak` also makes the Erf's output a model output (the pattern must then stay).
ModelDef written_out_gelu(DType dt, int order, bool leak = false, double root = std::sqrt(2.0)) {
  ModelBuilder b(dt);
  const std::string x0 = b.input("x", {4, 24, 32});
  const std::string x = b.op("Add", {b.op("MatMul", {x0, b.weight("w", {32, 48}, 1, -0.3, 0.3)}), b.weight("bias", {48}, 2)});
  ModelDef m = b.model({x});
  auto op = [&](const std::string& type, std::vector<std::string> in) {
    OpDef d;
    d.name = cat("g", m.ops.size());
    d.op_type = type;
    d.inputs = std::move(in);
    d.outputs = {cat("g", m.ops.size(), "_out")};
    m.ops.push_back(d);
    return d.outputs[0];
  };
  std::string out;
  if (order == 0) {
    const std::string e = op("Erf", {op("Div", {x, scalar(m, "root2", root)})});
    const std::string a = op("Add", {e, scalar(m, "one", 1.0)});
    out = op("Mul", {op("Mul", {x, a}), scalar(m, "half", 0.5)});
    if (leak) m.outputs.push_back(e);
  } else {
    const std::string e = op("Erf", {op("Mul", {scalar(m, "inv_root2", 1.0 / root), x})});
    const std::string a = op("Add", {scalar(m, "one", 1.0), e});
    out = op("Mul", {a, op("Mul", {scalar(m, "half", 0.5), x})});
  }
  m.outputs[0] = out;
  return m;
}

int count_ops(const ModelDef& m, const std::string& type) {
  int n = 0;
  for (const OpDef& op : m.ops) n += op.op_type == type;
  return n;
}
}  // namespace

TEST_CASE("normalize: BatchNormalization folded into the convolution before it") {
  const ModelDef m = small_cnn();
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, false, 0, true, {}}, &report);
  CHECK(report.batch_norms_folded == 2);  // c1, c2; the last one follows a pool
  CHECK(report.transposes == 0);
  CHECK(report.convs_channels_last == 0);
  int bns = 0;
  for (const OpDef& op : n.ops) bns += op.op_type == "BatchNormalization";
  CHECK(bns == 1);
  check_same_outputs(m, n, 3);
}

TEST_CASE("normalize: NCHW convolutions and the ops between them run channels-last") {
  const ModelDef m = small_cnn();
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &report);
  CHECK(report.convs_channels_last == 3);
  CHECK(report.batch_norms_scaled == 1);
  // ReLU, MaxPool, Add, PRelu, Concat, AveragePool, GlobalAveragePool.
  CHECK(report.ops_channels_last == 7);
  // The input into NHWC, and the pooled [N,1,1,C] back for Flatten: nothing else crosses.
  CHECK(report.transposes == 2);
  for (const OpDef& op : n.ops)
    if (op.op_type == "Conv") CHECK(std::get<std::string>(op.attrs.at("layout")) == "NHWC");
  CHECK(report.transposes_as_reshapes == 1);  // the pooled [N, 1, 1, C]: a Reshape
  CHECK(count_ops(n, "Transpose") == 1);
  CHECK(report.summary() == "folded 2 BatchNormalization into convolutions; 3 convolutions and 8 other ops in NHWC "
                            "(1 BatchNormalization as a scale and shift), 2 transposes (1 of them Reshapes: only axes of extent 1 move)");
  check_same_outputs(m, n, 5);
  // Compiled for the CPU, the normalized model still matches the model as imported.
  const OpGraph g = lower_model(n);
  const std::vector<HostTensor> in = {random_f32({2, 3, 12, 12}, 9)};
  const Schedule s = schedule_as_cli(g, shipped_spec("x86-64-avx2-generic"), "welder");
  const Compilation c = compile_with(g, shipped_spec("x86-64-avx2-generic"), s, "cpu");
  const CompareResult r = compare_tensors(c.executable->run(in)[0], interpret(lower_model(m), in)[0]);
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("normalize: a compile that probes the machine rewrites as one given the probed spec") {
  // The CPU backend's row limits come from the spec; without one, compile() probes the machine
  // before the normalize stage (they were left at 0 when the probe came after it).
  CompileRequest r;
  r.model_path = source_path("experiments/models/resnet50_bottleneck.json");
  r.backend = "cpu";
  r.last = Stage::schedule;
  const Compilation probed = compile(r);
  r.spec = probed.spec;
  r.last = Stage::normalize;
  const Compilation given = compile(r);
  CHECK(probed.graph.print() == given.graph.print());
  CHECK(probed.normalized.summary() == given.normalized.summary());
}

TEST_CASE("normalize: without channels_last, convolutions with short rows run channels-last (the CPU's rule)") {
  // channels_last_rows_below 16 (pointwise_rows_below 0): a 3x3 over rows of 20 stays NCHW; the
  // strided one after it (rows of 10) runs in NHWC, and so does the depthwise one reading its NHWC output; a depthwise
  // one over rows of 10 reading an NCHW tensor (the input, pooled) stays NCHW (the loop nest runs
  // it along its rows).
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {1, 8, 20, 20});
  auto conv = [&](const std::string& in, const std::string& name, int64_t stride, int64_t group, uint64_t seed) {
    return b.op("Conv", {in, b.weight(name + "_w", {8, 8 / group, 3, 3}, seed)},
                {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                 {"strides", std::vector<int64_t>{stride, stride}}, {"group", group}});
  };
  const std::string wide = b.op("Relu", {conv(x, "wide", 1, 1, 1)});
  const std::string narrow = b.op("Relu", {conv(wide, "narrow", 2, 1, 2)});
  const std::string dw_nhwc = conv(narrow, "dw_nhwc", 1, 8, 3);
  const std::string pooled = b.op("MaxPool", {x}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  const std::string dw_nchw = conv(pooled, "dw_nchw", 1, 8, 4);
  const ModelDef m = b.model({dw_nhwc, dw_nchw});
  NormalizeOptions options{true, false, 0, true, {}};
  options.channels_last_rows_below = 16;
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), options, &report);
  CHECK(report.convs_channels_last == 2);  // narrow, dw_nhwc
  int nhwc = 0, nchw = 0;
  for (const OpDef& op : n.ops)
    if (op.op_type == "Conv") {
      const auto layout = op.attrs.find("layout");
      (layout != op.attrs.end() && std::get<std::string>(layout->second) == "NHWC" ? nhwc : nchw) += 1;
    }
  CHECK(nhwc == 2);
  CHECK(nchw == 2);  // wide, dw_nchw
  CHECK(report.transposes == 2);  // wide's output into NHWC, dw_nhwc's back to NCHW
  check_same_outputs(m, n, 7);
  // Off (0): nothing moves.
  NormalizeReport none;
  normalize_model(m, lower_model(m), NormalizeOptions{true, false, 0, true, {}}, &none);
  CHECK(none.convs_channels_last == 0);
}

TEST_CASE("normalize: a 1x1 convolution of an NCHW input is a batched MatMul in NCHW, the ops after it on its pixels") {
  // Two 1x1 convolutions of the model's input (one with a bias), over 4 x 10 = 40 pixels, then
  // ReLU, a per-channel scale and a residual add.
  auto conv1x1 = [](ModelBuilder& b, const std::string& x, const std::string& name, int64_t cin, int64_t cout, bool bias,
                    uint64_t seed) {
    std::vector<std::string> in = {x, b.weight(name + "_w", {cout, cin, 1, 1}, seed)};
    if (bias) in.push_back(b.weight(name + "_b", {cout}, seed + 1));
    return b.op("Conv", in, {{"kernel_shape", std::vector<int64_t>{1, 1}}});
  };
  {
    ModelBuilder b(DType::f16);
    const std::string x = b.input("x", {2, 16, 4, 10});
    const std::string r = b.op("Mul", {b.op("Relu", {conv1x1(b, x, "c1", 16, 8, true, 1)}), b.weight("slope", {8, 1, 1}, 3)});
    const ModelDef m = b.model({b.op("Add", {r, conv1x1(b, x, "c2", 16, 8, false, 4)})});
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 16, true, {}}, &report);
    CHECK(report.convs_pointwise_matmul == 2);
    CHECK(report.ops_pixels == 3);
    CHECK(report.transposes == 0);
    CHECK(report.convs_channels_last == 0);
    CHECK(count_ops(n, "Conv") == 0);
    CHECK(count_ops(n, "MatMul") == 2);
    CHECK(report.summary().find("2 NCHW 1x1 convolutions as batched MatMuls") != std::string::npos);
    check_same_outputs(m, n, 7);
    // For the GPU: both products on the tensor cores, no transpose kernel.
    std::map<std::string, int> families = h100_families(m);
    CHECK(tensor_core_groups(families) == 2);
    CHECK(families["transpose"] == 0);
    // Off: the channels-last form, transposes at both ends.
    NormalizeOptions off{true, true, 16, true, {}};
    off.nchw_pointwise_matmul = false;
    NormalizeReport old;
    check_same_outputs(m, normalize_model(m, lower_model(m), off, &old), 8);
    CHECK(old.convs_pointwise_matmul == 0);
    CHECK(old.convs_channels_last == 2);
    CHECK(old.transposes == 2);
  }
  {
    // 5 x 7 f16 pixels per channel (70 bytes) would not start 16-byte aligned: channels-last.
    ModelBuilder b(DType::f16);
    const ModelDef m = b.model({b.op("Relu", {conv1x1(b, b.input("x", {2, 16, 5, 7}), "c1", 16, 8, true, 1)})});
    NormalizeOptions aligned{true, true, 16, true, {{DType::f16, 16}}};
    NormalizeReport report;
    check_same_outputs(m, normalize_model(m, lower_model(m), aligned, &report), 10);
    CHECK(report.convs_pointwise_matmul == 0);
    CHECK(report.convs_channels_last == 1);
  }
  for (const int64_t cout : {8, 32}) {
    // Then a 3x3 convolution, which runs in NHWC: the 1x1 runs in NCHW only where its output is
    // no wider than its input (that output is transposed instead of the input).
    INFO("1x1 16 -> ", cout);
    ModelBuilder b(DType::f32);
    const std::string h = b.op("Relu", {conv1x1(b, b.input("x", {2, 16, 6, 6}), "c1", 16, cout, true, 1)});
    const ModelDef m = b.model({b.op("Conv", {h, b.weight("c2_w", {4, cout, 3, 3}, 5)},
                                     {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})});
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &report);
    CHECK(report.convs_pointwise_matmul == (cout == 8 ? 1 : 0));
    CHECK(report.convs_channels_last == (cout == 8 ? 1 : 2));
    CHECK(report.transposes == 2);
    check_same_outputs(m, n, 9);
  }
}

TEST_CASE("normalize: a ViT's patch embedding flattens and transposes its NHWC grid as a view (no transpose back)") {
  // conv 4x4 stride 4 -> [N, E, H, W] -> Reshape [N, E, H W] -> Transpose [N, H W, E] -> LayerNorm,
  // as timm and torchvision export it; with `leak`, the flattened grid is a model output too.
  for (const bool leak : {false, true}) {
    INFO("flattened grid also an output: ", leak);
    ModelBuilder b(DType::f32);
    const std::string c = b.op("Conv", {b.input("x", {2, 8, 12, 16}), b.weight("w", {16, 8, 4, 4}, 1), b.weight("b", {16}, 2)},
                               {{"kernel_shape", std::vector<int64_t>{4, 4}}, {"strides", std::vector<int64_t>{4, 4}}});
    const std::string flat = b.op("Reshape", {c, b.weight_i64("to_tokens", {2, 16, 12})});
    const std::string tokens = b.op("Transpose", {flat}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    std::vector<std::string> outs = {b.op("LayerNormalization", {tokens, b.weight("g", {16}, 3), b.weight("beta", {16}, 4)}, {{"axis", int64_t{-1}}})};
    if (leak) outs.push_back(flat);
    const ModelDef m = b.model(outs);
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &report);
    CHECK(report.convs_channels_last == 1);
    CHECK(report.transposes_absorbed == 1);
    // The input into NHWC; with the grid an output too, it transposed back for that output.
    CHECK(report.transposes == (leak ? 2 : 1));
    check_same_outputs(m, n, 13);
  }
}

TEST_CASE("normalize: a reduction of a whole tensor to one value is split into rows and the rest, when asked") {
  NormalizeOptions split{true, false, 0, true, {}};
  split.split_full_reductions = true;
  {
    // T5's fp16 overflow check: any infinity in the activation picks the clamp bound.
    ModelBuilder b(DType::f16);
    const std::string h = b.input("h", {4, 12, 40});
    const std::string count = b.op("ReduceSum", {b.op("Cast", {b.op("IsInf", {h})}, {{"to", std::string("i64")}})}, {{"keepdims", int64_t{0}}});
    const std::string bound =
        b.op("Where", {b.op("Greater", {count, b.weight_i64("zero", {0}, true)}), b.weight("lo", {}, 1, 100, 101), b.weight("hi", {}, 2, 200, 201)});
    const ModelDef m = b.model({b.op("Clip", {h, b.op("Neg", {bound}), bound})});
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), split, &report);
    CHECK(report.reductions_split == 1);
    CHECK(count_ops(n, "ReduceSum") == 2);
    CHECK(report.summary().find("1 reductions to one value split into rows and the rest") != std::string::npos);
    check_same_outputs(m, n, 11);
    // Not asked (the CPU backend): unchanged.
    NormalizeReport none;
    normalize_model(m, lower_model(m), NormalizeOptions{true, false, 0, true, {}}, &none);
    CHECK(none.reductions_split == 0);
  }
  for (const char* type : {"ReduceMean", "ReduceMax", "ReduceMin"}) {
    // Every axis named (negative ones too), keepdims: the same value and shape.
    INFO(type);
    ModelBuilder b(DType::f32);
    const ModelDef m = b.model({b.op(type, {b.input("x", {3, 1, 5, 7})}, {{"axes", std::vector<int64_t>{0, 1, -2, 3}}})});
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), split, &report);
    CHECK(report.reductions_split == 1);
    check_same_outputs(m, n, 12);
  }
  // Not split: a reduction over some axes only, and a tensor with one axis of extent > 1.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {3, 5, 7});
  const ModelDef m = b.model({b.op("ReduceSum", {x, b.weight_i64("axes", {1, 2})}), b.op("ReduceMax", {b.input("y", {1, 1, 64})})});
  NormalizeReport report;
  normalize_model(m, lower_model(m), split, &report);
  CHECK(report.reductions_split == 0);
  // Nor an f16 sum or mean (its rows' sums would be rounded to f16 once more); an f16 maximum is.
  ModelBuilder h(DType::f16);
  const std::string z = h.input("z", {3, 5, 7});
  const ModelDef halves = h.model({h.op("ReduceSum", {z}), h.op("ReduceMean", {z}), h.op("ReduceMax", {z})});
  NormalizeReport half_report;
  check_same_outputs(halves, normalize_model(halves, lower_model(halves), split, &half_report), 14);
  CHECK(half_report.reductions_split == 1);
}

TEST_CASE("normalize: an SE block at an NCHW model's edge crosses the layouts by Reshapes, its excite kept in NCHW") {
  // EfficientNet-B0's squeeze-excite on an NCHW input: GlobalAveragePool, 1x1 convs 16 -> 4 -> 16
  // (on the tensor cores in NHWC), Sigmoid, Mul with the input.
  for (const int64_t hw : {int64_t{5}, int64_t{1}}) {
    INFO("H = W = ", hw);
    ModelBuilder b(DType::f32);
    const std::string x = b.input("x", {2, 16, hw, hw});
    std::string s = b.op("GlobalAveragePool", {x});
    s = b.op("Relu", {b.op("Conv", {s, b.weight("w1", {4, 16, 1, 1}, 1), b.weight("b1", {4}, 2)}, {{"kernel_shape", std::vector<int64_t>{1, 1}}})});
    s = b.op("Sigmoid", {b.op("Conv", {s, b.weight("w2", {16, 4, 1, 1}, 3), b.weight("b2", {16}, 4)}, {{"kernel_shape", std::vector<int64_t>{1, 1}}})});
    const ModelDef m = b.model({b.op("Mul", {x, s})});
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &report);
    CHECK(report.convs_channels_last == 2);
    // The squeeze [2, 16, 1, 1] into NHWC and the scale back: Reshapes, no Transpose anywhere.
    CHECK(count_ops(n, "Transpose") == 0);
    CHECK(report.transposes == report.transposes_as_reshapes);
    if (hw > 1) {
      // x * scale multiplies x as it is (in NHWC, x would be transposed in and the product out).
      CHECK(report.ops_kept_nchw == 1);
      CHECK(report.summary().find("1 elementwise ops kept in NCHW") != std::string::npos);
    } else {
      // A 1 x 1 input is the same data in both layouts: nothing needs keeping.
      CHECK(report.ops_kept_nchw == 0);
    }
    check_same_outputs(m, n, 7);
  }
}

TEST_CASE("normalize: what is not rewritten") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {1, 4, 6, 6});
  // A convolution whose output is also a model output keeps its BatchNormalization.
  const std::string y = b.op("Conv", {x, b.weight("w", {4, 4, 3, 3}, 1)}, {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                                           {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  const std::string z = b.op("BatchNormalization", {y, b.weight("g", {4}, 2, 0.5, 1.5), b.weight("b", {4}, 3), b.weight("m", {4}, 4),
                                                    b.weight("v", {4}, 5, 0.5, 1.5)});
  // Softmax over the channels has no NHWC form here: its input goes back to NCHW.
  const std::string s = b.op("Softmax", {z}, {{"axis", int64_t{1}}});
  const ModelDef m = b.model({y, s});
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &report);
  CHECK(report.batch_norms_folded == 0);
  CHECK(report.batch_norms_scaled == 1);
  CHECK(report.convs_channels_last == 1);
  CHECK(report.transposes == 3);  // x in; y and z out
  check_same_outputs(m, n, 7);
  NormalizeReport none;
  normalize_model(m, lower_model(m), NormalizeOptions{false, false, 0, false, {}}, &none);
  CHECK_FALSE(none.changed());
  CHECK(none.summary() == "nothing to fold or re-lay out");
}

TEST_CASE("normalize: a model's own permutes around a channels-last block are absorbed (ConvNeXt)") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {2, 8, 5, 5});
  const auto conv = [&](const std::string& in, uint64_t seed) {
    return b.op("Conv", {in, b.weight(cat("w", seed), {8, 1, 3, 3}, seed)},
                {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{8}}});
  };
  std::string h = b.op("Transpose", {conv(x, 1)}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  h = b.op("LayerNormalization", {h, b.weight("ln_g", {8}, 2), b.weight("ln_b", {8}, 3)}, {{"axis", int64_t{-1}}});
  h = b.op("MatMul", {h, b.weight("fc", {8, 8}, 4)});
  h = b.op("Transpose", {h}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  const ModelDef m = b.model({conv(b.op("Add", {h, x}), 5)});
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &report);
  CHECK(report.convs_channels_last == 2);
  CHECK(report.transposes_absorbed == 2);
  CHECK(report.transposes == 2);  // x into NHWC (read by the first conv and the add), the output back
  int transposes = 0, hwio = 0;
  for (const OpDef& op : n.ops) {
    transposes += op.op_type == "Transpose";
    // The depthwise convolutions' weights are re-laid out [kH, kW, 1, M] (channels innermost).
    if (op.op_type == "Conv") {
      const auto it = op.attrs.find("weight_layout");
      const bool is_hwio = it != op.attrs.end() && std::get<std::string>(it->second) == "HWIO";
      CHECK(is_hwio);
      hwio += is_hwio;
    }
  }
  CHECK(transposes == 2);
  CHECK(hwio == 2);
  check_same_outputs(m, n, 13);
}

TEST_CASE("normalize: an RGB stem convolution gets its input channels zero-padded to the alignment") {
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {2, 3, 20, 20});
  const std::string y = b.op("Conv", {x, b.weight("w", {16, 3, 7, 7}, 1, -0.2, 0.2), b.weight("b", {16}, 2)},
                             {{"kernel_shape", std::vector<int64_t>{7, 7}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}},
                              {"strides", std::vector<int64_t>{2, 2}}});
  const ModelDef m = b.model({b.op("Relu", {y})});
  NormalizeOptions options{true, true, 16, true, {}};
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), options, &report);
  CHECK(report.convs_channels_last == 1);
  CHECK(report.convs_channels_padded == 1);
  int pads = 0;
  for (const OpDef& op : n.ops) pads += op.op_type == "Pad";
  CHECK(pads == 1);
  check_same_outputs(m, n, 17);
  // Through compile() for the H100 spec, the padded convolution takes the tensor-core family.
  const Compilation c = compiled_for(m, "nvidia-h100-sxm", Stage::schedule);
  CHECK(c.normalized.convs_channels_padded == 1);
  bool tensor_cores = false;
  for (const ScheduleGroup& g : c.schedule.groups) tensor_cores |= g.group.kernel.family == "mma" || g.group.kernel.family == "wgmma";
  CHECK(tensor_cores);
  // Without the alignment (the CPU), nothing is padded.
  NormalizeReport unpadded;
  normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0, true, {}}, &unpadded);
  CHECK(unpadded.convs_channels_padded == 0);
}

TEST_CASE("normalize: grouped and depthwise convolutions get HWIO weights, NCHW or NHWC in the model") {
  for (const bool nhwc : {true, false}) {
    INFO("model layout NHWC: ", nhwc);
    ModelBuilder b(DType::f16);
    const std::string x = nhwc ? b.input("x", {2, 9, 9, 16}) : b.input("x", {2, 16, 9, 9});
    auto conv = [&](const std::string& w, int64_t groups) {
      std::map<std::string, AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", groups}};
      if (nhwc) attrs["layout"] = std::string("NHWC");
      return b.op("Conv", {x, w}, attrs);
    };
    const std::vector<int64_t> dw_shape = nhwc ? std::vector<int64_t>{16, 3, 3, 1} : std::vector<int64_t>{16, 1, 3, 3};
    const std::vector<int64_t> g_shape = nhwc ? std::vector<int64_t>{16, 3, 3, 4} : std::vector<int64_t>{16, 4, 3, 3};
    const std::string dw = conv(b.weight("w_dw", dw_shape, 1, -0.3, 0.3), 16);
    const std::string gr = conv(b.weight("w_g", g_shape, 2, -0.3, 0.3), 4);
    const ModelDef m = b.model({b.op("Add", {dw, gr})});
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 16, true, {}}, &report);
    CHECK(report.grouped_hwio == (nhwc ? 2 : 0));
    if (nhwc) CHECK(report.summary().find("2 NHWC grouped convolutions with HWIO weights") != std::string::npos);
    int hwio = 0;
    for (const OpDef& op : n.ops)
      if (op.op_type == "Conv") {
        REQUIRE(op.attrs.count("weight_layout"));
        CHECK(std::get<std::string>(op.attrs.at("weight_layout")) == "HWIO");
        ++hwio;
      }
    CHECK(hwio == 2);
    check_same_outputs(m, n, 31);
  }
}

TEST_CASE("normalize: a CPU compile reads every NHWC convolution's constant weights as HWIO (rewrite 4)") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {1, 7, 9, 16});
  auto conv = [&](const std::string& in, const std::string& w, int64_t groups, int64_t k) {
    return b.op("Conv", {in, w},
                {{"kernel_shape", std::vector<int64_t>{k, k}}, {"pads", std::vector<int64_t>(4, k / 2)}, {"group", groups},
                 {"layout", std::string("NHWC")}});
  };
  const std::string dense = conv(x, b.weight("w3", {24, 3, 3, 16}, 1, -0.3, 0.3), 1, 3);
  const std::string pw = conv(dense, b.weight("w1", {16, 1, 1, 24}, 2, -0.3, 0.3), 1, 1);
  const std::string dw = conv(pw, b.weight("wd", {16, 5, 5, 1}, 3, -0.3, 0.3), 16, 5);
  // A weight that is a graph input keeps its layout.
  const std::string fed = conv(dw, b.input("wi", {16, 3, 3, 16}), 1, 3);
  const ModelDef m = b.model({fed});
  NormalizeOptions options{true, false, 0, true, {}};
  options.conv_weights_hwio = true;
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), options, &report);
  CHECK(report.dense_hwio == 2);
  CHECK(report.grouped_hwio == 1);
  CHECK(report.summary().find("2 NHWC convolutions with HWIO weights") != std::string::npos);
  int hwio = 0;
  for (const OpDef& op : n.ops)
    if (op.op_type == "Conv" && op.attrs.count("weight_layout"))
      hwio += std::get<std::string>(op.attrs.at("weight_layout")) == "HWIO";
  CHECK(hwio == 3);
  check_same_outputs(m, n, 37);
  // compile() asks the CPU backend, which wants them; the CUDA backend does not.
  CHECK(compiled_for(m, "x86-64-avx2-generic", Stage::normalize).normalized.dense_hwio == 2);
  CHECK(compiled_for(m, "nvidia-h100-sxm", Stage::normalize).normalized.dense_hwio == 0);
}

TEST_CASE("normalize: 1-D convolutions (Whisper's front end) run as 2-D ones, channels-last, on tensor cores") {
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {2, 16, 50});
  std::string h = b.op("Conv", {x, b.weight("w1", {32, 16, 3}, 1, -0.2, 0.2), b.weight("b1", {32}, 2)},
                       {{"kernel_shape", std::vector<int64_t>{3}}, {"pads", std::vector<int64_t>{1, 1}}});
  h = b.op("Gelu", {h});
  h = b.op("Conv", {h, b.weight("w2", {24, 32, 3}, 3, -0.2, 0.2), b.weight("b2", {24}, 4)},
           {{"kernel_shape", std::vector<int64_t>{3}}, {"pads", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{2}},
            {"dilations", std::vector<int64_t>{1}}});
  const ModelDef m = b.model({b.op("Gelu", {h})});
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 16, true, {}}, &report);
  CHECK(report.convs_1d == 2);
  CHECK(report.convs_channels_last == 2);
  CHECK(report.summary().find("2 1-D convolutions as 2-D ones") != std::string::npos);
  check_same_outputs(m, n, 31);
  CHECK(tensor_core_groups(h100_families(m)) == 2);
  // Without channels-last (the CPU) they stay 1-D.
  NormalizeReport cpu;
  normalize_model(m, lower_model(m), NormalizeOptions{true, false, 0, true, {}}, &cpu);
  CHECK(cpu.convs_1d == 0);
}

TEST_CASE("normalize: a convolution the model already runs in NHWC gets its RGB channels zero-padded too") {
  // A ViT-style patch embedding: 4 x 4 kernel, stride 4, over 3 channels, NHWC in the model.
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {2, 16, 16, 3});
  const std::string y = b.op("Conv", {x, b.weight("w", {24, 4, 4, 3}, 1, -0.2, 0.2), b.weight("b", {24}, 2)},
                             {{"kernel_shape", std::vector<int64_t>{4, 4}}, {"strides", std::vector<int64_t>{4, 4}},
                              {"layout", std::string("NHWC")}});
  const ModelDef m = b.model({y});
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true, 16, true, {}}, &report);
  CHECK(report.convs_channels_last == 0);
  CHECK(report.convs_channels_padded == 1);
  CHECK(report.changed());
  CHECK(report.summary().find("1 NHWC convolutions with input channels zero-padded") != std::string::npos);
  check_same_outputs(m, n, 29);
  CHECK(tensor_core_groups(h100_families(m)) == 1);
}

TEST_CASE("normalize: compile() rewrites for the backend that prefers channels-last, and checks against the import") {
  const std::string path = source_path("experiments/models/resnet50_bottleneck.json");
  CompileRequest r;
  r.model_path = path;
  r.backend.clear();
  r.spec = shipped_spec("nvidia-h100-sxm");
  r.last = Stage::normalize;
  const Compilation gpu = compile(r);
  CHECK(gpu.normalized.batch_norms_folded > 0);
  CHECK(gpu.normalized.convs_channels_last > 0);
  CHECK(gpu.reference.num_nodes() > 0);
  CHECK(gpu.reference.print() != gpu.graph.print());
  r.spec = shipped_spec("x86-64-avx2-generic");
  const Compilation cpu = compile(r);
  CHECK(cpu.normalized.batch_norms_folded == gpu.normalized.batch_norms_folded);
  // The CPU backend's row limits on AVX2 (8 f32 lanes): rows of at most 4 run channels-last,
  // 1x1 ones over rows shorter than 16 as batched MatMuls. Over 14 x 14 pixels the two 1x1 are
  // MatMuls, the 3x3 stays NCHW.
  CHECK(cpu.normalized.convs_pointwise_matmul == 2);
  CHECK(cpu.normalized.convs_channels_last == 0);
  r.normalize = NormalizeOptions{false, false, 0, false, {}};
  const Compilation as_imported = compile(r);
  CHECK(as_imported.graph.print() == as_imported.reference.print());
  // The normalized GPU graph computes what the imported model does.
  const ModelDef m = load_model(path);
  NormalizeOptions both{true, true, 0, true, {}};
  check_same_outputs(m, normalize_model(m, lower_model(m), both), 11);
}

}  // namespace tessel::testing

namespace tessel::testing {

TEST_CASE("normalize: exported attention's views become one strided view each, K is read as stored") {
  const ModelDef m = torch_mha(DType::f32, 2, 5, 3, 4);
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
  // Q, K and V each: 8 view ops from the projection (its Transpose moved after the MatMul and the
  // bias) become a split Reshape (shared), a Gather and a Transpose.
  CHECK(report.view_chains == 3);
  CHECK(report.scalars_moved == 3);  // the MatMul and the bias add before the tokens' Transpose; K's Mul
  CHECK(report.matmuls_trans_b == 1);  // Q K^T reads K as [B, H, S, d]
  CHECK(report.view_ops_removed > 10);
  CHECK(count_ops(n, "Unsqueeze") == 0);
  CHECK(count_ops(n, "Squeeze") == 0);
  CHECK(count_ops(n, "Reshape") == 1 + 2);  // the split; the merge before the Gemm and its undo stay (copies)
  CHECK(count_ops(n, "Transpose") == 3 + 2);
  CHECK(report.summary().find("3 view chains in canonical form") != std::string::npos);
  check_same_outputs(m, n, 21);
  // Each rewrite alone keeps the outputs too, and none of it runs when not asked.
  NormalizeOptions off;
  off.simplify_views = false;
  NormalizeReport none;
  CHECK(normalize_model(m, lower_model(m), off, &none).ops.size() == m.ops.size());
  CHECK(none.view_chains + none.matmuls_trans_b + none.scalars_moved == 0);
}

TEST_CASE("normalize: an unbinding Split is a Gather per piece: timm's Q, K and V become views of the projection") {
  const ModelDef m = timm_attention(DType::f32, 2, 5, 3, 8);
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
  CHECK(report.splits_as_picks == 1);
  CHECK(count_ops(n, "Split") == 0);
  CHECK(report.view_chains == 3);  // Q, K and V: each a view of the projection
  CHECK(report.summary().find("1 unbinding Splits as one Gather per piece") != std::string::npos);
  check_same_outputs(m, n, 22);
  // For the GPU (f16): the projection, one streamed attention kernel reading Q, K and V from it,
  // the heads' merge (a copy) and the output projection; no copy of Q, K or V.
  const std::map<std::string, int> families = h100_families(timm_attention(DType::f16, 8, 197, 6, 64));
  CHECK(families.at("flash") == 1);
  CHECK(tensor_core_groups(families) == 2);
  CHECK(families.count("vector") ? families.at("vector") <= 1 : true);
}

TEST_CASE("normalize: Split sizes, Squeeze axes and Gather indices given by Constant ops, as TorchScript exports them") {
  // timm's unbinding Split with its sizes in a Constant op (DeiT as exported): the Split is seen
  // whole before any op moves (the Constant op read for its sizes comes before the Split).
  const ModelDef m = timm_attention(DType::f32, 2, 5, 3, 8, true);
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
  CHECK(report.splits_as_picks == 1);
  CHECK(count_ops(n, "Split") == 0);
  CHECK(report.view_chains == 3);
  check_same_outputs(m, n, 23);
  // A negative axis on a tensor lowering folds away (an Identity's output): the axis is the one
  // decided before any op moved.
  {
    ModelBuilder b(DType::f32);
    const std::string id = b.op("Identity", {b.op("Relu", {b.input("x", {4, 3})})});
    const std::vector<std::string> parts = b.ops("Split", {id, b.weight_i64("ones", {1, 1, 1})}, 3, {{"axis", int64_t{-1}}});
    std::vector<std::string> outs;
    for (const std::string& part : parts) outs.push_back(b.op("Exp", {part}));
    const ModelDef sm = b.model(outs);
    NormalizeReport sr;
    const ModelDef sn = normalize_model(sm, lower_model(sm), NormalizeOptions{}, &sr);
    CHECK(sr.splits_as_picks == 1);
    check_same_outputs(sm, sn, 28);
  }
  // torchvision's MultiheadAttention picks Q, K and V with Gathers of Constant scalar indices
  // (lowering folds the Constants away, so their type is the value's): each pick is a view, and
  // the permuted projection they share is not copied.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {5, 2, 3 * 8});
  std::string t = b.op("Reshape", {b.op("Relu", {x}), b.weight_i64("split", {5, 2, 3, 8})});
  t = b.op("Unsqueeze", {t, b.weight_i64("axis0", {0})});
  t = b.op("Transpose", {t}, {{"perm", std::vector<int64_t>{3, 1, 2, 0, 4}}});
  t = b.op("Squeeze", {t, b.weight_i64("axis3", {3})});
  std::vector<std::string> outs;
  for (int64_t i = 0; i < 3; ++i) {
    const std::string idx = b.op("Constant", {}, {{"value", HostTensor(TensorType{DType::i64, {}}, std::vector<double>{static_cast<double>(i)})}});
    outs.push_back(b.op("Sigmoid", {b.op("Gather", {t, idx}, {{"axis", int64_t{0}}})}));
  }
  const ModelDef g = b.model(outs);
  NormalizeReport r2;
  const ModelDef gn = normalize_model(g, lower_model(g), NormalizeOptions{}, &r2);
  CHECK(r2.view_chains == 3);
  check_same_outputs(g, gn, 24);
  // No tensor of the permuted projection's shape is made: each Sigmoid reads its piece through a view.
  const OpGraph lowered = lower_model(gn);
  for (NodeId id = 0; id < lowered.num_nodes(); ++id) {
    INFO(lowered.node(id).name());
    CHECK(lowered.node(id).output().shape != std::vector<int64_t>{3, 5, 2, 8});
  }
}

TEST_CASE("normalize: scalar multiplications of Q and K picked from the projection move into the projection, bit for bit") {
  // The exporter's q * sqrt(scale) and k^T * sqrt(scale): the projection is multiplied by a column
  // vector (the scalar over Q's and K's columns, 1 over V's), Q, K and V are plain views of it.
  const ModelDef m = timm_attention(DType::f16, 2, 5, 3, 8, true, true);
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
  CHECK(report.splits_as_picks == 1);
  CHECK(report.scales_moved == 2);
  CHECK(report.summary().find("2 scalar multiplications of picked views moved into their source") != std::string::npos);
  CHECK(count_ops(n, "Mul") == count_ops(m, "Mul") - 1);  // two Muls out, the column scale in
  // The same bits: x * 1 is x, and each picked value is multiplied by the same f16 constant.
  const OpGraph a = lower_model(m), b = lower_model(n);
  std::vector<HostTensor> inputs;
  for (TensorId t : a.inputs()) inputs.push_back(random_uniform(a.tensor(t).type.dtype, a.tensor(t).type.shape, 25));
  const std::vector<HostTensor> want = interpret(a, inputs), got = interpret(b, inputs);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].size() == want[0].size());
  int64_t differ = 0;
  for (int64_t i = 0; i < want[0].size(); ++i) differ += got[0][i] != want[0][i];
  CHECK(differ == 0);
  // For the GPU: the projection (scaling its columns in its epilogue), one streamed attention
  // kernel reading Q, K and V from it, the heads' merge and the output projection.
  const std::map<std::string, int> families = h100_families(timm_attention(DType::f16, 8, 197, 6, 64, true, true));
  CHECK(families.at("flash") == 1);
  CHECK(tensor_core_groups(families) == 2);
  CHECK(families.count("vector") ? families.at("vector") <= 1 : true);
  // At batch 1 too (the views then add a dimension of size 1, which goes into the split in front
  // of the picks, so that each chain still ends in its Transpose): the same bits, the same kernels.
  const ModelDef m1 = timm_attention(DType::f16, 1, 5, 3, 8, true, true);
  const ModelDef n1 = normalize_model(m1, lower_model(m1), NormalizeOptions{}, nullptr);
  const OpGraph a1 = lower_model(m1), b1 = lower_model(n1);
  std::vector<HostTensor> in1;
  for (TensorId t : a1.inputs()) in1.push_back(random_uniform(a1.tensor(t).type.dtype, a1.tensor(t).type.shape, 27));
  const std::vector<HostTensor> want1 = interpret(a1, in1), got1 = interpret(b1, in1);
  int64_t differ1 = 0;
  for (int64_t i = 0; i < want1[0].size(); ++i) differ1 += got1[0][i] != want1[0][i];
  CHECK(differ1 == 0);
  const std::map<std::string, int> batch1 = h100_families(timm_attention(DType::f16, 1, 197, 6, 64, true, true));
  CHECK(batch1.at("flash") == 1);
  CHECK(tensor_core_groups(batch1) == 2);
  CHECK(batch1.count("vector") ? batch1.at("vector") <= 1 : true);
  // A reader of the scaled columns that is not the multiplication keeps it where it is.
  ModelBuilder c(DType::f32);
  const std::string x = c.input("x", {4, 5});
  const std::string y = c.op("MatMul", {x, c.weight("w", {5, 6}, 6)});
  const std::string half = c.op("Gather", {c.op("Reshape", {y, c.weight_i64("s", {4, 2, 3})}), c.weight_i64("i0", {0})}, {{"axis", int64_t{1}}});
  const std::string scaled = c.op("Mul", {half, c.weight("k", {}, 5)});
  const ModelDef two = c.model({scaled, c.op("Exp", {half})});
  NormalizeReport none;
  normalize_model(two, lower_model(two), NormalizeOptions{}, &none);
  CHECK(none.scales_moved == 0);
  // Read by the multiplication alone, the same columns move.
  ModelBuilder e(DType::f32);
  const std::string ex = e.op("MatMul", {e.input("x", {4, 5}), e.weight("w", {5, 6}, 6)});
  const std::string eh = e.op("Gather", {e.op("Reshape", {ex, e.weight_i64("s", {4, 2, 3})}), e.weight_i64("i0", {0})}, {{"axis", int64_t{1}}});
  const ModelDef one = e.model({e.op("Exp", {e.op("Mul", {eh, e.weight("k", {}, 5)})})});
  NormalizeReport moved;
  const ModelDef one_n = normalize_model(one, lower_model(one), NormalizeOptions{}, &moved);
  CHECK(moved.scales_moved == 1);
  check_same_outputs(one, one_n, 26);
  // Not where the producer takes no epilogue (a Relu): the whole tensor would be scaled by a
  // kernel of its own.
  ModelBuilder f(DType::f32);
  const std::string fx = f.op("Relu", {f.input("x", {4, 6})});
  const std::string fh = f.op("Gather", {f.op("Reshape", {fx, f.weight_i64("s", {4, 2, 3})}), f.weight_i64("i0", {0})}, {{"axis", int64_t{1}}});
  const ModelDef relu = f.model({f.op("Exp", {f.op("Mul", {fh, f.weight("k", {}, 5)})})});
  NormalizeReport kept;
  normalize_model(relu, lower_model(relu), NormalizeOptions{}, &kept);
  CHECK(kept.scales_moved == 0);
}

TEST_CASE("normalize: views that need a copy, slices and weights are left as they are") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {4, 6, 8});
  auto perm = [](std::vector<int64_t> p) { return std::map<std::string, AttrValue>{{"perm", p}}; };
  // A transpose then a merge of dimensions apart in memory: a copy, not a view.
  const std::string merged = b.op("Reshape", {b.op("Transpose", {b.op("Relu", {x})}, perm({1, 0, 2})), b.weight_i64("s1", {24, 8})});
  // Gather of an index that is not known at import: kept.
  const std::string idx = b.input("i", {});
  const std::string picked = b.op("Reshape", {b.op("Gather", {b.op("Neg", {x}), b.op("Cast", {idx}, {{"to", int64_t{7}}})}), b.weight_i64("s2", {48})});
  // A chain of a weight: lowering folds it.
  const std::string wv = b.op("Reshape", {b.op("Transpose", {b.weight("w", {8, 4}, 9)}, perm({1, 0})), b.weight_i64("s3", {32})});
  const ModelDef m = b.model({merged, picked, wv});
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
  CHECK(report.view_chains == 0);
  CHECK(n.ops.size() == m.ops.size());
}

TEST_CASE("normalize: a bias behind an Identity (an exporter's reused initializer) still lets the transpose move") {
  // x^T W + Identity(b): exporters write an Identity for each reuse of an identical initializer
  // (every ViT layer's zero in-projection bias after the first), which lowering folds away.
  ModelBuilder b(DType::f32);
  const std::string xt = b.op("Transpose", {b.input("x", {2, 3, 4})}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  const std::string mm = b.op("MatMul", {xt, b.weight("w", {4, 6}, 1)});
  const std::string bias = b.op("Identity", {b.weight("b", {6}, 2)});
  const ModelDef m = b.model({b.op("Add", {bias, mm})});
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
  CHECK(report.scalars_moved == 2);  // the MatMul and the bias add
  check_same_outputs(m, n, 5);
}

TEST_CASE("normalize: a Gather of one index known at import is an affine copy, checked at import") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {3, 4, 5});
  const std::string g0 = b.op("Gather", {x, b.weight_i64("i0", {-1}, true)}, {{"axis", int64_t{1}}});  // x[:, 3]
  const std::string g1 = b.op("Gather", {x, b.weight_i64("i1", {2})}, {{"axis", int64_t{2}}});        // x[..., 2:3]
  const OpGraph g = b.graph(std::vector<std::string>{g0, g1});
  for (int i = 0; i < g.num_nodes(); ++i) CHECK_FALSE(g.node(i).inputs()[0].is_gather());
  const HostTensor in = random_uniform(DType::f32, {3, 4, 5}, 4);
  const std::vector<HostTensor> out = interpret(g, {in});
  REQUIRE(out.size() == 2);
  CHECK(out[0].shape() == std::vector<int64_t>{3, 5});
  CHECK(out[1].shape() == std::vector<int64_t>{3, 4, 1});
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t c = 0; c < 5; ++c) CHECK(out[0][a * 5 + c] == in[(a * 4 + 3) * 5 + c]);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t r = 0; r < 4; ++r) CHECK(out[1][a * 4 + r] == in[(a * 4 + r) * 5 + 2]);
  ModelBuilder bad(DType::f32);
  const std::string y = bad.op("Gather", {bad.input("x", {3, 4}), bad.weight_i64("i", {4}, true)}, {{"axis", int64_t{1}}});
  CHECK_THROWS_WITH_AS(bad.graph(y), doctest::Contains("index 4 is out of range for axis 1 of extent 4"), UserError);
}

TEST_CASE("normalize: MatMul's transB reads B transposed in its last two dimensions") {
  ModelBuilder b(DType::f32);
  const std::string a = b.input("a", {2, 3, 4}), bt = b.input("bt", {2, 5, 4});
  const std::string direct = b.op("MatMul", {a, bt}, {{"transB", int64_t{1}}});
  const std::string via = b.op("MatMul", {a, b.op("Transpose", {bt}, {{"perm", std::vector<int64_t>{0, 2, 1}}})});
  const OpGraph g = b.graph(std::vector<std::string>{direct, via});
  const std::vector<HostTensor> out = interpret(g, {random_uniform(DType::f32, {2, 3, 4}, 1), random_uniform(DType::f32, {2, 5, 4}, 2)});
  CHECK(out[0].values() == out[1].values());
  ModelBuilder bad(DType::f32);
  const std::string y = bad.op("MatMul", {bad.input("a", {3, 4}), bad.input("b", {4, 5})}, {{"transB", int64_t{2}}});
  CHECK_THROWS_WITH_AS(bad.graph(y), doctest::Contains("attribute 'transB' is 2, not 0 or 1"), UserError);
}

TEST_CASE("normalize: contractions by a weight whose rows are not 16-byte aligned are re-laid out, K zero-padded") {
  // f16: 8 elements per 16 bytes. A vocabulary-like N of 37 (re-laid out k-contiguous), a K of 19
  // (zero-padded: the activation by a Pad, the weight once here), both, a Gemm storing B as [N, K]
  // with a K of 19, and one weight and one activation read by two contractions (one copy each).
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {2, 5, 24}), h = b.input("h", {12, 19});  // (more rows than the gemv family takes)
  const std::string w_vocab = b.weight("w_vocab", {24, 37}, 1, -0.3, 0.3);
  const std::string vocab = b.op("MatMul", {x, w_vocab});
  const std::string vocab2 = b.op("MatMul", {b.op("Relu", {x}), w_vocab});
  const std::string odd_k = b.op("Gemm", {h, b.weight("w_k", {19, 16}, 2, -0.3, 0.3), b.weight("bias", {16}, 3)});
  const std::string both = b.op("MatMul", {h, b.weight("w_both", {19, 21}, 4, -0.3, 0.3)});
  const std::string gemm_t = b.op("Gemm", {h, b.weight("w_t", {21, 19}, 5, -0.3, 0.3)}, {{"transB", int64_t{1}}});
  const ModelDef m = b.model({vocab, vocab2, odd_k, both, gemm_t});
  NormalizeOptions options;
  options.contraction_alignment_bytes = {{DType::f16, 16}};
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), options, &report);
  CHECK(report.contractions_aligned == 5);
  CHECK(report.contraction_pads == 1);  // h is padded once for its three readers
  int pads = 0;
  std::map<std::string, std::vector<int64_t>> weights;
  for (const OpDef& op : n.ops) pads += op.op_type == "Pad";
  for (const WeightDef& w : n.weights) weights[w.name] = w.type.shape;
  CHECK(pads == 1);
  CHECK(weights.at("w_vocab_aligned") == std::vector<int64_t>{37, 24});
  CHECK(weights.at("w_k_aligned") == std::vector<int64_t>{24, 16});
  CHECK(weights.at("w_both_aligned") == std::vector<int64_t>{21, 24});
  CHECK(weights.at("w_t_aligned") == std::vector<int64_t>{21, 24});
  CHECK_FALSE(weights.count("w_vocab_aligned_2"));
  CHECK(report.summary().find("5 contractions by a weight re-laid out") != std::string::npos);
  check_same_outputs(m, n, 23);

  // Through compile() for the H100 spec every contraction takes a tensor-core family; for the CPU
  // nothing is re-laid out.
  std::map<std::string, int> families = h100_families(m);
  CHECK(families["generic"] == 0);
  CHECK(tensor_core_groups(families) >= 4);
  CHECK(compiled_for(m, "x86-64-avx2-generic", Stage::normalize).normalized.contractions_aligned == 0);
  // f32 operands (no tensor-core family) and aligned ones are left as they are.
  ModelBuilder f(DType::f32);
  const ModelDef m32 = f.model({f.op("MatMul", {f.input("x", {4, 19}), f.weight("w", {19, 37}, 1)})});
  NormalizeReport none;
  normalize_model(m32, lower_model(m32), options, &none);
  CHECK(none.contractions_aligned == 0);
}

TEST_CASE("normalize: exported attention compiles to the streamed attention kernel for the GPU") {
  // d 64 and 197 tokens: without the rewrites, K^T is stored [B, H, d, S] with rows 197 elements
  // apart, which the tensor-core kernels cannot read, and the whole attention takes the generic
  // kernel.
  const ModelDef model = torch_mha(DType::f16, 2, 197, 2, 64);
  CompileRequest r;
  r.model = &model;
  r.backend.clear();
  r.spec = shipped_spec("nvidia-h100-sxm");
  r.last = Stage::schedule;
  auto families = [&](const Compilation& c) {
    std::map<std::string, int> n;
    for (const ScheduleGroup& g : c.schedule.groups) ++n[g.group.kernel.family];
    return n;
  };
  const Compilation normalized = compile(r);
  CHECK(families(normalized)["flash"] == 1);
  r.normalize = NormalizeOptions{false, false, 0, false, {}};
  CHECK(families(compile(r))["flash"] == 0);
}

TEST_CASE("normalize: an erf GELU written out as five ops becomes one Gelu op") {
  for (DType dt : {DType::f32, DType::f16})
    for (int order : {0, 1}) {
      INFO(dtype_name(dt), " order ", order);
      const ModelDef m = written_out_gelu(dt, order);
      NormalizeReport report;
      const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
      CHECK(report.gelus == 1);
      CHECK(count_ops(n, "Gelu") == 1);
      CHECK(count_ops(n, "Erf") == 0);
      CHECK(count_ops(n, "Div") == 0);
      CHECK(count_ops(n, "Mul") == 0);
      CHECK(n.outputs == m.outputs);
      CHECK(report.summary().find("1 erf GELUs") != std::string::npos);
      check_same_outputs(m, n, 7);
    }
  // Left as it is: an intermediate the model also outputs, another constant than sqrt 2, and a
  // 0.5 of rank 4 that broadcasts the rank-3 result (then it is not x's GELU alone).
  ModelDef broadcast = written_out_gelu(DType::f32, 0);
  for (WeightDef& w : broadcast.weights)
    if (w.name == "half") {
      w.type.shape = {1, 1, 1, 1};
      w.source = std::make_shared<const HostTensor>(w.type, std::vector<double>{0.5});
    }
  for (const ModelDef& m : {written_out_gelu(DType::f32, 0, true), written_out_gelu(DType::f32, 0, false, 2.0), broadcast}) {
    NormalizeReport report;
    const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{}, &report);
    CHECK(report.gelus == 0);
    CHECK(count_ops(n, "Erf") == 1);
  }
}

}  // namespace tessel::testing
