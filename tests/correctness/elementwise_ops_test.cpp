// Elementwise operators against std:: math evaluated here: broadcasting, activations, integer
// semantics, Where, Clip, Cast.
#include <cmath>
#include <functional>

#include "../test_util.h"

using namespace tessel;
using namespace tessel::testing;

namespace {
HostTensor map_values(const HostTensor& x, const std::function<double(double)>& f) {
  std::vector<double> v;
  for (int64_t i = 0; i < x.size(); ++i) v.push_back(f(x[i]));
  return HostTensor(x.type(), v);
}
}  // namespace

TEST_CASE("binary ops broadcast like NumPy") {
  const HostTensor a = random_f32({2, 1, 3}, 1), b = random_f32({4, 1}, 2);
  const auto out = run_op("Sub", {a, b});
  REQUIRE(out[0].shape() == std::vector<int64_t>{2, 4, 3});
  std::vector<double> e;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) e.push_back(a[i * 3 + k] - b[j]);
  check_close(out[0], f32({2, 4, 3}, e));
  CHECK_THROWS_AS(run_op("Add", {random_f32({2, 3}, 1), random_f32({4}, 2)}), UserError);
}

TEST_CASE("activations match their formulas") {
  const HostTensor x = random_f32({37}, 3);  // a prime length: no vector-width multiple
  const double pi = 3.14159265358979323846;
  struct Case {
    const char* op;
    std::function<double(double)> f;
    std::map<std::string, AttrValue> attrs;
  };
  const std::vector<Case> cases = {
      {"Relu", [](double v) { return std::max(v, 0.0); }, {}},
      {"LeakyRelu", [](double v) { return v < 0 ? 0.1 * v : v; }, {{"alpha", 0.1}}},
      {"Elu", [](double v) { return v < 0 ? 2.0 * (std::exp(v) - 1) : v; }, {{"alpha", 2.0}}},
      {"Selu", [](double v) { return 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * (std::exp(v) - 1)); }, {}},
      {"Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }, {}},
      {"Tanh", [](double v) { return std::tanh(v); }, {}},
      {"Softplus", [](double v) { return std::log1p(std::exp(v)); }, {}},
      {"HardSigmoid", [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }, {}},
      {"HardSwish", [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }, {}},
      {"Gelu", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, {}},
      {"Gelu", [&](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v))); },
       {{"approximate", std::string("tanh")}}},
      {"Silu", [](double v) { return v / (1 + std::exp(-v)); }, {}},
      {"Mish", [](double v) { return v * std::tanh(std::log1p(std::exp(v))); }, {}},
      {"Erf", [](double v) { return std::erf(v); }, {}},
      {"Exp", [](double v) { return std::exp(v); }, {}},
      {"Abs", [](double v) { return std::fabs(v); }, {}},
      {"Neg", [](double v) { return -v; }, {}},
      {"Floor", [](double v) { return std::floor(v); }, {}},
      {"Ceil", [](double v) { return std::ceil(v); }, {}},
      {"Sign", [](double v) { return (v > 0) - (v < 0); }, {}},
      {"Sin", [](double v) { return std::sin(v); }, {}},
      {"Cos", [](double v) { return std::cos(v); }, {}},
      {"Reciprocal", [](double v) { return 1 / v; }, {}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    check_close(run_op(c.op, {x}, c.attrs)[0], map_values(x, c.f));
  }
  const HostTensor pos = map_values(x, [](double v) { return std::fabs(v) + 0.5; });
  check_close(run_op("Sqrt", {pos})[0], map_values(pos, [](double v) { return std::sqrt(v); }));
  check_close(run_op("Log", {pos})[0], map_values(pos, [](double v) { return std::log(v); }));
}

TEST_CASE("integer arithmetic truncates and wraps") {
  const HostTensor a = tensor(DType::i32, {4}, {7, -7, 2147483647, 9});
  const HostTensor b = tensor(DType::i32, {4}, {2, 2, 1, -4});
  CHECK(run_op("Div", {a, b})[0].values() == std::vector<double>{3, -3, 2147483647, -2});
  CHECK(run_op("Add", {a, b})[0].values() == std::vector<double>{9, -5, -2147483648.0, 5});
  CHECK(run_op("Mod", {a, b})[0].values() == std::vector<double>{1, 1, 0, -3});
}

TEST_CASE("Where, Clip, comparisons and Cast") {
  const HostTensor c = tensor(DType::boolean, {3}, {1, 0, 1});
  const HostTensor x = f32({3}, {1, 2, 3}), y = f32({1}, {-1});
  CHECK(run_op("Where", {c, x, y})[0].values() == std::vector<double>{1, -1, 3});
  const HostTensor lo = f32({}, {1.5}), hi = f32({}, {2.5});
  CHECK(run_op("Clip", {x, lo, hi})[0].values() == std::vector<double>{1.5, 2, 2.5});
  CHECK(run_op("Greater", {x, f32({}, {2})})[0].values() == std::vector<double>{0, 0, 1});
  CHECK(run_op("Greater", {x, f32({}, {2})})[0].dtype() == DType::boolean);
  const auto cast = run_op("Cast", {f32({3}, {-1.7, 2.5, 300})}, {{"to", int64_t{3}}})[0];  // INT8
  CHECK(cast.dtype() == DType::i8);
  CHECK(cast.values() == std::vector<double>{-1, 2, 44});
  const auto half = run_op("Cast", {f32({1}, {0.1})}, {{"to", std::string("f16")}})[0];
  CHECK(half[0] == static_cast<double>(half_bits_to_float(float_to_half_bits(0.1f))));
}
