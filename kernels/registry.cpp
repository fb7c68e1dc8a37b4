// The list of built-in backends. Adding one: a class implementing Backend in its own folder, a
// factory declared here, and one line in backends().
#include "kernels/backend.h"

#include "tilegraph/error.h"

namespace tessel {

std::unique_ptr<Backend> make_cpu_backend();  // kernels/cpu/cpu_backend.h
std::unique_ptr<Backend> make_cuda_backend();  // kernels/cuda/cuda_backend.h

std::vector<std::unique_ptr<Backend>> backends() {
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(make_cpu_backend());
  out.push_back(make_cuda_backend());
  return out;
}

std::unique_ptr<Backend> find_backend(std::string_view name) {
  std::string known;
  for (auto& b : backends()) {
    if (b->name() == name) return std::move(b);
    known += (known.empty() ? "" : ", ") + std::string(b->name());
  }
  throw UserError("command line", "--device", cat("unknown device '", name, "' (backends: ", known.empty() ? "none" : known, ")"));
}

void Executable::bind_inputs(const std::vector<uint64_t>&) {
  TESSEL_ASSERT(false, "Executable::bind_inputs on an executable without device-resident buffers");
}

void Executable::enqueue() {
  TESSEL_ASSERT(false, "Executable::enqueue on an executable without device-resident buffers");
}

void Executable::run_on_queue(const std::vector<uint64_t>&, const std::vector<uint64_t>&, void*) {
  TESSEL_ASSERT(false, "Executable::run_on_queue on an executable without device-resident buffers");
}

void Executable::wait_queued() {}

}  // namespace tessel
