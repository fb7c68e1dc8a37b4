// Tessel device library: the tensor-core main loop of contraction kernels (the "mma" path,
// kernels/cuda/contraction_plan.h), for sm_80 and newer. Pasted after prelude.cuh into every
// kernel; only kernels of the mma path instantiate it.
//
//   C[m, n] = sum_k A[m, k] * B[k, n]   (f16 or bf16 operands, f32 accumulators)
//
// A block computes one BM x BN tile of C with WARPS_M x WARPS_N warps, each owning a
// (BM / WARPS_M) x (BN / WARPS_N) warp tile of m16n8 accumulator fragments. The K loop runs in
// steps of BK through a STAGES-deep ring of shared-memory buffers filled by cp.async (16-byte
// global -> shared copies that bypass L1), so that STAGES - 1 tiles are in flight while one is
// multiplied. Fragments are read with ldmatrix (.trans for an operand stored with k strided) and
// multiplied with mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32.
//
// Operands in device memory are 2-D row-major views: element (r, c) at g[r * ld + c], c the
// contiguous index. An operand is "k-contiguous" when c is its k index (A stored M x K, B stored
// N x K) and "k-strided" otherwise (A stored K x M, B stored K x N). Rows that start 16-byte
// aligned (ld and the base a multiple of 8 elements) are read by 16-byte cp.async; others in
// narrower pieces (GRAN_A, GRAN_B: TileCopy). Any extent is fine: chunks past the edge are
// zero-filled (cp.async's src-size), so the K tail adds zeros and rows or columns past M or N
// produce accumulators the epilogue does not store.
//
// When a tile's K loop is split over a thread-block cluster (sm_90; contraction_plan.h), each
// block runs the loop over its part of K (run's kt0 and ktiles) and reduce_cluster adds the
// parts' accumulators in rank 0 through distributed shared memory.
//
// Shared memory holds each stage as [rows][cols + kPadElems]: the 16-byte pad shifts consecutive
// rows by 4 banks, so the 8 row addresses of an ldmatrix 8x8 matrix hit 8 distinct 16-byte bank
// groups (row length in 16-byte units is odd when cols is a multiple of 16): no bank conflicts.
//
// What is a hardware fact here is a fact of the PTX instructions (mma.sync's shape and its
// fragments, defined over the 32 lanes of a warp; ldmatrix's 8x8 matrices; cp.async's 16
// bytes), not of a chip: the compiler checks the spec's warp width and tensor-core shapes
// before it picks this path.
#pragma once

namespace tsl {
namespace mma {

constexpr int kInstM = 16, kInstN = 8, kInstK = 16;  // mma.sync.aligned.m16n8k16
constexpr int kLanes = 32;                           // the lanes mma.sync's fragments are defined over
constexpr int kChunkElems = 8;                       // one 16-byte cp.async of 16-bit elements
constexpr int kPadElems = 8;                         // 16 bytes of padding per shared-memory row

typedef unsigned short u16;

// ---- PTX wrappers ---------------------------------------------------------------------------------

__device__ __forceinline__ unsigned smem_address(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// Copies 16 bytes from global to shared memory; only the first src_bytes are read, the rest of
// the 16 are zero-filled (src_bytes = 0 reads nothing).
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// Copies BYTES (4 or 8) from global to shared memory, the first src_bytes read and the rest
// zero-filled: the narrower copies of an operand whose rows do not start 16-byte aligned
// (cp.async.ca: the .cg form takes 16 bytes only).
template <int BYTES>
__device__ __forceinline__ void cp_async_narrow(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// One step of the cp.async ring the main loops below share: starts the copies of K tile `tile`
// into its stage (copy(stage address), when it is one of the `ktiles`), moves the copiers on to
// the next tile (advance()) and commits one group -- empty past the end, so that the wait counts
// stay the same at every step.
template <int STAGES, int STAGE_BYTES, class Copy, class Advance>
__device__ __forceinline__ void ring_fill(unsigned base, int tile, int ktiles, Copy&& copy, Advance&& advance) {
  if (tile < ktiles) copy(base + static_cast<unsigned>((tile % STAGES) * STAGE_BYTES));
  advance();
  cp_async_commit();
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// d += a * b for one m16n8k16 tile (row-major A fragment, column-major B fragment).
template <bool BF16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// This block's rank in its thread-block cluster, and a barrier over the cluster that orders its
// shared-memory writes before the other blocks' reads (sm_90).
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The partial sums of a K split over a thread-block cluster (sm_90), for the main loops below:
// the SPLIT blocks of a cluster compute the same tile, each over its own part of K; their sums
// meet in rank 0 through distributed shared memory. Ranks 1 .. SPLIT-1 store their COUNT
// accumulators per thread in their own shared memory (COUNT x THREADS floats of `smem`, free
// after the main loop's last barrier; thread t's float4 j at [(j THREADS + t) 16] bytes, so
// consecutive threads write consecutive 16 bytes), the cluster synchronizes, rank 0 adds the
// partial sums rank by rank (a fixed order: the result does not depend on timing) reading them
// from the other blocks' shared memory, and the cluster synchronizes again so that no block exits
// while its memory is read. Threads THREADS and above hold no sums (the f32 kernel's k slices
// past the first) and take part in the barriers only. Returns whether this block holds the sums
// (rank 0, which then runs the epilogue).
template <int SPLIT, int THREADS, int COUNT>
__device__ __forceinline__ bool reduce_partial_sums(unsigned char* smem, float (&acc)[COUNT]) {
  static_assert(SPLIT >= 2, "a split K needs two blocks at least");
  static_assert(COUNT % 4 == 0, "the sums move as float4");
  const unsigned rank = cluster_rank();
  const int t = static_cast<int>(threadIdx.x);
  float4* mine = reinterpret_cast<float4*>(smem);
  if (rank != 0 && t < THREADS) {
#pragma unroll
    for (int j = 0; j < COUNT / 4; ++j) mine[j * THREADS + t] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  }
  cluster_sync();
  if (rank == 0 && t < THREADS) {
    const unsigned local = smem_address(smem);
#pragma unroll 1
    for (unsigned r = 1; r < SPLIT; ++r) {
      unsigned remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(r));
#pragma unroll
      for (int j = 0; j < COUNT / 4; ++j) {
        float v0, v1, v2, v3;
        asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                     : "r"(remote + static_cast<unsigned>((j * THREADS + t) * 16)));
        acc[4 * j] += v0;
        acc[4 * j + 1] += v1;
        acc[4 * j + 2] += v2;
        acc[4 * j + 3] += v3;
      }
    }
  }
  cluster_sync();
  return rank == 0;
}
// The address of `p` (this block's shared memory) in the shared memory of the cluster's block
// `rank`, and the value there (distributed shared memory; the vector kernel's sliced windows
// combine their parts so).
__device__ __forceinline__ unsigned cluster_address(const void* p, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_address(p)), "r"(rank));
  return remote;
}
__device__ __forceinline__ float cluster_load(const float* p, unsigned rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(cluster_address(p, rank)));
  return v;
}
__device__ __forceinline__ double cluster_load(const double* p, unsigned rank) {
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];\n" : "=d"(v) : "r"(cluster_address(p, rank)));
  return v;
}

