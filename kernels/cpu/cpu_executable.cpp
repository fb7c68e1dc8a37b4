// The CPU runtime (cpu_executable.h).
#include "kernels/cpu/cpu_executable.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include <sys/mman.h>

#include "kernels/cpu/emit_group.h"
#include "kernels/packed_tensor.h"
#include "tilegraph/error.h"
#include "tilegraph/graph_inputs.h"

namespace tessel::cpu {

void CpuExecutable::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

namespace {

// The kernel's transparent huge page size (Linux: /sys/kernel/mm/transparent_hugepage), or 0 where
// there is none to ask for.
int64_t huge_page_bytes() {
  static const int64_t bytes = [] {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    int64_t b = 0;
    return in >> b && b > 0 && (b & (b - 1)) == 0 ? b : int64_t{0};
  }();
  return bytes;
}

}  // namespace

CpuExecutable::Buffer CpuExecutable::allocate(int64_t bytes) const {
  int64_t alignment = std::max<int64_t>(buffers_.alignment, static_cast<int64_t>(alignof(std::max_align_t)));
  // A buffer of at least a huge page sits in huge pages where the kernel gives them on request: a
  // weight's rows read a leading dimension apart (a GEMM's column blocks walked down K) touch a
  // new 4 KB page per row.
  const int64_t huge = huge_page_bytes();
  const bool in_huge_pages = huge > 0 && bytes >= huge;
  if (in_huge_pages) alignment = std::max(alignment, huge);
  const int64_t size = std::max<int64_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(static_cast<size_t>(alignment), static_cast<size_t>(size)));
  if (!p) throw UserError("", "", cat("out of memory: cannot allocate ", bytes, " bytes for the CPU runtime"));
  if (in_huge_pages) madvise(p, static_cast<size_t>(size), MADV_HUGEPAGE);  // advice: refused, it costs nothing
  return Buffer(p);
}

CpuExecutable::CpuExecutable(const OpGraph& graph, BufferPlan buffers, std::vector<CompiledGroup> groups,
                             std::unique_ptr<HostJit> jit, int threads, CompileStats stats,
                             int64_t last_level_cache_bytes)
    : graph_(graph), buffers_(std::move(buffers)), groups_(std::move(groups)), jit_(std::move(jit)),
      pool_(std::make_unique<ThreadPool>(threads)), stats_(stats), last_level_cache_bytes_(last_level_cache_bytes) {
  tensor_ptrs_.assign(graph_.num_tensors(), nullptr);
  arena_ = allocate(buffers_.arena_bytes);
  for (const BufferSlot& s : buffers_.slots) tensor_ptrs_[s.tensor] = arena_.get() + s.offset;
  auto own = [&](TensorId t) {
    const TensorType& type = graph_.tensor(t).type;
    const int64_t bytes = type.num_elements() * dtype_bytes(type.dtype);
    owned_.push_back(allocate(bytes));
    owned_bytes_ += bytes;
    tensor_ptrs_[t] = owned_.back().get();
    return bytes;
  };
  for (TensorId t : graph_.inputs()) own(t);
  for (TensorId t : graph_.weights()) {
    const std::vector<uint8_t> packed = pack_tensor(graph_.weight_values(t));
    const int64_t bytes = own(t);
    std::memcpy(tensor_ptrs_[t], packed.data(), static_cast<size_t>(bytes));
  }
  int64_t scratch_bytes = 0;
  for (const CompiledGroup& g : groups_) scratch_bytes = std::max(scratch_bytes, g.plan.scratch_bytes);
  for (int w = 0; w < pool_->size(); ++w) scratch_.push_back(allocate(scratch_bytes));
}

CpuExecutable::~CpuExecutable() = default;

int64_t CpuExecutable::peak_memory_bytes() const { return buffers_.arena_bytes + owned_bytes_; }

void CpuExecutable::upload(const std::vector<HostTensor>& inputs) {
  check_graph_inputs(graph_, inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<uint8_t> packed = pack_tensor(inputs[i]);
    std::memcpy(tensor_ptrs_[graph_.inputs()[i]], packed.data(), packed.size());
  }
}

void CpuExecutable::execute_group(const CompiledGroup& g) {
  int64_t status[kStatusWords] = {0, 0, 0, 0};
  pool_->parallel_for(g.plan.num_tasks, [&](int64_t begin, int64_t end, int worker) {
    g.kernel(tensor_ptrs_.data(), begin, end, scratch_[worker].get(), g.plan.boxes.data(), status);
  });
  if (status[0] != 0) {
    const TeNode& node = graph_.node(g.plan.nodes.at(static_cast<size_t>(status[3])));
    throw UserError("", cat("node '", node.name(), "'"),
                    cat("gather index ", status[1], " is out of range for a dimension of size ", status[2]));
  }
}

void CpuExecutable::execute() {
  for (const CompiledGroup& g : groups_) execute_group(g);
}

