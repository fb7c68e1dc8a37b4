// NCCL opened with dlopen (nccl.h supplies types only): Tessel builds and runs without it, and the
// 200 MB library is not bundled. Sub-groups are split off the whole mesh's communicator
// (ncclCommSplit) the first time each is used; every rank meets the groups of one mesh axis at the
// same point of the same program, so the (collective) splits line up.
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "distributed/device_comm.h"
#include "tilegraph/error.h"

namespace tessel {

namespace {

struct Nccl {
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommSplit) comm_split = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  std::string error;

  static Nccl& get() {
    static Nccl n = open();
    return n;
  }

  void check(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess) throw UserError("", "", cat("NCCL: ", what, " failed: ", get_error_string(r)));
  }

 private:
  static Nccl open() {
    Nccl n;
    void* lib = nullptr;
    std::string tried;
    std::vector<std::string> names;
    if (const char* env = std::getenv("TESSEL_NCCL_LIBRARY")) names.push_back(env);
    names.push_back("libnccl.so.2");
    names.push_back("libnccl.so");
    for (const std::string& name : names) {
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!lib) {
      n.error = cat("cannot open NCCL (tried ", tried, "; set TESSEL_NCCL_LIBRARY to libnccl.so.2's path)");
      return n;
    }
    auto load = [&](auto& fn, const char* sym) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, sym));
      if (!fn && n.error.empty()) n.error = cat("NCCL has no ", sym, " (2.18 or later is needed)");
    };
    load(n.get_error_string, "ncclGetErrorString");
    load(n.comm_init_all, "ncclCommInitAll");
    load(n.comm_destroy, "ncclCommDestroy");
    load(n.comm_split, "ncclCommSplit");
    load(n.all_reduce, "ncclAllReduce");
    load(n.all_gather, "ncclAllGather");
    load(n.reduce_scatter, "ncclReduceScatter");
    load(n.send, "ncclSend");
    load(n.recv, "ncclRecv");
    load(n.group_start, "ncclGroupStart");
    load(n.group_end, "ncclGroupEnd");
    return n;
  }
};

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f64: return ncclFloat64;
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::i8: return ncclInt8;
    case DType::u8:
    case DType::boolean: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(Combiner op) {
  switch (op) {
    case Combiner::sum: return ncclSum;
    case Combiner::prod: return ncclProd;
    case Combiner::max: return ncclMax;
    case Combiner::min: return ncclMin;
    case Combiner::none: break;
  }
  TESSEL_ASSERT(false, "a reduction without a combiner");
  return ncclSum;
}

