// Tessel device library: the streamed ("flash") attention kernel's main loop, for sm_80 and newer
// (kernels/cuda/attention_plan.h plans it; tilegraph/attention_pattern.h says what it computes).
//
//   S = Q K^T (then the group's elementwise score steps), P = softmax_rows(S), O = P V
//
// A block owns BR query rows of one batch point: BR / 16 warps of 16 rows (mma.sync's m16). Q's
// tile is copied to shared memory once and held in registers as A fragments (heads up to
// kQFragmentsMaxHead; a longer head's fragments are read from shared memory at each k step of each
// chunk, leaving the registers to O's accumulators, as FlashAttention-2 does for heads of 256). The keys stream in
// chunks of BC through a STAGES-deep ring of shared-memory buffers of K (BC x D) and V (BC x DV),
// filled by cp.async. Per chunk a warp computes its 16 x BC scores on the tensor cores, applies the
// score function (the generated score steps: scaling, masks) per element, updates its rows'
// running max and sum online (scores rescaled by exp(m_old - m_new), as in FlashAttention-2), turns
// the f32 probabilities into f16/bf16 A fragments in registers (the m16n8 accumulator layout of
// two adjacent n8 tiles is the m16k16 A fragment layout) and accumulates P V into O's 16 x DV f32
// accumulators. Neither S nor P ever leaves the registers; O is divided by the row sums at the end.
//
// Operands are row-major 2-D views per batch point: Q (M x DA, rows LDQ apart), K (N x DA, rows LDK
// apart), V (N x DVA, rows LDV apart); rows start 16-byte aligned (the planner checks). D and DV
// are the head dimensions of the tiles, DA <= D and DVA <= DV the operands' own (a head of 40 runs
// in tiles of 64): columns past them, rows past M or N are zero-filled (zero columns add nothing
// to Q K^T, and give O columns that are not stored); keys past N get a score of -inf (probability
// 0). The block visits key chunks [c_begin, c_end) only (the planner's key ranges: the chunks
// outside hold only keys the mask excludes). Shared-memory rows are padded by 16 bytes (mma.cuh's
// kPadElems) so that ldmatrix is free of bank conflicts.
#pragma once