// ---- global -> shared tile copies -------------------------------------------------------------------

// The copies of one operand, tile after tile along K. The operand is a ROWS_ALL x COLS_ALL
// row-major view (rows LD elements apart); each tile is ROWS x COLS of it, stored in shared
// memory as [ROWS][COLS + kPadElems]; K runs along the columns (K_IN_COLS) or the rows. Thread t
// owns the 16-byte chunks t, t + THREADS, ... of a tile: one column and rows kRowStep apart, so
// one pointer describes them all. Chunks past the view's edge are zero-filled (cp.async reads
// `valid` bytes of 16). Extents are compile-time constants: the edge checks of an axis vanish
// when the tile divides it.
//
// GRAN: elements per global read, the largest of 8, 4, 2 and 1 that divides the view's row
// distance and start (the planner's MmaOperand::align). Below 8 a chunk is read in pieces: 8- or
// 4-byte cp.async, or, for rows that start at odd elements, 16-bit loads through registers
// stored to shared memory as one 16-byte chunk (visible after the main loop's next barrier, like
// a landed cp.async). The shared-memory layout is the same.
// CHECK_ROWS: check the rows against ROWS_ALL even where the tile divides it (tiles that do not
// start at multiples of ROWS: the flash kernel's key split, flash.cuh).
template <int ROWS, int COLS, int THREADS, int ROWS_ALL, int COLS_ALL, long long LD, bool K_IN_COLS, int GRAN = kChunkElems,
          bool CHECK_ROWS = false>
struct TileCopy {
  static constexpr int kChunksPerRow = COLS / kChunkElems;
  static constexpr int kChunks = ROWS * kChunksPerRow;
  static constexpr int kIters = (kChunks + THREADS - 1) / THREADS;
  static constexpr int kRowStep = THREADS / kChunksPerRow;
  static constexpr bool kCheckRows = CHECK_ROWS || ROWS_ALL % ROWS != 0, kCheckCols = COLS_ALL % COLS != 0 || COLS_ALL % kChunkElems != 0;
  static_assert(COLS % kChunkElems == 0, "tile columns must be whole 16-byte chunks");
  static_assert(THREADS % kChunksPerRow == 0, "a thread's chunks must share one column");
  static_assert(GRAN == 1 || GRAN == 2 || GRAN == 4 || GRAN == kChunkElems, "a read is 2, 4, 8 or 16 bytes");

  const u16* base;  // the view (a valid address for chunks that read nothing)
  const u16* ptr;   // this thread's first chunk of the next tile
  int row, col;     // its position in the view
  int row_first, col_first;  // ... in the first tile (seek)
  unsigned dst;     // its byte offset in a stage

  __device__ __forceinline__ TileCopy(const u16* __restrict__ g, int row0, int col0) : base(g) {
    const int t = static_cast<int>(threadIdx.x);
    row = row_first = row0 + t / kChunksPerRow;
    col = col_first = col0 + (t % kChunksPerRow) * kChunkElems;
    ptr = g + static_cast<long long>(row) * LD + col;
    dst = static_cast<unsigned>(((t / kChunksPerRow) * (COLS + kPadElems) + (t % kChunksPerRow) * kChunkElems) * 2);
  }

