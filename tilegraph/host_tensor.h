// A tensor's values on the host, as used by the reference interpreter, weights and tensor files.
//
// Values are stored as doubles already rounded to the tensor's dtype (see dtype.h), so the
// interpreter and every file format convert only at their boundary.
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
  HostTensor(TensorType type, std::vector<double> values);  // values are rounded to the dtype

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<int64_t>& shape() const { return type_.shape; }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  const double* data() const { return data_.data(); }
  double* data() { return data_.data(); }
  double operator[](int64_t i) const { return data_[i]; }
  const std::vector<double>& values() const { return data_; }

  /// Value i as an integer (clamped to the int64 range; NaN gives 0).
  int64_t as_int(int64_t i) const;
  std::vector<int64_t> as_ints() const;

 private:
  TensorType type_;
  std::vector<double> data_;
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
