// The wgmma main loop (kernels/cuda/device/wgmma.cuh) alone: correctness against a naive f32
// GEMM on the GPU and timing against cuBLAS, for the shapes and operand layouts the planner
// sends to it. Built and run by experiments/wgmma_probe/run (needs nvcc and a Hopper GPU).
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/device/mma.cuh"
#include "kernels/cuda/device/wgmma.cuh"

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e = (x);                                                                         \
    if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } \
  } while (0)

template <int BN, int STAGES, bool BK_CONTIG, int K>
__global__ void __launch_bounds__(384, 1) probe_kernel(const __grid_constant__ tsl::wg::TensorMap ma,
                                                       const __grid_constant__ tsl::wg::TensorMap mb, __half* c, int M, int N) {
  extern __shared__ __align__(16) unsigned char smem[];
  typedef tsl::wg::WarpgroupGemm<BN, STAGES, BK_CONTIG, false, K> G;
  const int tiles_n = (N + BN - 1) / BN;
  const int m0 = (blockIdx.x / tiles_n) * G::BM, n0 = (blockIdx.x % tiles_n) * BN;
  G g;
  g.run(smem, &ma, &mb, m0, n0, [&](int dm, int dn, float v0, float v1) {
    const int m = m0 + dm, n = n0 + dn;
    if (m >= M) return;
    if (n < N) c[(long long)m * N + n] = __float2half_rn(v0);
    if (n + 1 < N) c[(long long)m * N + n + 1] = __float2half_rn(v1);
  });
}

__global__ void reference(const __half* a, const __half* b, float* c, int M, int N, int K, bool b_k_contig) {
  const int m = blockIdx.y, n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float s = 0;
  for (int k = 0; k < K; ++k)
    s += __half2float(a[(long long)m * K + k]) * __half2float(b_k_contig ? b[(long long)n * K + k] : b[(long long)k * N + n]);
  c[(long long)m * N + n] = s;
}

static CUtensorMap make_map(void* p, int rows, int cols, int box_rows) {
  CUtensorMap m;
  cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
  cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, p, dims, strides, box, estr,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r); exit(1); }
  return m;
}

template <int BN, int STAGES, bool BK_CONTIG, int K>
void probe(int M, int N, cublasHandle_t h) {
  typedef tsl::wg::WarpgroupGemm<BN, STAGES, BK_CONTIG, false, K> G;
  std::vector<__half> ha((size_t)M * K), hb((size_t)N * K);
  srand(M * 7 + N * 3 + K + BN + (BK_CONTIG ? 1 : 0));
  for (auto& x : ha) x = __float2half((rand() % 2001 - 1000) / 1000.0f);
  for (auto& x : hb) x = __float2half((rand() % 2001 - 1000) / 1000.0f);
  __half *a, *b, *c;
  float* ref;
  CK(cudaMalloc(&a, ha.size() * 2));
  CK(cudaMalloc(&b, hb.size() * 2));
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  CK(cudaMalloc(&ref, (size_t)M * N * 4));
  CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(c, 0xff, (size_t)M * N * 2));  // NaN poison
  const CUtensorMap ma = make_map(a, M, K, G::BM);
  const CUtensorMap mb = BK_CONTIG ? make_map(b, N, K, BN) : make_map(b, K, N, 64);
  tsl::wg::TensorMap ta, tb;
  memcpy(&ta, &ma, sizeof ta);
  memcpy(&tb, &mb, sizeof tb);
  auto kern = probe_kernel<BN, STAGES, BK_CONTIG, K>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, G::kSmemBytes));
  const int blocks = ((M + G::BM - 1) / G::BM) * ((N + BN - 1) / BN);
  kern<<<blocks, 384, G::kSmemBytes>>>(ta, tb, c, M, N);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  reference<<<dim3((N + 127) / 128, M), 128>>>(a, b, ref, M, N, K, BK_CONTIG);
  CK(cudaDeviceSynchronize());
  std::vector<__half> hc((size_t)M * N);
  std::vector<float> hr((size_t)M * N);
  CK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  long long bad = 0;
  for (size_t i = 0; i < hc.size(); ++i) {
    const double v = __half2float(hc[i]);
    if (!std::isfinite(v)) ++bad;
    num += (v - hr[i]) * (v - hr[i]);
    den += (double)hr[i] * hr[i];
  }
  const double err = std::sqrt(num / den);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int r = 0; r < 30; ++r) {
    CK(cudaEventRecord(e0));
    kern<<<blocks, 384, G::kSmemBytes>>>(ta, tb, c, M, N);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  // cuBLAS: C^T = B^T A^T in column-major terms.
  std::vector<float> tc;
  const __half one = __float2half(1.0f), zero = __float2half(0.0f);
  for (int r = 0; r < 31; ++r) {
    CK(cudaEventRecord(e0));
    cublasStatus_t st = cublasGemmEx(h, BK_CONTIG ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16F,
                                     BK_CONTIG ? K : N, a, CUDA_R_16F, K, &zero, c, CUDA_R_16F, N, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    if (st != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublas %d\n", (int)st); exit(1); }
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r) tc.push_back(ms);
  }
  std::sort(tc.begin(), tc.end());
  const double flop = 2.0 * M * N * K;
  printf("%-6s M=%5d N=%5d K=%5d BN=%3d stages=%d  err=%.2e nonfinite=%lld  %s  wgmma %.4f ms (%.0f TFLOP/s)  cuBLAS %.4f ms (%.0f)\n",
         BK_CONTIG ? "NxK" : "KxN", M, N, K, BN, STAGES, err, bad, err < 2e-3 && bad == 0 ? "OK  " : "FAIL", ts[15],
         flop / ts[15] / 1e9, tc[15], flop / tc[15] / 1e9);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  CK(cudaFree(ref));
}

int main() {
  cublasHandle_t h;
  cublasCreate(&h);
  probe<256, 4, false, 4096>(4096, 4096, h);
  probe<256, 4, true, 4096>(4096, 4096, h);
  probe<128, 6, false, 4096>(4096, 4096, h);
  probe<128, 6, true, 4096>(4096, 4096, h);
  probe<256, 4, false, 1000>(1000, 1000, h);  // edges: M, N, K not multiples of the tile
  probe<256, 4, true, 1000>(1000, 1000, h);
  probe<128, 6, false, 72>(200, 136, h);      // K tail inside one tile
  probe<256, 4, false, 4096>(4096, 14336, h);  // llama up projection shape (per token block)
  return 0;
}