  // Starts the copy of the next tile into the stage at shared address `stage`.
  __device__ __forceinline__ void copy(unsigned stage) const {
    int valid = kChunkElems;
    if (kCheckCols) valid = COLS_ALL - col < 0 ? 0 : (COLS_ALL - col > kChunkElems ? kChunkElems : COLS_ALL - col);
    if (GRAN == 1) {
      // All the loads first, then the stores: one memory latency per tile, not one per chunk.
      unsigned words[kIters][kChunkElems / 2];
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const bool live = (kChunks % THREADS == 0 || static_cast<int>(threadIdx.x) + i * THREADS < kChunks) &&
                          (!kCheckRows || row + i * kRowStep < ROWS_ALL);
        const u16* src = ptr + static_cast<long long>(i) * kRowStep * LD;
#pragma unroll
        for (int e = 0; e < kChunkElems; e += 2) {
          const unsigned lo = live && e < valid ? __ldg(src + e) : 0u, hi = live && e + 1 < valid ? __ldg(src + e + 1) : 0u;
          words[i][e / 2] = lo | (hi << 16);
        }
      }
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        if (kChunks % THREADS != 0 && static_cast<int>(threadIdx.x) + i * THREADS >= kChunks) continue;
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(stage + dst + static_cast<unsigned>(i * kRowStep * (COLS + kPadElems) * 2)),
                     "r"(words[i][0]), "r"(words[i][1]), "r"(words[i][2]), "r"(words[i][3])
                     : "memory");
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (kChunks % THREADS != 0 && static_cast<int>(threadIdx.x) + i * THREADS >= kChunks) continue;
      const int v = (!kCheckRows || row + i * kRowStep < ROWS_ALL) ? valid : 0;
      const unsigned d = stage + dst + static_cast<unsigned>(i * kRowStep * (COLS + kPadElems) * 2);
      const u16* src = ptr + static_cast<long long>(i) * kRowStep * LD;
      if (GRAN == kChunkElems) {
        cp_async_16(d, v > 0 ? src : base, v * 2);
      } else {
#pragma unroll
        for (int e = 0; e < kChunkElems; e += GRAN) {
          const int piece = v - e < 0 ? 0 : (v - e > GRAN ? GRAN : v - e);
          cp_async_narrow<GRAN * 2>(d + static_cast<unsigned>(e * 2), piece > 0 ? src + e : base, piece * 2);
        }
      }
    }
  }

  // Moves to tile `kt` along K (counted from the one the copy started at).
  __device__ __forceinline__ void seek(int kt) {
    if (K_IN_COLS) col = col_first + kt * COLS;
    else row = row_first + kt * ROWS;
    ptr = base + static_cast<long long>(row) * LD + col;
  }

  // Moves to the next tile along K.
  __device__ __forceinline__ void advance() {
    if (K_IN_COLS) {
      ptr += COLS;
      col += COLS;
    } else {
      ptr += static_cast<long long>(ROWS) * LD;
      row += ROWS;
    }
  }
};

// A copier (TileCopy) walking a list of K tiles instead of every one: the block-sparse K loop,
// which skips the tiles where the sparse operand's block is zero. `tiles` lists `count` tile
// indices, ascending; run_with calls copy() for the first `count` tiles only.
template <class C>
struct ListCopy {
  C& inner;
  const int* tiles;
  int next;
  __device__ __forceinline__ ListCopy(C& c, const int* list) : inner(c), tiles(list), next(0) {}
  __device__ __forceinline__ void copy(unsigned stage) {
    inner.seek(__ldg(tiles + next));
    inner.copy(stage);
  }
  __device__ __forceinline__ void advance() { ++next; }
};

// ---- the block's main loop ----------------------------------------------------------------------

// One block's BM x BN tile of C = A B (M x N x K, compile-time extents) over the whole K range.
// A_K_CONTIG / B_K_CONTIG: how A and B are stored (see the file comment), LDA / LDB their row
// distances; BF16: bf16 operands, else f16.
//
// The loop is the multistage one of CUTLASS: STAGES - 1 tiles in flight; fragments are double
// buffered in registers, and the fragments of the next tile's first k16 step are read (after the
// wait and barrier for that tile) before the current tile's last mma.sync, so the tensor cores
// stay busy across the barrier.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIG, bool B_K_CONTIG, bool BF16, int M,
          int N, int K, long long LDA, long long LDB, int GRAN_A = kChunkElems, int GRAN_B = kChunkElems>
struct BlockGemm {
  static constexpr int kThreads = WARPS_M * WARPS_N * kLanes;
  static constexpr int kWarpM = BM / WARPS_M, kWarpN = BN / WARPS_N;
  static constexpr int kTilesM = kWarpM / kInstM;  // m16 fragments per warp
  static constexpr int kTilesN = kWarpN / kInstN;  // n8 fragments per warp
  static constexpr int kSteps = BK / kInstK;       // k16 steps per tile
  // Shared-memory stage layout (16-bit elements): A then B.
  static constexpr int kARows = A_K_CONTIG ? BM : BK, kACols = A_K_CONTIG ? BK : BM;
  static constexpr int kBRows = B_K_CONTIG ? BN : BK, kBCols = B_K_CONTIG ? BK : BN;
  static constexpr int kAStride = kACols + kPadElems, kBStride = kBCols + kPadElems;
  static constexpr int kStageBytes = (kARows * kAStride + kBRows * kBStride) * 2;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
  static constexpr int kKTiles = (K + BK - 1) / BK;
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");
  static_assert(kWarpM % kInstM == 0 && kWarpN % (2 * kInstN) == 0, "warp tile must be whole m16 x n16 fragments");
  static_assert(BK % (2 * kInstK) == 0, "an even number of k16 steps per tile (fragment double buffering)");
  static_assert(kACols % 16 == 0 && kBCols % 16 == 0, "tile shape");

  float acc[kTilesM][kTilesN][4];
  unsigned af[2][kTilesM][4];
  unsigned bf[2][kTilesN][2];

