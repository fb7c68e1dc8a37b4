// Tessel device library: the few-row product (the "gemv" family, kernels/cuda/contraction_plan.h).
// Pasted after mma.cuh into every kernel; only kernels of the gemv family instantiate it.
//
//   C[m, n] = sum_k A[m, k] * B[k, n]   for M of a few rows (a decoding step's tokens)
//
// Operands E are float (f32) or unsigned short (f16 / bf16 bits, BF16 says which); sums are f32.
// Such a product is bound by reading B once from device memory, so the kernel keeps as many of
// B's bytes requested as it can and does nothing else with them: every lane loads UNROLL of its
// VB-element vectors of B (VB x sizeof(E) bytes, 16 where B's rows allow) before it multiplies any,
// straight into registers (no shared-memory stage: each element of B is used by one lane only),
// and A's few rows are read through the L1 (every block reads them; they are small).
//
// B stored K x N (n contiguous, B_K_CONTIG false): a block's 32 lanes x VB consecutive columns,
// BN = 32 VB; its WARPS warps take the rows k = k0 + w, k0 + w + WARPS, ... of the block's part of
// K, each lane multiplying one row's vector by A[m, k] for every m; the warps' sums meet in
// shared memory (a slab per warp, added in a fixed order).
// B stored N x K (k contiguous, B_K_CONTIG true): each warp owns COLS columns, BN = WARPS COLS;
// lane l reads the vectors k = k0 + (l + 32 j) VB of each column's row, and A's rows at the same
// k; the 32 lanes' sums meet by shuffles.
//
// Either way the block ends with its ROWS x BN sums in shared memory (the tile), which the
// epilogue reads in pairs of columns (for_each_pair, as BlockGemm's). When K is split over a
// thread-block cluster (SPLIT blocks, sm_90: the family's split_k), each block sums its part of
// K (run's kt0 and ktiles, in steps of BK) and rank 0 adds the others' tiles, rank by rank,
// through distributed shared memory (reduce_cluster).
//
// Vectors or rows that cross N or the end of the block's K are read element by element (zeros
// past them); VB and VA (A's elements per read along k) divide every row distance and offset of
// their operand, as ContractionPlan's MmaOperand::align says.
#pragma once

namespace tsl {
namespace gemv {

template <int BYTES> struct Bits;
template <> struct Bits<16> { typedef uint4 T; };
template <> struct Bits<8> { typedef uint2 T; };
template <> struct Bits<4> { typedef unsigned T; };
template <> struct Bits<2> { typedef unsigned short T; };

// G consecutive elements at p (aligned to G elements) in one load through the read-only path.
template <class E, int G>
__device__ __forceinline__ void load(const E* p, E (&v)[G]) {
  typedef typename Bits<G * static_cast<int>(sizeof(E))>::T T;
  union {
    T bits;
    E e[G];
  } u;
  u.bits = __ldg(reinterpret_cast<const T*>(p));
#pragma unroll
  for (int g = 0; g < G; ++g) v[g] = u.e[g];
}

template <bool BF16> __device__ __forceinline__ float widen(float v) { return v; }
template <bool BF16> __device__ __forceinline__ float widen(unsigned short h) { return BF16 ? bf16_to_f32(h) : f16_to_f32(h); }

template <class E, bool BF16, int WARPS, int COLS, int UNROLL, int VB, int VA, bool A_K_CONTIG, bool B_K_CONTIG, long long M,
          long long N, long long K, long long LDA, long long LDB>
struct Gemv {
  // A block computes every row of C.
  static constexpr int ROWS = static_cast<int>(M);
  static_assert(ROWS >= 1, "a product of no rows");
  static_assert(VB >= 1 && VB * sizeof(E) <= 16 && VA >= 1 && VA * sizeof(E) <= 16, "vectors of at most 16 bytes");
  static constexpr int kThreads = WARPS * 32;
  static constexpr int BM = ROWS;
  static constexpr int BN = B_K_CONTIG ? WARPS * COLS : 32 * VB;
  static_assert(BN % 2 == 0, "the epilogue takes pairs of columns");
  // One step of the main loop along K: the split's unit (ContractionPlan::block_k).
  static constexpr int BK = B_K_CONTIG ? 32 * VB * UNROLL : WARPS * UNROLL;
  static constexpr int kTileBytes = ROWS * BN * 4;
  // A slab of sums per warp where the warps split K (B stored K x N); warp 0's is the tile.
  static constexpr int kSmemBytes = (B_K_CONTIG ? 1 : WARPS) * kTileBytes;
  static constexpr int kReduceBytes = kTileBytes;