namespace tsl {
namespace flash {

using mma::kInstK;
using mma::kInstM;
using mma::kInstN;
using mma::kLanes;
using mma::kPadElems;
using mma::u16;

// The longest head whose Q fragments stay in registers (D / 16 x 4 registers per thread): beyond
// it, O's 16 x DV accumulators and one chunk's scores would leave them no room.
constexpr int kQFragmentsMaxHead = 128;

// Two f32 values rounded to nearest even into one register of 16-bit values, lo in the low half.
template <bool BF16> __device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r;
  if (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Packed arithmetic on two 16-bit floats (lo, hi) in one register, each result rounded once to
// nearest even: what a node of that dtype computes for one product, sum or difference (the
// emitter's packed score steps, kernel_emitter.cpp's packed_score_pair). bf16 goes through fma
// (sm_80's bf16x2 instruction): a * b + -0, a * 1 + b, b * -1 + a are exact before their one
// rounding.
template <bool BF16> __device__ __forceinline__ unsigned mul2(unsigned a, unsigned b) {
  unsigned r;
  if (BF16) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
  else asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <bool BF16> __device__ __forceinline__ unsigned add2(unsigned a, unsigned b) {
  unsigned r;
  if (BF16) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(0x3f803f80u), "r"(b));
  else asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <bool BF16> __device__ __forceinline__ unsigned sub2(unsigned a, unsigned b) {
  unsigned r;
  if (BF16) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(b), "r"(0xbf80bf80u), "r"(a));
  else asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// The two values of a packed register as f32 (exact).
template <bool BF16> __device__ __forceinline__ void unpack2(unsigned h, float& lo, float& hi) {
  if (BF16) {
    lo = __int_as_float(static_cast<int>(h << 16));
    hi = __int_as_float(static_cast<int>(h & 0xffff0000u));
  } else {
    asm("{.reg .b16 l, u; mov.b32 {l, u}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, u;}" : "=f"(lo), "=f"(hi) : "r"(h));
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// 2^x with the special function unit's ex2, subnormal results flushed to zero (.ftz): a
// probability below 2^-126 of its row's maximum becomes 0. exp2f (ex2 without .ftz) costs three
// more instructions per score to handle subnormals (measured on the H100, 8x16x2048x128
// attention: 0.583 -> 0.552 ms with .ftz).
__device__ __forceinline__ float exp2_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// The online softmax's step for a thread's two rows (rows r and r + 8 of an m16 tile, whose
// columns are spread over the four lanes of a quad): folds the chunk's row maxima (this lane's)
// into the running maxima and rescales the running sums. Returns in `rescale` the factor the
// rows' earlier O takes, and in `shift` the new maxima times log2(e) (0 for a row without a
// finite score yet: its probabilities are all 0), so that a probability is
// exp2_ftz(fmaf(s, kLog2e, -shift)): one fused multiply-add before ex2. That is exact enough
// while the maxima are moderate: the rounding of shift is |m| 2^-24 in the exponent, so a maximum
// of 2^20 or more in magnitude (a key masked by -1e30 or -3.4e38 being the largest a row has seen)
// would turn probabilities into 0 or inf. Kernels whose logits can reach that (EXACT) compute
// exp2_ftz((s - m) * kLog2e) instead, with `maximum` the row's m (s - m is exact near m).
template <bool EXACT> __device__ __forceinline__ float probability(float s, float shift, float maximum) {
  return EXACT ? exp2_ftz((s - maximum) * kLog2e) : exp2_ftz(fmaf(s, kLog2e, -shift));
}

__device__ __forceinline__ void online_rows(float (&chunk_max)[2], float (&row_max)[2], float (&row_sum)[2], float (&rescale)[2],
                                            float (&shift)[2], float (&maximum)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    chunk_max[h] = fmaxf(chunk_max[h], __shfl_xor_sync(0xffffffffu, chunk_max[h], 1));
    chunk_max[h] = fmaxf(chunk_max[h], __shfl_xor_sync(0xffffffffu, chunk_max[h], 2));
    const float m_new = fmaxf(row_max[h], chunk_max[h]);
    const float m = m_new == -inf_f32() ? 0.0f : m_new;
    rescale[h] = exp2f((row_max[h] - m) * kLog2e);
    row_max[h] = m_new;
    shift[h] = m * kLog2e;
    maximum[h] = m;
    row_sum[h] *= rescale[h];
  }
}

// Scores keys n and n + 1 (n even) of block row dm in place: a, b hold their dot products. Keys
// past N score -inf and are not evaluated (a score step may read a mask there); a pair inside N
// goes through score2 (the emitter's packed evaluation, where it applies).
template <int N, int BC, class Score, class Score2>
__device__ __forceinline__ void score_pair(Score& score, Score2& score2, float& a, float& b, int dm, int n) {
  if (N % BC != 0 && n + 1 >= N) {
    a = n < N ? score(a, dm, n) : -inf_f32();
    b = -inf_f32();
  } else {
    float s0, s1;
    score2(a, b, dm, n, s0, s1);
    a = s0;
    b = s1;
  }
}

// KSPLIT > 1 (decoding: few blocks, each walking many keys): KSPLIT warps share each 16 rows, a
// stage holds KSPLIT chunks, warp part p of a step scores chunk KSPLIT * step + p, and at the end
// the parts merge in shared memory into part 0 (as combine_cluster merges a cluster's blocks) --
// KSPLIT chains of chunks on the SM's schedulers where one warp walked them all in turn.
template <int BR, int BC, int D, int DV, int STAGES, bool BF16, int M, int N, long long LDQ, long long LDK, long long LDV,
          int DA = D, int DVA = DV, bool EXACT = false, bool PLAIN = false, int KSPLIT = 1>
struct StreamedAttention {
  static constexpr int kRowWarps = BR / kInstM;  // warps of distinct rows
  static constexpr int kWarps = kRowWarps * KSPLIT;
  static constexpr int kThreads = kWarps * kLanes;
  static constexpr int kStepKeys = BC * KSPLIT;  // keys of a stage
  static constexpr int kQStride = D + kPadElems, kKStride = D + kPadElems, kVStride = DV + kPadElems;
  static constexpr int kQBytes = BR * kQStride * 2;
  static constexpr int kKBytes = kStepKeys * kKStride * 2, kVBytes = kStepKeys * kVStride * 2;
  static constexpr int kStageBytes = kKBytes + kVBytes;
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes;
  static constexpr int kTilesS = BC / kInstN;  // n8 tiles of one chunk of scores
  static constexpr int kTilesO = DV / kInstN;  // n8 tiles of O
  static_assert(BR % kInstM == 0 && BC % (2 * kInstN) == 0 && BC % kInstK == 0, "block shape");
  static_assert(D % kInstK == 0 && DV % (2 * kInstN) == 0, "head dimensions must be whole k16 / n16 steps");
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");
  static_assert(KSPLIT >= 1 && (KSPLIT == 1 || BR == kInstM), "a key split shares one warp's 16 rows");

  float o[kTilesO][4];  // O's accumulators: rows lane / 4 and lane / 4 + 8 of the warp's 16
  float row_max[2], row_sum[2];

  // No key seen: O and the sums 0, the maxima -inf (what a part that saw no key merges as).
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int t = 0; t < kTilesO; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] = 0.0f;
    row_max[0] = row_max[1] = -inf_f32();
    row_sum[0] = row_sum[1] = 0.0f;
  }

  typedef mma::TileCopy<BR, D, kThreads, M, DA, LDQ, true> CopyQ;
  // (A key split's stages start at the block's first chunk, not at a multiple of kStepKeys: the
  // last one may pass N even where kStepKeys divides it, so its rows are always checked.)
  typedef mma::TileCopy<kStepKeys, D, kThreads, N, DA, LDK, false, mma::kChunkElems, (KSPLIT > 1)> CopyK;  // advances by a stage's keys
  typedef mma::TileCopy<kStepKeys, DV, kThreads, N, DVA, LDV, false, mma::kChunkElems, (KSPLIT > 1)> CopyV;

  // O[m0 : m0 + BR, :] of one batch point (q, k, v at that point); score(acc, dm, n) gives the
  // score of block row dm and key n from the f32 dot product acc, score2(acc0, acc1, dm, n, s0, s1)
  // those of keys n and n + 1 (n even; both keys exist). Key chunks [c_begin, c_end) (c_begin <
  // c_end). With PLAIN, chunks [p_begin, p_end) are scored by score2p, the score steps without
  // those that are identities there (a causal mask below the diagonal; attention_pattern.h's
  // plain chunks). `smem` holds kSmemBytes.
  template <class Score, class Score2, class Score2P>
  __device__ __forceinline__ void run(unsigned char* smem, const u16* __restrict__ q, const u16* __restrict__ k,
                                      const u16* __restrict__ v, int m0, int c_begin, int c_end, Score&& score, Score2&& score2,
                                      int p_begin, int p_end, Score2P&& score2p) {
    const unsigned base = mma::smem_address(smem);
    const unsigned stages = base + kQBytes;
    const int lane = static_cast<int>(threadIdx.x) % kLanes;
    // The warp's rows (warp * 16 of the block's) and its part of a stage's keys.
    const int warp = static_cast<int>(threadIdx.x) / kLanes % kRowWarps, part = static_cast<int>(threadIdx.x) / kLanes / kRowWarps;
    const int r8 = lane % 8, j = lane / 8;
    clear();

    const int chunks = c_end - c_begin, steps = (chunks + KSPLIT - 1) / KSPLIT;
    CopyQ copy_q(q, m0, 0);
    CopyK copy_k(k, c_begin * BC, 0);
    CopyV copy_v(v, c_begin * BC, 0);
    // Prologue: Q with the first chunk, then the next STAGES - 2, one commit group each.
    copy_q.copy(base);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < steps) {
        copy_k.copy(stages + s * kStageBytes);
        copy_v.copy(stages + s * kStageBytes + kKBytes);
      }
      copy_k.advance();
      copy_v.advance();
      mma::cp_async_commit();
    }
    constexpr bool kQInRegisters = D <= kQFragmentsMaxHead;
    unsigned qf[kQInRegisters ? D / kInstK : 1][4];
    auto q_fragment = [&](unsigned (&f)[4], int kk) {
      mma::ldmatrix_x4(f, base + static_cast<unsigned>(((warp * kInstM + lane % 16) * kQStride + kk * kInstK + (lane / 16) * 8) * 2));
    };
    for (int i = 0; i < steps; ++i) {
      const int c = c_begin + i * KSPLIT + part;
      mma::cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (kQInRegisters && i == 0) {
#pragma unroll
        for (int kk = 0; kk < D / kInstK; ++kk) q_fragment(qf[kQInRegisters ? kk : 0], kk);
      }
      // Refill the stage of chunk c - 1 (every warp finished it before the barrier).
      {
        const int fill = i + STAGES - 1;
        if (fill < steps) {
          const unsigned st = stages + (fill % STAGES) * kStageBytes;
          copy_k.copy(st);
          copy_v.copy(st + kKBytes);
        }
        copy_k.advance();
        copy_v.advance();
        mma::cp_async_commit();
      }
      if (KSPLIT > 1 && c >= c_end) continue;  // this part of the last stage holds no chunk
      const unsigned sk = stages + (i % STAGES) * kStageBytes + part * BC * kKStride * 2,
                     sv = stages + (i % STAGES) * kStageBytes + kKBytes + part * BC * kVStride * 2;

      // S = Q K^T for the warp's 16 rows and the chunk's BC keys.
      float s[kTilesS][4];
#pragma unroll
      for (int t = 0; t < kTilesS; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[t][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / kInstK; ++kk) {
        if constexpr (!kQInRegisters) q_fragment(qf[0], kk);
        const unsigned (&a)[4] = qf[kQInRegisters ? kk : 0];
#pragma unroll
        for (int t = 0; t < kTilesS; t += 2) {
          // Matrices 0..3: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
          unsigned r[4];
          mma::ldmatrix_x4(r, sk + static_cast<unsigned>(((t * kInstN + r8 + (j / 2) * 8) * kKStride + kk * kInstK + (j % 2) * 8) * 2));
          mma::mma_16816<BF16>(s[t], a, r[0], r[1]);
          mma::mma_16816<BF16>(s[t + 1], a, r[2], r[3]);
        }
      }

      // The score function, then the online softmax of the warp's rows.
      float chunk_max[2] = {-inf_f32(), -inf_f32()};
      auto score_chunk = [&](auto& pair) {
#pragma unroll
        for (int t = 0; t < kTilesS; ++t)
#pragma unroll
          for (int e = 0; e < 4; e += 2) {
            const int dm = warp * kInstM + lane / 4 + (e / 2) * 8;
            const int n = c * BC + t * kInstN + (lane % 4) * 2;
            score_pair<N, BC>(score, pair, s[t][e], s[t][e + 1], dm, n);
            chunk_max[e / 2] = fmaxf(chunk_max[e / 2], fmaxf(s[t][e], s[t][e + 1]));
          }
      };
      if constexpr (PLAIN) {
        if (c >= p_begin && c < p_end) score_chunk(score2p);
        else score_chunk(score2);
      } else {
        score_chunk(score2);
      }
      float rescale[2], shift[2], maximum[2];
      online_rows(chunk_max, row_max, row_sum, rescale, shift, maximum);
#pragma unroll
      for (int t = 0; t < kTilesS; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[t][e] = probability<EXACT>(s[t][e], shift[e / 2], maximum[e / 2]);
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
    if constexpr (KSPLIT > 1) combine_parts(smem, part, lane);
  }

  // Folds running maxima and sums (m_r, l_r) and accumulators o_r of the same rows into this
  // thread's (O_r rescaled by exp(m_r - m), m the larger maximum); a part that saw no key holds
  // m = -inf and adds nothing.
  template <class Load> __device__ __forceinline__ void merge(Load&& load) {
    float mine_scale[2], their_scale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_r = load(kTilesO * 4 + h), l_r = load(kTilesO * 4 + 2 + h);
      const float m = fmaxf(row_max[h], m_r);
      mine_scale[h] = row_max[h] == -inf_f32() ? 0.0f : exp2f((row_max[h] - m) * kLog2e);
      their_scale[h] = m_r == -inf_f32() ? 0.0f : exp2f((m_r - m) * kLog2e);
      row_max[h] = m;
      row_sum[h] = row_sum[h] * mine_scale[h] + l_r * their_scale[h];
    }
#pragma unroll
    for (int i = 0; i < kTilesO; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][e] = o[i][e] * mine_scale[e / 2] + load(i * 4 + e) * their_scale[e / 2];
  }

  // The key split's merge (KSPLIT > 1): parts 1.. leave their rows' O, maxima and sums in shared
  // memory (the stages, free once every warp is past its last chunk), part 0 merges them and holds
  // the block's result; the other parts are left empty (m = -inf, sums and O 0), so that
  // combine_cluster's thread-by-thread merge and for_each_pair (which they skip) see one part.
  static constexpr int kCombineFloats = kTilesO * 4 + 4;  // O's accumulators, the two maxima and sums
  static_assert((KSPLIT - 1) * kCombineFloats * kLanes * 4 <= kSmemBytes, "the parts must fit the kernel's shared memory");
  __device__ __forceinline__ void combine_parts(unsigned char* smem, int part, int lane) {
    float* buf = reinterpret_cast<float*>(smem);
    __syncthreads();  // every warp is done with the stages
    if (part > 0) {
      float* mine = buf + (part - 1) * kCombineFloats * kLanes + lane;
#pragma unroll
      for (int i = 0; i < kTilesO; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) mine[(i * 4 + e) * kLanes] = o[i][e];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mine[(kTilesO * 4 + h) * kLanes] = row_max[h];
        mine[(kTilesO * 4 + 2 + h) * kLanes] = row_sum[h];
      }
    }
    __syncthreads();
    if (part == 0) {
#pragma unroll 1
      for (int r = 1; r < KSPLIT; ++r) {
        const float* theirs = buf + (r - 1) * kCombineFloats * kLanes + lane;
        merge([&](int j) { return theirs[j * kLanes]; });
      }
    } else {
      clear();
    }
  }

  // The keys split over a thread-block cluster (flash-decoding: few blocks of query rows, many
  // keys): each block ran its part of the chunks; rank 0 merges the parts' O, row maxima and
  // sums through distributed shared memory (O_r rescaled by exp(m_r - m), m the largest maximum)
  // and returns true; the others return false. A part that saw no key holds m = -inf and adds
  // nothing. Reuses the kernel's shared memory (kCombineBytes of it): call after run.
  static constexpr int kCombineBytes = kCombineFloats * kThreads * 4;
  static __device__ __forceinline__ unsigned cluster_rank() { return mma::cluster_rank(); }
  static __device__ __forceinline__ void cluster_sync() { mma::cluster_sync(); }
  template <int SPLIT> __device__ __forceinline__ bool combine_cluster(unsigned char* smem) {
    static_assert(SPLIT >= 2, "a split needs two blocks at least");
    static_assert(kCombineBytes <= kSmemBytes, "the parts must fit the kernel's shared memory");
    const unsigned rank = cluster_rank();
    const int t = static_cast<int>(threadIdx.x);
    // Value j of thread t at [(j * kThreads + t) * 4] bytes: consecutive threads, consecutive words.
    float* mine = reinterpret_cast<float*>(smem);
    __syncthreads();  // every warp is done with the stages
    if (rank != 0) {
#pragma unroll
      for (int i = 0; i < kTilesO; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) mine[(i * 4 + e) * kThreads + t] = o[i][e];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mine[(kTilesO * 4 + h) * kThreads + t] = row_max[h];
        mine[(kTilesO * 4 + 2 + h) * kThreads + t] = row_sum[h];
      }
    }
    cluster_sync();
    if (rank == 0) {
      const unsigned local = mma::smem_address(smem);
#pragma unroll 1
      for (unsigned r = 1; r < SPLIT; ++r) {
        unsigned remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(r));
        merge([&](int j) {
          float v;
          asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote + static_cast<unsigned>((j * kThreads + t) * 4)));
          return v;
        });
      }
    }
    cluster_sync();
    return rank == 0;
  }

  // Calls f(dm, n, v0, v1) for every pair of horizontally adjacent outputs of this thread: O at
  // block row dm and columns n, n + 1 (n even), divided by the row's sum.
  template <class F> __device__ __forceinline__ void for_each_pair(F&& f) const {
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    if (warp >= kRowWarps) return;  // a key split's parts past 0 (merged into part 0)
#pragma unroll
    for (int t = 0; t < kTilesO; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float inv = 1.0f / row_sum[h];
        f(warp * kInstM + lane / 4 + h * 8, t * kInstN + (lane % 4) * 2, o[t][2 * h] * inv, o[t][2 * h + 1] * inv);
      }
  }
};

