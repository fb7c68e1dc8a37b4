// Tessel device library: the Hopper tensor-core main loop of contraction kernels (the "wgmma"
// path, kernels/cuda/contraction_plan.h), for sm_90a. Pasted after mma.cuh into every kernel;
// only kernels of the wgmma path instantiate it (its instructions exist on sm_90a alone).
//
//   C[m, n] = sum_k A[m, k] * B[k, n]   (f16 or bf16 operands, f32 accumulators)
//
// A block of three warpgroups computes one BM x BN tile of C (BM = 128; BN = 128, 192 or 256):
// warpgroup 0 is the producer, whose first thread copies the K tiles of A and B into a
// STAGES-deep ring of shared-memory stages with the tensor copy engine (TMA: cp.async.bulk.tensor,
// one tensor map per operand, made on the host); warpgroups 1 and 2 are the consumers, each
// multiplying its 64 rows of A by the whole B tile with wgmma.mma_async m64nBNk16, accumulators in
// registers (BN / 2 floats per thread). A block of 64-row tiles (BM = 64; BN 64 to 256) has one
// consumer and two warpgroups: the GEMMs of few tiles, which 128-row tiles leave SMs idle on.
// Two mbarriers per stage hand it over: `full` completes when the copies of the stage have landed
// (the producer arms it with the stage's byte count), `empty` when the consumers have finished
// reading it. A consumer keeps one group of wgmmas in flight: it waits for the previous tile's
// group, releases that tile's stage, and goes on. In a 128-row block the producer gives registers
// up and the consumers take them (setmaxnreg), so 128 accumulators fit.
//
// Shared-memory layout (what TMA writes with 128-byte swizzling and wgmma reads through matrix
// descriptors with the same swizzle): a tile is stored as rows of 64 16-bit elements (128 bytes),
// the 16-byte chunk c of row r at chunk c ^ (r % 8); 8 rows (1024 bytes) are one swizzle atom, so
// tiles start 1024-byte aligned. A (M x K, k contiguous) is one BM x 64 box per stage: rows are
// m. B stored N x K (k contiguous) likewise: rows are n. B stored K x N (n contiguous) is BN / 64
// boxes of 64 k rows x 64 n, one after the other: rows are k, and wgmma reads it transposed.
// Out-of-range elements of a box (edges of M, N and K) are zero-filled by the copy engine, so the
// K tail adds zeros and rows or columns past M or N produce accumulators the epilogue does not
// store. Operand rows must start 16-byte aligned (the tensor map's stride rule), as for mma.cuh.
//
// Where each stage's boxes start is the COORDS hook's (PlainCoords: a product's K tile kt at
// k = 64 kt, A's rows at the tile's m0); a box-tiled convolution (contraction_plan.h) supplies its
// own, so A's box is the input points its tile's outputs read for one tap and 64 channels.
//
// What is a hardware fact here is a fact of the PTX instructions (wgmma's warpgroup of 4 warps,
// m64 and k16; the swizzle modes of the copy engine and the descriptors), not of a chip: the
// planner takes this path only for an sm_90a target whose spec lists wgmma's shape.
#pragma once

namespace tsl {
namespace wg {

typedef unsigned short u16;
typedef unsigned long long u64;

constexpr int kWarpgroup = 128;  // threads of a warpgroup: 4 consecutive warps
constexpr int kInstM = 64, kInstK = 16;
constexpr int kRowElems = 64;     // a tile row: 64 16-bit elements, 128 bytes (the swizzle span)
constexpr int kRowBytes = 128;
constexpr int kAtomBytes = 1024;  // 8 rows: the period of the 128-byte swizzle
// Registers per thread after setmaxnreg: the producer gives up what the consumers' accumulators
// take (40 x 128 + 2 x 232 x 128 = 64512 of a 64K register file; the planner checks the spec).
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
// A block with one consumer (256 threads) moves no registers: 64 x 128 tiles and narrower are
// compiled for up to two blocks per SM (128 registers a thread; two share an SM where their shared
// memory allows), wider ones for one (ptxas gives the consumer's 128 accumulators what they need).

// The host's CUtensorMap (128 opaque bytes, 64-byte aligned), passed by value as a
// __grid_constant__ kernel parameter.
struct __align__(64) TensorMap {
  u64 opaque[16];
};

// ---- PTX wrappers ---------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Arrives once and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
// Copies the box at (c0 innermost, c1) of `map` into shared memory at `dst`; completes on `bar`.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
               ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}

// The same box copied into the shared memory of every block of the cluster in `mask` (at the same
// offset in each), completing on each one's mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1,
                                                      unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n"
               ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
}
// Arrives on the mbarrier at `bar`'s offset in the shared memory of cluster block `rank` (this one's
// too), with the instruction's default semantics (release at CTA scope, as CUTLASS's cluster
// barrier arrives): what it orders is the wgmmas' reads of a stage, complete before (wgmma_wait),
// against the copy engine's next write. Releasing at cluster scope instead made every arrive a
// cluster-wide fence: the clustered 2:4 kernel ran 1.85x slower than unclustered (H200, ncu: 31%
// of the SMs' throughput, 46% of the L2's).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// The same for a tensor map with NB outer (batch) dimensions after the two of the matrix: the
// box at (c0, c1, b[0], .., b[NB - 1]).
template <int NB>
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1, const int* b) {
  static_assert(NB >= 0 && NB <= 3, "a tensor map has at most 5 dimensions");
  if constexpr (NB == 0) {
    tma_load_2d(dst, map, bar, c0, c1);
  } else if constexpr (NB == 1) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
                 ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(b[0]) : "memory");
  } else if constexpr (NB == 2) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
                 ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(b[0]), "r"(b[1]) : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
                 ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(b[0]), "r"(b[1]), "r"(b[2]) : "memory");
  }
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups of wgmmas of this warpgroup are pending.
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accesses of the accumulators across the asynchronous wgmmas.
template <int R> __device__ __forceinline__ void fence_registers(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for A fragments in registers that a wgmma reads asynchronously: placed after the wait
// for that wgmma, it keeps the registers from being reused before.
template <int R> __device__ __forceinline__ void fence_registers(unsigned (&a)[R][4]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

// A wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all
// in 16-byte units), 128-byte swizzle (mode 1 in bits 62-63).
__device__ __forceinline__ u64 smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<u64>((addr & 0x3FFFFu) >> 4) | (static_cast<u64>(lbo >> 4) << 16) | (static_cast<u64>(sbo >> 4) << 32) |
         (1ull << 62);
}

// ---- wgmma.mma_async m64nNk16, both operands from shared memory (N = 256, 192, 128; 64 below) ----
// d += A B for a 64 x 16 slice of A and a 16 x N slice of B; TRANS_B: B is stored with n
// contiguous (transposed for wgmma). Accumulator i of a thread (warp w of the warpgroup, lane l)
// holds row 16 w + l / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2.
#define TSL_WG_D128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, " \
  "%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define TSL_WG_OUT128 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), \
  "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
  "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
  "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), \
  "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), \
  "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
  "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), \
  "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), \
  "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), \
  "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), \
  "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), \
  "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), \
  "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), \
  "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), \
  "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define TSL_WG_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63}"
#define TSL_WG_OUT64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), \
  "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
  "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
  "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), \
  "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), \
  "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
  "+f"(d[63])
#define TSL_WG_D96 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, " \
  "%92, %93, %94, %95}"
#define TSL_WG_OUT96 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), \
  "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), \
  "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), \
  "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), \
  "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
  "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), \
  "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), \
  "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), \
  "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), \
  "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define TSL_WG_MMA(SHAPE, TYPE, D, OPERANDS, OUT)                                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " D \
               OPERANDS ";\n}\n"                                                                   \
               : OUT                                                                               \
               : "l"(da), "l"(db), "n"(TRANS_B ? 1 : 0))

template <bool BF16, bool TRANS_B> __device__ __forceinline__ void wgmma_n256(float (&d)[128], u64 da, u64 db) {
  if (BF16) TSL_WG_MMA("m64n256k16", "bf16", TSL_WG_D128, ", %128, %129, p, 1, 1, 0, %130", TSL_WG_OUT128);
  else TSL_WG_MMA("m64n256k16", "f16", TSL_WG_D128, ", %128, %129, p, 1, 1, 0, %130", TSL_WG_OUT128);
}
template <bool BF16, bool TRANS_B> __device__ __forceinline__ void wgmma_n192(float (&d)[96], u64 da, u64 db) {
  if (BF16) TSL_WG_MMA("m64n192k16", "bf16", TSL_WG_D96, ", %96, %97, p, 1, 1, 0, %98", TSL_WG_OUT96);
  else TSL_WG_MMA("m64n192k16", "f16", TSL_WG_D96, ", %96, %97, p, 1, 1, 0, %98", TSL_WG_OUT96);
}
template <bool BF16, bool TRANS_B> __device__ __forceinline__ void wgmma_n128(float (&d)[64], u64 da, u64 db) {
  if (BF16) TSL_WG_MMA("m64n128k16", "bf16", TSL_WG_D64, ", %64, %65, p, 1, 1, 0, %66", TSL_WG_OUT64);
  else TSL_WG_MMA("m64n128k16", "f16", TSL_WG_D64, ", %64, %65, p, 1, 1, 0, %66", TSL_WG_OUT64);
}