void* ptr(uint64_t p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

class NcclComm : public DeviceCommunicator {
 public:
  NcclComm(int64_t rank, int64_t size, ncclComm_t world) : rank_(rank), size_(size), world_(world) {}
  ~NcclComm() override {
    for (auto& [group, c] : split_) Nccl::get().comm_destroy(c);
    for (auto& [key, c] : limited_) Nccl::get().comm_destroy(c);
    Nccl::get().comm_destroy(world_);
  }
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }

  void all_reduce(uint64_t send, uint64_t recv, int64_t count, DType dtype, Combiner op, const std::vector<int64_t>& group,
                  void* stream) override {
    n().check(n().all_reduce(ptr(send), ptr(recv), static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), comm(group),
                             static_cast<cudaStream_t>(stream)),
              "ncclAllReduce");
  }
  void all_gather(uint64_t send, uint64_t recv, int64_t count, DType dtype, const std::vector<int64_t>& group,
                  void* stream) override {
    n().check(n().all_gather(ptr(send), ptr(recv), static_cast<size_t>(count), nccl_type(dtype), comm(group),
                             static_cast<cudaStream_t>(stream)),
              "ncclAllGather");
  }
  void reduce_scatter(uint64_t send, uint64_t recv, int64_t count, DType dtype, Combiner op, const std::vector<int64_t>& group,
                      void* stream) override {
    n().check(n().reduce_scatter(ptr(send), ptr(recv), static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), comm(group),
                                 static_cast<cudaStream_t>(stream)),
              "ncclReduceScatter");
  }
  void all_to_all(uint64_t send, uint64_t recv, int64_t count, DType dtype, const std::vector<int64_t>& group,
                  void* stream) override {
    ncclComm_t c = comm(group);
    const uint64_t block = static_cast<uint64_t>(count) * static_cast<uint64_t>(dtype_bytes(dtype));
    n().check(n().group_start(), "ncclGroupStart");
    for (size_t j = 0; j < group.size(); ++j) {
      n().check(n().send(ptr(send + j * block), static_cast<size_t>(count), nccl_type(dtype), static_cast<int>(j), c,
                         static_cast<cudaStream_t>(stream)),
                "ncclSend");
      n().check(n().recv(ptr(recv + j * block), static_cast<size_t>(count), nccl_type(dtype), static_cast<int>(j), c,
                         static_cast<cudaStream_t>(stream)),
                "ncclRecv");
    }
    n().check(n().group_end(), "ncclGroupEnd");
  }

  void shift(uint64_t send, uint64_t recv, int64_t count, DType dtype, const std::vector<int64_t>& group,
             int64_t max_units, void* stream) override {
    ncclComm_t c = max_units > 0 ? limited(group, max_units) : comm(group);
    const int parts = static_cast<int>(group.size());
    const int me = static_cast<int>(std::find(group.begin(), group.end(), rank_) - group.begin());
    n().check(n().group_start(), "ncclGroupStart");
    n().check(n().send(ptr(send), static_cast<size_t>(count), nccl_type(dtype), (me + 1) % parts, c, static_cast<cudaStream_t>(stream)),
              "ncclSend");
    n().check(n().recv(ptr(recv), static_cast<size_t>(count), nccl_type(dtype), (me + parts - 1) % parts, c,
                       static_cast<cudaStream_t>(stream)),
              "ncclRecv");
    n().check(n().group_end(), "ncclGroupEnd");
  }

 private:
  static Nccl& n() { return Nccl::get(); }
  ncclComm_t comm(const std::vector<int64_t>& group) {
    if (static_cast<int64_t>(group.size()) == size_) return world_;
    auto it = split_.find(group);
    if (it != split_.end()) return it->second;
    ncclComm_t c = nullptr;
    n().check(n().comm_split(world_, static_cast<int>(group.front()), static_cast<int>(rank_), &c, nullptr), "ncclCommSplit");
    return split_[group] = c;
  }
  /// The group's communicator whose kernels use at most `units` CTAs (one per SM): a split of the
  /// world with ncclConfig_t::maxCTAs.
  ncclComm_t limited(const std::vector<int64_t>& group, int64_t units) {
    const auto key = std::make_pair(group, units);
    auto it = limited_.find(key);
    if (it != limited_.end()) return it->second;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.maxCTAs = static_cast<int>(units);
    config.minCTAs = 1;
    const bool member = std::find(group.begin(), group.end(), rank_) != group.end();
    TESSEL_ASSERT(member, "a shift among a group without this rank");
    ncclComm_t c = nullptr;
    n().check(n().comm_split(world_, static_cast<int>(group.front()), static_cast<int>(rank_), &c, &config), "ncclCommSplit (limited)");
    return limited_[key] = c;
  }

  int64_t rank_, size_;
  ncclComm_t world_;
  std::map<std::vector<int64_t>, ncclComm_t> split_;
  std::map<std::pair<std::vector<int64_t>, int64_t>, ncclComm_t> limited_;
};

}  // namespace

std::vector<std::unique_ptr<DeviceCommunicator>> nccl_mesh(int64_t ranks, std::string* why) {
  Nccl& n = Nccl::get();
  if (!n.error.empty()) {
    if (why) *why = n.error;
    return {};
  }
  std::vector<ncclComm_t> comms(ranks);
  std::vector<int> devices(ranks);
  for (int64_t r = 0; r < ranks; ++r) devices[r] = static_cast<int>(r);
  const ncclResult_t rc = n.comm_init_all(comms.data(), static_cast<int>(ranks), devices.data());
  if (rc != ncclSuccess) {
    if (why) *why = cat("ncclCommInitAll over ", ranks, " GPUs failed: ", n.get_error_string(rc));
    return {};
  }
  std::vector<std::unique_ptr<DeviceCommunicator>> out;
  for (int64_t r = 0; r < ranks; ++r) out.push_back(std::make_unique<NcclComm>(r, ranks, comms[r]));
  return out;
}

}  // namespace tessel
