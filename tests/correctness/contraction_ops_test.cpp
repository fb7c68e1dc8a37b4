// MatMul, Gemm, Conv and ConvTranspose against direct loops written here, independently of the
// lowering (random inputs, odd sizes, strides, padding, dilation, groups, both layouts).
#include <cmath>

#include "../test_util.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

HostTensor naive_matmul(const HostTensor& a, const HostTensor& b, int64_t batch, int64_t M, int64_t K,
                        int64_t N, bool bcast_b) {
  std::vector<double> out(static_cast<size_t>(batch * M * N), 0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a[(p * M + i) * K + k] * b[((bcast_b ? 0 : p) * K + k) * N + j];
        out[(p * M + i) * N + j] = s;
      }
  return f32({batch, M, N}, out);
}

// Direct NCHW convolution: y[n, m, oh, ow] = sum x[n, g*Cg + c, oh*s - p + kh*d, ...] w[m, c, kh, kw].
HostTensor naive_conv(const HostTensor& x, const HostTensor& w, int64_t stride, int64_t pad,
                      int64_t dil, int64_t groups) {
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t M = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  const int64_t OH = (H + 2 * pad - (KH - 1) * dil - 1) / stride + 1;
  const int64_t OW = (W + 2 * pad - (KW - 1) * dil - 1) / stride + 1;
  const int64_t Mg = M / groups;
  (void)C;
  std::vector<double> y(static_cast<size_t>(N * M * OH * OW), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = 0;
          const int64_t g = m / Mg;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * stride - pad + kh * dil, iw = ow * stride - pad + kw * dil;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x[((n * x.shape()[1] + g * Cg + c) * H + ih) * W + iw] * w[((m * Cg + c) * KH + kh) * KW + kw];
              }
          y[((n * M + m) * OH + oh) * OW + ow] = s;
        }
  return f32({N, M, OH, OW}, y);
}

HostTensor to_nhwc(const HostTensor& t) {  // [N, C, H, W] -> [N, H, W, C]
  const int64_t N = t.shape()[0], C = t.shape()[1], H = t.shape()[2], W = t.shape()[3];
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) v[((n * H + h) * W + w) * C + c] = t[((n * C + c) * H + h) * W + w];
  return f32({N, H, W, C}, v);
}

}  // namespace

TEST_CASE("MatMul: batched, with a broadcast right operand, odd sizes") {
  const HostTensor a = random_f32({3, 5, 7}, 1), b = random_f32({7, 11}, 2);
  const auto out = run_op("MatMul", {a, b});
  check_close(out[0], naive_matmul(a, b, 3, 5, 7, 11, true));
}

TEST_CASE("MatMul: 1-D operands drop their dimension") {
  const HostTensor v = random_f32({4}, 3), m = random_f32({4, 3}, 4);
  const auto out = run_op("MatMul", {v, m});
  CHECK(out[0].shape() == std::vector<int64_t>{3});
  for (int64_t j = 0; j < 3; ++j) {
    double s = 0;
    for (int64_t k = 0; k < 4; ++k) s += v[k] * m[k * 3 + j];
    CHECK(out[0][j] == doctest::Approx(static_cast<float>(s)));
  }
}

TEST_CASE("Gemm: transposes, alpha, beta and a broadcast bias") {
  const HostTensor a = random_f32({6, 4}, 5), b = random_f32({5, 6}, 6), c = random_f32({5}, 7);
  const auto out = run_op("Gemm", {a, b, c}, {{"transA", int64_t{1}}, {"transB", int64_t{1}},
                                             {"alpha", 0.5}, {"beta", 2.0}});
  std::vector<double> expect(4 * 5);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 6; ++k) s += a[k * 4 + i] * b[j * 6 + k];
      expect[i * 5 + j] = 0.5 * s + 2.0 * c[j];
    }
  check_close(out[0], f32({4, 5}, expect));
}

