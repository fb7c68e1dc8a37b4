// The CPU runtime: a compiled model's buffers and kernels, run group after group, each group's
// tasks spread over a thread pool (thread_pool.h). Internal to kernels/cpu/ (no LLVM types).
//
// Buffers follow the buffer plan (kernels/buffer_plan.h): graph inputs and weights have their own
// buffers (weights packed once, at construction), every tensor that leaves its group has a slot in
// one arena, and each worker thread owns a scratch buffer for the in-group intermediates of the
// task it runs (group_plan.h). Graph outputs are poisoned before every run.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/group_plan.h"
#include "kernels/cpu/llvm_toolchain.h"
#include "kernels/cpu/thread_pool.h"

namespace tessel::cpu {

/// The kernel ABI (emit_group.h).
using KernelFn = void (*)(uint8_t** tensors, int64_t task_begin, int64_t task_end, uint8_t* scratch,
                          const int64_t* boxes, int64_t* status);

struct CompiledGroup {
  CpuGroupPlan plan;
  KernelFn kernel = nullptr;
};

class CpuExecutable : public Executable {
 public:
  CpuExecutable(const OpGraph& graph, BufferPlan buffers, std::vector<CompiledGroup> groups, std::unique_ptr<HostJit> jit,
                int threads, CompileStats stats, int64_t last_level_cache_bytes);
  ~CpuExecutable() override;

  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) override;
  std::vector<double> time(const std::vector<HostTensor>& inputs, const TimingOptions& options) override;
  std::vector<double> profile(const std::vector<HostTensor>& inputs, int repeats) override;
  bool run_in_place(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) override;
  int64_t in_place_alignment() const override;
  const CompileStats& compile_stats() const override { return stats_; }
  int64_t peak_memory_bytes() const override;
  int launches_per_run() const override { return static_cast<int>(groups_.size()); }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t, AlignedFree>;
  Buffer allocate(int64_t bytes) const;

  void upload(const std::vector<HostTensor>& inputs);
  void poison_outputs();
  void execute();
  void execute_group(const CompiledGroup& g);  // one group: its tasks on the pool, then its status

  OpGraph graph_;
  BufferPlan buffers_;
  std::vector<CompiledGroup> groups_;
  std::unique_ptr<HostJit> jit_;  // owns the kernels' code
  std::unique_ptr<ThreadPool> pool_;
  CompileStats stats_;
  int64_t last_level_cache_bytes_ = 0;  // the spec's; what TimingOptions::cold_cache overwrites
  Buffer arena_;
  std::vector<Buffer> owned_;        // inputs and weights
  std::vector<Buffer> scratch_;      // one per worker
  std::vector<uint8_t*> tensor_ptrs_;  // by TensorId (null for in-group intermediates)
  int64_t owned_bytes_ = 0;
};

}  // namespace tessel::cpu