  // Reads the fragments of k16 step `kk` (elements) of a stage into buffer `buf`.
  __device__ __forceinline__ void load_fragments(int buf, unsigned stage, int kk, int warp_m, int warp_n, int lane) {
    const unsigned sa = stage, sb = stage + kARows * kAStride * 2;
    const int r8 = lane % 8, j = lane / 8;  // ldmatrix: lane supplies row r8 of 8x8 matrix j
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
      const int m = warp_m * kWarpM + i * kInstM;
      // Matrices 0..3: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
      if (A_K_CONTIG) ldmatrix_x4(af[buf][i], sa + static_cast<unsigned>(((m + lane % 16) * kAStride + kk + (lane / 16) * 8) * 2));
      else ldmatrix_x4_trans(af[buf][i], sa + static_cast<unsigned>(((kk + r8 + (j / 2) * 8) * kAStride + m + (j % 2) * 8) * 2));
    }
#pragma unroll
    for (int t = 0; t < kTilesN; t += 2) {
      const int n = warp_n * kWarpN + t * kInstN;
      // Matrices 0..3: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
      unsigned r[4];
      if (B_K_CONTIG) ldmatrix_x4(r, sb + static_cast<unsigned>(((n + r8 + (j / 2) * 8) * kBStride + kk + (j % 2) * 8) * 2));
      else ldmatrix_x4_trans(r, sb + static_cast<unsigned>(((kk + r8 + (j % 2) * 8) * kBStride + n + (j / 2) * 8) * 2));
      bf[buf][t][0] = r[0];
      bf[buf][t][1] = r[1];
      bf[buf][t + 1][0] = r[2];
      bf[buf][t + 1][1] = r[3];
    }
  }

  __device__ __forceinline__ void multiply(int buf) {
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int t = 0; t < kTilesN; ++t) mma_16816<BF16>(acc[i][t], af[buf][i], bf[buf][t][0], bf[buf][t][1]);
  }

  // The copies of plain 2-D operand views (see the file comment).
  typedef TileCopy<kARows, kACols, kThreads, A_K_CONTIG ? M : K, A_K_CONTIG ? K : M, LDA, A_K_CONTIG, GRAN_A> CopyA;
  typedef TileCopy<kBRows, kBCols, kThreads, B_K_CONTIG ? N : K, B_K_CONTIG ? K : N, LDB, B_K_CONTIG, GRAN_B> CopyB;

  // acc = A[m0 : m0 + BM, k] B[k, n0 : n0 + BN] summed over the K tiles kt0 .. kt0 + ktiles - 1 (all
  // of K by default; a part of it when the K loop is split over a cluster, see reduce_cluster),
  // `a` and `b` at the batch point, `smem` holding kSmemBytes. Ends with every copy complete and a
  // barrier: the caller may reuse the memory.
  __device__ __forceinline__ void run(unsigned char* smem, const u16* __restrict__ a, const u16* __restrict__ b, int m0, int n0,
                                      int kt0 = 0, int ktiles = kKTiles) {
    // A is M x K (k contiguous) or K x M; B is N x K or K x N.
    CopyA copy_a(a, A_K_CONTIG ? m0 : kt0 * BK, A_K_CONTIG ? kt0 * BK : m0);
    CopyB copy_b(b, B_K_CONTIG ? n0 : kt0 * BK, B_K_CONTIG ? kt0 * BK : n0);
    run_with(smem, copy_a, copy_b, ktiles);
  }

  // The same main loop over any copiers of the block's A and B tiles: objects with
  // copy(unsigned stage_address) (start the cp.async copies of the next tile into a stage laid out
  // as above) and advance() (move to the next tile along K), `ktiles` tiles from where they start.
  // The implicit GEMM of a convolution passes a generated gather copier for A
  // (kernels/cuda/kernel_emitter.cpp).
  template <class CA, class CB>
  __device__ __forceinline__ void run_with(unsigned char* smem, CA& copy_a, CB& copy_b, int ktiles = kKTiles) {
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int t = 0; t < kTilesN; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][t][e] = 0.0f;
    const unsigned base = smem_address(smem);
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const unsigned b_offset = kARows * kAStride * 2;
    auto copy = [&](unsigned st) {
      copy_a.copy(st);
      copy_b.copy(st + b_offset);
    };
    auto advance = [&] {
      copy_a.advance();
      copy_b.advance();
    };
    // Prologue: tiles 0 .. STAGES - 2 in flight, one commit group each (empty past the end).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) ring_fill<STAGES, kStageBytes>(base, s, ktiles, copy, advance);
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_fragments(0, base, 0, warp_m, warp_n, lane);
    for (int kt = 0; kt < ktiles; ++kt) {
      const unsigned cur = base + (kt % STAGES) * kStageBytes;
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        if (step == kSteps - 1) {
          // Tile kt + 1 has landed (at most STAGES - 2 younger groups pending), and every warp
          // has read its last fragments of tile kt - 1, whose stage was refilled at step 0.
          cp_async_wait<STAGES - 2>();
          __syncthreads();
        }
        if (step == 0) {
          // Refill the stage of tile kt - 1 (read completely before the last barrier) with tile
          // kt + STAGES - 1.
          ring_fill<STAGES, kStageBytes>(base, kt + STAGES - 1, ktiles, copy, advance);
        }
        if (step < kSteps - 1) load_fragments((step + 1) % 2, cur, (step + 1) * kInstK, warp_m, warp_n, lane);
        else if (kt + 1 < ktiles) load_fragments(0, base + ((kt + 1) % STAGES) * kStageBytes, 0, warp_m, warp_n, lane);
        multiply(step % 2);
      }
    }
    cp_async_wait<0>();
    __syncthreads();
  }

  // ---- split K over a thread-block cluster (sm_90): reduce_partial_sums ----
  static constexpr int kAccPerThread = kTilesM * kTilesN * 4;
  static constexpr int kReduceBytes = kAccPerThread * kThreads * 4;

  static __device__ __forceinline__ unsigned cluster_rank() { return mma::cluster_rank(); }

  template <int SPLIT> __device__ __forceinline__ bool reduce_cluster(unsigned char* smem) {
    return reduce_partial_sums<SPLIT, kThreads>(smem, *reinterpret_cast<float(*)[kAccPerThread]>(&acc[0][0][0]));
  }

  // Calls f(m, n, v0, v1) for every pair of horizontally adjacent accumulators of this thread:
  // v0 at (m, n), v1 at (m, n + 1), m and n relative to the block tile (n is even).
  template <class F> __device__ __forceinline__ void for_each_pair(F&& f) const {
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int t = 0; t < kTilesN; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // m16n8 f32 accumulator fragment: c0, c1 at (lane / 4, 2 (lane % 4) + {0, 1}); c2, c3 eight rows below.
          const int m = warp_m * kWarpM + i * kInstM + lane / 4 + h * 8;
          const int n = warp_n * kWarpN + t * kInstN + (lane % 4) * 2;
          f(m, n, acc[i][t][2 * h], acc[i][t][2 * h + 1]);
        }
  }
};

