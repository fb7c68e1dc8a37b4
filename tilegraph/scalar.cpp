// Scalar constants held exactly (scalar.h).
#include "tilegraph/scalar.h"

#include <charconv>
#include <cmath>

namespace tessel {

namespace {

// 2^63 as a double: the first double above the int64 range.
constexpr double kTwoToThe63 = 9223372036854775808.0;

// Whether double `d` is exactly the integer `i`.
bool double_is(double d, int64_t i) {
  if (!(d >= -kTwoToThe63 && d < kTwoToThe63) || d != std::trunc(d)) return false;
  return static_cast<int64_t>(d) == i;
}

}  // namespace

Scalar Scalar::integer(int64_t v) {
  Scalar s;
  s.integer_ = v;
  s.real_ = static_cast<double>(v);
  s.is_integer_ = true;
  return s;
}

double Scalar::as_double() const { return real_; }

int64_t Scalar::as_int64() const { return is_integer_ ? integer_ : saturating_int64(real_); }

std::string Scalar::print() const {
  if (is_integer_) return std::to_string(integer_);
  if (std::isnan(real_)) return "nan";
  if (std::isinf(real_)) return real_ > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), real_);
  return std::string(buf, res.ptr);
}

bool Scalar::operator==(const Scalar& other) const {
  if (is_integer_ && other.is_integer_) return integer_ == other.integer_;
  if (is_integer_) return double_is(other.real_, integer_);
  if (other.is_integer_) return double_is(real_, other.integer_);
  return real_ == other.real_ || (std::isnan(real_) && std::isnan(other.real_));
}

Scalar round_to(DType t, const Scalar& v) {
  if (is_integer(t)) return Scalar::integer(v.is_integer() ? wrap_integer(t, v.as_int64()) : float_to_integer(t, v.as_double()));
  if (!v.is_integer()) return round_to(t, v.as_double());
  if (t == DType::boolean) return v.as_int64() != 0 ? 1.0 : 0.0;
  return integer_to_float(t, v.as_int64());
}

}  // namespace tessel