// ---- wgmma.mma_async m64nNk16 with A from registers (N = 128 or 64), B from shared memory ----------
// a: the thread's A fragment of the 64 x 16 slice, as mma.sync's m16k16 A fragment of its warp's
// 16 rows: {(r, 2q..2q+1), (r + 8, 2q..), (r, 8 + 2q..), (r + 8, 8 + 2q..)}, r = lane / 4,
// q = lane % 4, two 16-bit values per register (the lower column in the low half).
#define TSL_WG_D32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TSL_WG_OUT32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), \
  "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
  "+f"(d[31])
template <bool BF16, bool TRANS_B> __device__ __forceinline__ void wgmma_n64(float (&d)[32], u64 da, u64 db) {
  if (BF16) TSL_WG_MMA("m64n64k16", "bf16", TSL_WG_D32, ", %32, %33, p, 1, 1, 0, %34", TSL_WG_OUT32);
  else TSL_WG_MMA("m64n64k16", "f16", TSL_WG_D32, ", %32, %33, p, 1, 1, 0, %34", TSL_WG_OUT32);
}
#define TSL_WG_MMA_RS(SHAPE, TYPE, D, OPERANDS, OUT)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " D \
               OPERANDS ";\n}\n"                                                                   \
               : OUT                                                                               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TRANS_B ? 1 : 0))

template <bool BF16, bool TRANS_B> __device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const unsigned (&a)[4], u64 db) {
  if (BF16) TSL_WG_MMA_RS("m64n128k16", "bf16", TSL_WG_D64, ", {%64, %65, %66, %67}, %68, p, 1, 1, %69", TSL_WG_OUT64);
  else TSL_WG_MMA_RS("m64n128k16", "f16", TSL_WG_D64, ", {%64, %65, %66, %67}, %68, p, 1, 1, %69", TSL_WG_OUT64);
}
template <bool BF16, bool TRANS_B> __device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const unsigned (&a)[4], u64 db) {
  if (BF16) TSL_WG_MMA_RS("m64n64k16", "bf16", TSL_WG_D32, ", {%32, %33, %34, %35}, %36, p, 1, 1, %37", TSL_WG_OUT32);
  else TSL_WG_MMA_RS("m64n64k16", "f16", TSL_WG_D32, ", {%32, %33, %34, %35}, %36, p, 1, 1, %37", TSL_WG_OUT32);
}
#undef TSL_WG_MMA_RS
// m64n128k16 / m64n64k16 with A and B from shared memory and a runtime scale-d: accumulate != 0
// adds to d, else d = A B (d's old values are not read: no zeroing before the first k step).
// OPS: the operand list and the closing of the block; PRED: the number of the operand `accumulate`.
#define TSL_WG_MMA_P(SHAPE, TYPE, OPS, PRED, OUT)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" PRED ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE \
               " " OPS                                                                                             \
               : OUT                                                                                               \
               : "l"(da), "l"(db), "n"(TRANS_B ? 1 : 0), "r"(accumulate))
template <bool BF16, bool TRANS_B>
__device__ __forceinline__ void wgmma_n128_acc(float (&d)[64], u64 da, u64 db, int accumulate) {
  if (BF16) TSL_WG_MMA_P("m64n128k16", "bf16", TSL_WG_D64 ", %64, %65, p, 1, 1, 0, %66;\n}\n", "67", TSL_WG_OUT64);
  else TSL_WG_MMA_P("m64n128k16", "f16", TSL_WG_D64 ", %64, %65, p, 1, 1, 0, %66;\n}\n", "67", TSL_WG_OUT64);
}
template <bool BF16, bool TRANS_B>
__device__ __forceinline__ void wgmma_n64_acc(float (&d)[32], u64 da, u64 db, int accumulate) {
  if (BF16) TSL_WG_MMA_P("m64n64k16", "bf16", TSL_WG_D32 ", %32, %33, p, 1, 1, 0, %34;\n}\n", "35", TSL_WG_OUT32);
  else TSL_WG_MMA_P("m64n64k16", "f16", TSL_WG_D32 ", %32, %33, p, 1, 1, 0, %34;\n}\n", "35", TSL_WG_OUT32);
}
// ---- wgmma.mma_async.sp m64nNk32 (2:4 sparse A from shared memory; SparseWarpgroupGemm, below) ----
#define TSL_WG_MMA_SP(SHAPE, TYPE, D, OPERANDS, OUT)                                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sp.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " D \
               OPERANDS ";\n}\n"                                                                                     \
               : OUT                                                                                                 \
               : "l"(da), "l"(db), "r"(e))

// d += A B for a 64 x 32 slice of 2:4 sparse A (compressed: 64 x 16) and a 32 x N slice of B (K-major),
// metadata word `e` (sparsity selector 0).
template <bool BF16> __device__ __forceinline__ void wgmma_sp_n128(float (&d)[64], u64 da, u64 db, unsigned e) {
  if (BF16) TSL_WG_MMA_SP("m64n128k32", "bf16", TSL_WG_D64, ", %64, %65, %66, 0, p, 1, 1, 0, 0", TSL_WG_OUT64);
  else TSL_WG_MMA_SP("m64n128k32", "f16", TSL_WG_D64, ", %64, %65, %66, 0, p, 1, 1, 0, 0", TSL_WG_OUT64);
}
template <bool BF16> __device__ __forceinline__ void wgmma_sp_n192(float (&d)[96], u64 da, u64 db, unsigned e) {
  if (BF16) TSL_WG_MMA_SP("m64n192k32", "bf16", TSL_WG_D96, ", %96, %97, %98, 0, p, 1, 1, 0, 0", TSL_WG_OUT96);
  else TSL_WG_MMA_SP("m64n192k32", "f16", TSL_WG_D96, ", %96, %97, %98, 0, p, 1, 1, 0, 0", TSL_WG_OUT96);
}
template <bool BF16> __device__ __forceinline__ void wgmma_sp_n256(float (&d)[128], u64 da, u64 db, unsigned e) {
  if (BF16) TSL_WG_MMA_SP("m64n256k32", "bf16", TSL_WG_D128, ", %128, %129, %130, 0, p, 1, 1, 0, 0", TSL_WG_OUT128);
  else TSL_WG_MMA_SP("m64n256k32", "f16", TSL_WG_D128, ", %128, %129, %130, 0, p, 1, 1, 0, 0", TSL_WG_OUT128);
}

#undef TSL_WG_MMA_SP
#undef TSL_WG_MMA_P
#undef TSL_WG_D32
#undef TSL_WG_OUT32
#undef TSL_WG_MMA
#undef TSL_WG_D128
#undef TSL_WG_D96
#undef TSL_WG_OUT96
#undef TSL_WG_D64
#undef TSL_WG_OUT128
#undef TSL_WG_OUT64

// ---- pieces both block kernels share ------------------------------------------------------------

// Where a tile of C lies: its first row and column, and for a batched product its batch point's
// coordinates in each operand's tensor map (the outer dimensions after the matrix's two, NBA of
// A's map and NBB of B's; an operand broadcast over a batch axis has no dimension for it).
// A box-tiled convolution's tile (contraction_plan.h) also has the first output point along each
// output axis its rows span (mo, in the plan's m_axes order).
struct TileAt {
  int m0 = 0, n0 = 0;
  int ba[3] = {0, 0, 0}, bb[3] = {0, 0, 0};
  int mo[4] = {0, 0, 0, 0};
};

// Where K tile kt of the tile at `at` lies in the operands' tensor maps (the COORDS hook of
// load_stage): A's box at (a0, a1, ab..), B's first box at (b0, b1, bb..) -- B stored N x K one box,
// else the box j of 64 columns at (b0 + 64 j, b1, bb..). A plain or batched product: K tile kt
// starts at k = 64 kt in both, A's rows at m0, B's at n0, the batch point's coordinates as placed.
// A box-tiled convolution's kernel defines its own (emit_mma.cpp): the tap and channel chunk of
// kt, the input box's corner, the tap as a dimension of B's map.
struct PlainCoords {
  template <bool B_K_CONTIG>
  __device__ __forceinline__ static void place(int kt, const TileAt& at, int& a0, int& a1, int (&ab)[3], int& b0, int& b1,
                                               int (&bb)[3]) {
    a0 = kt * kRowElems;
    a1 = at.m0;
    b0 = B_K_CONTIG ? kt * kRowElems : at.n0;
    b1 = B_K_CONTIG ? at.n0 : kt * kRowElems;
#pragma unroll
    for (int i = 0; i < 3; ++i) ab[i] = at.ba[i], bb[i] = at.bb[i];
  }
};