// ---- 2:4 sparse weights on the sparse tensor cores ---------------------------------------------
//
// C[m, n] = sum_k X[m, k] * W[k, n] with W 2:4 sparse along k (at most 2 non-zeros in every 4
// consecutive k) and stored compressed at compile time (kernels/cuda/nm_compress.h):
//   values: N x KC 16-bit elements, row n holding the 2 kept values of each group of 4 of W's
//           column n, in k order (KC = K rounded up to whole BK tiles, halved);
//   meta:   per 16 rows of W^T and 32 of k, 16 words of 2-bit indices, word 2 g + q for the lanes
//           4 g + q (q = 0, 1) that supply mma.sp's metadata (sparsity selector 0; lanes with
//           q = 2, 3 read the same word, which the instruction ignores), a ROWS16 x (K32 * 32) view
//           of 16-bit elements.
// mma.sp's sparse operand is its A, so the tensor cores compute C^T = W^T X^T: W^T's rows are
// mma's m (16 per instruction), X's rows its n (8), and for_each_pair turns the transposed
// accumulator pairs back into pairs along C's n with one shuffle. The main loop is BlockGemm's:
// per stage X's tile (BM x BK, as B), W's compressed tile (BN x BK / 2, as A) and its metadata
// (BN / 16 rows of BK * 2 16-bit elements), STAGES - 1 of them in flight through cp.async.

// d += a * b for one m16n8k32 tile of 2:4 sparse A (compressed A fragment, metadata word `e`,
// the lanes 4 g and 4 g + 1 supplying it: sparsity selector 0).
template <bool BF16>
__device__ __forceinline__ void mma_sp_16832(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[4], unsigned e) {
  if (BF16)
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  else
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
}

constexpr int kSpInstK = 32;        // mma.sp.m16n8k32
constexpr int kSpMetaElems = 32;    // 16-bit elements of metadata per 16 rows and 32 k (16 words)
// The metadata word of lane `lane` within a step's 16 (nm_compress.h's order).
__device__ __forceinline__ int sp_meta_word(int lane) { return 2 * (lane / 4) + (lane & 1); }
constexpr unsigned kSpMetaFill = 0x44444444u;  // indices 0 and 1 in every group: valid metadata for zero rows

// One block's BM x BN tile of C (M x N x K) with W 2:4 sparse (see above). X_K_CONTIG: X stored
// M x K (else K x M), LDX its row distance, GRAN_X its read granule (TileCopy); KC and K32 the
// compressed operand's columns and the metadata's k32 steps.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool X_K_CONTIG, bool BF16, int M, int N, int K,
          long long LDX, int GRAN_X = kChunkElems>
struct SparseBlockGemm {
  static constexpr int kThreads = WARPS_M * WARPS_N * kLanes;
  static constexpr int kWarpM = BM / WARPS_M, kWarpN = BN / WARPS_N;
  static constexpr int kTilesW = kWarpN / kInstM;   // m16 fragments of W^T per warp (C's n)
  static constexpr int kTilesX = kWarpM / kInstN;   // n8 fragments of X per warp (C's m)
  static constexpr int kSteps = BK / kSpInstK;      // k32 steps per tile
  static constexpr int kKTiles = (K + BK - 1) / BK;
  // The compressed operand covers K rounded up to whole tiles (nm_compress.h's k_pad): no copy
  // reads past it, and its padding holds zeros with valid indices.
  static constexpr int K32 = kKTiles * BK / kSpInstK;
  static constexpr int KC = kKTiles * BK / 2;       // compressed columns
  static constexpr int kMetaRows = (N + kInstM - 1) / kInstM;
  static constexpr int kWRows = BN, kWCols = BK / 2;
  static constexpr int kXRows = X_K_CONTIG ? BM : BK, kXCols = X_K_CONTIG ? BK : BM;
  static constexpr int kERows = BN / kInstM, kECols = BK / kSpInstK * kSpMetaElems;
  static constexpr int kWStride = kWCols + kPadElems, kXStride = kXCols + kPadElems, kEStride = kECols + kPadElems;
  static constexpr int kWBytes = kWRows * kWStride * 2, kXBytes = kXRows * kXStride * 2;
  static constexpr int kStageBytes = kWBytes + kXBytes + kERows * kEStride * 2;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");
  static_assert(kWarpN % kInstM == 0 && kWarpM % (2 * kInstN) == 0, "warp tile must be whole n16 x m16 fragments");
  static_assert(BK % (2 * kSpInstK) == 0, "an even number of k32 steps per tile (fragment double buffering)");

  float acc[kTilesW][kTilesX][4];
  unsigned wf[2][kTilesW][4];
  unsigned ef[2][kTilesW];
  int meta_row0 = 0;  // the block's first row of 16 of W^T

  typedef TileCopy<kWRows, kWCols, kThreads, N, KC, KC, true> CopyW;
  typedef TileCopy<kXRows, kXCols, kThreads, X_K_CONTIG ? M : K, X_K_CONTIG ? K : M, LDX, X_K_CONTIG, GRAN_X> CopyX;
  typedef TileCopy<kERows, kECols, kThreads, kMetaRows, K32 * kSpMetaElems, K32 * kSpMetaElems, true> CopyE;

  // The compressed W^T fragments and metadata of k32 step `step` of a stage into buffer `buf`
  // (double buffered: read a step ahead).
  __device__ __forceinline__ void load_fragments(int buf, unsigned stage, int step, int warp_m, int warp_n, int lane) {
    (void)warp_m;
    const unsigned sw = stage, se = stage + kWBytes + kXBytes;
#pragma unroll
    for (int i = 0; i < kTilesW; ++i) {
      const int row = warp_n * kWarpN + i * kInstM;
      // The compressed 16 x 16 of this k32 step, read as a dense m16 x k16 A fragment.
      ldmatrix_x4(wf[buf][i], sw + static_cast<unsigned>(((row + lane % 16) * kWStride + step * (kSpInstK / 2) + (lane / 16) * 8) * 2));
      // (Rows of W^T past its last 16 read zeros from the copy: invalid metadata, so a fill.)
      if (meta_row0 + row / kInstM < kMetaRows)
        asm volatile("ld.shared.b32 %0, [%1];\n"
                     : "=r"(ef[buf][i])
                     : "r"(se + static_cast<unsigned>(((row / kInstM) * kEStride + step * kSpMetaElems + sp_meta_word(lane) * 2) * 2)));
      else
        ef[buf][i] = kSpMetaFill;
    }
  }