// Poisons the outputs, so an element no kernel writes cannot pass a comparison: NaN for floats, a
// byte pattern for integers.
void CpuExecutable::poison_outputs() {
  for (TensorId t : graph_.outputs()) {
    if (!buffers_.find(t)) continue;  // an input or weight: not written by any kernel
    const TensorType& type = graph_.tensor(t).type;
    std::memset(tensor_ptrs_[t], is_float(type.dtype) ? 0xff : 0xa5, static_cast<size_t>(type.num_elements() * dtype_bytes(type.dtype)));
  }
}

std::vector<HostTensor> CpuExecutable::run(const std::vector<HostTensor>& inputs) {
  upload(inputs);
  poison_outputs();
  execute();
  std::vector<HostTensor> out;
  for (TensorId t : graph_.outputs()) out.push_back(unpack_tensor(graph_.tensor(t).type, tensor_ptrs_[t]));
  return out;
}

int64_t CpuExecutable::in_place_alignment() const {
  return std::max<int64_t>(buffers_.alignment, static_cast<int64_t>(alignof(std::max_align_t)));
}

bool CpuExecutable::run_in_place(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  if (inputs.size() != graph_.inputs().size() || outputs.size() != graph_.outputs().size())
    throw UserError("", "", cat("the model has ", graph_.inputs().size(), " inputs and ", graph_.outputs().size(), " outputs, ",
                                inputs.size(), " and ", outputs.size(), " buffers were given"));
  const int64_t align = in_place_alignment();
  auto aligned = [&](const void* p) { return p != nullptr && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) == 0; };
  auto bytes_of = [&](TensorId t) {
    const TensorType& type = graph_.tensor(t).type;
    return static_cast<size_t>(type.num_elements() * dtype_bytes(type.dtype));
  };
  // The kernels find every tensor through tensor_ptrs_: point inputs and outputs at the caller's
  // buffers for this run, and put the executable's own back after it, whatever happens.
  const std::vector<uint8_t*> own = tensor_ptrs_;
  struct Restore {
    std::vector<uint8_t*>& ptrs;
    const std::vector<uint8_t*>& saved;
    ~Restore() { ptrs = saved; }
  } restore{tensor_ptrs_, own};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorId t = graph_.inputs()[i];
    if (aligned(inputs[i])) tensor_ptrs_[t] = static_cast<uint8_t*>(const_cast<void*>(inputs[i]));  // only read
    else if (bytes_of(t) > 0) std::memcpy(tensor_ptrs_[t], inputs[i], bytes_of(t));
  }
  // An output a kernel writes goes straight to the caller's buffer (once per tensor); an output that
  // is an input or a weight, or a second output of one tensor, or an unaligned buffer, is copied.
  std::vector<bool> direct(outputs.size(), false);
  std::set<TensorId> redirected;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const TensorId t = graph_.outputs()[o];
    if (!buffers_.find(t) || !aligned(outputs[o]) || redirected.count(t)) continue;
    tensor_ptrs_[t] = static_cast<uint8_t*>(outputs[o]);
    redirected.insert(t);
    direct[o] = true;
  }
  poison_outputs();
  execute();
  for (size_t o = 0; o < outputs.size(); ++o)
    if (!direct[o] && bytes_of(graph_.outputs()[o]) > 0)
      std::memcpy(outputs[o], tensor_ptrs_[graph_.outputs()[o]], bytes_of(graph_.outputs()[o]));
  return true;
}

std::vector<double> CpuExecutable::time(const std::vector<HostTensor>& inputs, const TimingOptions& options) {
  upload(inputs);
  for (int i = 0; i < options.warmup; ++i) execute();
  // A cold cache: twice the last-level cache overwritten before each timed run (outside it).
  std::vector<uint8_t> flush(options.cold_cache ? static_cast<size_t>(2 * last_level_cache_bytes_) : 0);
  std::vector<double> seconds;
  for (int i = 0; i < options.repeats; ++i) {
    if (!flush.empty()) {
      std::memset(flush.data(), i & 0xff, flush.size());
      asm volatile("" : : "r"(flush.data()) : "memory");  // the stores must happen
    }
    const auto start = std::chrono::steady_clock::now();
    execute();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

std::vector<double> CpuExecutable::profile(const std::vector<HostTensor>& inputs, int repeats) {
  upload(inputs);
  execute();  // warm
  std::vector<std::vector<double>> seconds(groups_.size());
  for (int r = 0; r < repeats; ++r)
    for (size_t g = 0; g < groups_.size(); ++g) {
      const auto start = std::chrono::steady_clock::now();
      execute_group(groups_[g]);
      seconds[g].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  std::vector<double> out;
  for (std::vector<double>& s : seconds) {
    std::sort(s.begin(), s.end());
    out.push_back(s.empty() ? 0 : s[s.size() / 2]);
  }
  return out;
}

}  // namespace tessel::cpu
