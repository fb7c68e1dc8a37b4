// Probing a CUDA GPU (probe.h): device attributes from the driver API, and bandwidth and
// throughput from small kernels.
//
// The driver library is opened at run time with dlopen("libcuda.so.1"), so Tessel builds, links and
// runs on machines without a GPU or driver; cuda.h supplies only types and enum values. Kernels are
// compiled at run time by NVRTC (no nvcc, no headers) to a cubin for the device's architecture,
// falling back to PTX that the driver compiles. Each measurement runs once to warm up, then a few
// times timed with CUDA events; the best run counts.
//
//   DRAM    copy kernel, 16-byte loads and stores, over 1 GiB (256 MiB with --quick)
//   L2      ld.global.cg reads (cached in L2 only) of a working set of 1/4 of the L2, repeated
//   smem    conflict-free 32-bit shared-memory loads, 16 per loop iteration
//   fp32    8 independent FMA chains per thread
//   launch  back-to-back launches of an empty kernel
//   tensor  4 independent chains of mma.sync.m16n8k16 f16 -> f32 per warp, no memory traffic
//           (on sm_90 the datasheet peak needs wgmma; mma.sync reaches roughly two thirds of it)
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "hw_specs/probe.h"
#include "tilegraph/error.h"

namespace tessel {
namespace {

// ---- The driver API, opened at run time ----------------------------------------------------------

struct Driver {
  void* lib = nullptr;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemsetD32) memset_d32 = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;

