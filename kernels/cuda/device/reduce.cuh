// Cooperative reductions: `lanes` consecutive threads of one warp share one output point, each
// combines a strided slice of the reduction domain, then the partial values are combined with
// warp shuffles (butterfly over xor distances lanes/2, ..., 1), so every lane of the segment ends
// with the full result. `lanes` is a power of two no larger than the warp; every thread of the
// warp must call this (inactive threads pass the combiner's identity). `mask` is the full-warp
// mask of the target (generated from the spec's warp width).
//
//   acc = tsl::segment_combine(acc, lanes, mask, [](double a, double b) { return tsl::c_sum(a, b); });
#pragma once

namespace tsl {

template <class T, class F>
__device__ __forceinline__ T segment_combine(T v, unsigned lanes, unsigned mask, F combine) {
  for (unsigned off = lanes >> 1; off > 0; off >>= 1) v = combine(v, __shfl_xor_sync(mask, v, off));
  return v;
}

// bool has no shuffle overload: carried as int.
template <class F>
__device__ __forceinline__ bool segment_combine(bool v, unsigned lanes, unsigned mask, F combine) {
  int x = v;
  for (unsigned off = lanes >> 1; off > 0; off >>= 1) x = combine(x != 0, __shfl_xor_sync(mask, x, off) != 0);
  return x != 0;
}

}  // namespace tsl