// The stages' barriers: full[s] at bars + 8 s (armed by the producer), empty[s] at bars + 8
// (STAGES + s), completed by `releasers` arrivals (the consumers that read a stage).
template <int STAGES>
__device__ __forceinline__ void init_stage_barriers(unsigned bars, unsigned releasers) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 1);
      mbar_init(bars + 8 * (STAGES + s), releasers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// The producer's copies of one K tile into stage round i: A's BM x 64 box at (kt, at.m0) and B's
// tile at at.n0 (one BN x 64 box when B is stored N x K, else BN / 64 boxes of 64 k rows), each
// at the tile's batch point in its map (NBA, NBB outer dimensions).
//
// With CLUSTER > 1 blocks of a cluster computing tiles of the same columns (consecutive m tiles),
// B is loaded once for all of them: block `rank` copies its 1 / CLUSTER of the B tile (BN /
// CLUSTER rows of a B stored N x K, whose tensor map has boxes that high; or its share of the BN /
// 64 boxes of a B stored K x N) into every block's stage, and each block's `full` barrier expects
// the whole stage. A stage is refilled only when every block's consumers released it (`empty`
// counts their arrivals from the whole cluster).
template <int BM, int BN, int STAGES, bool B_K_CONTIG, int CLUSTER = 1, int NBA = 0, int NBB = 0, class COORDS = PlainCoords>
__device__ __forceinline__ void load_stage(unsigned base, unsigned bars, const TensorMap* map_a, const TensorMap* map_b, int i,
                                           int kt, const TileAt& at, int rank = 0) {
  constexpr int kABytes = BM * kRowBytes, kStageBytes = kABytes + BN * kRowBytes;
  static_assert(CLUSTER == 1 || CLUSTER == 2, "B is shared by at most two blocks");
  static_assert(CLUSTER == 1 || (NBA == 0 && NBB == 0), "a cluster shares B of an unbatched product");
  static_assert(CLUSTER == 1 || B_K_CONTIG || (BN / kRowElems) % CLUSTER == 0, "the cluster's blocks copy whole boxes of B");
  int a0, a1, ab[3], b0, b1, bb[3];
  COORDS::template place<B_K_CONTIG>(kt, at, a0, a1, ab, b0, b1, bb);
  const int s = i % STAGES;
  const unsigned full = bars + 8 * s;
  // Round r of a stage waits for the consumers' release of round r - 1 (at r = 0 the phase
  // before the first counts as complete).
  mbar_wait(bars + 8 * (STAGES + s), ((i / STAGES) & 1) ^ 1);
  const unsigned a = base + s * kStageBytes, b = a + kABytes;
  mbar_expect_tx(full, kStageBytes);
  tma_load<NBA>(a, map_a, full, a0, a1, ab);
  if constexpr (CLUSTER > 1) {
    constexpr unsigned short kAll = (1u << CLUSTER) - 1;
    if (B_K_CONTIG) {
      constexpr int kRows = BN / CLUSTER;
      tma_load_2d_multicast(b + rank * kRows * kRowBytes, map_b, full, b0, b1 + rank * kRows, kAll);
    } else {
      constexpr int kBoxes = BN / kRowElems / CLUSTER;
#pragma unroll
      for (int j = rank * kBoxes; j < (rank + 1) * kBoxes; ++j)
        tma_load_2d_multicast(b + j * kRowElems * kRowBytes, map_b, full, b0 + j * kRowElems, b1, kAll);
    }
  } else if (B_K_CONTIG) {
    tma_load<NBB>(b, map_b, full, b0, b1, bb);
  } else {
#pragma unroll
    for (int j = 0; j < BN / kRowElems; ++j)
      tma_load<NBB>(b + j * kRowElems * kRowBytes, map_b, full, b0 + j * kRowElems, b1, bb);
  }
}

// The producer of a persistent block: every K tile of the block's tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... in order, stage rounds running on across tiles.
// With CLUSTER > 1, the cluster's blocks walk tiles blockIdx.x / CLUSTER, + gridDim.x / CLUSTER,
// ... together (origin places each block's own part of a tile) and share B (load_stage).
template <int BM, int BN, int STAGES, bool B_K_CONTIG, int KTILES, int CLUSTER = 1, int NBA = 0, int NBB = 0, class COORDS = PlainCoords,
          class Origin>
__device__ __forceinline__ void produce_tiles(unsigned base, unsigned bars, const TensorMap* map_a, const TensorMap* map_b,
                                              long long tiles, Origin&& origin, int rank = 0) {
  int i = 0;  // stage rounds so far, over all of this block's tiles
  for (long long t = blockIdx.x / CLUSTER; t < tiles; t += gridDim.x / CLUSTER) {
    TileAt at;
    origin(t, at);
    for (int kt = 0; kt < KTILES; ++kt, ++i)
      load_stage<BM, BN, STAGES, B_K_CONTIG, CLUSTER, NBA, NBB, COORDS>(base, bars, map_a, map_b, i, kt, at, rank);
  }
}

// A block-sparse K loop on the persistent grid (run_tiles): the tile whose panel is q -- its n
// tile when by_n (a sparse B), else its m tile -- walks the K tiles list[ptr[q] .. ptr[q + 1]),
// ascending (kernels/cuda/contraction_plan.h's sparse_ptr and sparse_tiles). No ptr: every K tile.
struct SparseLists {
  const int* ptr = nullptr;
  const int* list = nullptr;
  bool by_n = true;
};

// Named barriers 1 and 2 (0 is __syncthreads') between the two consumer warpgroups of a
// ping-pong block: bar.arrive does not wait, bar.sync waits for the other's arrival.
__device__ __forceinline__ void named_arrive(int id, int threads) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }
__device__ __forceinline__ void named_sync(int id, int threads) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }

// ---- the staged epilogue ------------------------------------------------------------------------
//
// Storing accumulators straight from wgmma's fragments writes 16 bytes per row and instruction
// (4 lanes x 2 columns), so every 32-byte sector of C is written in two halves, and a side input
// read in the epilogue (a bias) is read the same way (H100, ncu: 8-16 of 32 bytes used per sector;
// the vocabulary head and the attention scores ran at a third of the DRAM's bandwidth). Instead
// each consumer warpgroup passes its 64-row slabs of 128 columns through a buffer of its own
// (kEpiSlabBytes, after the stages): the accumulators rounded to the operands' 16-bit type -- the
// contraction's value, all that the epilogue's nodes read of it -- and then read back row by row,
// so the epilogue reads side inputs and writes C along rows.

constexpr int kEpiCols = 128;                          // columns of a slab
constexpr int kEpiRowBytes = kEpiCols * 2;             // 16-bit values
constexpr int kEpiSlabBytes = kInstM * kEpiRowBytes;   // one warpgroup's 64 rows
constexpr int kEpiChunk = 8;                           // 16 bytes of 16-bit values

// Byte offset of (r, c) in a slab buffer: 16-byte chunk q of row r at chunk q ^ (r % 8), so that
// both the fragments' writes (8 rows, one chunk) and the row-wise reads hit distinct banks.
__device__ __forceinline__ int slab_offset(int r, int c) {
  return r * kEpiRowBytes + (((c / kEpiChunk) ^ (r % 8)) * 16) + (c % kEpiChunk) * 2;
}

// An epilogue that reads side inputs along the rows it stores (a bias, a residual) can have them
// loaded before the slab's round trip instead of after it, where each run's loads would wait in
// turn: prefetching(prefetch, epilogue) pairs prefetch(r, c, Q&), which loads what the run at
// (r, c) will read into a Q, with epilogue(r, c, v, q). store_slab issues every run's prefetch
// first (8-column runs; one column at a time takes no prefetching), a K split every pair's before
// its ranks exchange their sums.
struct NoPrefetch {};
template <class Q, class P, class E> struct Prefetching {
  P prefetch;
  E epilogue;
};
template <class Q, class P, class E> __device__ __forceinline__ Prefetching<Q, P, E> prefetching(P&& p, E&& e) { return {p, e}; }
template <class F> __device__ __forceinline__ NoPrefetch prefetch_run(F&, int, int) { return {}; }
template <class Q, class P, class E> __device__ __forceinline__ Q prefetch_run(Prefetching<Q, P, E>& f, int r, int c) {
  Q q{};
  f.prefetch(r, c, q);
  return q;
}
template <class F, int N> __device__ __forceinline__ void epilogue_run(F& f, int r, int c, const float (&v)[N], const NoPrefetch&) {
  f(r, c, v);
}
template <class Q, class P, class E, int N>
__device__ __forceinline__ void epilogue_run(Prefetching<Q, P, E>& f, int r, int c, const float (&v)[N], const Q& q) {
  f.epilogue(r, c, v, q);
}

