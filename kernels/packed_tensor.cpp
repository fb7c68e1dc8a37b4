#include "kernels/packed_tensor.h"

#include <cstring>

#include "tilegraph/error.h"

namespace tessel {

namespace {

template <typename T>
void store(uint8_t* out, int64_t i, T v) {
  std::memcpy(out + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T>
T load(const uint8_t* in, int64_t i) {
  T v;
  std::memcpy(&v, in + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

}  // namespace

std::vector<uint8_t> pack_tensor(const HostTensor& t) {
  const int64_t n = t.size();
  std::vector<uint8_t> out(static_cast<size_t>(n * dtype_bytes(t.dtype())));
  uint8_t* p = out.data();
  if (t.holds_int64()) {
    if (n > 0) std::memcpy(p, t.int64_data(), out.size());
    return out;
  }
  const double* v = t.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::f64: store<double>(p, i, v[i]); break;
      case DType::f32: store<float>(p, i, static_cast<float>(v[i])); break;
      case DType::f16: store<uint16_t>(p, i, float_to_half_bits(static_cast<float>(v[i]))); break;
      case DType::bf16: store<uint16_t>(p, i, float_to_bf16_bits(static_cast<float>(v[i]))); break;
      case DType::i64: break;  // copied above
      case DType::i32: store<int32_t>(p, i, static_cast<int32_t>(v[i])); break;
      case DType::i8: store<int8_t>(p, i, static_cast<int8_t>(v[i])); break;
      case DType::u8: store<uint8_t>(p, i, static_cast<uint8_t>(v[i])); break;
      case DType::boolean: store<uint8_t>(p, i, v[i] != 0 ? 1 : 0); break;
    }
  }
  return out;
}

HostTensor unpack_tensor(const TensorType& type, const void* data) {
  const int64_t n = type.num_elements();
  const auto* p = static_cast<const uint8_t*>(data);
  if (type.dtype == DType::i64) {
    std::vector<int64_t> exact(static_cast<size_t>(n));
    if (n > 0) std::memcpy(exact.data(), p, static_cast<size_t>(n) * sizeof(int64_t));
    return HostTensor::from_integers(type, std::move(exact));
  }
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (type.dtype) {
      case DType::f64: v[i] = load<double>(p, i); break;
      case DType::f32: v[i] = load<float>(p, i); break;
      case DType::f16: v[i] = half_bits_to_float(load<uint16_t>(p, i)); break;
      case DType::bf16: v[i] = bf16_bits_to_float(load<uint16_t>(p, i)); break;
      case DType::i64: break;  // read above
      case DType::i32: v[i] = load<int32_t>(p, i); break;
      case DType::i8: v[i] = load<int8_t>(p, i); break;
      case DType::u8: v[i] = load<uint8_t>(p, i); break;
      case DType::boolean: v[i] = load<uint8_t>(p, i) != 0 ? 1 : 0; break;
    }
  }
  return HostTensor(type, std::move(v));
}

}  // namespace tessel