// ---- the Hopper kernel (sm_90a): wgmma and the tensor copy engine ---------------------------------
//
// The same computation as StreamedAttention, organized as device/wgmma.cuh's GEMM: a block of
// three warpgroups owns BR = 128 query rows of one batch point. Warpgroup 0 is the producer: its
// first thread copies Q's tile once and then each chunk of BC = 128 keys of K and V into a
// STAGES-deep ring with the tensor copy engine (one tensor map per operand, made on the host,
// with the operand's batch dimensions as outer dimensions of the map; QB, KB and VB of them, the
// batch coordinates of the block passed in). Warpgroups 1 and 2 are the consumers, 64 query rows
// each: per chunk S = Q K^T with wgmma m64n128k16 (Q and K from shared memory, 128-byte swizzled
// as wgmma.cuh describes), the score function and the online softmax on the accumulators, then
// O += P V with wgmma m64nDVk16, P's A fragments in registers made from S's accumulators (the
// accumulator layout of two adjacent n8 columns is the k16 A fragment layout, as on mma.sync) and
// V from shared memory read transposed (rows are keys, dv contiguous). K and V of a stage have
// their own `full` barriers, so S can start before V has landed; a stage's `empty` barrier
// completes when both consumers have finished its P V. Rows past M and keys past N are zero-
// filled by the copy engine (per batch point: the batch dimensions are the map's own), and keys
// past N get a score of -inf. D and DV are the tiles' head dimensions; the tensor maps' own
// (smaller: a head of 80 in tiles of 128) zero-fill the columns past them. As StreamedAttention,
// the block visits key chunks [c_begin, c_end) only.
template <int D, int DV, int CHUNK, int STAGES, bool BF16, int M, int N, int QB, int KB, int VB, bool EXACT = false,
          bool PLAIN = false>