  ~Driver() {
    if (lib) dlclose(lib);
  }
};

/// Opens libcuda and initialises it; UnsupportedError "no CUDA device" when that fails.
void open_driver(Driver& d) {
  d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d.lib) throw UnsupportedError("cuda", "", cat("no CUDA device: cannot load libcuda.so.1 (", dlerror(), ")"));
  bool missing = false;
  std::string missing_name;
  auto load = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(d.lib, name));
    if (!fn && !missing) missing = true, missing_name = name;
  };
  load(d.init, "cuInit");
  load(d.driver_get_version, "cuDriverGetVersion");
  load(d.device_get_count, "cuDeviceGetCount");
  load(d.device_get, "cuDeviceGet");
  load(d.device_get_name, "cuDeviceGetName");
  load(d.device_get_attribute, "cuDeviceGetAttribute");
  load(d.device_total_mem, "cuDeviceTotalMem_v2");
  load(d.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  load(d.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
  load(d.ctx_set_current, "cuCtxSetCurrent");
  load(d.ctx_synchronize, "cuCtxSynchronize");
  load(d.module_load_data, "cuModuleLoadData");
  load(d.module_unload, "cuModuleUnload");
  load(d.module_get_function, "cuModuleGetFunction");
  load(d.launch_kernel, "cuLaunchKernel");
  load(d.mem_alloc, "cuMemAlloc_v2");
  load(d.mem_free, "cuMemFree_v2");
  load(d.memset_d32, "cuMemsetD32_v2");
  load(d.event_create, "cuEventCreate");
  load(d.event_destroy, "cuEventDestroy_v2");
  load(d.event_record, "cuEventRecord");
  load(d.event_synchronize, "cuEventSynchronize");
  load(d.event_elapsed_time, "cuEventElapsedTime");
  load(d.get_error_name, "cuGetErrorName");
  if (missing)
    throw UnsupportedError("cuda", "", cat("no CUDA device: libcuda.so.1 lacks ", missing_name, " (driver too old)"));
  if (CUresult r = d.init(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.get_error_name(r, &name);
    throw UnsupportedError("cuda", "", cat("no CUDA device: cuInit failed with ", name ? name : "?"));
  }
}

class Gpu {
 public:
  Gpu(Driver& d, int ordinal) : d_(d), ordinal_(ordinal) {
    int count = 0;
    check(d_.device_get_count(&count), "cuDeviceGetCount");
    if (count == 0) throw UnsupportedError("cuda", "", "no CUDA device: the driver reports 0 devices");
    if (ordinal < 0 || ordinal >= count)
      throw UserError("cuda", "", cat("no CUDA device ", ordinal, ": the driver reports ", count, " device(s)"));
    device_count_ = count;
    check(d_.device_get(&dev_, ordinal), "cuDeviceGet");
    check(d_.primary_ctx_retain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    check(d_.ctx_set_current(ctx_), "cuCtxSetCurrent");
  }
  ~Gpu() {
    for (CUdeviceptr p : allocations_) d_.mem_free(p);
    if (module_) d_.module_unload(module_);
    if (ctx_) d_.primary_ctx_release(dev_);
  }

  void check(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    d_.get_error_name(r, &name);
    throw UserError(cat("cuda device ", ordinal_), "", cat(what, " failed: ", name ? name : "unknown error"));
  }

  int attribute(CUdevice_attribute a) const {
    int v = 0;
    check(d_.device_get_attribute(&v, a, dev_), "cuDeviceGetAttribute");
    return v;
  }
  std::string name() const {
    char buf[256] = {};
    check(d_.device_get_name(buf, sizeof(buf) - 1, dev_), "cuDeviceGetName");
    return buf;
  }
  int64_t total_memory() const {
    size_t bytes = 0;
    check(d_.device_total_mem(&bytes, dev_), "cuDeviceTotalMem");
    return static_cast<int64_t>(bytes);
  }
  int device_count() const { return device_count_; }

  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    check(d_.mem_alloc(&p, bytes), cat("cuMemAlloc of ", bytes, " bytes").c_str());
    allocations_.push_back(p);
    check(d_.memset_d32(p, 0x3c003c00u, bytes / 4), "cuMemsetD32");
    return p;
  }

  /// Loads the module (a cubin, or PTX for the driver to compile).
  CUresult load(const std::string& image) {
    if (module_) d_.module_unload(module_), module_ = nullptr;
    return d_.module_load_data(&module_, image.c_str());
  }

  CUfunction function(const char* name) const {
    CUfunction f = nullptr;
    check(d_.module_get_function(&f, module_, name), cat("cuModuleGetFunction(", name, ")").c_str());
    return f;
  }

  /// Best time in seconds of `repeats` launches, after one warm-up launch.
  double time_best(CUfunction f, unsigned blocks, unsigned threads, std::vector<void*> params, int repeats) {
    CUevent start = nullptr, stop = nullptr;
    check(d_.event_create(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d_.event_create(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    double best = 1e30;
    for (int r = 0; r <= repeats; ++r) {
      check(d_.event_record(start, nullptr), "cuEventRecord");
      check(d_.launch_kernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr, params.data(), nullptr), "cuLaunchKernel");
      check(d_.event_record(stop, nullptr), "cuEventRecord");
      check(d_.event_synchronize(stop), "cuEventSynchronize (the kernel failed)");
      float ms = 0;
      check(d_.event_elapsed_time(&ms, start, stop), "cuEventElapsedTime");
      if (r > 0) best = std::min(best, static_cast<double>(ms) / 1e3);
    }
    d_.event_destroy(start);
    d_.event_destroy(stop);
    return best;
  }

  /// Mean seconds per launch of `count` back-to-back launches of a kernel without parameters.
  double time_launches(CUfunction f, int count) {
    CUevent start = nullptr, stop = nullptr;
    check(d_.event_create(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d_.event_create(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d_.launch_kernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel");
    check(d_.event_record(start, nullptr), "cuEventRecord");
    for (int i = 0; i < count; ++i)
      check(d_.launch_kernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel");
    check(d_.event_record(stop, nullptr), "cuEventRecord");
    check(d_.event_synchronize(stop), "cuEventSynchronize (the kernel failed)");
    float ms = 0;
    check(d_.event_elapsed_time(&ms, start, stop), "cuEventElapsedTime");
    d_.event_destroy(start);
    d_.event_destroy(stop);
    return static_cast<double>(ms) / 1e3 / count;
  }

 private:
  Driver& d_;
  int ordinal_;
  int device_count_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

// ---- The kernels ----------------------------------------------------------------------------------

constexpr const char* kKernels = R"(
typedef unsigned long long u64;

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, u64 n) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__device__ __forceinline__ unsigned load_cg(const int4* p) {
  unsigned a, b, c, d;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p));
  return a ^ b ^ c ^ d;
}

extern "C" __global__ void l2_read_kernel(const int4* __restrict__ src, u64 n, int passes, unsigned* out) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  unsigned acc = 0;
  for (int p = 0; p < passes; ++p) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride)
      acc ^= load_cg(src + i) ^ load_cg(src + i + stride) ^ load_cg(src + i + 2 * stride) ^
             load_cg(src + i + 3 * stride);
    for (; i < n; i += stride) acc ^= load_cg(src + i);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

extern "C" __global__ void smem_read_kernel(int iters, unsigned* out) {
  __shared__ unsigned buf[16 * 256];
  for (int i = threadIdx.x; i < 16 * 256; i += blockDim.x) buf[i] = i * 2654435761u;
  __syncthreads();
  volatile unsigned* v = buf;
  unsigned acc = 0;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 16; ++k) acc ^= v[k * 256 + threadIdx.x];
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

extern "C" __global__ void fma_kernel(int iters, float m, float c, float* out) {
  float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6,
        a7 = a0 + 7;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
      a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
    }
  }
  const float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s == 1234.5f) out[0] = s;
}

extern "C" __global__ void mma_kernel(int iters, unsigned bits, float* out) {
#if __CUDA_ARCH__ >= 800  // mma.sync m16n8k16 needs sm_80
  const unsigned a0 = bits, a1 = bits ^ threadIdx.x, a2 = bits, a3 = bits, b0 = bits, b1 = bits;
  float c[4][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
          "{%8, %9}, {%0, %1, %2, %3};"
          : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 1234.5f) out[0] = s;
#endif
}
)";

struct Compiled {
  std::string image;
  bool cubin = false;
};

std::string nvrtc_compile(const std::string& arch_option, bool cubin, std::string& log) {
  nvrtcProgram prog = nullptr;
  if (nvrtcCreateProgram(&prog, kKernels, "tessel_probe.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return "";
  const char* options[] = {arch_option.c_str(), "--std=c++17"};
  const nvrtcResult result = nvrtcCompileProgram(prog, 2, options);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  log.assign(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  std::string image;
  if (result == NVRTC_SUCCESS) {
    size_t size = 0;
    if (cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size)) size = 0;
    image.assign(size, '\0');
    if (size && (cubin ? nvrtcGetCUBIN(prog, image.data()) : nvrtcGetPTX(prog, image.data())) != NVRTC_SUCCESS)
      image.clear();
  }
  nvrtcDestroyProgram(&prog);
  return image;
}

/// PTX ISA version that a driver of CUDA version `v` (e.g. 12040) accepts.
std::string ptx_isa_for_driver(int v) {
  const int major = v / 1000, minor = (v % 1000) / 10;
  if (major <= 11) return cat("7.", std::min(minor, 8));
  if (major == 12) return minor <= 5 ? cat("8.", minor) : minor == 6 ? "8.5" : cat("8.", minor - 1);
  return cat(major - 4, ".0");
}

/// Compiles the probe kernels for compute capability `cc` (e.g. 90) and loads them: a cubin when
/// NVRTC knows the architecture and the driver takes it, else PTX (lowered to the PTX ISA version
/// the driver accepts, when NVRTC is newer than the driver).
void compile_and_load(Gpu& gpu, const Driver& driver, int cc) {
  std::string log;
  std::string image = nvrtc_compile(cat("--gpu-architecture=sm_", cc), true, log);
  if (!image.empty() && gpu.load(image) == CUDA_SUCCESS) return;

  int num_archs = 0;
  nvrtcGetNumSupportedArchs(&num_archs);
  std::vector<int> archs(std::max(num_archs, 0));
  if (num_archs > 0) nvrtcGetSupportedArchs(archs.data());
  int ptx_cc = cc;
  if (!archs.empty() && std::find(archs.begin(), archs.end(), cc) == archs.end()) {
    ptx_cc = 0;
    for (int a : archs)
      if (a <= cc) ptx_cc = std::max(ptx_cc, a);
  }
  const std::string option = cat("--gpu-architecture=compute_", ptx_cc);
  image = nvrtc_compile(option, false, log);
  if (image.empty())
    throw UnsupportedError("cuda", "", cat("NVRTC cannot compile the probe kernels for compute_", ptx_cc, ": ", log,
                                           " (repro: save the kernels of hw_specs/probe_cuda.cpp as k.cu and run "
                                           "nvcc -c ", option, " k.cu)"));
  if (image.back() == '\0') image.pop_back();
  CUresult r = gpu.load(image);
  if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {  // NVRTC is newer than the driver
    int driver_version = 0;
    driver.driver_get_version(&driver_version);
    const size_t at = image.find(".version ");
    if (at != std::string::npos) {
      const size_t end = image.find('\n', at);
      image.replace(at, end - at, ".version " + ptx_isa_for_driver(driver_version));
      r = gpu.load(image);
    }
  }
  gpu.check(r, cat("cuModuleLoadData (PTX for compute_", ptx_cc, ")").c_str());
}

/// Measurements are written with 4 significant digits; more would only be noise.
double rounded(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(v))));
  return std::round(v * scale) / scale;
}

