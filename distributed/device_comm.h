// Collectives on device memory (docs/distributed.md, "Runtime"): one handle per rank, every call
// enqueued on the caller's queue (a DeviceContext's stream) and naming the group of device
// numbers taking part, called by every member in the same order. Buffers hold values in their
// dtype's packed form (kernels/packed_tensor.h).
//
// nccl_mesh(): NCCL (opened at run time, as the CUDA driver is: TESSEL_NCCL_LIBRARY, else
// libnccl.so.2 on the library path), one communicator per local GPU, each rank driven by a
// thread of this process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilegraph/node.h"

namespace tessel {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// recv = send combined over the group (count elements; in place when equal).
  virtual void all_reduce(uint64_t send, uint64_t recv, int64_t count, DType dtype, Combiner op,
                          const std::vector<int64_t>& group, void* stream) = 0;
  /// recv = every member's `count` elements, in group order.
  virtual void all_gather(uint64_t send, uint64_t recv, int64_t count, DType dtype, const std::vector<int64_t>& group,
                          void* stream) = 0;
  /// send holds one block of `count` elements per member; recv = block k combined over the group.
  virtual void reduce_scatter(uint64_t send, uint64_t recv, int64_t count, DType dtype, Combiner op,
                              const std::vector<int64_t>& group, void* stream) = 0;
  /// send holds one block of `count` elements per member; recv block j = member j's block k.
  virtual void all_to_all(uint64_t send, uint64_t recv, int64_t count, DType dtype, const std::vector<int64_t>& group,
                          void* stream) = 0;
  /// One ring step: member k sends its `count` elements to member k + 1 and receives member k - 1's
  /// (mod the group's size) into recv. `max_units` > 0: on at most that many compute units (SMs),
  /// leaving the rest to kernels running beside it.
  virtual void shift(uint64_t send, uint64_t recv, int64_t count, DType dtype, const std::vector<int64_t>& group,
                     int64_t max_units, void* stream) = 0;
};

/// One NCCL communicator for each of this machine's GPUs 0 .. ranks-1 (rank r on GPU r). Empty,
/// with `why` set, when NCCL cannot be opened or fails to start.
std::vector<std::unique_ptr<DeviceCommunicator>> nccl_mesh(int64_t ranks, std::string* why);

}  // namespace tessel