TEST_CASE("Conv: stride, padding, dilation and groups against a direct loop") {
  struct Case { int64_t C, M, groups, stride, pad, dil, K, H; };
  for (const Case& k : {Case{4, 6, 2, 2, 1, 2, 3, 9}, Case{3, 5, 1, 1, 0, 1, 1, 7},
                        Case{6, 6, 6, 1, 1, 1, 3, 5} /* depthwise */, Case{2, 3, 1, 3, 2, 1, 5, 13}}) {
    CAPTURE(k.groups);
    CAPTURE(k.stride);
    const HostTensor x = random_f32({2, k.C, k.H, k.H + 2}, 10 + k.C);
    const HostTensor w = random_f32({k.M, k.C / k.groups, k.K, k.K}, 20 + k.M);
    const std::vector<int64_t> pads(4, k.pad);
    const auto out = run_op("Conv", {x, w}, {{"strides", std::vector<int64_t>{k.stride, k.stride}},
                                            {"pads", pads},
                                            {"dilations", std::vector<int64_t>{k.dil, k.dil}},
                                            {"group", k.groups}});
    check_close(out[0], naive_conv(x, w, k.stride, k.pad, k.dil, k.groups));
  }
}

TEST_CASE("Conv: NHWC layout computes the same as NCHW, and a bias is added per channel") {
  const HostTensor x = random_f32({1, 4, 6, 5}, 30), w = random_f32({8, 2, 3, 3}, 31), b = random_f32({8}, 32);
  std::map<std::string, AttrValue> attrs{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}};
  const HostTensor nchw = run_op("Conv", {x, w, b}, attrs)[0];
  // NHWC weight layout is [M, kH, kW, C/g].
  std::vector<double> wv(static_cast<size_t>(w.size()));
  for (int64_t m = 0; m < 8; ++m)
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t kh = 0; kh < 3; ++kh)
        for (int64_t kw = 0; kw < 3; ++kw) wv[((m * 3 + kh) * 3 + kw) * 2 + c] = w[((m * 2 + c) * 3 + kh) * 3 + kw];
  attrs["layout"] = std::string("NHWC");
  const HostTensor nhwc = run_op("Conv", {to_nhwc(x), f32({8, 3, 3, 2}, wv), b}, attrs)[0];
  check_close(nhwc, to_nhwc(nchw));
  HostTensor no_bias = naive_conv(x, w, 1, 1, 1, 2);
  std::vector<double> with_bias = no_bias.values();
  for (int64_t i = 0; i < no_bias.size(); ++i) with_bias[i] += b[(i / 30) % 8];
  check_close(nchw, f32(no_bias.shape(), with_bias));
}

TEST_CASE("ConvTranspose: stride, padding, output padding and groups against a scatter loop") {
  const int64_t N = 1, C = 4, H = 3, W = 4, Mg = 3, groups = 2, K = 3, s = 2, p = 1, op = 1;
  const HostTensor x = random_f32({N, C, H, W}, 40), w = random_f32({C, Mg, K, K}, 41);
  const auto out = run_op("ConvTranspose", {x, w}, {{"strides", std::vector<int64_t>{s, s}},
                                                   {"pads", std::vector<int64_t>{p, p, p, p}},
                                                   {"output_padding", std::vector<int64_t>{op, op}},
                                                   {"group", groups}});
  const int64_t OH = s * (H - 1) + op + K - 2 * p, OW = s * (W - 1) + op + K - 2 * p, M = Mg * groups;
  std::vector<double> y(static_cast<size_t>(N * M * OH * OW), 0);
  const int64_t Cg = C / groups;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ih = 0; ih < H; ++ih)
      for (int64_t iw = 0; iw < W; ++iw)
        for (int64_t mg = 0; mg < Mg; ++mg)
          for (int64_t kh = 0; kh < K; ++kh)
            for (int64_t kw = 0; kw < K; ++kw) {
              const int64_t oh = ih * s + kh - p, ow = iw * s + kw - p;
              if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
              const int64_t m = (c / Cg) * Mg + mg;
              y[(m * OH + oh) * OW + ow] += x[(c * H + ih) * W + iw] * w[((c * Mg + mg) * K + kh) * K + kw];
            }
  check_close(out[0], f32({N, M, OH, OW}, y));
}

TEST_CASE("shape errors name the shapes") {
  try {
    run_op("MatMul", {random_f32({2, 3}, 1), random_f32({4, 5}, 2)});
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("f32[2,3]") != std::string::npos);
    CHECK(std::string(e.what()).find("f32[4,5]") != std::string::npos);
    CHECK(std::string(e.what()).find("op 'op' (MatMul)") != std::string::npos);
  }
}
