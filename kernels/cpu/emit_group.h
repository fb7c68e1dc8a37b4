// The CPU kernel of one fused group, in LLVM IR (DESIGN.md, "Code generation"; kernels/cpu/README.md).
//
// One function per group, with the ABI the runtime (cpu_executable.cpp) calls:
//
//   void tessel_group_<g>(uint8_t** tensors,      // every tensor's buffer, by TensorId
//                         int64_t task_begin, int64_t task_end,
//                         uint8_t* scratch,       // the calling thread's scratch buffer
//                         const int64_t* boxes,   // CpuGroupPlan::boxes
//                         int64_t* status)        // status[0] != 0: a gather index was out of range
//
// For every task in [task_begin, task_end) it evaluates the group's nodes in order over their boxes
// (group_plan.h). Internal to kernels/cpu/.
#pragma once

#include <cstdint>
#include <string>

#include "hw_specs/hw_spec.h"
#include "kernels/cpu/group_plan.h"

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace tessel::cpu {

/// What the emitter takes from the hardware spec -- and nothing else: vector widths, register
/// blocking and loop hints are all derived from these.
struct CodegenParams {
  int64_t vector_bytes = 0;      // one SIMD register: compute.simd_width fp32 lanes
  int64_t vector_registers = 0;  // SIMD registers per core: the register level's capacity / vector_bytes
  int64_t l1_bytes = 0;          // the smallest private per-core cache (cpu_loops.h: first_cache_bytes)
  int64_t bound_rows = 0;        // cpu_loops.h: compute_bound_rows
  /// The largest packed operand panel, in bytes: half the largest private per-core cache (0: the
  /// spec has none, so nothing is packed).
  int64_t pack_bytes = 0;
  /// The largest row-reuse buffer per thread, in bytes (row_reuse.h): half the largest private
  /// per-core cache, so that the stored values and the task's inputs are still cached when the
  /// reader loads them (0: the spec has none, so values are recomputed).
  int64_t reuse_bytes = 0;
  /// A group whose memory traffic reaches this many bytes stores its outputs non-temporally
  /// (streaming_stores.h): the most any cache level of the spec holds, capacity x instances (0:
  /// the spec has no cache, nothing streams).
  int64_t streaming_bytes = 0;
  /// Every tensor buffer the kernel is given starts at a multiple of this (the runtime allocates
  /// with the buffer plan's alignment, arena_alignment(spec); the manifest states it).
  int64_t tensor_alignment = 1;
  /// The cache line: the largest transaction size of the spec's cache levels (0: no cache, so
  /// nothing is prefetched; see KernelEmitter::plan_prefetches).
  int64_t line_bytes = 0;
};

/// Reads CodegenParams from a CPU spec; UserError naming the field when the spec lacks one.
CodegenParams codegen_params(const HwSpec& spec);

/// "tessel_group_<g>".
std::string kernel_name(int group);

/// Status words the kernel writes (status[kStatusWords]).
inline constexpr int kStatusWords = 4;  // flag, offending index, dimension size, node position

/// Emits the kernel of `plan` into `module` and returns it (not yet verified).
llvm::Function* emit_group_kernel(const OpGraph& graph, const CpuGroupPlan& plan, const CodegenParams& params,
                                  llvm::Module& module);

}  // namespace tessel::cpu
