// The CUDA backend (kernels/cuda/README.md): one CUDA C++ kernel per fused group of a Schedule,
// compiled with NVRTC for the spec's architecture, cached on disk, loaded and launched through the
// driver API. Everything else talks to it through the Backend interface (kernels/backend.h).
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace tessel {

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace tessel
