// DType names, sizes and rounding.
#include <doctest/doctest.h>

#include <cmath>

#include "tilegraph/dtype.h"
#include "tilegraph/host_tensor.h"

using namespace tessel;

TEST_CASE("dtype names round-trip and unknown names are rejected") {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i8,
                  DType::u8, DType::boolean})
    CHECK(parse_dtype(dtype_name(t)) == t);
  CHECK_FALSE(parse_dtype("float32").has_value());
  CHECK(dtype_bytes(DType::bf16) == 2);
  CHECK(dtype_bytes(DType::i64) == 8);
}

TEST_CASE("float rounding: f32, f16 and bf16 round to nearest even") {
  CHECK(round_to(DType::f32, 0.1) == static_cast<double>(0.1f));
  CHECK(round_to(DType::f16, 1.0 + 1.0 / 4096) == 1.0);           // below half an ulp (2^-10)
  CHECK(round_to(DType::f16, 1.0 + 3.0 / 2048) == 1.0 + 2.0 / 1024);  // tie rounds to even
  CHECK(round_to(DType::f16, 65520.0) == INFINITY);
  CHECK(round_to(DType::f16, 6e-8) == std::ldexp(1.0, -24));      // smallest subnormal
  CHECK(round_to(DType::bf16, 1.00390625) == 1.0);                // tie to even
  CHECK(std::isnan(round_to(DType::f16, NAN)));
  CHECK(half_bits_to_float(float_to_half_bits(-2.5f)) == -2.5f);
}

TEST_CASE("integer rounding truncates and wraps like two's complement") {
  CHECK(round_to(DType::i32, 2.9) == 2);
  CHECK(round_to(DType::i32, -2.9) == -2);
  CHECK(round_to(DType::i8, 130) == -126);
  CHECK(round_to(DType::u8, -1) == 255);
  CHECK(round_to(DType::i32, 2147483648.0) == -2147483648.0);
  CHECK(round_to(DType::boolean, 0.5) == 1);
  CHECK(round_to(DType::boolean, 0) == 0);
}

TEST_CASE("random weights: a large tensor, drawn in parallel, has the values of one drawn element by element") {
  // materialize_random splits a tensor of a million elements or more over threads; splitmix64's
  // state steps by a constant, so every element's draws are its own whatever the split. Check the
  // first elements against a small tensor of the same stream and the last against the formula.
  const int64_t n = (int64_t{1} << 21) + 37;
  for (const RandomInit::Dist dist : {RandomInit::Dist::normal, RandomInit::Dist::uniform}) {
    const RandomInit init{dist, 0.5, 2.0, 7};
    const HostTensor large = materialize_random(TensorType{DType::f64, {n}}, init);
    const HostTensor small = materialize_random(TensorType{DType::f64, {1000}}, init);
    for (int64_t i = 0; i < 1000; ++i) REQUIRE(large[i] == small[i]);
    // The reference: splitmix64 from the seed's state, one draw (uniform) or two (normal) each.
    auto element = [&](int64_t i) {
      uint64_t state = init.seed * 0x2545f4914f6cdd1dull + 1;
      auto next = [&] {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return (static_cast<double>((z ^ (z >> 31)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
      };
      state += static_cast<uint64_t>(i) * (dist == RandomInit::Dist::normal ? 2u : 1u) * 0x9e3779b97f4a7c15ull;
      if (dist == RandomInit::Dist::uniform) return init.a + (init.b - init.a) * next();
      const double u1 = next(), u2 = next();
      return init.a + init.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    };
    for (int64_t i : {int64_t{0}, n / 2 - 1, n / 2, n / 2 + 1, n - 2, n - 1}) CHECK(large[i] == element(i));
  }
}