struct WarpgroupAttention {
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (kConsumers + 1) * wg::kWarpgroup;
  static constexpr int BR = kConsumers * wg::kInstM;  // query rows of a block
  static constexpr int BC = CHUNK;                     // keys of a chunk: S is m64n<BC> per consumer
  static constexpr int kQBoxes = D / wg::kRowElems, kVBoxes = DV / wg::kRowElems;
  static constexpr int kQBytes = kQBoxes * BR * wg::kRowBytes;
  static constexpr int kKBytes = kQBoxes * BC * wg::kRowBytes, kVBytes = kVBoxes * BC * wg::kRowBytes;
  static constexpr int kStageBytes = kKBytes + kVBytes;
  static constexpr int kBarriers = 1 + 3 * STAGES;  // Q full; per stage K full, V full, empty
  // The tiles, 1024-byte aligned (slack for aligning the dynamic shared memory), then the barriers.
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes + wg::kAtomBytes + kBarriers * 8;
  static constexpr int kSAccs = BC / 2, kOAccs = DV / 2;  // 64 x n f32 over a warpgroup's 128 threads
  static_assert(D % wg::kRowElems == 0, "d must be whole 64-element rows of the swizzled tiles");
  static_assert(BC == 64 || BC == 128, "S's accumulators are m64n64 or m64n128");
  // O's accumulators: m64n128 pieces, the last one m64n64 when DV is an odd number of 64-column
  // boxes; piece p holds columns [128 p, 128 p + 128) as o[64 p ..], so accumulator i of o is
  // column 8 (i / 4) + 2 (lane % 4) + i % 2 throughout, as in one m64n<DV> tile.
  static_assert(DV % wg::kRowElems == 0 && DV <= 256, "dv must be 64, 128, 192 or 256 columns");
  static constexpr int kOPiece = 2 * wg::kRowElems;  // m64n128: O's widest accumulator piece
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");

