// Probe: which metadata layout mma.sp m16n8k32 f16 expects (H1: lane 4g+q, q=0/1 -> k half q,
// rows g (low 16) and g+8 (high 16); H2: q=0 -> row g all 32 k, q=1 -> row g+8).
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
__global__ void k(const unsigned* a, const unsigned* b, const unsigned* e, float* d, int ordered) {
  int lane = threadIdx.x;
  unsigned ar[4], br[4];
  for (int i = 0; i < 4; ++i) { ar[i] = a[lane * 4 + i]; br[i] = b[lane * 4 + i]; }
  unsigned ee = e[lane];
  float c[4] = {0, 0, 0, 0};
  if (ordered)
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]), "r"(br[2]), "r"(br[3]), "r"(ee));
  else
    asm volatile("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]), "r"(br[2]), "r"(br[3]), "r"(ee));
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = c[i];
}
int main() {
  srand(3);
  float A[16][32] = {}, B[32][8];
  int idx[16][8][2];
  for (int r = 0; r < 16; ++r) for (int g = 0; g < 8; ++g) {
    int i0 = rand() % 4, i1 = rand() % 3; if (i1 >= i0) ++i1; if (i0 > i1) { int t = i0; i0 = i1; i1 = t; }
    idx[r][g][0] = i0; idx[r][g][1] = i1;
    A[r][g * 4 + i0] = (rand() % 7) - 3; A[r][g * 4 + i1] = (rand() % 7) - 3;
  }
  for (int k = 0; k < 32; ++k) for (int n = 0; n < 8; ++n) B[k][n] = (rand() % 5) - 2;
  // compressed 16 x 16
  float Ac[16][16];
  for (int r = 0; r < 16; ++r) for (int g = 0; g < 8; ++g) for (int j = 0; j < 2; ++j) Ac[r][g * 2 + j] = A[r][g * 4 + idx[r][g][j]];
  unsigned ha[128], hb[128], e1[32], e2[32];
  auto pack = [](float x, float y) { __half hx = __float2half(x), hy = __float2half(y); unsigned short ux, uy; memcpy(&ux, &hx, 2); memcpy(&uy, &hy, 2); return (unsigned)ux | ((unsigned)uy << 16); };
  for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, q = lane % 4;
    ha[lane * 4 + 0] = pack(Ac[g][2 * q], Ac[g][2 * q + 1]);
    ha[lane * 4 + 1] = pack(Ac[g + 8][2 * q], Ac[g + 8][2 * q + 1]);
    ha[lane * 4 + 2] = pack(Ac[g][2 * q + 8], Ac[g][2 * q + 9]);
    ha[lane * 4 + 3] = pack(Ac[g + 8][2 * q + 8], Ac[g + 8][2 * q + 9]);
    for (int i = 0; i < 4; ++i) hb[lane * 4 + i] = pack(B[2 * q + 8 * i][g], B[2 * q + 1 + 8 * i][g]);
    auto nib = [&](int r, int gg) { return (unsigned)(idx[r][gg][0] | (idx[r][gg][1] << 2)); };
    unsigned w1 = 0, w2 = 0;
    int half = q % 2;
    for (int c = 0; c < 4; ++c) { w1 |= nib(g, half * 4 + c) << (4 * c); w1 |= nib(g + 8, half * 4 + c) << (16 + 4 * c); }
    int row = q % 2 == 0 ? g : g + 8;
    for (int c = 0; c < 8; ++c) w2 |= nib(row, c) << (4 * c);
    e1[lane] = w1; e2[lane] = w2;
  }
  float ref[16][8] = {};
  for (int m = 0; m < 16; ++m) for (int n = 0; n < 8; ++n) for (int k = 0; k < 32; ++k) ref[m][n] += A[m][k] * B[k][n];
  unsigned *da, *db, *de; float* dd;
  cudaMalloc(&da, 512); cudaMalloc(&db, 512); cudaMalloc(&de, 128); cudaMalloc(&dd, 512);
  cudaMemcpy(da, ha, 512, cudaMemcpyHostToDevice); cudaMemcpy(db, hb, 512, cudaMemcpyHostToDevice);
  for (int ordered = 0; ordered < 2; ++ordered)
    for (int h = 1; h <= 2; ++h) {
      cudaMemcpy(de, h == 1 ? e1 : e2, 128, cudaMemcpyHostToDevice);
      k<<<1, 32>>>(da, db, de, dd, ordered);
      float hd[128];
      cudaError_t err = cudaMemcpy(hd, dd, 512, cudaMemcpyDeviceToHost);
      double maxerr = 0;
      for (int lane = 0; lane < 32; ++lane) {
        int g = lane / 4, q = lane % 4;
        float want[4] = {ref[g][2 * q], ref[g][2 * q + 1], ref[g + 8][2 * q], ref[g + 8][2 * q + 1]};
        for (int i = 0; i < 4; ++i) maxerr = fmax(maxerr, fabs(hd[lane * 4 + i] - want[i]));
      }
      printf("ordered=%d H%d: max error %g (%s)\n", ordered, h, maxerr, cudaGetErrorString(err));
    }
  return 0;
}
