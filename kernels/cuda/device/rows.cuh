// Tessel device library: vector accesses of the row kernel (row_plan.h). A row is read and written
// `N` elements at a time (16 bytes: one ld.global.v4 / st.global.v4; a wider vector of a wider
// dtype splits into several). The struct asks for at most 16-byte alignment, which is what the
// caller guarantees: rows start at multiples of N elements and every buffer is at least 16-byte
// aligned (cuda_backend.cpp's arena alignment, cuMemAlloc for inputs and weights).
#pragma once

namespace tsl {

template <class T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) RowVec {
  T v[N];
};

// dst: N consecutive registers of the caller's array (constant indices after unrolling).
template <class T, int N>
__device__ __forceinline__ void row_load(T* dst, const T* __restrict__ src) {
  const RowVec<T, N> w = *reinterpret_cast<const RowVec<T, N>*>(src);
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = w.v[i];
}

template <class T, int N>
__device__ __forceinline__ void row_store(T* __restrict__ dst, const T (&src)[N]) {
  RowVec<T, N> w;
#pragma unroll
  for (int i = 0; i < N; ++i) w.v[i] = src[i];
  *reinterpret_cast<RowVec<T, N>*>(dst) = w;
}

}  // namespace tsl
