// NVRTC compilation with the cubin cache and rejected-source capture (see nvrtc_compiler.h).
#include "kernels/cuda/nvrtc_compiler.h"

#include <nvrtc.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "kernels/kernel_cache.h"
#include "tilegraph/error.h"

namespace tessel::cuda {

std::string cuda_arch(const HwSpec& spec) {
  const std::string& arch = spec.target.arch;
  if (spec.target.backend != "cuda" || arch.rfind("sm_", 0) != 0)
    throw UserError(spec.file, "/target", cat("spec '", spec.name, "' names no CUDA architecture (target backend '",
                                              spec.target.backend, "', arch '", arch, "'); expected e.g. \"sm_90a\""));
  return arch;
}

std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "--std=c++17", "-default-device"};
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return cat(major, ".", minor);
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, const std::vector<std::string>& options, bool ptx) {
  NvrtcResult out;
  nvrtcProgram prog = nullptr;
  const std::string file = name + ".cu";
  if (nvrtcCreateProgram(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  const nvrtcResult result = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    out.log.assign(log_size, '\0');
    nvrtcGetProgramLog(prog, out.log.data());
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  }
  if (result == NVRTC_SUCCESS && ptx) {
    size_t size = 0;
    if (nvrtcGetPTXSize(prog, &size) == NVRTC_SUCCESS && size > 1) {
      out.cubin.assign(size, '\0');
      out.ok = nvrtcGetPTX(prog, out.cubin.data()) == NVRTC_SUCCESS;
      out.cubin.pop_back();  // the terminating NUL
    }
    if (!out.ok) out.log += cat(out.log.empty() ? "" : "\n", "NVRTC produced no PTX");
  } else if (result == NVRTC_SUCCESS) {
    size_t size = 0;
    if (nvrtcGetCUBINSize(prog, &size) == NVRTC_SUCCESS && size > 0) {
      out.cubin.assign(size, '\0');
      out.ok = nvrtcGetCUBIN(prog, out.cubin.data()) == NVRTC_SUCCESS;
    }
    if (!out.ok) out.log += cat(out.log.empty() ? "" : "\n", "NVRTC produced no cubin (is the architecture a real one, e.g. sm_90a?)");
  } else if (out.log.empty()) {
    out.log = nvrtcGetErrorString(result);
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

std::string compile_ptx(const std::string& source, const std::string& name, const std::string& arch) {
  TESSEL_ASSERT(arch.rfind("sm_", 0) == 0, "not a real CUDA architecture: ", arch);
  std::vector<std::string> options = nvrtc_options(arch);
  options.front() = "--gpu-architecture=compute_" + arch.substr(3);  // virtual: NVRTC then writes PTX
  const NvrtcResult r = nvrtc_compile(source, name, options, true);
  if (!r.ok) throw InternalError(cat("NVRTC ", nvrtc_version(), " wrote no PTX for generated kernel ", name, " (a Tessel bug):\n", r.log));
  return r.cubin;
}

CompiledKernel compile_kernel(const std::string& source, const std::string& name, const std::string& arch,
                              const CompileOptions& options) {
  const std::vector<std::string> opts = nvrtc_options(arch);
  std::string opts_text;
  for (const std::string& o : opts) opts_text += o + " ";
  KernelCache cache(options.cache_dir, "cubin");
  const std::string key = KernelCache::key({source, arch, nvrtc_version(), opts_text});
  if (options.use_cache)
    if (std::optional<std::string> hit = cache.load(key)) return {std::move(*hit), true};

  NvrtcResult r = nvrtc_compile(source, name, opts);
  if (!r.ok) {
    const std::string dir = options.reject_dir.empty() ? "tessel-rejected" : options.reject_dir;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string src_path = dir + "/" + name + ".cu";
    std::ofstream(src_path) << source;
    std::ofstream(dir + "/" + name + ".log") << r.log << "\n";
    const std::string sm = arch.substr(3);  // "90a"
    throw InternalError(cat("NVRTC ", nvrtc_version(), " rejected generated kernel ", name, " (a Tessel bug):\n", r.log,
                            "\nsaved the source as ", src_path, "; repro: nvcc -cubin -std=c++17 -gencode=arch=compute_",
                            sm, ",code=sm_", sm, " ", src_path));
  }
  if (options.use_cache && !cache.store(key, r.cubin)) {
    // A read-only or full cache directory degrades to compiling every time, said once per process.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      std::cerr << "warning: cannot write the kernel cache in " << cache.dir()
                << " (read-only or full?); compiling without caching\n";
  }
  return {std::move(r.cubin), false};
}

}  // namespace tessel::cuda