  float* tile_ = nullptr;

  static __device__ __forceinline__ unsigned cluster_rank() { return tsl::mma::cluster_rank(); }

  static __device__ __forceinline__ float a_at(const E* a, int m, long long k) {
    return widen<BF16>(__ldg(a + (A_K_CONTIG ? m * LDA + k : k * LDA + m)));
  }

  // B stored N x K: the vectors at k of the COLS columns from nb on (zeros past N).
  static __device__ __forceinline__ void load_columns(const E* b, long long nb, long long k, E (&bv)[COLS][VB]) {
#pragma unroll
    for (int c = 0; c < COLS; ++c) {
      if (nb + c < N) {
        load<E, VB>(b + (nb + c) * LDB + k, bv[c]);
      } else {
#pragma unroll
        for (int v = 0; v < VB; ++v) bv[c][v] = E(0);
      }
    }
  }

  // The whole of K.
  __device__ __forceinline__ void run(unsigned char* smem, const E* a, const E* b, int m0, int n0) {
    run(smem, a, b, m0, n0, 0, static_cast<int>((K + BK - 1) / BK));
  }

  // K steps [kt0, kt0 + ktiles) of BK each; ends with the block's sums in the tile (synchronized).
  __device__ __forceinline__ void run(unsigned char* smem, const E* a, const E* b, int m0, int n0, int kt0, int ktiles) {
    (void)m0;
    tile_ = reinterpret_cast<float*>(smem);
    const long long k0 = static_cast<long long>(kt0) * BK;
    const long long k1 = k0 + static_cast<long long>(ktiles) * BK < K ? k0 + static_cast<long long>(ktiles) * BK : K;
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    if constexpr (B_K_CONTIG) {
      float acc[ROWS][COLS] = {};
      const long long nb = n0 + warp * COLS;
      long long k = k0 + lane * VB;
      // Whole steps: every lane's UNROLL vectors of each column inside [k0, k1).
      for (; k + static_cast<long long>(UNROLL - 1) * 32 * VB + VB <= k1; k += 32LL * VB * UNROLL) {
        E bv[UNROLL][COLS][VB];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) load_columns(b, nb, k + u * 32 * VB, bv[u]);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const long long ku = k + u * 32 * VB;
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            float av[VB];
            if constexpr (A_K_CONTIG && VA >= VB) {
              E e[VB];
              load<E, VB>(a + r * LDA + ku, e);
#pragma unroll
              for (int v = 0; v < VB; ++v) av[v] = widen<BF16>(e[v]);
            } else {
#pragma unroll
              for (int v = 0; v < VB; ++v) av[v] = a_at(a, r, ku + v);
            }
#pragma unroll
            for (int c = 0; c < COLS; ++c)
#pragma unroll
              for (int v = 0; v < VB; ++v) acc[r][c] = fmaf(av[v], widen<BF16>(bv[u][c][v]), acc[r][c]);
          }
        }
      }
      // The rest: a vector at a time, the last one (crossing k1) element by element.
      for (; k < k1; k += 32LL * VB) {
        if (k + VB <= k1) {
          E bv[COLS][VB];
          load_columns(b, nb, k, bv);
#pragma unroll
          for (int r = 0; r < ROWS; ++r)
#pragma unroll
            for (int v = 0; v < VB; ++v) {
              const float av = a_at(a, r, k + v);
#pragma unroll
              for (int c = 0; c < COLS; ++c) acc[r][c] = fmaf(av, widen<BF16>(bv[c][v]), acc[r][c]);
            }
          continue;
        }
#pragma unroll
        for (int v = 0; v < VB; ++v) {
          if (k + v >= k1) break;
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            const float av = a_at(a, r, k + v);
#pragma unroll
            for (int c = 0; c < COLS; ++c)
              if (nb + c < N) acc[r][c] = fmaf(av, widen<BF16>(__ldg(b + (nb + c) * LDB + k + v)), acc[r][c]);
          }
        }
      }
      // The lanes' sums (a fixed tree), stored by lane 0.
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int c = 0; c < COLS; ++c) {
          float s = acc[r][c];
#pragma unroll
          for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
          if (lane == 0) tile_[r * BN + warp * COLS + c] = s;
        }
      __syncthreads();
    } else {
      float acc[ROWS][VB] = {};
      const long long n = n0 + lane * VB;
      const bool whole = n + VB <= N;  // the lane's vector lies inside N
      long long k = k0 + warp;
      if (whole) {
        for (; k + static_cast<long long>(UNROLL - 1) * WARPS < k1; k += static_cast<long long>(WARPS) * UNROLL) {
          E bv[UNROLL][VB];
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) load<E, VB>(b + (k + u * WARPS) * LDB + n, bv[u]);
#pragma unroll
          for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
              const float av = a_at(a, r, k + u * WARPS);
#pragma unroll
              for (int v = 0; v < VB; ++v) acc[r][v] = fmaf(av, widen<BF16>(bv[u][v]), acc[r][v]);
            }
        }
      }
      // The rest, a row at a time (a vector crossing N element by element).
      for (; k < k1; k += WARPS) {
        E bv[VB];
        if (whole) {
          load<E, VB>(b + k * LDB + n, bv);
        } else {
#pragma unroll
          for (int v = 0; v < VB; ++v) bv[v] = n + v < N ? __ldg(b + k * LDB + n + v) : E(0);
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          const float av = a_at(a, r, k);
#pragma unroll
          for (int v = 0; v < VB; ++v) acc[r][v] = fmaf(av, widen<BF16>(bv[v]), acc[r][v]);
        }
      }
      float* slab = tile_ + warp * (ROWS * BN);
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int v = 0; v < VB; ++v) slab[r * BN + lane * VB + v] = acc[r][v];
      __syncthreads();
      // The warps' slabs added in order into warp 0's.
      for (int e = static_cast<int>(threadIdx.x); e < ROWS * BN; e += kThreads) {
        float s = tile_[e];
#pragma unroll 1
        for (int w = 1; w < WARPS; ++w) s += tile_[w * (ROWS * BN) + e];
        tile_[e] = s;
      }
      __syncthreads();
    }
  }

  // K split over the cluster: rank 0's tile becomes the sum of every rank's, added rank by rank.
  // Returns whether this block holds the sums (and runs the epilogue).
  template <int SPLIT>
  __device__ __forceinline__ bool reduce_cluster(unsigned char* smem) {
    static_assert(SPLIT >= 2, "a split K needs two blocks at least");
    tile_ = reinterpret_cast<float*>(smem);
    tsl::mma::cluster_sync();
    const unsigned rank = cluster_rank();
    if (rank == 0)
      for (int e = static_cast<int>(threadIdx.x); e < ROWS * BN; e += kThreads) {
        float s = tile_[e];
#pragma unroll 1
        for (unsigned r = 1; r < SPLIT; ++r) s += tsl::mma::cluster_load(tile_ + e, r);
        tile_[e] = s;
      }
    tsl::mma::cluster_sync();
    return rank == 0;
  }

  // f(row, column, value, value of the next column) for every pair of columns of the tile.
  template <class F>
  __device__ __forceinline__ void for_each_pair(F&& f) const {
    for (int p = static_cast<int>(threadIdx.x); p < ROWS * BN / 2; p += kThreads) {
      const int r = p / (BN / 2), c = 2 * (p % (BN / 2));
      f(r, c, tile_[r * BN + c], tile_[r * BN + c + 1]);
    }
  }
};

}  // namespace gemv
}  // namespace tsl