  float o[kOAccs];
  float row_max[2], row_sum[2];

  // O[m0 : m0 + BR, :] of one batch point; qb, kb, vb: the batch coordinates of the block in the
  // tensor maps' outer dimensions. score and score2 as for StreamedAttention; store(dm, n, v0,
  // v1) is called by the consumers for every pair of horizontally adjacent outputs (block row dm,
  // columns n and n + 1, divided by the row sums). `smem` holds kSmemBytes.
  template <class Score, class Score2, class Score2P, class Store>
  __device__ __forceinline__ void run(unsigned char* smem, const wg::TensorMap* map_q, const wg::TensorMap* map_k,
                                      const wg::TensorMap* map_v, int m0, const int* qb, const int* kb, const int* vb,
                                      int c_begin, int c_end, Score&& score, Score2&& score2, int p_begin, int p_end,
                                      Score2P&& score2p, Store&& store) {
    const int chunks = c_end - c_begin;
    const unsigned raw = mma::smem_address(smem);
    const unsigned base = (raw + wg::kAtomBytes - 1) & ~static_cast<unsigned>(wg::kAtomBytes - 1);
    const unsigned tiles = base + kQBytes;
    // q_full at bars; k_full[s] at bars + 8 (1 + s), v_full[s] + 8 STAGES, empty[s] + 16 STAGES.
    const unsigned bars = tiles + STAGES * kStageBytes;
    const int wgi = static_cast<int>(threadIdx.x) / wg::kWarpgroup;
    if (threadIdx.x == 0) {
      wg::mbar_init(bars, 1);
#pragma unroll
      for (int s = 0; s < STAGES; ++s) {
        wg::mbar_init(bars + 8 * (1 + s), 1);
        wg::mbar_init(bars + 8 * (1 + STAGES + s), 1);
        wg::mbar_init(bars + 8 * (1 + 2 * STAGES + s), kConsumers);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wgi == 0) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(wg::kProducerRegs) : "memory");
      if (threadIdx.x == 0) {
        wg::mbar_expect_tx(bars, kQBytes);
#pragma unroll
        for (int b = 0; b < kQBoxes; ++b) wg::tma_load<QB>(base + b * BR * wg::kRowBytes, map_q, bars, b * wg::kRowElems, m0, qb);
        for (int i = 0; i < chunks; ++i) {
          const int s = i % STAGES, c = c_begin + i;
          const unsigned k_full = bars + 8 * (1 + s), v_full = bars + 8 * (1 + STAGES + s);
          // Round r of a stage waits for the consumers' release of round r - 1.
          wg::mbar_wait(bars + 8 * (1 + 2 * STAGES + s), ((i / STAGES) & 1) ^ 1);
          const unsigned k = tiles + s * kStageBytes, v = k + kKBytes;
          wg::mbar_expect_tx(k_full, kKBytes);
#pragma unroll
          for (int b = 0; b < kQBoxes; ++b) wg::tma_load<KB>(k + b * BC * wg::kRowBytes, map_k, k_full, b * wg::kRowElems, c * BC, kb);
          wg::mbar_expect_tx(v_full, kVBytes);
#pragma unroll
          for (int b = 0; b < kVBoxes; ++b) wg::tma_load<VB>(v + b * BC * wg::kRowBytes, map_v, v_full, b * wg::kRowElems, c * BC, vb);
        }
      }
    } else {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(wg::kConsumerRegs) : "memory");
      const int cw = wgi - 1;
      const int t = static_cast<int>(threadIdx.x) % wg::kWarpgroup, w = t / kLanes, lane = t % kLanes;
      const int row0 = cw * wg::kInstM + w * kInstM + lane / 4;  // block row of accumulators 0, 1 (+ 8: 2, 3)
#pragma unroll
      for (int i = 0; i < kOAccs; ++i) o[i] = 0.0f;
      row_max[0] = row_max[1] = -inf_f32();
      row_sum[0] = row_sum[1] = 0.0f;
      const unsigned q = base + cw * wg::kInstM * wg::kRowBytes;
      float sc[kSAccs];        // the scores of the chunk in flight, then its probabilities
#pragma unroll
      for (int i = 0; i < kSAccs; ++i) sc[i] = 0.0f;  // defined values for the first wgmma's operands
      unsigned pf[BC / wg::kInstK][4];  // the previous chunk's probabilities as A fragments
      float rescale[2];

