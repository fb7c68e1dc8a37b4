// Tessel device library: the streamed ("flash") attention kernel's main loop, for sm_80 and newer
// (kernels/cuda/attention_plan.h plans it; tilegraph/attention_pattern.h says what it computes).
//
//   S = Q K^T (then the group's elementwise score steps), P = softmax_rows(S), O = P V
//
// A block owns BR query rows of one batch point: BR / 16 warps of 16 rows (mma.sync's m16). Q's
// tile is copied to shared memory once and held in registers as A fragments. The keys stream in
// chunks of BC through a STAGES-deep ring of shared-memory buffers of K (BC x D) and V (BC x DV),
// filled by cp.async. Per chunk a warp computes its 16 x BC scores on the tensor cores, applies the
// score function (the generated score steps: scaling, masks) per element, updates its rows'
// running max and sum online (scores rescaled by exp(m_old - m_new), as in FlashAttention-2), turns
// the f32 probabilities into f16/bf16 A fragments in registers (the m16n8 accumulator layout of
// two adjacent n8 tiles is the m16k16 A fragment layout) and accumulates P V into O's 16 x DV f32
// accumulators. Neither S nor P ever leaves the registers; O is divided by the row sums at the end.
//
// Operands are row-major 2-D views per batch point: Q (M x D, rows LDQ apart), K (N x D, rows LDK
// apart), V (N x DV, rows LDV apart); rows start 16-byte aligned (the planner checks). Rows past M
// or N are zero-filled; keys past N get a score of -inf (probability 0). Shared-memory rows are
// padded by 16 bytes (mma.cuh's kPadElems) so that ldmatrix is free of bank conflicts.
#pragma once

