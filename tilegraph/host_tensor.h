// A tensor's values on the host, as used by the reference interpreter, weights and tensor files.
//
// Values are stored already rounded to the tensor's dtype (see dtype.h), so the interpreter and
// every file format convert only at their boundary. An i64 tensor stores int64_t, exact over the
// whole int64 range; every other dtype stores doubles (which hold every i32, i8, u8 and bool value
// exactly). Code that needs exact i64 values reads `int64_data()` or `as_int`; `operator[]` and
// `values()` give any tensor's values as doubles, exact for every dtype but an i64 value beyond
// 2^53, which rounds to the nearest double.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tilegraph/node.h"

namespace tessel {

class HostTensor {
 public:
  HostTensor() = default;
  /// Zero-filled tensor of `type`.
  explicit HostTensor(TensorType type);
  /// Values rounded to the dtype (round_to; into an i64 tensor a double truncates and saturates).
  HostTensor(TensorType type, std::vector<double> values);
  /// Exact integers: wrapped to an integer dtype (two's complement), rounded once to a float
  /// dtype, non-zero as 1 for bool. (A factory, not a constructor: `HostTensor(type, {1, 2})`
  /// stays the double constructor.)
  static HostTensor from_integers(TensorType type, std::vector<int64_t> values);

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<int64_t>& shape() const { return type_.shape; }
  int64_t size() const { return static_cast<int64_t>(holds_int64() ? ints_.size() : data_.size()); }
  /// True for i64 tensors, whose values live in int64_data(); the others' live in data().
  bool holds_int64() const { return type_.dtype == DType::i64; }

  /// Value i as a double (an i64 value beyond 2^53 rounds to the nearest double).
  double operator[](int64_t i) const { return holds_int64() ? static_cast<double>(ints_[i]) : data_[i]; }
  /// Every value as a double, as operator[] gives it (a copy).
  std::vector<double> values() const;

  /// The stored doubles of a tensor that is not i64 (InternalError for i64: see int64_data).
  const double* data() const;
  double* data();
  /// The stored values of an i64 tensor (InternalError for any other dtype).
  const int64_t* int64_data() const;
  int64_t* int64_data();

  /// Value i as an integer: exact for integer and bool dtypes; a float value truncates and
  /// saturates (NaN gives 0).
  int64_t as_int(int64_t i) const;
  std::vector<int64_t> as_ints() const;

  /// Sets value i to value j of `source`, which has the same dtype: an exact copy for every dtype
  /// (slices, transposes, samples of a tensor).
  void set_from(int64_t i, const HostTensor& source, int64_t j);
  /// The same values with another shape of the same element count.
  HostTensor reshaped(std::vector<int64_t> shape) const;

 private:
  TensorType type_;
  std::vector<double> data_;   // every dtype but i64
  std::vector<int64_t> ints_;  // i64
};

/// Deterministic random weights: a weight tensor that is materialized only when values are needed.
struct RandomInit {
  enum class Dist : uint8_t { normal, uniform };
  Dist dist = Dist::normal;
  double a = 0;      // normal: mean; uniform: low
  double b = 0.02;   // normal: stddev; uniform: high
  uint64_t seed = 0;
  bool operator==(const RandomInit&) const = default;
};

/// Fills a tensor from a RandomInit (splitmix64 + Box-Muller; identical on every platform).
HostTensor materialize_random(const TensorType& type, const RandomInit& init);

}  // namespace tessel