// The 16 bytes of 16-bit values at p (8 of them), for a prefetch: one load where p is 16-byte
// aligned, else eight.
__device__ __forceinline__ uint4 load_run(const unsigned short* p) {
  if (reinterpret_cast<unsigned long long>(p) % 16 == 0) {
    uint4 q;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w) : "l"(p));
    return q;
  }
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = static_cast<unsigned>(p[2 * i]) | (static_cast<unsigned>(p[2 * i + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}
// Value e of a run load_run loaded.
template <bool BF16> __device__ __forceinline__ float run_value(const uint4& q, int e) {
  const unsigned w = e / 2 == 0 ? q.x : e / 2 == 1 ? q.y : e / 2 == 2 ? q.z : q.w;
  const unsigned short h = static_cast<unsigned short>(w >> (16 * (e % 2)));
  return BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}
// The pair of 16-bit values at p (a K split's pairs, n even): one load where p is 4-byte aligned,
// else two; and value e of it.
__device__ __forceinline__ unsigned load_pair(const unsigned short* p) {
  if (reinterpret_cast<unsigned long long>(p) % 4 == 0) {
    unsigned q;
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(q) : "l"(p));
    return q;
  }
  return static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 16);
}
template <bool BF16> __device__ __forceinline__ float pair_value(unsigned q, int e) {
  const unsigned short h = static_cast<unsigned short>(q >> (16 * (e % 2)));
  return BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// The read-back of a slab of ROWS x COLS 16-bit values written by store_slab or
// store_slab_transposed (offset(r, c): the byte offset of (r, c) in `buf`), in the warpgroup's
// threads: epilogue(r0 + r, c0 + c, v) with CHUNK = 8 consecutive columns of a row per call (run
// i of thread t: the (t + 128 i)-th run, its side inputs already loaded into pre[i]), or with
// CHUNK = 1 one column at a time, consecutive threads on consecutive columns.
template <bool BF16, int CHUNK, int ROWS, int COLS, class Offset, class F, class Pre>
__device__ __forceinline__ void read_slab(const unsigned char* buf, Offset offset, int r0, int c0, F& epilogue, const Pre* pre) {
  const int t = static_cast<int>(threadIdx.x) % kWarpgroup;
  constexpr int kPerRow = COLS / kEpiChunk, kRuns = ROWS * kPerRow / kWarpgroup;
  auto value = [](unsigned short x) { return BF16 ? bf16_to_f32(x) : f16_to_f32(x); };
  if constexpr (CHUNK == kEpiChunk) {
#pragma unroll
    for (int i = 0; i < kRuns; ++i) {
      const int q = t + kWarpgroup * i, r = q / kPerRow, c = (q % kPerRow) * kEpiChunk;
      const uint4 raw = *reinterpret_cast<const uint4*>(buf + offset(r, c));
      const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
      float v[kEpiChunk];
#pragma unroll
      for (int e = 0; e < kEpiChunk; ++e) v[e] = value(static_cast<unsigned short>(words[e / 2] >> (16 * (e % 2))));
      epilogue_run(epilogue, r0 + r, c0 + c, v, pre[i]);
    }
  } else {
    (void)pre;
#pragma unroll 4
    for (int i = 0; i < ROWS * COLS / kWarpgroup; ++i) {
      const int q = t + kWarpgroup * i, r = q / COLS, c = q % COLS;
      const float v[1] = {value(*reinterpret_cast<const unsigned short*>(buf + offset(r, c)))};
      epilogue(r0 + r, c0 + c, v);
    }
  }
}

// One consumer warpgroup's slab: the accumulators acc[4 (J0 + j) + 2 h + e] of column groups J0 ..
// J0 + COLS / 8 - 1 (COLS 128, or 64: the last of a 192-wide tile, a 64-wide tile; row 16 w + l / 4 + 8 h, column 8 j + 2 (l % 4) + e of the slab, for lane l of warp w)
// written to `buf` rounded to the 16-bit type, then read back and passed to epilogue(r0 + r,
// c0 + c, v) for slab row r and column c: with CHUNK = 8 each thread takes 8 consecutive columns
// of a row at a time (float v[8]; an epilogue with prefetching has every run's side inputs loaded
// first); with CHUNK = 1 one column at a time, consecutive threads on consecutive columns (an
// output whose rows do not start 16-byte aligned). `bar` is the warpgroup's named barrier: the
// slab is written when the warpgroup's reads of the previous one are done.
template <bool BF16, int CHUNK, int J0, int COLS = kEpiCols, int NACC, class F>
__device__ __forceinline__ void store_slab(unsigned char* buf, const float (&acc)[NACC], int bar, int r0, int c0, F& epilogue) {
  static_assert(CHUNK == 1 || CHUNK == kEpiChunk, "a slab is read by chunks of 16 bytes or by elements");
  static_assert(COLS == kEpiCols || COLS == kEpiCols / 2, "a slab holds 128 columns, or 64: a 192-wide tile's last, a 64-wide tile");
  static_assert(4 * (J0 + COLS / 8) <= NACC, "the slab's column groups are accumulators of the thread");
  const int t = static_cast<int>(threadIdx.x) % kWarpgroup, w = t / 32, lane = t % 32;
  constexpr int kPerRow = COLS / kEpiChunk, kRuns = kInstM * kPerRow / kWarpgroup;
  decltype(prefetch_run(epilogue, 0, 0)) pre[CHUNK == kEpiChunk ? kRuns : 1];
  if constexpr (CHUNK == kEpiChunk) {
#pragma unroll
    for (int i = 0; i < kRuns; ++i) {
      const int q = t + kWarpgroup * i;
      pre[i] = prefetch_run(epilogue, r0 + q / kPerRow, c0 + (q % kPerRow) * kEpiChunk);
    }
  }
  named_sync(bar, kWarpgroup);
#pragma unroll
  for (int j = 0; j < COLS / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * w + lane / 4 + 8 * h, c = 8 * j + 2 * (lane % 4);
      const float v0 = acc[4 * (J0 + j) + 2 * h], v1 = acc[4 * (J0 + j) + 2 * h + 1];
      const unsigned lo = BF16 ? f32_to_bf16(v0) : f32_to_f16(v0), hi = BF16 ? f32_to_bf16(v1) : f32_to_f16(v1);
      *reinterpret_cast<unsigned*>(buf + slab_offset(r, c)) = lo | (hi << 16);
    }
  named_sync(bar, kWarpgroup);
  read_slab<BF16, CHUNK, kInstM, COLS>(buf, [](int r, int c) { return slab_offset(r, c); }, r0, c0, epilogue, pre);
}

// The bits of a 16- or 32-bit storage value.
template <class T> __device__ __forceinline__ unsigned storage_bits(T x) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- or 32-bit storage");
  if constexpr (sizeof(T) == 2) {
    union { T t; unsigned short u; } b;
    b.t = x;
    return b.u;
  } else {
    union { T t; unsigned u; } b;
    b.t = x;
    return b.u;
  }
}

// Stores N values of type T at `dst` with the widest stores its alignment allows, dst aligned to
// N x sizeof(T) bytes or to 16 when that is less: the generated epilogue's store of a chunk of a
// row that lies inside the output.
// The alignment store_row needs of its destination, in bytes.
template <class T, int N> constexpr int store_row_alignment() {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  return (sizeof(T) != 2 && sizeof(T) != 4) || kBytes % 4 != 0 ? static_cast<int>(sizeof(T)) : kBytes % 16 == 0 ? 16 : kBytes == 8 ? 8 : 4;
}

template <class T, int N>
__device__ __forceinline__ void store_row(T* dst, const T (&v)[N]) {
  constexpr int kSize = static_cast<int>(sizeof(T)), kBytes = N * kSize;
  if constexpr ((kSize == 2 || kSize == 4) && kBytes % 4 == 0) {
    constexpr int kWords = kBytes / 4;
    unsigned w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i)
      w[i] = kSize == 2 ? storage_bits(v[2 * i]) | (storage_bits(v[2 * i + 1]) << 16) : storage_bits(v[i]);
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i)
        reinterpret_cast<uint4*>(dst)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    } else if constexpr (kWords == 2) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else {
#pragma unroll
      for (int i = 0; i < kWords; ++i) reinterpret_cast<unsigned*>(dst)[i] = w[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = v[i];
  }
}

// ---- the block's main loop ----------------------------------------------------------------------

// One block's BM x BN tile of C = A B over the whole K range (compile-time K). A is M x K with k
// contiguous; B_K_CONTIG: B is stored N x K, else K x N. The tensor maps describe A with boxes of
// BM rows x 64 columns and B with boxes of BN rows x 64 (B_K_CONTIG) or 64 rows x 64 columns; a
// batched product's maps have NBA and NBB outer dimensions (its batch axes each operand is not
// broadcast over), boxes of one matrix, so every edge of M, N and K reads zeros per batch point.
// BM = 128: two consumer warpgroups of 64 rows each; BM = 64: one (file comment).
template <int BM_, int BN, int STAGES, bool B_K_CONTIG, bool BF16, int K, int SPLIT = 1, int CLUSTER = 1, int NBA = 0, int NBB = 0,
          class COORDS = PlainCoords>
