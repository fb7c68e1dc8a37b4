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

// The values are packed into 32-bit words and stored with one st.global.v4 (v2): a RowVec of
// 16-bit values assigned member by member was stored as N 2-byte stores, and a uint4 as four
// 4-byte ones (nvcc splits a struct store into its members; seen in the PTX of a streamed
// softmax). `dst` is global memory, 16-byte aligned (the caller's guarantee, above).
template <class T, int N>
__device__ __forceinline__ void row_store(T* __restrict__ dst, const T (&src)[N]) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      unsigned w[4];
      memcpy(w, reinterpret_cast<const unsigned char*>(src) + 16 * c, 16);
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(reinterpret_cast<unsigned char*>(dst) + 16 * c), "r"(w[0]),
                   "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
  } else if constexpr (kBytes == 8) {
    unsigned w[2];
    memcpy(w, src, 8);
    asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(dst), "r"(w[0]), "r"(w[1]) : "memory");
  } else if constexpr (kBytes == 4) {
    unsigned w;
    memcpy(&w, src, 4);
    *reinterpret_cast<unsigned*>(dst) = w;
  } else {
    RowVec<T, N> w;
#pragma unroll
    for (int i = 0; i < N; ++i) w.v[i] = src[i];
    *reinterpret_cast<RowVec<T, N>*>(dst) = w;
  }
}

}  // namespace tsl
