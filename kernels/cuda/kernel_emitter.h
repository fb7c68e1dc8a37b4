// CUDA C++ for one fused group (DESIGN.md, "emit"), of the kernel family the schedule records for
// it (kernel_families.h): the streamed attention kernel (attention_plan.h), the tensor-core kernel
// for f16/bf16 contractions with an elementwise epilogue and channels-last convolutions
// (contraction_plan.h, mma.sync or wgmma), the row kernel for groups that reduce and normalize
// rows (row_plan.h), the tiled transpose for a permuting copy (transpose_plan.h), the vector
// kernel for elementwise groups (vector_plan.h), or the generic
// kernel built from the group's GroupPlan (group_plan.h). The emitter chooses nothing. The source is self-contained: the device
// library (kernels/cuda/device/*.cuh, embedded into the binary) is pasted in front of the kernel,
// so NVRTC needs no include path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/contraction_plan.h"
#include "kernels/cuda/group_plan.h"
#include "kernels/cuda/row_plan.h"
#include "kernels/cuda/kernel_families.h"
#include "kernels/cuda/transpose_plan.h"
#include "kernels/cuda/vector_plan.h"
#include "policy/schedule.h"

namespace tessel::cuda {

struct GeneratedKernel {
  std::string name;       // the __global__ function (extern "C"): "tessel_" + a hash of `canonical`
  std::string source;     // the whole translation unit, with comments naming the group's nodes
  std::string canonical;  // the source without comments: equal for identical groups (compile once)
  GroupPlan plan;      // grid, block, shared memory, parameters (inputs, outputs, scratch, status)
  std::string path;    // "flash", "wgmma", "mma", "row", "transpose", "vector" or "generic": which template produced it
  std::optional<AttentionPlan> attention;      // the streamed attention path's plan
  std::string attention_reason;                // a streamed group on another path: why
  std::optional<ContractionPlan> contraction;  // the mma path's plan
  std::string mma_reason;                      // row and generic paths: why the mma path was not taken
  std::optional<RowPlan> rows;                 // the row path's plan
  std::string row_reason;                      // generic path: why the row path was not taken
  std::optional<VectorPlan> vector;            // the vector path's plan (elementwise groups)
  std::string vector_reason;                   // generic path: why the vector path was not taken
  std::optional<TransposePlan> transpose;      // the tiled transpose's plan (a permuting copy)
  std::string transpose_reason;                // why the transpose path was not taken
};

/// Generates the kernel of group `index` of `schedule`, of the kernel family the group records
/// (KernelChoice, chosen by CudaKernelFamilies while scheduling): an InternalError when it records
/// none (record_missing_kernel_families first), a UserError when the recorded family cannot emit the group
/// or its recorded parameters differ from the ones the family derives from the group's tiles.
GeneratedKernel emit_group_kernel(const OpGraph& graph, const Schedule& schedule, int index, const HwSpec& spec);

/// The device library: every kernels/cuda/device/*.cuh, in dependency order, as one string.
const std::string& device_library_source();

}  // namespace tessel::cuda
