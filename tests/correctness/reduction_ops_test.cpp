// Reductions, softmax, normalizations and pooling against loops written here.
#include <cmath>

#include "../test_util.h"

using namespace tessel;
using namespace tessel::testing;

TEST_CASE("ReduceMean / ReduceMax over chosen axes, with and without keepdims") {
  const HostTensor x = random_f32({3, 4, 5}, 1);
  const auto mean = run_op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}})[0];
  const auto mx = run_op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{-1}}})[0];
  REQUIRE(mean.shape() == std::vector<int64_t>{4});
  REQUIRE(mx.shape() == std::vector<int64_t>{3, 4, 1});
  for (int j = 0; j < 4; ++j) {
    double s = 0;
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 5; ++k) s += x[(i * 4 + j) * 5 + k];
    CHECK(mean[j] == doctest::Approx(static_cast<float>(s / 15)));
  }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double m = -INFINITY;
      for (int k = 0; k < 5; ++k) m = std::max(m, x[(i * 4 + j) * 5 + k]);
      CHECK(mx[i * 4 + j] == m);
    }
  // The axes as an input (opset 18 style), reducing everything when empty.
  const auto all = run_op("ReduceSum", {x, i64({0}, {})}, {{"keepdims", int64_t{0}}}, 1, {1})[0];
  double s = 0;
  for (double v : x.values()) s += v;
  CHECK(all.shape().empty());
  CHECK(all[0] == doctest::Approx(static_cast<float>(s)));
}

TEST_CASE("ArgMax picks the first maximum, or the last with select_last_index") {
  const HostTensor x = f32({2, 4}, {1, 5, 5, 2, 7, 0, 7, 7});
  CHECK(run_op("ArgMax", {x}, {{"axis", int64_t{1}}})[0].values() == std::vector<double>{1, 0});
  CHECK(run_op("ArgMax", {x}, {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}})[0].values() ==
        std::vector<double>{2, 3});
  const auto amin = run_op("ArgMin", {x}, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}})[0];
  CHECK(amin.dtype() == DType::i64);
  CHECK(amin.values() == std::vector<double>{0, 1, 0, 0});
}

TEST_CASE("Softmax and LogSoftmax over the last axis") {
  const HostTensor x = random_f32({3, 129}, 2);  // rows not a multiple of any lane count
  const auto sm = run_op("Softmax", {x})[0];
  const auto lsm = run_op("LogSoftmax", {x})[0];
  for (int r = 0; r < 3; ++r) {
    double m = -INFINITY, z = 0;
    for (int c = 0; c < 129; ++c) m = std::max(m, x[r * 129 + c]);
    for (int c = 0; c < 129; ++c) z += std::exp(x[r * 129 + c] - m);
    for (int c = 0; c < 129; ++c) {
      CHECK(sm[r * 129 + c] == doctest::Approx(static_cast<float>(std::exp(x[r * 129 + c] - m) / z)));
      CHECK(lsm[r * 129 + c] == doctest::Approx(static_cast<float>(x[r * 129 + c] - m - std::log(z))));
    }
  }
}

TEST_CASE("LayerNormalization, RMSNormalization and BatchNormalization") {
  const HostTensor x = random_f32({2, 3, 8}, 3), g = random_f32({8}, 4), b = random_f32({8}, 5);
  const auto ln = run_op("LayerNormalization", {x, g, b}, {{"epsilon", 1e-3}})[0];
  const auto rms = run_op("RMSNormalization", {x, g}, {{"epsilon", 1e-3}})[0];
  for (int row = 0; row < 6; ++row) {
    double mean = 0, var = 0, ms = 0;
    for (int c = 0; c < 8; ++c) mean += x[row * 8 + c] / 8;
    for (int c = 0; c < 8; ++c) var += (x[row * 8 + c] - mean) * (x[row * 8 + c] - mean) / 8;
    for (int c = 0; c < 8; ++c) ms += x[row * 8 + c] * x[row * 8 + c] / 8;
    for (int c = 0; c < 8; ++c) {
      const double v = x[row * 8 + c];
      CHECK(ln[row * 8 + c] == doctest::Approx(static_cast<float>((v - mean) / std::sqrt(var + 1e-3) * g[c] + b[c])));
      CHECK(rms[row * 8 + c] == doctest::Approx(static_cast<float>(v / std::sqrt(ms + 1e-3) * g[c])));
    }
  }
  const HostTensor img = random_f32({2, 3, 2, 2}, 6);
  const HostTensor scale = f32({3}, {1, 2, 3}), bias = f32({3}, {0, 1, 2}), mean = f32({3}, {0.1, 0.2, 0.3}),
                   var = f32({3}, {1, 0.5, 2});
  const auto bn = run_op("BatchNormalization", {img, scale, bias, mean, var})[0];
  for (int64_t i = 0; i < img.size(); ++i) {
    const int64_t c = (i / 4) % 3;
    CHECK(bn[i] == doctest::Approx(static_cast<float>((img[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * scale[c] + bias[c])));
  }
}

TEST_CASE("MaxPool and AveragePool with padding, strides and ceil mode") {
  const HostTensor x = random_f32({1, 2, 5, 5}, 7);
  const std::map<std::string, AttrValue> attrs{{"kernel_shape", std::vector<int64_t>{3, 3}},
                                               {"strides", std::vector<int64_t>{2, 2}},
                                               {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  const auto mp = run_op("MaxPool", {x}, attrs)[0];
  auto avg_attrs = attrs;
  const auto ap = run_op("AveragePool", {x}, avg_attrs)[0];
  avg_attrs["count_include_pad"] = int64_t{1};
  const auto api = run_op("AveragePool", {x}, avg_attrs)[0];
  REQUIRE(mp.shape() == std::vector<int64_t>{1, 2, 3, 3});
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double m = -INFINITY, s = 0;
        int n = 0;
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            const int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
            if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
            m = std::max(m, x[(c * 5 + ih) * 5 + iw]);
            s += x[(c * 5 + ih) * 5 + iw];
            ++n;
          }
        const int o = (c * 3 + oh) * 3 + ow;
        CHECK(mp[o] == m);
        CHECK(ap[o] == doctest::Approx(static_cast<float>(s / n)));
        CHECK(api[o] == doctest::Approx(static_cast<float>(s / 9)));
      }
  auto ceil_attrs = attrs;
  ceil_attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0};
  ceil_attrs["ceil_mode"] = int64_t{1};
  CHECK(run_op("MaxPool", {x}, ceil_attrs)[0].shape() == std::vector<int64_t>{1, 2, 2, 2});
  const auto gap = run_op("GlobalAveragePool", {x})[0];
  REQUIRE(gap.shape() == std::vector<int64_t>{1, 2, 1, 1});
  double s = 0;
  for (int i = 0; i < 25; ++i) s += x[25 + i];
  CHECK(gap[1] == doctest::Approx(static_cast<float>(s / 25)));
}