struct WarpgroupGemm {
  static constexpr int BM = BM_, BK = kRowElems;
  static constexpr int kConsumers = BM / kInstM;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroup;
  static constexpr int kAccs = BN / 2;  // 64 x BN f32 accumulators over a warpgroup's 128 threads
  static constexpr int kABytes = BM * kRowBytes, kBBytes = BN * kRowBytes, kStageBytes = kABytes + kBBytes;
  static constexpr int kKTiles = (K + BK - 1) / BK;
  // The stages, 1024-byte aligned (slack for aligning the dynamic shared memory), each consumer's
  // epilogue slab, then the barriers.
  static constexpr int kEpiBytes = kConsumers * kEpiSlabBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes + kEpiBytes + kAtomBytes + 2 * STAGES * 8;
  static_assert(BM == kInstM || BM == 2 * kInstM, "a block has one or two consumer warpgroups of 64 rows");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "wgmma tiles are 64 x 64, 128, 192 or 256 per consumer");
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");
  // A split K (SPLIT blocks of a cluster per tile, run's comment) parks each rank's partial sums in
  // its stages' memory.
  static constexpr int kReduceBytes = kConsumers * kWarpgroup * kAccs * 4;
  static_assert(SPLIT == 1 || (SPLIT <= 8 && kReduceBytes <= STAGES * kStageBytes), "the partial sums must fit the stages");
  static_assert(CLUSTER == 1 || SPLIT == 1, "a cluster shares B or splits K, not both");

  float acc[kAccs];

  // Computes the tile at `at` and calls epilogue(m, n, v) in the consumer threads for runs of
  // consecutive values of C's rows rounded to the 16-bit type (v: float[CHUNK], v[e] at (m, n + e),
  // relative to the tile) through each consumer's epilogue slab (store_tile); a split K calls it
  // with pairs from the fragments (float[2], n even). (An epilogue with prefetching, store_slab's
  // comment, is called epilogue(m, n, v, q) through epilogue_run, its side inputs loaded first.)
  // Each role is one branch (setmaxnreg needs
  // that), so the epilogue runs inside the consumers' branch. With `tiles`, only the `ktiles` K tiles it lists (ascending) are
  // loaded and multiplied: the block-sparse K loop, which skips the tiles where the sparse
  // operand is zero.
  //
  // Split K (SPLIT > 1): the SPLIT blocks of a thread-block cluster share the tile, rank r
  // multiplying K tiles [r T / SPLIT, (r + 1) T / SPLIT) of the T; the ranks park their partial
  // sums in their own shared memory and each adds up and stores 1 / SPLIT of the tile's columns
  // through distributed shared memory (reduce_cluster). Every thread of every block takes part in
  // the two cluster barriers, the producer's too.
  template <int CHUNK = kEpiChunk, class F>
  __device__ __forceinline__ void run(unsigned char* smem, const TensorMap* map_a, const TensorMap* map_b, const TileAt& at,
                                      F&& epilogue, const int* tiles = nullptr, int ktiles = kKTiles) {
    const unsigned raw = mma::smem_address(smem);
    const unsigned base = (raw + kAtomBytes - 1) & ~static_cast<unsigned>(kAtomBytes - 1);
    const unsigned bars = base + STAGES * kStageBytes + kEpiBytes;  // full[s] at bars + 8 s, empty[s] at bars + 8 (STAGES + s)
    const int wg = static_cast<int>(threadIdx.x) / kWarpgroup;
    const int rank = SPLIT > 1 ? static_cast<int>(mma::cluster_rank()) : 0;
    const int kt0 = rank * kKTiles / SPLIT;
    if (SPLIT > 1) ktiles = (rank + 1) * kKTiles / SPLIT - kt0;
    init_stage_barriers<STAGES>(bars, kConsumers);
    if (wg == 0) {
      if constexpr (kConsumers > 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs) : "memory");
      if (threadIdx.x == 0) {
        for (int i = 0; i < ktiles; ++i)
          load_stage<BM, BN, STAGES, B_K_CONTIG, 1, NBA, NBB, COORDS>(base, bars, map_a, map_b, i, tiles ? __ldg(tiles + i) : kt0 + i, at);
      }
      if (SPLIT > 1) {
        __syncwarp();  // thread 0 rejoins its warp before the aligned cluster barriers
        mma::cluster_sync();
        mma::cluster_sync();
      }
    } else {
      if constexpr (kConsumers > 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs) : "memory");
#pragma unroll
      for (int i = 0; i < kAccs; ++i) acc[i] = 0.0f;
      const int c = wg - 1;
      const bool signals = threadIdx.x % kWarpgroup == 0;
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(bars + 8 * s, (kt / STAGES) & 1);
        const unsigned a = base + s * kStageBytes + c * kInstM * kRowBytes, b = base + s * kStageBytes + kABytes;
        fence_registers(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / kInstK; ++kk) {
          // K-major tiles step k by 16 elements (32 bytes) inside the swizzled rows; 8-row groups
          // are one atom apart. B stored K x N steps k by 16 rows; its 64-column boxes are
          // BK rows apart.
          const u64 da = smem_desc(a + kk * kInstK * 2, 16, kAtomBytes);
          const u64 db = B_K_CONTIG ? smem_desc(b + kk * kInstK * 2, 16, kAtomBytes)
                                    : smem_desc(b + kk * kInstK * kRowBytes, BK * kRowBytes, kAtomBytes);
          if constexpr (BN == 256) wgmma_n256<BF16, !B_K_CONTIG>(acc, da, db);
          else if constexpr (BN == 192) wgmma_n192<BF16, !B_K_CONTIG>(acc, da, db);
          else if constexpr (BN == 128) wgmma_n128<BF16, !B_K_CONTIG>(acc, da, db);
          else wgmma_n64<BF16, !B_K_CONTIG>(acc, da, db);
        }
        wgmma_commit();
        fence_registers(acc);
        if (kt > 0) {
          // The previous tile's wgmmas are done: its stage can be refilled.
          wgmma_wait<1>();
          fence_registers(acc);
          if (signals) mbar_arrive(bars + 8 * (STAGES + (kt - 1) % STAGES));
        }
      }
      wgmma_wait<0>();
      fence_registers(acc);
      if constexpr (SPLIT > 1) {
        // This rank stores its share of the column groups (reduce_cluster), pair by pair from the
        // fragments (a split runs where the tiles are few: its stores are not the bound); an
        // epilogue with prefetching has the pairs' side inputs loaded before the ranks' exchange.
        constexpr int kShare = BN / 8 / SPLIT;
        const int t = static_cast<int>(threadIdx.x) % kWarpgroup, w = t / mma::kLanes, lane = t % mma::kLanes;
        const int row = c * kInstM + w * (kInstM / 4) + lane / 4;
        decltype(prefetch_run(epilogue, 0, 0)) pre[kShare][2];
#pragma unroll
        for (int i = 0; i < kShare; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) pre[i][h] = prefetch_run(epilogue, row + 8 * h, 8 * (rank * kShare + i) + 2 * (lane % 4));
        reduce_cluster(smem, base, rank);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          if (j / kShare != rank) continue;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float v[2] = {acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]};
            epilogue_run(epilogue, row + 8 * h, 8 * j + 2 * (lane % 4), v, pre[j % kShare][h]);
          }
        }
      } else {
        store_tile<CHUNK>(smem, base, c, epilogue);
      }
    }
  }

  // The consumer warpgroup c's part of the tile (its 64 rows) through its epilogue slab, 128
  // columns at a time (store_slab; a 64-wide tile half a slab): epilogue(m, n, v) with v
  // float[CHUNK], m and n relative to the tile (with prefetching, epilogue_run's form).
  template <int CHUNK, class F>
  __device__ __forceinline__ void store_tile(unsigned char* smem, unsigned base, int c, F&& epilogue) {
    unsigned char* slab = smem + (base - mma::smem_address(smem)) + STAGES * kStageBytes + c * kEpiSlabBytes;
    if constexpr (BN == kEpiCols / 2)
      store_slab<BF16, CHUNK, 0, kEpiCols / 2>(slab, acc, 3 + c, c * kInstM, 0, epilogue);
    else
      store_slab<BF16, CHUNK, 0>(slab, acc, 3 + c, c * kInstM, 0, epilogue);
    if constexpr (BN == 2 * kEpiCols) store_slab<BF16, CHUNK, kEpiCols / 8>(slab, acc, 3 + c, c * kInstM, kEpiCols, epilogue);
    if constexpr (BN == kEpiCols + kEpiCols / 2)  // a 192-wide tile's last 64 columns: half a slab
      store_slab<BF16, CHUNK, kEpiCols / 8, kEpiCols / 2>(slab, acc, 3 + c, c * kInstM, kEpiCols, epilogue);
  }

  // Split K, in the consumer threads, as a reduce-scatter: every rank writes its accumulators to
  // its stages' memory (consumer thread t's float4 j at [(j x kConsumerThreads + t) x 16] bytes,
  // once every consumer's multiplies are done with the stages), the cluster synchronizes, rank r adds the other ranks'
  // sums of its share of the column groups -- float4 j for j / (BN / 8 / SPLIT) == r, in rank
  // order, so the sums do not depend on timing -- and the cluster synchronizes again so that no
  // block exits while another reads its memory. Each rank then stores its share (run).
  __device__ __forceinline__ void reduce_cluster(unsigned char* smem, unsigned base, int rank) {
    static_assert((BN / 8) % SPLIT == 0, "the column groups divide among the ranks");
    constexpr int kConsumerThreads = kConsumers * kWarpgroup, kShare = BN / 8 / SPLIT;
    const int t = static_cast<int>(threadIdx.x) - kWarpgroup;  // 0 .. kConsumerThreads - 1 over the consumers
    named_sync(1, kConsumerThreads);  // (with two) the other consumer's last wgmmas no longer read the stages
    float4* mine = reinterpret_cast<float4*>(smem + (base - mma::smem_address(smem)));
#pragma unroll
    for (int j = 0; j < kAccs / 4; ++j)
      mine[j * kConsumerThreads + t] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    mma::cluster_sync();
#pragma unroll
    for (int j = 0; j < kAccs / 4; ++j) {
      if (j / kShare != rank) continue;
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int r = 0; r < SPLIT; ++r) {
        unsigned remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(base), "r"(r));
        float v0, v1, v2, v3;
        asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                     : "r"(remote + static_cast<unsigned>((j * kConsumerThreads + t) * 16)));
        sum.x += v0;
        sum.y += v1;
        sum.z += v2;
        sum.w += v3;
      }
      acc[4 * j] = sum.x;
      acc[4 * j + 1] = sum.y;
      acc[4 * j + 2] = sum.z;
      acc[4 * j + 3] = sum.w;
    }
    mma::cluster_sync();
  }

  // The persistent form (a grid of at most one block per SM): the block computes tiles
  // blockIdx.x, blockIdx.x + gridDim.x, ... of `tiles`, origin(t, at) placing tile t (TileAt), and
  // calls epilogue(m, n, v) for each as run does. The stages' round count runs on across
  // tiles, and the consumers release a tile's last stage before its epilogue, so the producer
  // loads the first stages of the next tile while the consumers store this one.
  //
  // With CLUSTER = 2, the grid is made of two-block clusters that walk tiles of 2 BM rows
  // together (tile blockIdx.x / 2, + gridDim.x / 2, ...; origin places this block's BM rows of it)
  // and load each stage's B once for both (load_stage). The blocks synchronize after initializing
  // their barriers (the other's copies and releases target them) and before exiting.
  //
  // With `lists` (a block-sparse operand, CLUSTER 1), each tile walks only its panel's K tiles
  // (SparseLists); a tile with none stores zeros.
  template <int CHUNK = kEpiChunk, class Origin, class F>
  __device__ __forceinline__ void run_tiles(unsigned char* smem, const TensorMap* map_a, const TensorMap* map_b, long long tiles,
                                            Origin&& origin, F&& epilogue, SparseLists lists = {}) {
    const unsigned raw = mma::smem_address(smem);
    const unsigned base = (raw + kAtomBytes - 1) & ~static_cast<unsigned>(kAtomBytes - 1);
    const unsigned bars = base + STAGES * kStageBytes + kEpiBytes;  // full[s] at bars + 8 s, empty[s] at bars + 8 (STAGES + s)
    const int wg = static_cast<int>(threadIdx.x) / kWarpgroup;
    const int rank = CLUSTER > 1 ? static_cast<int>(mma::cluster_rank()) : 0;
    // The K tiles of the tile at `at`: its panel's list, or all of them.
    auto k_range = [&](const TileAt& at, int& first, int& count) {
      if (lists.ptr == nullptr) {
        first = 0;
        count = kKTiles;
        return;
      }
      const int q = lists.by_n ? at.n0 / BN : at.m0 / BM;
      first = __ldg(lists.ptr + q);
      count = __ldg(lists.ptr + q + 1) - first;
    };
    init_stage_barriers<STAGES>(bars, kConsumers * CLUSTER);
    if (CLUSTER > 1) mma::cluster_sync();
    if (wg == 0) {
      if constexpr (kConsumers > 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs) : "memory");
      if (threadIdx.x == 0 && lists.ptr != nullptr) {
        int i = 0;  // stage rounds so far, over all of this block's tiles
        for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
          TileAt at;
          origin(t, at);
          int first = 0, count = 0;
          k_range(at, first, count);
          for (int j = 0; j < count; ++j, ++i)
            load_stage<BM, BN, STAGES, B_K_CONTIG, 1, NBA, NBB, COORDS>(base, bars, map_a, map_b, i, __ldg(lists.list + first + j), at);
        }
      } else if (threadIdx.x == 0) {
        produce_tiles<BM, BN, STAGES, B_K_CONTIG, kKTiles, CLUSTER, NBA, NBB, COORDS>(base, bars, map_a, map_b, tiles, origin, rank);
      }
      if (CLUSTER > 1) {
        __syncwarp();  // thread 0 rejoins its warp before the aligned cluster barrier
        mma::cluster_sync();
      }
    } else {
      if constexpr (kConsumers > 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs) : "memory");
      const int c = wg - 1;
      const bool signals = threadIdx.x % kWarpgroup == 0;
      // Releases stage s for its next round: in every block that shares it.
      auto release = [&](int s) {
        if (!signals) return;
        if constexpr (CLUSTER > 1) {
#pragma unroll
          for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bars + 8 * (STAGES + s), r);
        } else {
          mbar_arrive(bars + 8 * (STAGES + s));
        }
      };
      int i = 0;
      for (long long t = blockIdx.x / CLUSTER; t < tiles; t += gridDim.x / CLUSTER) {
        TileAt at;
        origin(t, at);
        int first = 0, count = 0;
        k_range(at, first, count);
#pragma unroll
        for (int j = 0; j < kAccs; ++j) acc[j] = 0.0f;
        for (int kt = 0; kt < count; ++kt, ++i) {
          const int s = i % STAGES;
          mbar_wait(bars + 8 * s, (i / STAGES) & 1);
          const unsigned a = base + s * kStageBytes + c * kInstM * kRowBytes, b = base + s * kStageBytes + kABytes;
          fence_registers(acc);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK / kInstK; ++kk) {
            const u64 da = smem_desc(a + kk * kInstK * 2, 16, kAtomBytes);
            const u64 db = B_K_CONTIG ? smem_desc(b + kk * kInstK * 2, 16, kAtomBytes)
                                      : smem_desc(b + kk * kInstK * kRowBytes, BK * kRowBytes, kAtomBytes);
            if constexpr (BN == 256) wgmma_n256<BF16, !B_K_CONTIG>(acc, da, db);
            else if constexpr (BN == 192) wgmma_n192<BF16, !B_K_CONTIG>(acc, da, db);
            else if constexpr (BN == 128) wgmma_n128<BF16, !B_K_CONTIG>(acc, da, db);
            else wgmma_n64<BF16, !B_K_CONTIG>(acc, da, db);
          }
          wgmma_commit();
          fence_registers(acc);
          if (kt > 0) {
            wgmma_wait<1>();
            fence_registers(acc);
            release((i - 1) % STAGES);
          }
        }
        wgmma_wait<0>();
        fence_registers(acc);
        // The tile's last stage is free: the producer refills it while this tile is stored.
        if (count > 0) release((i - 1) % STAGES);
        store_tile<CHUNK>(smem, base, c, epilogue);
      }
      if (CLUSTER > 1) {
        __syncwarp();
        mma::cluster_sync();
      }
    }
  }
};

