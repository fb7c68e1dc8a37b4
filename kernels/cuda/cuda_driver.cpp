// Opening the CUDA driver at run time (see cuda_driver.h).
#include "kernels/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

struct Opened {
  std::unique_ptr<CudaDriver> driver;
  std::optional<std::string> why_not;  // set when opening failed
};

Opened open_driver() {
  Opened out;
  auto d = std::make_unique<CudaDriver>();
  d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d->lib) {
    out.why_not = cat("no CUDA device: cannot load libcuda.so.1 (", dlerror(), ")");
    return out;
  }
  std::string missing;
#define TESSEL_CUDA_DRIVER_LOAD(fn, sym)                                               \
  d->fn = reinterpret_cast<decltype(d->fn)>(dlsym(d->lib, sym));                       \
  if (!d->fn && missing.empty()) missing = sym;
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_CUDA_DRIVER_LOAD)
#undef TESSEL_CUDA_DRIVER_LOAD
  if (!missing.empty()) {
    out.why_not = cat("no CUDA device: libcuda.so.1 lacks ", missing, " (driver too old)");
    return out;
  }
  if (CUresult r = d->cuInit(0); r != CUDA_SUCCESS) {
    out.why_not = cat("no CUDA device: cuInit failed with ", d->error_name(r));
    return out;
  }
  int count = 0;
  if (CUresult r = d->cuDeviceGetCount(&count); r != CUDA_SUCCESS || count == 0) {
    out.why_not = r != CUDA_SUCCESS ? cat("no CUDA device: cuDeviceGetCount failed with ", d->error_name(r))
                                    : std::string("no CUDA device: the driver reports 0 devices");
    return out;
  }
  out.driver = std::move(d);
  return out;
}

Opened& opened() {
  static Opened o = open_driver();
  return o;
}

}  // namespace

CudaDriver& CudaDriver::get() {
  Opened& o = opened();
  if (!o.driver) throw UnsupportedError("cuda", "", *o.why_not);
  return *o.driver;
}

std::optional<std::string> CudaDriver::unavailable() { return opened().why_not; }

std::string CudaDriver::error_name(CUresult r) const {
  const char* name = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  return name ? name : cat("CUresult ", static_cast<int>(r));
}

void CudaDriver::check(CUresult r, const char* what) const {
  if (r == CUDA_SUCCESS) return;
  const std::string msg = cat(what, " failed: ", error_name(r));
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      throw UserError("cuda", "", cat(msg, " (the model does not fit the device's memory)"));
    case CUDA_ERROR_NO_DEVICE: case CUDA_ERROR_INVALID_DEVICE: case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED: case CUDA_ERROR_NO_BINARY_FOR_GPU: case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      throw UserError("cuda", "", cat(msg, " (compiled for another GPU? check --hw)"));
    default:
      throw InternalError(msg);
  }
}

}  // namespace tessel::cuda
