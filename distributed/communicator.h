// Communicators: how the devices of a mesh exchange tensors (docs/distributed.md, "Runtime").
//
// A Communicator is one device's (rank's) handle. Every collective names the group of device
// numbers taking part (ascending, the caller among them) and must be called by every member of
// that group in the same order. Values travel as doubles, the form every host tensor has
// (tilegraph/host_tensor.h).
//
// Implementations:
//   mpi_communicator()   one process per rank under mpirun (OpenMPI from Debian), CPU ranks on one
//                        host or many; groups become MPI sub-communicators
//   ThreadMesh           every rank a thread of one process, exchanging through shared memory:
//                        tests and single-host runs without mpirun
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilegraph/node.h"

namespace tessel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  virtual std::string name() const = 0;  // "mpi", "threads"

  /// Every member ends with the elementwise combination (sum, prod, max, min) of every member's `data`.
  virtual void all_reduce(std::vector<double>& data, Combiner op, const std::vector<int64_t>& group) = 0;
  /// Every member's `mine` (equal sizes), concatenated in group order.
  virtual std::vector<double> all_gather(const std::vector<double>& mine, const std::vector<int64_t>& group) = 0;
  /// `blocks` holds one equal-sized block per member in group order; member k ends with block k
  /// combined over every member.
  virtual std::vector<double> reduce_scatter(const std::vector<double>& blocks, Combiner op, const std::vector<int64_t>& group) = 0;
  /// `blocks` holds one equal-sized block per member in group order; member k receives block k of
  /// everyone. Returns the blocks received, in group order.
  virtual std::vector<double> all_to_all(const std::vector<double>& blocks, const std::vector<int64_t>& group) = 0;
  /// `text` as rank `root` has it, on every rank of the whole mesh.
  virtual std::string broadcast(const std::string& text, int64_t root) = 0;
  /// This rank failed: the others must not wait for it (threads: their pending and later
  /// collectives raise UserError; MPI: MPI_Abort ends the job).
  virtual void abort() = 0;
};

/// This process's rank of the MPI job it runs in (MPI is initialised on first use and finalised
/// when the communicator is destroyed). nullptr, with `why` set, when Tessel was built without MPI
/// or the process was not started by mpirun.
std::unique_ptr<Communicator> mpi_communicator(std::string* why);

/// Whether this process was started by an MPI launcher (mpirun sets its rank variables).
bool launched_by_mpi();

/// `ranks` communicators whose ranks are threads of this process.
std::vector<std::unique_ptr<Communicator>> thread_mesh(int64_t ranks);

}  // namespace tessel
