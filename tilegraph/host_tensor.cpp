// HostTensor storage and deterministic random weights.
#include "tilegraph/host_tensor.h"

#include <cmath>

#include "tilegraph/error.h"

namespace tessel {

HostTensor::HostTensor(TensorType type)
    : type_(std::move(type)), data_(static_cast<size_t>(type_.num_elements()), 0.0) {}

HostTensor::HostTensor(TensorType type, std::vector<double> values)
    : type_(std::move(type)), data_(std::move(values)) {
  TESSEL_ASSERT(static_cast<int64_t>(data_.size()) == type_.num_elements(), "HostTensor of ",
                type_.print(), " given ", data_.size(), " values");
  if (type_.dtype != DType::f64)
    for (double& v : data_) v = round_to(type_.dtype, v);
}

int64_t HostTensor::as_int(int64_t i) const {
  const double v = data_[i];
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

std::vector<int64_t> HostTensor::as_ints() const {
  std::vector<int64_t> out;
  out.reserve(data_.size());
  for (int64_t i = 0; i < size(); ++i) out.push_back(as_int(i));
  return out;
}

namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double unit_uniform(uint64_t& state) {  // in (0, 1)
  return (static_cast<double>(splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
}  // namespace

HostTensor materialize_random(const TensorType& type, const RandomInit& init) {
  const int64_t n = type.num_elements();
  std::vector<double> values(static_cast<size_t>(n));
  uint64_t state = init.seed * 0x2545f4914f6cdd1dull + 1;
  for (int64_t i = 0; i < n; ++i) {
    if (init.dist == RandomInit::Dist::uniform) {
      values[i] = init.a + (init.b - init.a) * unit_uniform(state);
    } else {
      const double u1 = unit_uniform(state), u2 = unit_uniform(state);
      values[i] = init.a + init.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    if (is_integer(type.dtype) || type.dtype == DType::boolean) values[i] = std::floor(values[i]);
  }
  return HostTensor(type, std::move(values));
}

}  // namespace tessel