      // Issues S = Q K^T of the block's chunk c (counted from c_begin; one commit group) into sc.
      auto issue_scores = [&](int c) {
        wg::mbar_wait(bars + 8 * (1 + c % STAGES), (c / STAGES) & 1);
        const unsigned k = tiles + (c % STAGES) * kStageBytes;
        wg::fence_registers(sc);
        wg::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / wg::kInstK; ++kk) {
          // k steps of 16 elements (32 bytes) inside a swizzled row; 64-element boxes one after the other.
          const int box = kk / (wg::kRowElems / wg::kInstK), col = (kk % (wg::kRowElems / wg::kInstK)) * wg::kInstK * 2;
          const wg::u64 da = wg::smem_desc(q + box * BR * wg::kRowBytes + col, 16, wg::kAtomBytes);
          const wg::u64 db = wg::smem_desc(k + box * BC * wg::kRowBytes + col, 16, wg::kAtomBytes);
          // The first k step overwrites sc.
          if constexpr (BC == 128) wg::wgmma_n128_acc<BF16, false>(sc, da, db, kk);
          else wg::wgmma_n64_acc<BF16, false>(sc, da, db, kk);
        }
        wg::wgmma_commit();
      };
      // The score function and the online softmax of chunk c's landed scores: the row maxima and
      // sums move on, sc becomes the probabilities (relative to the new maxima), `rescale` the
      // factor O's rows must take before P V of chunk c. Accumulator i: row row0 + 8 ((i / 2) % 2),
      // key 8 (i / 4) + 2 (lane % 4) + i % 2 of the chunk.
      auto softmax = [&](int c) {
        float chunk_max[2] = {-inf_f32(), -inf_f32()};
        auto score_chunk = [&](auto& pair) {
#pragma unroll
          for (int i = 0; i < kSAccs; i += 2) {
            const int h = (i / 2) % 2;
            const int n = (c_begin + c) * BC + 8 * (i / 4) + 2 * (lane % 4);
            score_pair<N, BC>(score, pair, sc[i], sc[i + 1], row0 + 8 * h, n);
            chunk_max[h] = fmaxf(chunk_max[h], fmaxf(sc[i], sc[i + 1]));
          }
        };
        if constexpr (PLAIN) {
          if (c_begin + c >= p_begin && c_begin + c < p_end) score_chunk(score2p);
          else score_chunk(score2);
        } else {
          score_chunk(score2);
        }
        float shift[2], maximum[2];
        online_rows(chunk_max, row_max, row_sum, rescale, shift, maximum);
#pragma unroll
        for (int i = 0; i < kSAccs; ++i) {
          sc[i] = probability<EXACT>(sc[i], shift[(i / 2) % 2], maximum[(i / 2) % 2]);
          row_sum[(i / 2) % 2] += sc[i];
        }
      };
      // O's rows take the rescale; the probabilities become P's A fragments (two adjacent n8
      // accumulator tiles are one k16 A fragment).
      auto rescale_and_pack = [&]() {
#pragma unroll
        for (int i = 0; i < kOAccs; ++i) o[i] *= rescale[(i / 2) % 2];
#pragma unroll
        for (int kk = 0; kk < BC / wg::kInstK; ++kk)
#pragma unroll
          for (int r = 0; r < 4; ++r) pf[kk][r] = pack2<BF16>(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
        // Done here, not sunk past the next wgmmas' issue (ptxas would serialize the wgmmas).
        wg::fence_registers(o);
        wg::fence_registers(pf);
      };

      // The two consumers take turns issuing their wgmmas (named barriers 1 and 2: a consumer
      // waits for its turn, issues, and hands the turn over), so that one's softmax runs while
      // the other's products occupy the tensor cores. Consumer 0 goes first: consumer 1 hands it
      // the first turn and does not hand over after its last issue (every wait has its arrive).
      const int turns = chunks + 1;  // S(0); S(c + 1) with P V(c); the last P V
      auto turn_wait = [&]() { asm volatile("bar.sync %0, %1;\n" ::"r"(1 + cw), "n"(2 * wg::kWarpgroup) : "memory"); };
      auto turn_pass = [&](int turn) {
        if (cw == 0 || turn + 1 < turns) asm volatile("bar.arrive %0, %1;\n" ::"r"(2 - cw), "n"(2 * wg::kWarpgroup) : "memory");
      };
      if (cw == 1) asm volatile("bar.arrive 1, %0;\n" ::"n"(2 * wg::kWarpgroup) : "memory");

      wg::mbar_wait(bars, 0);
      turn_wait();
      issue_scores(0);
      turn_pass(0);
      wg::wgmma_wait<0>();
      wg::fence_registers(sc);
      softmax(0);
      rescale_and_pack();
      // O += P V of chunk c (one commit group): V stored keys x dv, read transposed; its 64-column
      // boxes are BC rows apart, O's piece p reads boxes 2 p and 2 p + 1 (2 p alone for a last n64).
      auto issue_pv = [&](int c) {
        wg::mbar_wait(bars + 8 * (1 + STAGES + c % STAGES), (c / STAGES) & 1);
        const unsigned v = tiles + (c % STAGES) * kStageBytes + kKBytes;
        wg::fence_registers(o);
        wg::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BC / wg::kInstK; ++kk) {
#pragma unroll
          for (int piece = 0; piece < (DV + kOPiece - 1) / kOPiece; ++piece) {
            const unsigned at = v + (2 * piece * BC + kk * wg::kInstK) * wg::kRowBytes;
            const wg::u64 db = wg::smem_desc(at, BC * wg::kRowBytes, wg::kAtomBytes);
            float* acc = o + kOPiece / 2 * piece;  // 64 x kOPiece f32 over the warpgroup's 128 threads
            if (DV - kOPiece * piece >= kOPiece) wg::wgmma_rs_n128<BF16, true>(*reinterpret_cast<float(*)[kOPiece / 2]>(acc), pf[kk], db);
            else wg::wgmma_rs_n64<BF16, true>(*reinterpret_cast<float(*)[kOPiece / 4]>(acc), pf[kk], db);
          }
        }
        wg::wgmma_commit();
      };
      // After P V of chunk c: O's and P's registers are free again, and both groups reading the
      // chunk's stage are done (K: S of chunk c, waited for earlier; V).
      auto finish_pv = [&](int c) {
        wg::wgmma_wait<0>();
        wg::fence_registers(o);
        wg::fence_registers(pf);
        if (t == 0) wg::mbar_arrive(bars + 8 * (1 + 2 * STAGES + c % STAGES));
      };
      // Chunk c's P V runs on the tensor cores while the scores of chunk c + 1 go through the
      // softmax: S(c + 1) is issued first, then P V(c); waiting for all but the newest group
      // waits for S(c + 1) alone. (No branch inside the loop: ptxas then sees which group each
      // wait covers and keeps the wgmmas asynchronous.)
      for (int c = 0; c + 1 < chunks; ++c) {
        turn_wait();
        issue_scores(c + 1);
        issue_pv(c);
        turn_pass(c + 1);
        wg::wgmma_wait<1>();
        wg::fence_registers(sc);
        softmax(c + 1);
        finish_pv(c);
        rescale_and_pack();
      }
      turn_wait();
      issue_pv(chunks - 1);
      turn_pass(turns - 1);
      finish_pv(chunks - 1);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
        row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
      }
      const float inv[2] = {1.0f / row_sum[0], 1.0f / row_sum[1]};
#pragma unroll
      for (int j = 0; j < DV / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          store(row0 + 8 * h, 8 * j + 2 * (lane % 4), o[4 * j + 2 * h] * inv[h], o[4 * j + 2 * h + 1] * inv[h]);
    }
  }
};

}  // namespace flash
}  // namespace tsl
