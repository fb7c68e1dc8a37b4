// Probe: wgmma.mma_async.sp m64n128k32 f16 -- which A layout / descriptor and metadata layout give
// C^T = A (64 x 64 logical, 2:4, two k32 steps) X^T (X: 128 x 64).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cuda_fp16.h>
typedef unsigned long long u64;
__device__ unsigned saddr(const void* p) { unsigned a; asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p)); return a; }
__device__ u64 desc(unsigned addr, unsigned lbo, unsigned sbo, int mode) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | ((u64)mode << 62);
}
#define D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define O64(d) "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7]),"+f"(d[8]),"+f"(d[9]),"+f"(d[10]),"+f"(d[11]),"+f"(d[12]),"+f"(d[13]),"+f"(d[14]),"+f"(d[15]),"+f"(d[16]),"+f"(d[17]),"+f"(d[18]),"+f"(d[19]),"+f"(d[20]),"+f"(d[21]),"+f"(d[22]),"+f"(d[23]),"+f"(d[24]),"+f"(d[25]),"+f"(d[26]),"+f"(d[27]),"+f"(d[28]),"+f"(d[29]),"+f"(d[30]),"+f"(d[31]),"+f"(d[32]),"+f"(d[33]),"+f"(d[34]),"+f"(d[35]),"+f"(d[36]),"+f"(d[37]),"+f"(d[38]),"+f"(d[39]),"+f"(d[40]),"+f"(d[41]),"+f"(d[42]),"+f"(d[43]),"+f"(d[44]),"+f"(d[45]),"+f"(d[46]),"+f"(d[47]),"+f"(d[48]),"+f"(d[49]),"+f"(d[50]),"+f"(d[51]),"+f"(d[52]),"+f"(d[53]),"+f"(d[54]),"+f"(d[55]),"+f"(d[56]),"+f"(d[57]),"+f"(d[58]),"+f"(d[59]),"+f"(d[60]),"+f"(d[61]),"+f"(d[62]),"+f"(d[63])
// ac: compressed A [64][32] halfs; x: X [128][64] halfs; meta: [4 warps][2 steps][32 lanes] words chosen on host
// alayout 0: 64B rows, 64B swizzle (mode 2, sbo 512); 1: 128B rows (first 64 B used), 128B swizzle (mode 1, sbo 1024)
__global__ void k(const unsigned short* ac, const unsigned short* x, const unsigned* meta, float* out, int alayout, int steps) {
  __shared__ __align__(1024) unsigned char sa[64 * 128];
  __shared__ __align__(1024) unsigned char sx[128 * 128];
  int t = threadIdx.x;
  for (int i = t; i < 64 * 4; i += 128) {  // A: 64 rows x 4 chunks of 16 B
    int r = i / 4, c = i % 4;
    unsigned off = alayout == 0 ? r * 64 + ((c ^ ((r >> 1) & 3)) * 16) : r * 128 + ((c ^ (r & 7)) * 16);
    memcpy(sa + off, ac + r * 32 + c * 8, 16);
  }
  for (int i = t; i < 128 * 8; i += 128) {
    int r = i / 8, c = i % 8;
    memcpy(sx + r * 128 + ((c ^ (r & 7)) * 16), x + r * 64 + c * 8, 16);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float d[64];
  for (int i = 0; i < 64; ++i) d[i] = 0;
  int warp = t / 32, lane = t % 32;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int s = 0; s < steps; ++s) {
    u64 da = alayout == 0 ? desc(saddr(sa) + s * 32, 16, 512, 2) : desc(saddr(sa) + s * 32, 16, 1024, 1);
    u64 db = desc(saddr(sx) + s * 64, 16, 1024, 1);
    unsigned e = meta[(warp * 2 + s) * 32 + lane];
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 " D64 ", %64, %65, %66, 0, p, 1, 1, 0, 0;\n}\n"
                 : O64(d) : "l"(da), "l"(db), "r"(e));
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < 64; ++i) {
    int row = warp * 16 + lane / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    out[row * 128 + col] = d[i];
  }
}
int main() {
  srand(5);
  static float A[64][64], X[128][64];
  static int idx[64][16][2];
  for (int r = 0; r < 64; ++r) for (int g = 0; g < 16; ++g) {
    int i0 = rand() % 4, i1 = rand() % 3; if (i1 >= i0) ++i1; if (i0 > i1) { int tt = i0; i0 = i1; i1 = tt; }
    idx[r][g][0] = i0; idx[r][g][1] = i1;
    A[r][g * 4 + i0] = (rand() % 7) - 3; A[r][g * 4 + i1] = (rand() % 7) - 3;
  }
  for (int m = 0; m < 128; ++m) for (int k = 0; k < 64; ++k) X[m][k] = (rand() % 5) - 2;
  static unsigned short hac[64 * 32], hx[128 * 64];
  auto h = [](float v) { __half hv = __float2half(v); unsigned short u; memcpy(&u, &hv, 2); return u; };
  for (int r = 0; r < 64; ++r) for (int g = 0; g < 16; ++g) for (int j = 0; j < 2; ++j) hac[r * 32 + g * 2 + j] = h(A[r][g * 4 + idx[r][g][j]]);
  for (int m = 0; m < 128; ++m) for (int k = 0; k < 64; ++k) hx[m * 64 + k] = h(X[m][k]);
  auto nib = [&](int r, int g) { return (unsigned)(idx[r][g][0] | (idx[r][g][1] << 2)); };
  static unsigned m1[4 * 2 * 32], m2[4 * 2 * 32];
  for (int w = 0; w < 4; ++w) for (int s = 0; s < 2; ++s) for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, q = lane % 4, half = q % 2;
    unsigned a = 0, b = 0;
    for (int c = 0; c < 4; ++c) { a |= nib(w * 16 + g, s * 8 + half * 4 + c) << (4 * c); a |= nib(w * 16 + g + 8, s * 8 + half * 4 + c) << (16 + 4 * c); }
    int row = w * 16 + (half == 0 ? g : g + 8);
    for (int c = 0; c < 8; ++c) b |= nib(row, s * 8 + c) << (4 * c);
    m1[(w * 2 + s) * 32 + lane] = a; m2[(w * 2 + s) * 32 + lane] = b;
  }
  unsigned short *dac, *dx; unsigned* dm; float* dout;
  cudaMalloc(&dac, sizeof hac); cudaMalloc(&dx, sizeof hx); cudaMalloc(&dm, sizeof m1); cudaMalloc(&dout, 64 * 128 * 4);
  cudaMemcpy(dac, hac, sizeof hac, cudaMemcpyHostToDevice); cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  static float o[64 * 128];
  for (int steps = 1; steps <= 2; ++steps)
    for (int al = 0; al < 2; ++al)
      for (int mv = 1; mv <= 2; ++mv) {
        cudaMemcpy(dm, mv == 1 ? m1 : m2, sizeof m1, cudaMemcpyHostToDevice);
        cudaMemset(dout, 0, 64 * 128 * 4);
        k<<<1, 128>>>(dac, dx, dm, dout, al, steps);
        cudaError_t err = cudaDeviceSynchronize();
        cudaMemcpy(o, dout, sizeof o, cudaMemcpyDeviceToHost);
        double num = 0, den = 0, mx = 0;
        for (int r = 0; r < 64; ++r) for (int c = 0; c < 128; ++c) {
          double ref = 0; for (int kk = 0; kk < 32 * steps; ++kk) ref += A[r][kk] * X[c][kk];
          double e = o[r * 128 + c] - ref; num += e * e; den += ref * ref; mx = fmax(mx, fabs(e));
        }
        printf("steps=%d alayout=%s meta=M%d: rel L2 %.3g max %.3g (%s)\n", steps, al ? "128B" : "64B", mv, sqrt(num / den), mx, cudaGetErrorString(err));
      }
  return 0;
}
