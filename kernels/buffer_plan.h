// Buffer planning for a compiled model: every tensor a compiled Schedule keeps in device memory
// (or, on a CPU, main memory) gets a place, shared by the CUDA and CPU runtimes.
//
// Graph inputs and weights get their own buffers (uploaded once, alive for the whole run). Every
// other tensor that crosses a group boundary (a graph output, or read by a later group) lives in
// one arena; intermediates that stay inside a group (edge levels: registers, shared memory, small
// per-thread buffers) get no place here. Arena slots are assigned greedily by first fit in order
// of size, largest first, over the tensors' lifetimes in group order (from the producing group to
// the last reading group; graph outputs live to the end), so slots whose lifetimes do not overlap
// share memory. `arena_bytes` is the peak that plan needs.
#pragma once

#include <cstdint>
#include <vector>

#include "hw_specs/hw_spec.h"
#include "policy/schedule.h"

namespace tessel {

struct BufferSlot {
  TensorId tensor = -1;
  int64_t offset = 0;      // bytes into the arena (a multiple of the plan's alignment)
  int64_t bytes = 0;       // element count x element size of the tensor's dtype
  int first_group = 0;     // producing group
  int last_group = 0;      // last group reading it (the number of groups for a graph output)
};

struct BufferPlan {
  std::vector<BufferSlot> slots;  // arena tensors, by tensor id
  int64_t arena_bytes = 0;        // the arena's size: the plan's peak
  int64_t unshared_bytes = 0;     // what the slots would need without sharing (for reports)
  int64_t alignment = 0;
  /// The slot of tensor t, or nullptr when t is not in the arena (a graph input, a weight, or an
  /// intermediate that stays inside its group).
  const BufferSlot* find(TensorId t) const;
};

/// Plans the arena of `schedule` on `graph`; offsets are multiples of `alignment` (a power of
/// two; the caller passes the spec's device transaction size or larger).
BufferPlan plan_buffers(const OpGraph& graph, const Schedule& schedule, int64_t alignment);

/// Alignment of arena slots for `spec`: the widest transaction of any of its memory levels (a cache
/// line, a DRAM sector), at least `minimum` bytes, rounded up to a power of two.
int64_t arena_alignment(const HwSpec& spec, int64_t minimum = 1);

}  // namespace tessel