// The ping-pong form of the persistent kernel: each consumer warpgroup computes whole 128 x 128
// tiles of its own (two m64n128k16 per k step, 128 accumulators per thread), consumer c taking
// the block's tiles c, c + 2, c + 4, ... (tiles blockIdx.x + j gridDim.x for those j). Their
// main loops take turns -- a consumer starts its tile's multiplies when the other has issued all
// of its own (named barriers 1 and 2) -- so one consumer's epilogue runs while the other keeps
// the tensor cores busy, which the cooperative form (both consumers on one tile) cannot do. The
// producer fills the stage ring with the block's tiles in order; each stage is read by the one
// consumer whose tile it holds. A block with a single tile leaves consumer 1 idle: the planner
// takes this form only when the tiles outnumber the SMs.
template <int STAGES, bool B_K_CONTIG, bool BF16, int K, int NBA = 0, int NBB = 0, class COORDS = PlainCoords>
struct WarpgroupPingpong {
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroup;
  static constexpr int BM = 2 * kInstM, BN = 128, BK = kRowElems;
  static constexpr int kHalfAccs = BN / 2;  // one 64-row half's accumulators per thread
  static constexpr int kABytes = BM * kRowBytes, kBBytes = BN * kRowBytes, kStageBytes = kABytes + kBBytes;
  static constexpr int kKTiles = (K + BK - 1) / BK;
  static constexpr int kEpiBytes = kConsumers * kEpiSlabBytes;  // each consumer's epilogue slab
  static constexpr int kSmemBytes = STAGES * kStageBytes + kEpiBytes + kAtomBytes + 2 * STAGES * 8;
  static constexpr int kTurnThreads = kConsumers * kWarpgroup;  // the named barriers' count
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");

  float acc0[kHalfAccs], acc1[kHalfAccs];  // rows 0-63 and 64-127 of the consumer's tile