namespace tsl {
namespace flash {

using mma::kInstK;
using mma::kInstM;
using mma::kInstN;
using mma::kLanes;
using mma::kPadElems;
using mma::u16;

// Two f32 values rounded to nearest even into one register of 16-bit values, lo in the low half.
template <bool BF16> __device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r;
  if (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

template <int BR, int BC, int D, int DV, int STAGES, bool BF16, int M, int N, long long LDQ, long long LDK, long long LDV>
struct StreamedAttention {
  static constexpr int kWarps = BR / kInstM;
  static constexpr int kThreads = kWarps * kLanes;
  static constexpr int kQStride = D + kPadElems, kKStride = D + kPadElems, kVStride = DV + kPadElems;
  static constexpr int kQBytes = BR * kQStride * 2;
  static constexpr int kKBytes = BC * kKStride * 2, kVBytes = BC * kVStride * 2;
  static constexpr int kStageBytes = kKBytes + kVBytes;
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes;
  static constexpr int kChunks = (N + BC - 1) / BC;
  static constexpr int kTilesS = BC / kInstN;  // n8 tiles of one chunk of scores
  static constexpr int kTilesO = DV / kInstN;  // n8 tiles of O
  static_assert(BR % kInstM == 0 && BC % (2 * kInstN) == 0 && BC % kInstK == 0, "block shape");
  static_assert(D % kInstK == 0 && DV % (2 * kInstN) == 0, "head dimensions must be whole k16 / n16 steps");
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");

  float o[kTilesO][4];  // O's accumulators: rows lane / 4 and lane / 4 + 8 of the warp's 16
  float row_max[2], row_sum[2];

  typedef mma::TileCopy<BR, D, kThreads, M, D, LDQ, true> CopyQ;
  typedef mma::TileCopy<BC, D, kThreads, N, D, LDK, false> CopyK;   // advances by BC rows
  typedef mma::TileCopy<BC, DV, kThreads, N, DV, LDV, false> CopyV;

  // O[m0 : m0 + BR, :] of one batch point (q, k, v at that point); score(acc, dm, n) gives the
  // score of block row dm and key n from the f32 dot product acc. `smem` holds kSmemBytes.
  template <class Score>
  __device__ __forceinline__ void run(unsigned char* smem, const u16* __restrict__ q, const u16* __restrict__ k,
                                      const u16* __restrict__ v, int m0, Score&& score) {
    const unsigned base = mma::smem_address(smem);
    const unsigned stages = base + kQBytes;
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    const int r8 = lane % 8, j = lane / 8;
#pragma unroll
    for (int t = 0; t < kTilesO; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] = 0.0f;
    row_max[0] = row_max[1] = -inf_f32();
    row_sum[0] = row_sum[1] = 0.0f;

    CopyQ copy_q(q, m0, 0);
    CopyK copy_k(k, 0, 0);
    CopyV copy_v(v, 0, 0);
    // Prologue: Q with chunk 0, then chunks 1 .. STAGES - 2, one commit group each.
    copy_q.copy(base);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < kChunks) {
        copy_k.copy(stages + s * kStageBytes);
        copy_v.copy(stages + s * kStageBytes + kKBytes);
      }
      copy_k.advance();
      copy_v.advance();
      mma::cp_async_commit();
    }
    unsigned qf[D / kInstK][4];
    for (int c = 0; c < kChunks; ++c) {
      mma::cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (c == 0) {
#pragma unroll
        for (int kk = 0; kk < D / kInstK; ++kk)
          mma::ldmatrix_x4(qf[kk], base + static_cast<unsigned>(((warp * kInstM + lane % 16) * kQStride + kk * kInstK + (lane / 16) * 8) * 2));
      }
      // Refill the stage of chunk c - 1 (every warp finished it before the barrier).
      {
        const int fill = c + STAGES - 1;
        if (fill < kChunks) {
          const unsigned st = stages + (fill % STAGES) * kStageBytes;
          copy_k.copy(st);
          copy_v.copy(st + kKBytes);
        }
        copy_k.advance();
        copy_v.advance();
        mma::cp_async_commit();
      }
      const unsigned sk = stages + (c % STAGES) * kStageBytes, sv = sk + kKBytes;

      // S = Q K^T for the warp's 16 rows and the chunk's BC keys.
      float s[kTilesS][4];
#pragma unroll
      for (int t = 0; t < kTilesS; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[t][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / kInstK; ++kk) {
#pragma unroll
        for (int t = 0; t < kTilesS; t += 2) {
          // Matrices 0..3: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
          unsigned r[4];
          mma::ldmatrix_x4(r, sk + static_cast<unsigned>(((t * kInstN + r8 + (j / 2) * 8) * kKStride + kk * kInstK + (j % 2) * 8) * 2));
          mma::mma_16816<BF16>(s[t], qf[kk], r[0], r[1]);
          mma::mma_16816<BF16>(s[t + 1], qf[kk], r[2], r[3]);
        }
      }

      // The score function, then the online softmax of the warp's rows.
      float chunk_max[2] = {-inf_f32(), -inf_f32()};
#pragma unroll
      for (int t = 0; t < kTilesS; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int dm = warp * kInstM + lane / 4 + (e / 2) * 8;
          const int n = c * BC + t * kInstN + (lane % 4) * 2 + e % 2;
          s[t][e] = (N % BC != 0 && n >= N) ? -inf_f32() : score(s[t][e], dm, n);
          chunk_max[e / 2] = fmaxf(chunk_max[e / 2], s[t][e]);
        }
      float rescale[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // The four lanes of a quad hold the row's columns.
        chunk_max[h] = fmaxf(chunk_max[h], __shfl_xor_sync(0xffffffffu, chunk_max[h], 1));
        chunk_max[h] = fmaxf(chunk_max[h], __shfl_xor_sync(0xffffffffu, chunk_max[h], 2));
        const float m_new = fmaxf(row_max[h], chunk_max[h]);
        // A row without a finite score yet shifts by 0 (its probabilities are all 0).
        const float shift = m_new == -inf_f32() ? 0.0f : m_new;
        rescale[h] = __expf(row_max[h] - shift);
        row_max[h] = m_new;
        chunk_max[h] = shift;
        row_sum[h] *= rescale[h];
      }
#pragma unroll
      for (int t = 0; t < kTilesS; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[t][e] = __expf(s[t][e] - chunk_max[e / 2]);
          row_sum[e / 2] += s[t][e];
        }
#pragma unroll
      for (int t = 0; t < kTilesO; ++t) {
        o[t][0] *= rescale[0];
        o[t][1] *= rescale[0];
        o[t][2] *= rescale[1];
        o[t][3] *= rescale[1];
      }

      // O += P V: P's A fragments straight from the score accumulators.
#pragma unroll
      for (int kk = 0; kk < BC / kInstK; ++kk) {
        unsigned pf[4];
        pf[0] = pack2<BF16>(s[2 * kk][0], s[2 * kk][1]);
        pf[1] = pack2<BF16>(s[2 * kk][2], s[2 * kk][3]);
        pf[2] = pack2<BF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pf[3] = pack2<BF16>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int t = 0; t < kTilesO; t += 2) {
          // V is K x N (keys x dv): transposed matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
          unsigned r[4];
          mma::ldmatrix_x4_trans(r, sv + static_cast<unsigned>(((kk * kInstK + r8 + (j % 2) * 8) * kVStride + t * kInstN + (j / 2) * 8) * 2));
          mma::mma_16816<BF16>(o[t], pf, r[0], r[1]);
          mma::mma_16816<BF16>(o[t + 1], pf, r[2], r[3]);
        }
      }
    }
    mma::cp_async_wait<0>();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
      row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    }
  }

  // Calls f(dm, n, v0, v1) for every pair of horizontally adjacent outputs of this thread: O at
  // block row dm and columns n, n + 1 (n even), divided by the row's sum.
  template <class F> __device__ __forceinline__ void for_each_pair(F&& f) const {
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
#pragma unroll
    for (int t = 0; t < kTilesO; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float inv = 1.0f / row_sum[h];
        f(warp * kInstM + lane / 4 + h * 8, t * kInstN + (lane % 4) * 2, o[t][2 * h] * inv, o[t][2 * h + 1] * inv);
      }
  }
};

}  // namespace flash
}  // namespace tsl
