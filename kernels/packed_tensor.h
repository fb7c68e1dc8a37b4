// Tensors in their machine layout: what compiled kernels read and write. The interpreter's
// HostTensor holds doubles (int64_t for i64, copied exactly); compiled code holds each dtype in
// its own storage (dtype_bytes per
// element, row-major): f64 double, f32 float, f16 and bf16 as 16-bit patterns (round to nearest
// even), i64/i32/i8/u8 as those integers, bool as one byte 0 or 1.
#pragma once

#include <cstdint>
#include <vector>

#include "tilegraph/host_tensor.h"

namespace tessel {

/// The bytes of `t` in its dtype's storage.
std::vector<uint8_t> pack_tensor(const HostTensor& t);

/// Reads a tensor of `type` from `data` (type.num_elements() x dtype_bytes bytes).
HostTensor unpack_tensor(const TensorType& type, const void* data);

}  // namespace tessel