  template <int CHUNK = kEpiChunk, class Origin, class F>
  __device__ __forceinline__ void run_tiles(unsigned char* smem, const TensorMap* map_a, const TensorMap* map_b, long long tiles,
                                            Origin&& origin, F&& epilogue) {
    const unsigned raw = mma::smem_address(smem);
    const unsigned base = (raw + kAtomBytes - 1) & ~static_cast<unsigned>(kAtomBytes - 1);
    const unsigned bars = base + STAGES * kStageBytes + kEpiBytes;
    const int wg = static_cast<int>(threadIdx.x) / kWarpgroup;
    init_stage_barriers<STAGES>(bars, 1);
    if (wg == 0) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs) : "memory");
      if (threadIdx.x == 0) produce_tiles<BM, BN, STAGES, B_K_CONTIG, kKTiles, 1, NBA, NBB, COORDS>(base, bars, map_a, map_b, tiles, origin);
    } else {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs) : "memory");
      const int c = wg - 1;
      const bool signals = threadIdx.x % kWarpgroup == 0;
      unsigned char* slab = smem + (base - raw) + STAGES * kStageBytes + c * kEpiSlabBytes;
      int j = c;  // the tile's place among the block's
      for (long long t = blockIdx.x + c * static_cast<long long>(gridDim.x); t < tiles; t += 2LL * gridDim.x, j += 2) {
        // My turn: the other consumer has issued its previous tile's multiplies (tile 0 starts).
        if (j > 0) named_sync(1 + c, kTurnThreads);
        TileAt at;
        origin(t, at);
        int i = j * kKTiles;  // the stage round of this tile's first K tile
        for (int kt = 0; kt < kKTiles; ++kt, ++i) {
          const int s = i % STAGES;
          mbar_wait(bars + 8 * s, (i / STAGES) & 1);
          const unsigned a = base + s * kStageBytes, b = a + kABytes;
          fence_registers(acc0);
          fence_registers(acc1);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK / kInstK; ++kk) {
            const u64 da0 = smem_desc(a + kk * kInstK * 2, 16, kAtomBytes);
            const u64 da1 = smem_desc(a + kInstM * kRowBytes + kk * kInstK * 2, 16, kAtomBytes);
            const u64 db = B_K_CONTIG ? smem_desc(b + kk * kInstK * 2, 16, kAtomBytes)
                                      : smem_desc(b + kk * kInstK * kRowBytes, BK * kRowBytes, kAtomBytes);
            // The first K step overwrites the accumulators (no zeroing of the previous tile's).
            wgmma_n128_acc<BF16, !B_K_CONTIG>(acc0, da0, db, kt > 0 || kk > 0);
            wgmma_n128_acc<BF16, !B_K_CONTIG>(acc1, da1, db, kt > 0 || kk > 0);
          }
          wgmma_commit();
          fence_registers(acc0);
          fence_registers(acc1);
          if (kt > 0) {
            wgmma_wait<1>();
            fence_registers(acc0);
            fence_registers(acc1);
            if (signals) mbar_arrive(bars + 8 * (STAGES + (i - 1) % STAGES));
          }
        }
        // Every multiply of this tile is issued: the other consumer's turn, if it has a next tile.
        if (t + gridDim.x < tiles) named_arrive(2 - c, kTurnThreads);
        wgmma_wait<0>();
        fence_registers(acc0);
        fence_registers(acc1);
        if (signals) mbar_arrive(bars + 8 * (STAGES + (i - 1) % STAGES));
        // The tile's two 64-row halves through the consumer's slab (store_slab).
        store_slab<BF16, CHUNK, 0>(slab, acc0, 3 + c, 0, 0, epilogue);
        store_slab<BF16, CHUNK, 0>(slab, acc1, 3 + c, kInstM, 0, epilogue);
      }
    }
  }
};

// ---- 2:4 sparse weights: wgmma.mma_async.sp -------------------------------------------------------
//
// C[m, n] = sum_k X[m, k] W[k, n] with W 2:4 sparse along k, read compressed (mma.cuh's
// SparseBlockGemm has the layout, kernels/cuda/nm_compress.h makes it). wgmma.sp's sparse operand
// is its A, so a block computes C^T = W^T X^T: two consumer warpgroups of 64 rows of W^T (C's n;
// the block's 128) against BM = 128, 192 or 256 rows of X (C's m; wgmma's N), fed like the dense
// kernel: warpgroup 0's first thread copies each K tile of 64 into a STAGES-deep ring with the
// tensor copy engine -- X's BM x 64 box (the dense kernel's 128-byte swizzle), W's 128 rows of 32
// compressed values (64-byte rows: the 64-byte swizzle, chunk c of row r at c ^ ((r / 2) % 4)) and
// the block's metadata (8 rows of 16 x 128 bytes: two k32 steps of 16 words per 16 rows of W^T,
// unswizzled) -- on the stage's `full` mbarrier; the consumers release a stage on its `empty` one
// once its wgmmas are done. A consumer keeps one tile's wgmmas in flight while it issues the next;
// their metadata operands are registers read asynchronously, so the K loop runs tiles in pairs,
// even and odd tiles on their own registers. The producer gives registers to the consumers
// (setmaxnreg). Out-of-range rows of X and W read zeros (the copy engine's fill); 16-row groups of
// W^T past the metadata's last one take valid metadata for zero rows (mma::kSpMetaFill). The
// accumulators lie as the m16n8 fragments of mma.sync (C^T rows 16 w + l / 4 + 8 h, columns 8 j +
// 2 (l % 4) + {0, 1}); run's epilogue gets pairs along C's n.

// A descriptor of a K-major tile with the 64-byte swizzle (mode 2 in bits 62-63): 8-row groups
// `sbo` bytes apart.
__device__ __forceinline__ u64 smem_desc_64b(unsigned addr, unsigned sbo) {
  return static_cast<u64>((addr & 0x3FFFFu) >> 4) | (static_cast<u64>(1) << 16) | (static_cast<u64>(sbo >> 4) << 32) | (2ull << 62);
}

// One consumer warpgroup's slab of a 2:4 tile, transposed: acc holds C^T (rows: the consumer's 64
// columns n of C; columns: rows m of C), as the m16n8 fragments (row 16 w + l / 4 + 8 h, column
// 8 j + 2 (l % 4) + e for accumulator 4 j + 2 h + e). Column groups J0 .. J0 + ROWS / 8 - 1 (ROWS
// rows of C: 128, or 64 for the last of a 192-row tile) are written to `buf` as rows of C -- 64 16-bit values (128 bytes) each, chunk q of row r at
// q ^ (r % 8) -- rounded to the 16-bit type, then read back along the rows and passed to
// epilogue(r0 + r, c0 + c, v) as store_slab does (CHUNK 8: runs of 8 columns, side inputs
// prefetched; CHUNK 1: one column at a time). `bar`: the warpgroup's named barrier.
constexpr int kSpSlabRows = 128, kSpSlabCols = kInstM;  // 128 x 64 16-bit values: kEpiSlabBytes
template <bool BF16, int CHUNK, int J0, int ROWS = kSpSlabRows, int NACC, class F>
__device__ __forceinline__ void store_slab_transposed(unsigned char* buf, const float (&acc)[NACC], int bar, int r0, int c0, F& epilogue) {
  static_assert(CHUNK == 1 || CHUNK == kEpiChunk, "a slab is read by chunks of 16 bytes or by elements");
  static_assert(ROWS == kSpSlabRows || ROWS == kSpSlabRows / 2, "a slab holds 128 rows of C, or 64: a 192-row tile's last");
  static_assert(4 * (J0 + ROWS / 8) <= NACC, "the slab's column groups are accumulators of the thread");
  static_assert(kSpSlabRows * kSpSlabCols * 2 == kEpiSlabBytes, "the transposed slab is the size of the dense one");
  const int t = static_cast<int>(threadIdx.x) % kWarpgroup, w = t / 32, lane = t % 32;
  const int g = lane / 4, q = lane % 4;
  const bool even = g % 2 == 0;
  constexpr int kPerRow = kSpSlabCols / kEpiChunk, kRuns = ROWS * kPerRow / kWarpgroup;
  auto offset = [](int r, int c) { return r * kSpSlabCols * 2 + (((c / kEpiChunk) ^ (r % 8)) * 16) + (c % kEpiChunk) * 2; };
  decltype(prefetch_run(epilogue, 0, 0)) pre[CHUNK == kEpiChunk ? kRuns : 1];
  if constexpr (CHUNK == kEpiChunk) {
#pragma unroll
    for (int i = 0; i < kRuns; ++i) {
      const int p = t + kWarpgroup * i;
      pre[i] = prefetch_run(epilogue, r0 + p / kPerRow, c0 + (p % kPerRow) * kEpiChunk);
    }
  }
  named_sync(bar, kWarpgroup);
  // Lanes of even g pair their value at (n, m) with the odd neighbour's at (n + 1, m), and odd ones
  // theirs at (n, m + 1) with the even neighbour's at (n - 1, m + 1): one 32-bit word each.
#pragma unroll
  for (int j = 0; j < ROWS / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float own0 = acc[4 * (J0 + j) + 2 * h], own1 = acc[4 * (J0 + j) + 2 * h + 1];
      const float other = __shfl_xor_sync(0xffffffffu, even ? own1 : own0, 4);
      const float v0 = even ? own0 : other, v1 = even ? other : own1;
      const int n = 16 * w + 8 * h + (even ? g : g - 1), m = 8 * j + 2 * q + (even ? 0 : 1);
      const unsigned lo = BF16 ? f32_to_bf16(v0) : f32_to_f16(v0), hi = BF16 ? f32_to_bf16(v1) : f32_to_f16(v1);
      *reinterpret_cast<unsigned*>(buf + offset(m, n)) = lo | (hi << 16);
    }
  named_sync(bar, kWarpgroup);
  read_slab<BF16, CHUNK, ROWS, kSpSlabCols>(buf, offset, r0, c0, epilogue, pre);
}

