// The MPI communicator (built when CMake finds MPI: TESSEL_HAVE_MPI). Groups become
// sub-communicators split off MPI_COMM_WORLD, cached by their members; every rank meets a group
// of the same mesh axis at the same point of the same program, so the (collective) splits line up.
#include <cstdlib>
#include <limits>
#include <map>

#include "distributed/communicator.h"
#include "tilegraph/error.h"

#ifdef TESSEL_HAVE_MPI
#include <mpi.h>
#endif

namespace tessel {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(var)) return true;
  return false;
}

#ifdef TESSEL_HAVE_MPI

namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw UserError("", "", cat("MPI: ", what, " failed: ", std::string(text, len)));
  }
}

MPI_Op mpi_op(Combiner op) {
  switch (op) {
    case Combiner::sum: return MPI_SUM;
    case Combiner::prod: return MPI_PROD;
    case Combiner::max: return MPI_MAX;
    case Combiner::min: return MPI_MIN;
    case Combiner::none: break;
  }
  TESSEL_ASSERT(false, "all_reduce without a combiner");
  return MPI_SUM;
}

class MpiComm : public Communicator {
 public:
  MpiComm() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      check(MPI_Init(nullptr, nullptr), "MPI_Init");
      owns_ = true;
    }
    int r = 0, s = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    rank_ = r;
    size_ = s;
  }
  ~MpiComm() override {
    for (auto& [group, comm] : comms_) MPI_Comm_free(&comm);
    if (owns_) MPI_Finalize();
  }
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce(std::vector<double>& data, Combiner op, const std::vector<int64_t>& group) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_DOUBLE, mpi_op(op), comm(group)), "MPI_Allreduce");
  }
  std::vector<double> all_gather(const std::vector<double>& mine, const std::vector<int64_t>& group) override {
    std::vector<double> out(mine.size() * group.size());
    check(MPI_Allgather(mine.data(), count(mine.size()), MPI_DOUBLE, out.data(), count(mine.size()), MPI_DOUBLE, comm(group)),
          "MPI_Allgather");
    return out;
  }
  std::vector<double> reduce_scatter(const std::vector<double>& blocks, Combiner op, const std::vector<int64_t>& group) override {
    const size_t block = blocks.size() / group.size();
    std::vector<double> out(block);
    check(MPI_Reduce_scatter_block(blocks.data(), out.data(), count(block), MPI_DOUBLE, mpi_op(op), comm(group)),
          "MPI_Reduce_scatter_block");
    return out;
  }
  std::vector<double> all_to_all(const std::vector<double>& blocks, const std::vector<int64_t>& group) override {
    const size_t block = blocks.size() / group.size();
    std::vector<double> out(blocks.size());
    check(MPI_Alltoall(blocks.data(), count(block), MPI_DOUBLE, out.data(), count(block), MPI_DOUBLE, comm(group)),
          "MPI_Alltoall");
    return out;
  }
  std::string broadcast(const std::string& text, int64_t root) override {
    int64_t n = static_cast<int64_t>(text.size());
    check(MPI_Bcast(&n, 1, MPI_INT64_T, static_cast<int>(root), MPI_COMM_WORLD), "MPI_Bcast");
    std::string out = rank_ == root ? text : std::string(static_cast<size_t>(n), '\0');
    check(MPI_Bcast(out.data(), count(out.size()), MPI_CHAR, static_cast<int>(root), MPI_COMM_WORLD), "MPI_Bcast");
    return out;
  }
  void abort() override { MPI_Abort(MPI_COMM_WORLD, 2); }

 private:
  static int count(size_t n) {
    if (n > static_cast<size_t>(std::numeric_limits<int>::max()))
      throw UserError("", "", cat("MPI: a message of ", n, " values is over MPI's int count"));
    return static_cast<int>(n);
  }
  MPI_Comm comm(const std::vector<int64_t>& group) {
    if (static_cast<int64_t>(group.size()) == size_) return MPI_COMM_WORLD;
    auto it = comms_.find(group);
    if (it != comms_.end()) return it->second;
    MPI_Comm c;
    check(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(group.front()), static_cast<int>(rank_), &c), "MPI_Comm_split");
    return comms_[group] = c;
  }

  int64_t rank_ = 0, size_ = 1;
  bool owns_ = false;
  std::map<std::vector<int64_t>, MPI_Comm> comms_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_communicator(std::string* why) {
  if (!launched_by_mpi()) {
    if (why) *why = "this process was not started by mpirun";
    return nullptr;
  }
  return std::make_unique<MpiComm>();
}

#else

std::unique_ptr<Communicator> mpi_communicator(std::string* why) {
  if (why) *why = "this tessel was built without MPI (install libopenmpi-dev: scripts/setup)";
  return nullptr;
}

#endif

}  // namespace tessel
