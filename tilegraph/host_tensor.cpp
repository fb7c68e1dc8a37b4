// HostTensor storage and deterministic random weights.
#include "tilegraph/host_tensor.h"

#include <algorithm>
#include <thread>

#include <cmath>

#include "tilegraph/error.h"

namespace tessel {

HostTensor::HostTensor(TensorType type) : type_(std::move(type)) {
  const auto n = static_cast<size_t>(type_.num_elements());
  if (holds_int64()) ints_.assign(n, 0);
  else data_.assign(n, 0.0);
}

HostTensor::HostTensor(TensorType type, std::vector<double> values) : type_(std::move(type)) {
  TESSEL_ASSERT(static_cast<int64_t>(values.size()) == type_.num_elements(), "HostTensor of ",
                type_.print(), " given ", values.size(), " values");
  if (holds_int64()) {
    ints_.reserve(values.size());
    for (double v : values) ints_.push_back(saturating_int64(v));
    return;
  }
  data_ = std::move(values);
  if (type_.dtype != DType::f64)
    for (double& v : data_) v = round_to(type_.dtype, v);
}

HostTensor HostTensor::from_integers(TensorType type, std::vector<int64_t> values) {
  TESSEL_ASSERT(static_cast<int64_t>(values.size()) == type.num_elements(), "HostTensor of ",
                type.print(), " given ", values.size(), " values");
  HostTensor out;
  out.type_ = std::move(type);
  if (out.holds_int64()) {
    out.ints_ = std::move(values);
    return out;
  }
  out.data_.reserve(values.size());
  for (int64_t v : values)
    out.data_.push_back(is_float(out.type_.dtype) ? integer_to_float(out.type_.dtype, v)
                                                  : static_cast<double>(wrap_integer(out.type_.dtype, v)));
  return out;
}

std::vector<double> HostTensor::values() const {
  if (!holds_int64()) return data_;
  return std::vector<double>(ints_.begin(), ints_.end());
}

const double* HostTensor::data() const {
  TESSEL_ASSERT(!holds_int64(), "the doubles of an i64 tensor (", type_.print(), ") were asked for; read int64_data()");
  return data_.data();
}

double* HostTensor::data() {
  TESSEL_ASSERT(!holds_int64(), "the doubles of an i64 tensor (", type_.print(), ") were asked for; write int64_data()");
  return data_.data();
}

const int64_t* HostTensor::int64_data() const {
  TESSEL_ASSERT(holds_int64(), "the int64 values of a ", type_.print(), " tensor were asked for");
  return ints_.data();
}

int64_t* HostTensor::int64_data() {
  TESSEL_ASSERT(holds_int64(), "the int64 values of a ", type_.print(), " tensor were asked for");
  return ints_.data();
}

int64_t HostTensor::as_int(int64_t i) const { return holds_int64() ? ints_[i] : saturating_int64(data_[i]); }

std::vector<int64_t> HostTensor::as_ints() const {
  if (holds_int64()) return ints_;
  std::vector<int64_t> out;
  out.reserve(data_.size());
  for (double v : data_) out.push_back(saturating_int64(v));
  return out;
}

void HostTensor::set_from(int64_t i, const HostTensor& source, int64_t j) {
  TESSEL_ASSERT(source.dtype() == dtype(), "copying a ", dtype_name(source.dtype()), " value into a ",
                dtype_name(dtype()), " tensor");
  if (holds_int64()) ints_[i] = source.ints_[j];
  else data_[i] = source.data_[j];
}

HostTensor HostTensor::reshaped(std::vector<int64_t> shape) const {
  HostTensor out = *this;
  out.type_.shape = std::move(shape);
  TESSEL_ASSERT(out.type_.num_elements() == size(), "reshaping ", type_.print(), " to ", out.type_.print());
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
  const uint64_t start = init.seed * 0x2545f4914f6cdd1dull + 1;
  const bool normal = init.dist != RandomInit::Dist::uniform;
  const bool whole = is_integer(type.dtype) || type.dtype == DType::boolean;
  // Elements [begin, end). splitmix64 steps its state by a constant, so element i's draws are the
  // (1 or 2) i-th ones whatever the split: the values do not depend on the number of threads.
  auto fill = [&](int64_t begin, int64_t end) {
    uint64_t state = start + static_cast<uint64_t>(begin) * (normal ? 2u : 1u) * 0x9e3779b97f4a7c15ull;
    for (int64_t i = begin; i < end; ++i) {
      if (!normal) {
        values[i] = init.a + (init.b - init.a) * unit_uniform(state);
      } else {
        const double u1 = unit_uniform(state), u2 = unit_uniform(state);
        values[i] = init.a + init.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      }
      if (whole) values[i] = std::floor(values[i]);
    }
  };
  // A large tensor (a model's weights) in parallel: a normal draw costs a log and a cosine, and
  // ResNet-50's 25.6 million of them took most of a cached `tessel run`.
  constexpr int64_t kParallelElements = int64_t{1} << 20;
  const int64_t threads = n >= kParallelElements ? std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), n / (kParallelElements / 4)) : 1;
  if (threads <= 1) {
    fill(0, n);
  } else {
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t) pool.emplace_back(fill, n * t / threads, n * (t + 1) / threads);
    fill(0, n / threads);
    for (std::thread& th : pool) th.join();
  }
  return HostTensor(type, std::move(values));
}

}  // namespace tessel
