// The CUDA driver API, opened at run time with dlopen("libcuda.so.1") (as hw_specs/probe_cuda.cpp
// does), so Tessel builds, links and runs without a GPU or a driver; cuda.h supplies types only.
// Private to kernels/cuda/ (other folders talk to the Backend interface).
//
// Every call goes through check(): a failure raises an error naming the call and the driver's
// error name -- UnsupportedError when there is no usable device, UserError for exhausted memory,
// InternalError for anything a generated kernel or this runtime caused (an illegal address, a
// bad launch).
#pragma once

#include <cuda.h>

#include <optional>
#include <string>

namespace tessel::cuda {

struct CudaDriver {
#define TESSEL_CUDA_DRIVER_FUNCTIONS(X)                                                           \
  X(cuInit, "cuInit") X(cuDriverGetVersion, "cuDriverGetVersion") X(cuDeviceGetCount, "cuDeviceGetCount") \
  X(cuDeviceGet, "cuDeviceGet") X(cuDeviceGetName, "cuDeviceGetName")                              \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")                                                   \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                                           \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") X(cuCtxSetCurrent, "cuCtxSetCurrent") \
  X(cuModuleLoadData, "cuModuleLoadData") X(cuModuleUnload, "cuModuleUnload")                       \
  X(cuModuleGetFunction, "cuModuleGetFunction") X(cuFuncSetAttribute, "cuFuncSetAttribute")         \
  X(cuLaunchKernel, "cuLaunchKernel") X(cuMemAlloc, "cuMemAlloc_v2") X(cuMemFree, "cuMemFree_v2")   \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2") X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")         \
  X(cuMemsetD8Async, "cuMemsetD8Async") X(cuStreamCreate, "cuStreamCreate")                         \
  X(cuStreamDestroy, "cuStreamDestroy_v2") X(cuStreamSynchronize, "cuStreamSynchronize")            \
  X(cuEventCreate, "cuEventCreate") X(cuEventDestroy, "cuEventDestroy_v2") X(cuEventRecord, "cuEventRecord") \
  X(cuEventSynchronize, "cuEventSynchronize") X(cuEventElapsedTime, "cuEventElapsedTime_v2")        \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2") X(cuStreamEndCapture, "cuStreamEndCapture")    \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags") X(cuGraphLaunch, "cuGraphLaunch")            \
  X(cuGraphExecDestroy, "cuGraphExecDestroy") X(cuGraphDestroy, "cuGraphDestroy")                   \
  X(cuGetErrorName, "cuGetErrorName") X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")          \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2") X(cuStreamWaitEvent, "cuStreamWaitEvent")          \
  X(cuEventQuery, "cuEventQuery") X(cuStreamIsCapturing, "cuStreamIsCapturing")                     \
  X(cuMemAllocHost, "cuMemAllocHost_v2") X(cuMemFreeHost, "cuMemFreeHost")                         \
  X(cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters")
#define TESSEL_CUDA_DRIVER_MEMBER(fn, sym) decltype(&::fn) fn = nullptr;
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_CUDA_DRIVER_MEMBER)
#undef TESSEL_CUDA_DRIVER_MEMBER

  void* lib = nullptr;

  /// The process-wide driver, opened and initialised on first use; UnsupportedError ("no CUDA
  /// device: ...") when libcuda is missing, too old, or cuInit fails.
  static CudaDriver& get();
  /// Why get() would fail, or nullopt when a device is usable (cached after the first call).
  static std::optional<std::string> unavailable();

  /// Raises the error described in the file comment when `r` is not CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;
  std::string error_name(CUresult r) const;
};

}  // namespace tessel::cuda
