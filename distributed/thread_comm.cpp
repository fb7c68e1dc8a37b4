// ThreadMesh: ranks as threads of one process. A collective is an exchange: every member deposits
// its data under (group, the group's call count), waits until all have, reads everyone's, and the
// last reader frees the slot.
#include <condition_variable>
#include <map>
#include <mutex>

#include "distributed/communicator.h"
#include "tilegraph/error.h"

namespace tessel {

namespace {


struct Shared {
  struct Slot {
    std::vector<std::vector<double>> data;
    size_t deposited = 0, read = 0;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<std::vector<int64_t>, int64_t>, Slot> slots;
  bool aborted = false;
};

class ThreadComm : public Communicator {
 public:
  ThreadComm(int64_t rank, int64_t size, std::shared_ptr<Shared> shared) : rank_(rank), size_(size), shared_(std::move(shared)) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string name() const override { return "threads"; }

  void all_reduce(std::vector<double>& data, Combiner op, const std::vector<int64_t>& group) override {
    const auto all = exchange(data, group);
    data = all[0];
    for (size_t k = 1; k < all.size(); ++k)
      for (size_t i = 0; i < data.size(); ++i) data[i] = combine_values(op, data[i], all[k][i]);
  }
  std::vector<double> all_gather(const std::vector<double>& mine, const std::vector<int64_t>& group) override {
    std::vector<double> out;
    for (const auto& piece : exchange(mine, group)) out.insert(out.end(), piece.begin(), piece.end());
    return out;
  }
  std::vector<double> reduce_scatter(const std::vector<double>& blocks, Combiner op, const std::vector<int64_t>& group) override {
    const size_t block = blocks.size() / group.size();
    const size_t me = position(group);
    const auto all = exchange(blocks, group);
    std::vector<double> out(all[0].begin() + me * block, all[0].begin() + (me + 1) * block);
    for (size_t k = 1; k < all.size(); ++k)
      for (size_t i = 0; i < block; ++i) out[i] = combine_values(op, out[i], all[k][me * block + i]);
    return out;
  }
  std::vector<double> all_to_all(const std::vector<double>& blocks, const std::vector<int64_t>& group) override {
    const size_t block = blocks.size() / group.size();
    const size_t me = position(group);
    std::vector<double> out;
    for (const auto& theirs : exchange(blocks, group))
      out.insert(out.end(), theirs.begin() + me * block, theirs.begin() + (me + 1) * block);
    return out;
  }
  std::string broadcast(const std::string& text, int64_t root) override {
    std::vector<int64_t> everyone(size_);
    for (int64_t r = 0; r < size_; ++r) everyone[r] = r;
    const std::vector<double> mine(text.begin(), text.end());
    const std::vector<std::vector<double>> all = exchange(mine, everyone);  // the root's, kept alive
    const std::vector<double>& theirs = all[root];
    return std::string(theirs.begin(), theirs.end());
  }
  void abort() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->aborted = true;
    shared_->cv.notify_all();
  }

 private:
  size_t position(const std::vector<int64_t>& group) const {
    for (size_t k = 0; k < group.size(); ++k)
      if (group[k] == rank_) return k;
    TESSEL_ASSERT(false, "a collective on a group without the caller");
    return 0;
  }

  std::vector<std::vector<double>> exchange(const std::vector<double>& mine, const std::vector<int64_t>& group) {
    const size_t me = position(group);
    const auto key = std::make_pair(group, calls_[group]++);
    std::unique_lock<std::mutex> lock(shared_->mu);
    Shared::Slot& slot = shared_->slots[key];  // map nodes are stable
    if (slot.data.empty()) slot.data.resize(group.size());
    slot.data[me] = mine;
    ++slot.deposited;
    shared_->cv.notify_all();
    shared_->cv.wait(lock, [&] { return slot.deposited == group.size() || shared_->aborted; });
    if (shared_->aborted) throw UserError("", "", cat("rank ", rank_, ": another rank failed; this collective was abandoned"));
    std::vector<std::vector<double>> all = slot.data;
    if (++slot.read == group.size()) shared_->slots.erase(key);
    return all;
  }

  int64_t rank_, size_;
  std::shared_ptr<Shared> shared_;
  std::map<std::vector<int64_t>, int64_t> calls_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> thread_mesh(int64_t ranks) {
  auto shared = std::make_shared<Shared>();
  std::vector<std::unique_ptr<Communicator>> out;
  for (int64_t r = 0; r < ranks; ++r) out.push_back(std::make_unique<ThreadComm>(r, ranks, shared));
  return out;
}

}  // namespace tessel
