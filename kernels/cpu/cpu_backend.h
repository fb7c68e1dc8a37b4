// The CPU backend: LLVM IR for every fused group of a Schedule, JIT-compiled with ORC for the host
// (kernels/cpu/README.md). The factory is all the rest of Tessel sees; registry.cpp lists it.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace tessel {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace tessel