  // The products of k32 step `step` of `stage`: X's fragments are read per n8 tile as they are
  // multiplied (an n8 x k32 fragment is 4 registers, twice a dense k16 one: double buffering them
  // too would spill a 64 x 64 warp tile).
  __device__ __forceinline__ void multiply(int buf, unsigned stage, int step, int warp_m, int lane) {
    const unsigned sx = stage + kWBytes;
    const int r8 = lane % 8, j = lane / 8, kk = step * kSpInstK;
#pragma unroll
    for (int t = 0; t < kTilesX; ++t) {
      const int m = warp_m * kWarpM + t * kInstN;
      unsigned xf[4];
      // Matrices 0..3: (m 0-7, k 0-7), (k 8-15), (k 16-23), (k 24-31): b0..b3 of an n8 x k32 fragment.
      if (X_K_CONTIG) ldmatrix_x4(xf, sx + static_cast<unsigned>(((m + r8) * kXStride + kk + j * 8) * 2));
      else ldmatrix_x4_trans(xf, sx + static_cast<unsigned>(((kk + j * 8 + r8) * kXStride + m) * 2));
#pragma unroll
      for (int i = 0; i < kTilesW; ++i) mma_sp_16832<BF16>(acc[i][t], wf[buf][i], xf, ef[buf][i]);
    }
  }

