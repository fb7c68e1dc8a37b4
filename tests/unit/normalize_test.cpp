// The normalize stage (tilegraph/normalize.h): BatchNormalization folding and channels-last
// convolutions keep what the model computes -- each rewritten model is interpreted and compared
// with the model as imported -- and rewrite what they promise.
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

}  // namespace

TEST_CASE("normalize: BatchNormalization folded into the convolution before it") {
  const ModelDef m = small_cnn();
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, false}, &report);
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
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true}, &report);
  CHECK(report.convs_channels_last == 3);
  CHECK(report.batch_norms_scaled == 1);
  // ReLU, MaxPool, Add, PRelu, Concat, AveragePool, GlobalAveragePool.
  CHECK(report.ops_channels_last == 7);
  // The input into NHWC, and the pooled [N,1,1,C] back for Flatten: nothing else crosses.
  CHECK(report.transposes == 2);
  for (const OpDef& op : n.ops)
    if (op.op_type == "Conv") CHECK(std::get<std::string>(op.attrs.at("layout")) == "NHWC");
  CHECK(report.summary() == "folded 2 BatchNormalization into convolutions; 3 convolutions and 8 other ops in NHWC "
                            "(1 BatchNormalization as a scale and shift), 2 transposes");
  check_same_outputs(m, n, 5);
  // Compiled for the CPU, the normalized model still matches the model as imported.
  const OpGraph g = lower_model(n);
  const std::vector<HostTensor> in = {random_f32({2, 3, 12, 12}, 9)};
  const Schedule s = schedule_as_cli(g, shipped_spec("x86-64-avx2-generic"), "welder");
  const Compilation c = compile_with(g, shipped_spec("x86-64-avx2-generic"), s, "cpu");
  const CompareResult r = compare_tensors(c.executable->run(in)[0], interpret(lower_model(m), in)[0]);
  CHECK_MESSAGE(r.ok, r.message);
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
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true}, &report);
  CHECK(report.batch_norms_folded == 0);
  CHECK(report.batch_norms_scaled == 1);
  CHECK(report.convs_channels_last == 1);
  CHECK(report.transposes == 3);  // x in; y and z out
  check_same_outputs(m, n, 7);
  NormalizeReport none;
  normalize_model(m, lower_model(m), NormalizeOptions{false, false}, &none);
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
  const ModelDef n = normalize_model(m, lower_model(m), NormalizeOptions{true, true}, &report);
  CHECK(report.convs_channels_last == 2);
  CHECK(report.transposes_absorbed == 2);
  CHECK(report.transposes == 2);  // x into NHWC (read by the first conv and the add), the output back
  int transposes = 0;
  for (const OpDef& op : n.ops) transposes += op.op_type == "Transpose";
  CHECK(transposes == 2);
  check_same_outputs(m, n, 13);
}

TEST_CASE("normalize: an RGB stem convolution gets its input channels zero-padded to the alignment") {
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {2, 3, 20, 20});
  const std::string y = b.op("Conv", {x, b.weight("w", {16, 3, 7, 7}, 1, -0.2, 0.2), b.weight("b", {16}, 2)},
                             {{"kernel_shape", std::vector<int64_t>{7, 7}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}},
                              {"strides", std::vector<int64_t>{2, 2}}});
  const ModelDef m = b.model({b.op("Relu", {y})});
  NormalizeOptions options{true, true, 16};
  NormalizeReport report;
  const ModelDef n = normalize_model(m, lower_model(m), options, &report);
  CHECK(report.convs_channels_last == 1);
  CHECK(report.convs_channels_padded == 1);
  int pads = 0;
  for (const OpDef& op : n.ops) pads += op.op_type == "Pad";
  CHECK(pads == 1);
  check_same_outputs(m, n, 17);
  // Through compile() for the H100 spec, the padded convolution takes the tensor-core family.
  CompileRequest r;
  r.model = &m;
  r.backend.clear();
  r.spec = shipped_spec("nvidia-h100-sxm");
  r.last = Stage::schedule;
  const Compilation c = compile(r);
  CHECK(c.normalized.convs_channels_padded == 1);
  bool tensor_cores = false;
  for (const ScheduleGroup& g : c.schedule.groups) tensor_cores |= g.group.kernel.family == "mma" || g.group.kernel.family == "wgmma";
  CHECK(tensor_cores);
  // Without the alignment (the CPU), nothing is padded.
  NormalizeReport unpadded;
  normalize_model(m, lower_model(m), NormalizeOptions{true, true, 0}, &unpadded);
  CHECK(unpadded.convs_channels_padded == 0);
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
  CHECK(cpu.normalized.convs_channels_last == 0);
  r.normalize = NormalizeOptions{false, false};
  const Compilation as_imported = compile(r);
  CHECK(as_imported.graph.print() == as_imported.reference.print());
  // The normalized GPU graph computes what the imported model does.
  const ModelDef m = load_model(path);
  NormalizeOptions both{true, true};
  check_same_outputs(m, normalize_model(m, lower_model(m), both), 11);
}

}  // namespace tessel::testing