template <int BM, int STAGES, bool BF16, int N, int K, int CLUSTER = 1>
struct SparseWarpgroupGemm {
  static constexpr int BN = 2 * kInstM;  // W^T rows: two consumers of 64
  static constexpr int BK = kRowElems;   // k per stage
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroup;
  static constexpr int kAccs = BM / 2;
  static constexpr int kSpK = 32;                    // wgmma.sp's k
  static constexpr int kWRowBytes = BK;              // 32 compressed 16-bit values: the 64-byte swizzle span
  static constexpr int kWAtomBytes = 8 * kWRowBytes;  // its period: 8 rows
  static constexpr int kMetaWords = 16;  // per 16 rows and k32 step (mma.cuh's kSpMetaElems / 2)
  static constexpr int kERowBytes = BK / kSpK * kMetaWords * 4;  // a K tile's metadata of 16 rows: 128 bytes
  static constexpr int kXBytes = BM * kRowBytes, kWBytes = BN * kWRowBytes, kEBytes = BN / 16 * kERowBytes;
  static constexpr int kStageBytes = kXBytes + kWBytes + kEBytes;
  static constexpr int kKTiles = (K + BK - 1) / BK;
  static constexpr int KC = kKTiles * BK / 2;  // compressed values per row of W^T (as SparseBlockGemm's)
  static constexpr int kMetaRows = (N + 15) / 16;
  // The stages, 1024-byte aligned (slack for aligning the dynamic shared memory), each consumer's
  // epilogue slab, then the barriers.
  static constexpr int kEpiBytes = kConsumers * kEpiSlabBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes + kEpiBytes + kAtomBytes + 2 * STAGES * 8;
  static constexpr int kBlocksPerSm = 1;  // the launch bound
  static_assert(BM == 128 || BM == 192 || BM == 256, "wgmma.sp tiles are 64 x 128, 192 or 256 per consumer");
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");
  static_assert(kXBytes % kAtomBytes == 0 && kStageBytes % kAtomBytes == 0, "tiles start swizzle-atom aligned");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "X is shared by at most two blocks");
  static_assert(kXBytes / CLUSTER % kAtomBytes == 0, "each block's part of X starts swizzle-atom aligned");

  float acc[kAccs];

  // The persistent form (at most one block per SM): the block computes tiles blockIdx.x,
  // blockIdx.x + gridDim.x, ... of `tiles`, origin(t, at) placing tile t (at.m0: its first row of
  // C, at.n0: its first column), each over all of K through the tensor maps of X (BM x 64 boxes),
  // W's compressed values (128 x 32 boxes, 64-byte swizzle) and its metadata (8 x 64 boxes of
  // 16-bit elements: a K tile of 16 rows each), and calls epilogue(m, n, v) in the consumer
  // threads for runs of C's rows (v: float[CHUNK], relative to the tile) through each consumer's
  // slab (store_slab_transposed). The stages' round count runs on across tiles, and the consumers
  // release a tile's last stage before its epilogue, so the producer loads the next tile's first
  // stages while they store this one.
  //
  // With CLUSTER = 2 the grid is made of two-block clusters whose blocks compute tiles of the same
  // rows of C and neighbouring columns (tile blockIdx.x / 2, + gridDim.x / 2, ...; origin places
  // this block's columns of it): each block copies half of X's box (BM / 2 rows: the map's boxes)
  // into both blocks' stages at once (multicast), so X crosses the L2 once for the two. A stage
  // is refilled when both blocks' consumers released it (`empty` counts the cluster's four).
  template <int CHUNK = kEpiChunk, class Origin, class F>
  __device__ __forceinline__ void run_tiles(unsigned char* smem, const TensorMap* map_x, const TensorMap* map_w, const TensorMap* map_e,
                                            long long tiles, Origin&& origin, F&& epilogue) {
    const unsigned raw = mma::smem_address(smem);
    const unsigned base = (raw + kAtomBytes - 1) & ~static_cast<unsigned>(kAtomBytes - 1);
    const unsigned bars = base + STAGES * kStageBytes + kEpiBytes;  // full[s] at bars + 8 s, empty[s] at bars + 8 (STAGES + s)
    const int wg = static_cast<int>(threadIdx.x) / kWarpgroup;
    const int rank = CLUSTER > 1 ? static_cast<int>(mma::cluster_rank()) : 0;
    init_stage_barriers<STAGES>(bars, kConsumers * CLUSTER);
    if (CLUSTER > 1) mma::cluster_sync();
    if (wg == 0) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs) : "memory");
      if (threadIdx.x == 0) {
        int i = 0;  // stage rounds so far, over all of this block's tiles
        for (long long t = blockIdx.x / CLUSTER; t < tiles; t += gridDim.x / CLUSTER) {
          TileAt at;
          origin(t, at);
          for (int kt = 0; kt < kKTiles; ++kt, ++i) {
            const int s = i % STAGES;
            const unsigned full = bars + 8 * s, st = base + s * kStageBytes;
            mbar_wait(bars + 8 * (STAGES + s), ((i / STAGES) & 1) ^ 1);
            mbar_expect_tx(full, kStageBytes);
            if constexpr (CLUSTER > 1) {
              constexpr unsigned short kAll = (1u << CLUSTER) - 1;
              tma_load_2d_multicast(st + rank * (kXBytes / CLUSTER), map_x, full, kt * BK, at.m0 + rank * (BM / CLUSTER), kAll);
            } else {
              tma_load_2d(st, map_x, full, kt * BK, at.m0);
            }
            tma_load_2d(st + kXBytes, map_w, full, kt * (BK / 2), at.n0);
            tma_load_2d(st + kXBytes + kWBytes, map_e, full, kt * (kERowBytes / 2), at.n0 / 16);
          }
        }
      }
      if (CLUSTER > 1) {
        __syncwarp();  // thread 0 rejoins its warp before the aligned cluster barrier
        mma::cluster_sync();
      }
      return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs) : "memory");
    const int c = wg - 1, warp = (static_cast<int>(threadIdx.x) % kWarpgroup) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const bool signals = threadIdx.x % kWarpgroup == 0;
    // Releases stage s for its next round: in every block that shares it.
    auto release = [&](int s) {
      if (!signals) return;
      if constexpr (CLUSTER > 1) {
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bars + 8 * (STAGES + s), r);
      } else {
        mbar_arrive(bars + 8 * (STAGES + s));
      }
    };
    unsigned char* slab = smem + (base - raw) + STAGES * kStageBytes + c * kEpiSlabBytes;
    // This warp's metadata words in a stage: its row of 16, the lane's word of each k32 step.
    const unsigned meta_at = static_cast<unsigned>(kXBytes + kWBytes + (c * kInstM / 16 + warp) * kERowBytes + mma::sp_meta_word(lane) * 4);
    // The metadata of even and odd K tiles in their own registers: a tile's wgmmas read theirs
    // asynchronously until they complete (the next tile's wgmma_wait), so the next tile's words go
    // to the other pair, and the fence after each wait keeps all four live.
    unsigned ea0 = mma::kSpMetaFill, ea1 = mma::kSpMetaFill, eb0 = mma::kSpMetaFill, eb1 = mma::kSpMetaFill;
    int i = 0;  // stage rounds so far
    for (long long t = blockIdx.x / CLUSTER; t < tiles; t += gridDim.x / CLUSTER) {
      TileAt at;
      origin(t, at);
      const bool has_meta = (at.n0 + c * kInstM + warp * 16) / 16 < kMetaRows;
#pragma unroll
      for (int j = 0; j < kAccs; ++j) acc[j] = 0.0f;
      auto tile = [&](int kt, unsigned& e0, unsigned& e1) __attribute__((always_inline)) {
        const int s = i % STAGES;
        const unsigned st = base + s * kStageBytes;
        mbar_wait(bars + 8 * s, (i / STAGES) & 1);
        if (has_meta) {
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(e0) : "r"(st + meta_at) : "memory");
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(e1) : "r"(st + meta_at + kMetaWords * 4) : "memory");
        } else {
          e0 = e1 = mma::kSpMetaFill;
        }
        const unsigned sw = st + kXBytes + c * kInstM * kWRowBytes;
        fence_registers(acc);
        wgmma_fence();
#pragma unroll
        for (int step = 0; step < BK / kSpK; ++step) {
          // A: 16 compressed values (32 bytes) per step inside the 64-byte rows, 8-row groups one
          // atom apart; B: 32 k (64 bytes) per step inside the 128-byte rows.
          const u64 da = smem_desc_64b(sw + step * (kSpK / 2) * 2, kWAtomBytes);
          const u64 db = smem_desc(st + step * kSpK * 2, 16, kAtomBytes);
          if constexpr (BM == 256) wgmma_sp_n256<BF16>(acc, da, db, step ? e1 : e0);
          else if constexpr (BM == 192) wgmma_sp_n192<BF16>(acc, da, db, step ? e1 : e0);
          else wgmma_sp_n128<BF16>(acc, da, db, step ? e1 : e0);
        }
        wgmma_commit();
        fence_registers(acc);
        if (kt > 0) {
          wgmma_wait<1>();  // the previous tile's wgmmas are done: its stage and metadata pair are free
          fence_registers(acc);
          release((i - 1) % STAGES);
        }
        ++i;
        asm volatile("" : "+r"(ea0), "+r"(ea1), "+r"(eb0), "+r"(eb1)::"memory");
      };
      for (int kt = 0; kt < kKTiles; kt += 2) {
        tile(kt, ea0, ea1);
        if (kt + 1 < kKTiles) tile(kt + 1, eb0, eb1);
      }
      wgmma_wait<0>();
      fence_registers(acc);
      // The tile's last stage is free: the producer refills it while this tile is stored.
      release((i - 1) % STAGES);
      store_slab_transposed<BF16, CHUNK, 0>(slab, acc, 3 + c, 0, c * kInstM, epilogue);
      if constexpr (BM >= 2 * kSpSlabRows) store_slab_transposed<BF16, CHUNK, kSpSlabRows / 8>(slab, acc, 3 + c, kSpSlabRows, c * kInstM, epilogue);
      if constexpr (BM == kSpSlabRows + kSpSlabRows / 2)
        store_slab_transposed<BF16, CHUNK, kSpSlabRows / 8, kSpSlabRows / 2>(slab, acc, 3 + c, kSpSlabRows, c * kInstM, epilogue);
    }
    if (CLUSTER > 1) {
      __syncwarp();
      mma::cluster_sync();  // the other block's copies into this one's stages and its releases are done
    }
  }
};

}  // namespace wg
}  // namespace tsl