  // acc = the block's tile at (m0, n0) over all of K: `x` the dense operand, `w` the compressed
  // values, `e` the metadata (16-bit view). Ends with every copy complete and a barrier.
  __device__ __forceinline__ void run(unsigned char* smem, const u16* __restrict__ x, const u16* __restrict__ w,
                                      const u16* __restrict__ e, int m0, int n0) {
#pragma unroll
    for (int i = 0; i < kTilesW; ++i)
#pragma unroll
      for (int t = 0; t < kTilesX; ++t)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[i][t][v] = 0.0f;
    CopyW copy_w(w, n0, 0);
    CopyX copy_x(x, X_K_CONTIG ? m0 : 0, X_K_CONTIG ? 0 : m0);
    CopyE copy_e(e, n0 / kInstM, 0);
    meta_row0 = n0 / kInstM;
    const unsigned base = smem_address(smem);
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    auto copy = [&](unsigned st) {
      copy_w.copy(st);
      copy_x.copy(st + kWBytes);
      copy_e.copy(st + kWBytes + kXBytes);
    };
    auto advance = [&] {
      copy_w.advance();
      copy_x.advance();
      copy_e.advance();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) ring_fill<STAGES, kStageBytes>(base, s, kKTiles, copy, advance);
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_fragments(0, base, 0, warp_m, warp_n, lane);
    for (int kt = 0; kt < kKTiles; ++kt) {
      const unsigned cur = base + (kt % STAGES) * kStageBytes;
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        if (step == 0) {
          // Refill the stage of tile kt - 1: every warp finished reading it (X's fragments too)
          // before the last barrier.
          ring_fill<STAGES, kStageBytes>(base, kt + STAGES - 1, kKTiles, copy, advance);
        }
        if (step < kSteps - 1) {
          load_fragments((step + 1) % 2, cur, step + 1, warp_m, warp_n, lane);
          multiply(step % 2, cur, step, warp_m, lane);
        } else {
          // X's fragments are read from the stage as they are multiplied: the barrier that lets
          // the next refill overwrite this stage comes after the last step's multiplies.
          multiply(step % 2, cur, step, warp_m, lane);
          cp_async_wait<STAGES - 2>();
          __syncthreads();
          if (kt + 1 < kKTiles) load_fragments(0, base + ((kt + 1) % STAGES) * kStageBytes, 0, warp_m, warp_n, lane);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();
  }

  // Calls f(m, n, v0, v1) for pairs of horizontally adjacent values of C (v0 at (m, n), v1 at
  // (m, n + 1), n even, relative to the block tile). The accumulators hold C^T: lane 4 g + q has
  // C^T rows g, g + 8 (C's n) at columns 2 q, 2 q + 1 (C's m); lanes g and g ^ 1 exchange one
  // value per row so that an even g keeps C's row 2 q and an odd g row 2 q + 1. Every lane of
  // the warp must call it.
  template <class F> __device__ __forceinline__ void for_each_pair(F&& f) const {
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int g = lane / 4, q = lane % 4;
    const bool even = g % 2 == 0;
#pragma unroll
    for (int i = 0; i < kTilesW; ++i)
#pragma unroll
      for (int t = 0; t < kTilesX; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float own0 = acc[i][t][2 * h], own1 = acc[i][t][2 * h + 1];
          const float other = __shfl_xor_sync(0xffffffffu, even ? own1 : own0, 4);
          const int n = warp_n * kWarpN + i * kInstM + h * 8 + (even ? g : g - 1);
          const int m = warp_m * kWarpM + t * kInstN + 2 * q + (even ? 0 : 1);
          if (even) f(m, n, own0, other);
          else f(m, n, other, own1);
        }
  }
};

// ---- f32 products on the CUDA cores -------------------------------------------------------------
//
// One block's BM x BN tile of C = A B for f32 operands, with fused multiply-adds on the CUDA cores
// (the tensor cores take no f32 operands at f32 precision). The interface is BlockGemm's (run,
// run_with, reduce_cluster, for_each_pair, kThreads, kSmemBytes), so the emitter's split K and
// epilogue are shared; the operands are the same views, A M x K or K x M, B N x K or K x N
// (A_K_CONTIG, B_K_CONTIG), rows LDA and LDB f32 elements apart, read in GRAN_A- and GRAN_B-element
// pieces (4: 16-byte cp.async).
//
// The stages are TileCopy's, each f32 row seen as twice as many 16-bit elements: a tile is
// [rows][cols + kSimtPad] floats, STAGES - 1 tiles in flight. A warp's lanes are LANES_M along m
// by 32 / LANES_M along n, each lane 8 x 8 outputs in registers: a warp tile of 64 x 32 (LANES_M
// 8), 32 x 64 (4) or 16 x 128 (2, for a product of few rows: a decoding step's tokens). Per group
// of 4 k steps a lane reads its A and B values with 16-byte shared loads: along k where the
// operand is stored k-contiguous (its rows then interleaved LANES_M or 32 / LANES_M apart, so the
// lanes of a load phase read distinct rows on distinct banks, or the same row: a broadcast),
// along m or n otherwise (4 consecutive elements per load). A lane's n values come in adjacent
// pairs, as for_each_pair hands them on.
//
// KSLICES > 1 slices each stage's K among that many sets of warps (the k groups of 4 dealt out in
// turn), so that a tile of few warps still gives the SM's schedulers warps to issue from: after
// the main loop the slices past the first leave their sums in shared memory and the first adds
// them (a fixed order), and only the first slice's warps hold the tile (for_each_pair, the
// cluster's reduction).
constexpr int kSimtLaneRows = 8, kSimtLaneCols = 8;  // a lane's outputs
constexpr int kSimtPad = kPadElems / 2;            // floats of padding per shared-memory row

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIG, bool B_K_CONTIG, int M, int N, int K,
          long long LDA, long long LDB, int GRAN_A = 4, int GRAN_B = 4, int LANES_M = 8, int KSLICES = 1>
struct SimtBlockGemm {
  static constexpr int kTileThreads = WARPS_M * WARPS_N * kLanes;  // the threads of one k slice
  static constexpr int kThreads = kTileThreads * KSLICES;
  static constexpr int kLanesM = LANES_M, kLanesN = kLanes / LANES_M;
  static constexpr int TM = kSimtLaneRows, TN = kSimtLaneCols;
  static constexpr int kWarpM = kLanesM * TM, kWarpN = kLanesN * TN;  // the warp tile
  static constexpr int kARows = A_K_CONTIG ? BM : BK, kACols = A_K_CONTIG ? BK : BM;
  static constexpr int kBRows = B_K_CONTIG ? BN : BK, kBCols = B_K_CONTIG ? BK : BN;
  static constexpr int kAStride = kACols + kSimtPad, kBStride = kBCols + kSimtPad;  // floats
  static constexpr int kStageBytes = (kARows * kAStride + kBRows * kBStride) * 4;
  static constexpr int kKTiles = (K + BK - 1) / BK;
  static constexpr int kAccPerThread = TM * TN;
  static constexpr int kReduceBytes = kAccPerThread * kTileThreads * 4;  // a cluster's partial sums: one tile
  static constexpr int kSliceBytes = (KSLICES - 1) * kAccPerThread * kTileThreads * 4;  // the slices' sums
  static constexpr int kSmemBytes = STAGES * kStageBytes > kSliceBytes ? STAGES * kStageBytes : kSliceBytes;
  static_assert(LANES_M == 2 || LANES_M == 4 || LANES_M == 8, "a warp's lanes are 2, 4 or 8 along m");
  static_assert(BM == WARPS_M * kWarpM && BN == WARPS_N * kWarpN, "the block is whole warp tiles");
  static_assert(BK % (4 * KSLICES) == 0 && STAGES >= 2, "K tiles of whole groups of 4 per slice, two stages at least");
  // (16-bit view for the copies: a 16-byte chunk is 4 floats.)
  static constexpr int kGranA = GRAN_A >= 4 ? kChunkElems : 2 * GRAN_A, kGranB = GRAN_B >= 4 ? kChunkElems : 2 * GRAN_B;
  typedef TileCopy<kARows, 2 * kACols, kThreads, A_K_CONTIG ? M : K, 2 * (A_K_CONTIG ? K : M), 2 * LDA, A_K_CONTIG, kGranA> CopyA;
  typedef TileCopy<kBRows, 2 * kBCols, kThreads, B_K_CONTIG ? N : K, 2 * (B_K_CONTIG ? K : N), 2 * LDB, B_K_CONTIG, kGranB> CopyB;

  float acc[TM * TN];  // acc[i * TN + j]: this lane's i-th m value, j-th n value

  // The tile rows of this lane's i-th m value and j-th n value.
  static __device__ __forceinline__ int row_of(int warp_m, int lm, int i) {
    return warp_m * kWarpM + (A_K_CONTIG ? i * kLanesM + lm : (i / 4) * (4 * kLanesM) + lm * 4 + i % 4);
  }
  static __device__ __forceinline__ int col_of(int warp_n, int ln, int j) {
    return warp_n * kWarpN + (B_K_CONTIG ? (j / 2) * (2 * kLanesN) + ln * 2 + j % 2 : (j / 4) * (4 * kLanesN) + ln * 4 + j % 4);
  }

  // v[q][e] = an operand's value at k step kk + q for this lane's e-th row of A or column of B,
  // `at(e)` its index in the tile, rows of STRIDE floats in shared memory: one 16-byte load along
  // k per element where the operand is k-contiguous, else one along the elements per 4 of them.
  template <bool K_CONTIG, int COUNT, int STRIDE, class At>
  static __device__ __forceinline__ void load4(const float* s, int kk, At at, float (&v)[4][COUNT]) {
#pragma unroll
    for (int e = 0; e < COUNT; e += K_CONTIG ? 1 : 4) {
      if (K_CONTIG) {
        const float4 x = *reinterpret_cast<const float4*>(s + at(e) * STRIDE + kk);
        v[0][e] = x.x, v[1][e] = x.y, v[2][e] = x.z, v[3][e] = x.w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float4 x = *reinterpret_cast<const float4*>(s + (kk + q) * STRIDE + at(e));
          v[q][e] = x.x, v[q][e + 1] = x.y, v[q][e + 2] = x.z, v[q][e + 3] = x.w;
        }
      }
    }
  }

  // acc += the products of k steps kk .. kk + 3 of the stage at `sa` (A) and `sb` (B).
  __device__ __forceinline__ void multiply4(const float* sa, const float* sb, int kk, int warp_m, int warp_n, int lm, int ln) {
    float a[4][TM], b[4][TN];
    load4<A_K_CONTIG, TM, kAStride>(sa, kk, [&](int i) { return row_of(warp_m, lm, i); }, a);
    load4<B_K_CONTIG, TN, kBStride>(sb, kk, [&](int j) { return col_of(warp_n, ln, j); }, b);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i * TN + j] = fmaf(a[q][i], b[q][j], acc[i * TN + j]);
  }