std::string spec_name(const std::string& device_name) {
  std::string out;
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "cuda-gpu" : out;
}

}  // namespace

std::string cuda_identity(int device) {
  try {
    Driver driver;
    open_driver(driver);
    Gpu gpu(driver, device);
    int version = 0;
    driver.driver_get_version(&version);
    return cat("cuda ", device, ": ", gpu.name(), ", sm_", gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
               gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), ", ", gpu.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
               " SMs, ", gpu.total_memory(), " bytes, ", gpu.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE), " kHz, driver ", version);
  } catch (const std::exception&) {
    return "";
  }
}

HwSpec probe_cuda_gpu(int device, const ProbeOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  Driver driver;
  open_driver(driver);
  Gpu gpu(driver, device);
  const std::string measured = probe_source_note();
  const bool quick = options.quick;

  // 1. Attributes.
  const int sms = gpu.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  const int cc_major = gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int cc_minor = gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  const int cc = cc_major * 10 + cc_minor;
  const int warp = gpu.attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  const int clock_khz = gpu.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  const int l2_bytes = gpu.attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  const int max_threads_per_sm = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  const int64_t memory_bytes = gpu.total_memory();
  const std::string name = gpu.name();

  HwSpec spec;
  spec.name = spec_name(name);
  spec.description = cat(name, ", compute capability ", cc_major, ".", cc_minor, " (probed)");
  spec.kind = "gpu";
  spec.source = cat(measured, "; other values from the CUDA driver's device attributes");
  LimitSpec& lim = spec.limits;
  lim.max_threads_per_block = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  lim.max_threads_per_sm = max_threads_per_sm;
  lim.max_blocks_per_sm = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  lim.registers_per_sm = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  lim.max_registers_per_thread = 255;  // PTX ISA limit on every architecture since sm_35
  lim.smem_per_block_bytes = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  lim.smem_per_sm_bytes = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  // Clusters of up to 8 blocks are CUDA's portable size: every launch on a device with cluster
  // launch may use it (larger ones need an opt-in per kernel and depend on the kernel's resources).
  constexpr int kPortableClusterBlocks = 8;
  lim.max_cluster_blocks = gpu.attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) ? kPortableClusterBlocks : 0;
  spec.target.backend = "cuda";
  spec.target.arch = cat("sm_", cc, cc_major >= 9 ? "a" : "");
  spec.target.triple = "nvptx64-nvidia-cuda";
  // The instruction features of this compute capability (PTX ISA: ldmatrix from sm_75; mma.sync
  // m16n8k16 for bf16, mma.sp with ordered metadata and cp.async from sm_80; the bulk tensor copies from sm_90; wgmma on sm_90a
  // only). This is the one place that maps a device's version to features; the compiler asks for
  // the features.
  if (cc >= 75) spec.target.gpu_features.push_back("ldmatrix");
  if (cc >= 80) {
    spec.target.gpu_features.push_back("mma_sync");
    spec.target.gpu_features.push_back("mma_sparse");
    spec.target.gpu_features.push_back("cp_async");
  }
  if (cc >= 90) spec.target.gpu_features.push_back("tma");
  if (cc == 90) spec.target.gpu_features.push_back("wgmma");
  spec.interconnect.devices = gpu.device_count();
  spec.interconnect.source = "device count from the CUDA driver; links are not probed";

  progress(cat("compiling probe kernels with NVRTC for sm_", cc));
  compile_and_load(gpu, driver, cc);
  CUdeviceptr sink = gpu.alloc(256);
  const unsigned blocks_full = static_cast<unsigned>(sms * std::max(1, max_threads_per_sm / 256));
  const int repeats = quick ? 3 : 5;

  progress("measuring kernel launch overhead");
  const double launch_s = gpu.time_launches(gpu.function("empty_kernel"), quick ? 200 : 1000);

  // 2. DRAM: copy half the buffer onto the other half.
  int64_t dram_total = quick ? (int64_t{256} << 20) : (int64_t{1} << 30);
  dram_total = std::min(dram_total, memory_bytes / 4);
  progress(cat("measuring DRAM bandwidth (copy over ", dram_total >> 20, " MiB)"));
  CUdeviceptr src = gpu.alloc(dram_total / 2), dst = gpu.alloc(dram_total / 2);
  unsigned long long n16 = static_cast<unsigned long long>(dram_total / 2 / 16);
  double s = gpu.time_best(gpu.function("copy_kernel"), blocks_full, 256, {&src, &dst, &n16}, repeats);
  const double dram_gbps = 2.0 * n16 * 16 / s / 1e9;

  // 3. L2: read a quarter of the L2 over and over.
  unsigned long long l2_n16 = static_cast<unsigned long long>(std::max(l2_bytes / 4, 1 << 16) / 16);
  int passes = static_cast<int>(std::max<int64_t>(1, (quick ? (int64_t{4} << 30) : (int64_t{16} << 30)) /
                                                          static_cast<int64_t>(l2_n16 * 16)));
  progress(cat("measuring L2 bandwidth (", (l2_n16 * 16) >> 10, " KiB read ", passes, " times)"));
  s = gpu.time_best(gpu.function("l2_read_kernel"), blocks_full, 256, {&src, &l2_n16, &passes, &sink},
                    repeats);
  const double l2_gbps = static_cast<double>(passes) * l2_n16 * 16 / s / 1e9;

  // 4. Shared memory: 16 KiB per block, 16 loads of 4 B per thread per iteration.
  int smem_iters = quick ? 1024 : 4096;
  const unsigned smem_blocks = static_cast<unsigned>(sms * 4);
  progress("measuring shared-memory bandwidth");
  s = gpu.time_best(gpu.function("smem_read_kernel"), smem_blocks, 256, {&smem_iters, &sink},
                    repeats);
  const double smem_gbps = static_cast<double>(smem_blocks) * 256 * smem_iters * 16 * 4 / s / 1e9;

  // 5. fp32 FMA: 8 chains x 4 unrolled steps per iteration.
  int fma_iters = quick ? 8192 : 32768;
  float m = 0.999999f, c = 1e-7f;
  progress("measuring fp32 FMA throughput");
  s = gpu.time_best(gpu.function("fma_kernel"), blocks_full, 256, {&fma_iters, &m, &c, &sink},
                    repeats);
  const double fp32_tflops = static_cast<double>(blocks_full) * 256 * fma_iters * 32 * 2 / s / 1e12;

  // 6. Tensor cores: mma.sync m16n8k16 needs sm_80 or newer.
  double tensor_tflops = 0;
  if (cc >= 80) {
    int mma_iters = quick ? 4096 : 16384;
    unsigned bits = 0x2c002c00u;  // two fp16 0.0625
    const unsigned mma_blocks = static_cast<unsigned>(sms * 4);
    progress("measuring fp16 tensor-core throughput (mma.sync m16n8k16)");
    s = gpu.time_best(gpu.function("mma_kernel"), mma_blocks, 256, {&mma_iters, &bits, &sink},
                      repeats);
    tensor_tflops = static_cast<double>(mma_blocks) * (256 / 32) * mma_iters * 4 * (2.0 * 16 * 8 * 16) / s / 1e12;
  }

  // 7. The spec.
  ComputeSpec& comp = spec.compute;
  comp.units = sms;
  comp.simd_width = warp;
  comp.clock_ghz = clock_khz / 1e6;
  comp.launch_overhead_us = rounded(launch_s * 1e6);
  comp.simt_peak_tflops[DType::f32] = rounded(fp32_tflops);
  if (tensor_tflops > 0) {
    comp.tensor_peak_tflops[DType::f16] = rounded(tensor_tflops);
    comp.tensor_core_shapes[DType::f16] = {MmaShape{16, 8, 16}};
  }
  comp.source = cat(measured, ": f32 = 8 independent FMA chains per thread",
                    tensor_tflops > 0 ? "; f16 tensor = 4 chains of mma.sync.m16n8k16 f32-accumulate per warp "
                                        "(a lower bound on sm_90, whose peak needs wgmma)"
                                      : "",
                    "; launch overhead = back-to-back empty-kernel launches; units, warp size and clock from the driver");

  MemoryLevel regs;
  regs.name = "registers";
  regs.scope = MemoryScope::sm;
  regs.capacity_bytes = lim.registers_per_sm * 4;
  regs.instances = sms;
  regs.bandwidth_gbps = rounded(fp32_tflops * 1e12 / 2 * 3 * 4 / 1e9);
  regs.transaction_bytes = 4;
  regs.software_managed = true;
  regs.source =
      "registers per SM from the driver; bandwidth estimate: 3 operands x 4 B per measured fp32 FMA";
  MemoryLevel smem;
  smem.name = "smem";
  smem.scope = MemoryScope::sm;
  smem.capacity_bytes = lim.smem_per_sm_bytes;
  smem.instances = sms;
  smem.bandwidth_gbps = rounded(smem_gbps);
  smem.transaction_bytes = 128;
  smem.banks = 32;  // 32 banks of 4 B on every NVIDIA GPU since Maxwell (not a driver attribute)
  smem.bank_width_bytes = 4;
  smem.software_managed = true;
  smem.source = cat(measured, ": conflict-free 32-bit loads, ", smem_blocks, " blocks of 256 threads");
  MemoryLevel l2;
  l2.name = "l2";
  l2.scope = MemoryScope::device;
  l2.capacity_bytes = l2_bytes;
  l2.instances = 1;
  l2.bandwidth_gbps = rounded(l2_gbps);
  l2.transaction_bytes = 32;  // L2 sector size
  l2.cache = CacheSpec{0, true};  // associativity is not a driver attribute
  l2.source = cat(measured, ": ld.global.cg reads of ", (l2_n16 * 16) >> 10, " KiB (1/4 of L2)");
  MemoryLevel dram;
  dram.name = "dram";
  dram.scope = MemoryScope::device;
  dram.capacity_bytes = memory_bytes;
  dram.instances = 1;
  dram.bandwidth_gbps = rounded(dram_gbps);
  dram.transaction_bytes = 32;
  dram.source = cat(measured, ": copy kernel over ", dram_total >> 20, " MiB; capacity from the driver");
  spec.memory_levels = {regs, smem, l2, dram};
  return spec;
}

}  // namespace tessel
