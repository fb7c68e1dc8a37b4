// Compiling generated CUDA C++ with NVRTC (linked; needs no GPU) into a cubin for the spec's
// target, through the on-disk cache (kernels/kernel_cache.h). When NVRTC rejects generated code -- always
// a Tessel bug -- the source and NVRTC's log are saved and the InternalError names them with an
// nvcc command that reproduces the failure.
#pragma once

#include <string>
#include <vector>

#include "hw_specs/hw_spec.h"
#include "kernels/backend.h"

namespace tessel::cuda {

/// "sm_90a" from spec.target.arch; a UserError when the spec names no CUDA architecture.
std::string cuda_arch(const HwSpec& spec);

/// The NVRTC options every kernel is compiled with, for `arch` ("sm_90a").
std::vector<std::string> nvrtc_options(const std::string& arch);

/// "13.0": the linked NVRTC's version.
std::string nvrtc_version();

struct NvrtcResult {
  bool ok = false;
  std::string cubin;  // when ok: the cubin, or the PTX text when asked for PTX
  std::string log;    // NVRTC's messages (warnings too)
};

/// Compiles `source` (file name `name`.cu in messages) with `options`; no cache, no throwing.
/// `ptx`: return the PTX (options then name a virtual architecture, compute_XX) instead of a cubin.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, const std::vector<std::string>& options,
                          bool ptx = false);

/// The PTX of `source` for `arch`'s virtual architecture ("sm_90a" -> compute_90a), with the
/// options kernels are compiled with otherwise (`tessel compile --emit ptx`). A rejected kernel
/// raises an InternalError with NVRTC's log (a Tessel bug, as for cubins).
std::string compile_ptx(const std::string& source, const std::string& name, const std::string& arch);

struct CompiledKernel {
  std::string cubin;
  bool cache_hit = false;
};

/// Compiles kernel `name` for `arch`, looking in the cache first (options.use_cache) and storing
/// what it compiles. A rejected kernel is saved under options.reject_dir (default
/// ./tessel-rejected) and raises an InternalError with a repro command.
CompiledKernel compile_kernel(const std::string& source, const std::string& name, const std::string& arch,
                              const CompileOptions& options);

}  // namespace tessel::cuda