  // acc = the block's tile summed over the K tiles kt0 .. kt0 + ktiles - 1 (all of K by default; a
  // part of it when the K loop is split over a cluster, see reduce_cluster). Ends with every copy
  // complete and a barrier.
  __device__ __forceinline__ void run(unsigned char* smem, const u16* __restrict__ a, const u16* __restrict__ b, int m0, int n0,
                                      int kt0 = 0, int ktiles = kKTiles) {
    // (Columns of the 16-bit view: two per float.)
    CopyA copy_a(a, A_K_CONTIG ? m0 : kt0 * BK, A_K_CONTIG ? 2 * kt0 * BK : 2 * m0);
    CopyB copy_b(b, B_K_CONTIG ? n0 : kt0 * BK, B_K_CONTIG ? 2 * kt0 * BK : 2 * n0);
    run_with(smem, copy_a, copy_b, ktiles);
  }

  // The main loop over any copiers of the block's A and B tiles (BlockGemm::run_with's contract,
  // stages laid out as above): the implicit GEMM's gathered A.
  template <class CA, class CB>
  __device__ __forceinline__ void run_with(unsigned char* smem, CA& copy_a, CB& copy_b, int ktiles = kKTiles) {
#pragma unroll
    for (int i = 0; i < TM * TN; ++i) acc[i] = 0.0f;
    const unsigned base = smem_address(smem);
    const int warp = static_cast<int>(threadIdx.x) / kLanes % (WARPS_M * WARPS_N), lane = static_cast<int>(threadIdx.x) % kLanes;
    const int slice = static_cast<int>(threadIdx.x) / kTileThreads;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N, lm = lane % kLanesM, ln = lane / kLanesM;
    const unsigned b_offset = kARows * kAStride * 4;
    auto copy = [&](unsigned st) {
      copy_a.copy(st);
      copy_b.copy(st + b_offset);
    };
    auto advance = [&] {
      copy_a.advance();
      copy_b.advance();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) ring_fill<STAGES, kStageBytes>(base, s, ktiles, copy, advance);
    for (int kt = 0; kt < ktiles; ++kt) {
      // Tile kt has landed, and every warp is done with tile kt - 1, whose stage is refilled.
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      ring_fill<STAGES, kStageBytes>(base, kt + STAGES - 1, ktiles, copy, advance);
      const float* sa = reinterpret_cast<const float*>(smem + (kt % STAGES) * kStageBytes);
      const float* sb = reinterpret_cast<const float*>(smem + (kt % STAGES) * kStageBytes + b_offset);
#pragma unroll
      for (int kk = 0; kk < BK; kk += 4 * KSLICES) multiply4(sa, sb, kk + 4 * slice, warp_m, warp_n, lm, ln);
    }
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (KSLICES > 1) {
      // Slice s > 0 leaves its sums at float4 j of its thread t: [((s - 1) kAccPerThread / 4 + j)
      // kTileThreads + t]; slice 0 adds them slice by slice.
      float4* parts = reinterpret_cast<float4*>(smem);
      const int t = static_cast<int>(threadIdx.x) % kTileThreads;
      if (slice > 0) {
#pragma unroll
        for (int j = 0; j < kAccPerThread / 4; ++j)
          parts[((slice - 1) * kAccPerThread / 4 + j) * kTileThreads + t] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
      }
      __syncthreads();
      if (slice == 0) {
#pragma unroll 1
        for (int s = 1; s < KSLICES; ++s)
#pragma unroll
          for (int j = 0; j < kAccPerThread / 4; ++j) {
            const float4 v = parts[((s - 1) * kAccPerThread / 4 + j) * kTileThreads + t];
            acc[4 * j] += v.x, acc[4 * j + 1] += v.y, acc[4 * j + 2] += v.z, acc[4 * j + 3] += v.w;
          }
      }
      __syncthreads();  // (the memory is free again: a cluster's reduction reuses it)
    }
  }

  static __device__ __forceinline__ unsigned cluster_rank() { return mma::cluster_rank(); }

  // Split K: the cluster's partial sums meet in rank 0 (reduce_partial_sums).
  template <int SPLIT> __device__ __forceinline__ bool reduce_cluster(unsigned char* smem) {
    return reduce_partial_sums<SPLIT, kTileThreads>(smem, acc);
  }

  // Calls f(m, n, v0, v1) for every pair of horizontally adjacent accumulators of this thread:
  // v0 at (m, n), v1 at (m, n + 1), m and n relative to the block tile (n is even). (The first
  // slice's threads hold the tile; the others have none.)
  template <class F> __device__ __forceinline__ void for_each_pair(F&& f) const {
    if (static_cast<int>(threadIdx.x) >= kTileThreads) return;
    const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N, lm = lane % kLanesM, ln = lane / kLanesM;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; j += 2) f(row_of(warp_m, lm, i), col_of(warp_n, ln, j), acc[i * TN + j], acc[i * TN + j + 1]);
  }
};

}  // namespace mma
}  // namespace tsl
