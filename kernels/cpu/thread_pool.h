// The CPU runtime's thread pool: the parallel loop over a group's tasks (one task per outer tile
// of the sink) runs on a fixed set of std::threads that live as long as the compiled model.
// Tasks are handed out one at a time from an atomic counter, so uneven tasks (border tiles, halos)
// balance themselves; the calling thread works too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::cpu {

class ThreadPool {
 public:
  /// `threads` >= 1 workers in all, the caller included.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(task, worker) for every task in [0, count), worker in [0, size()); returns when all
  /// are done and rethrows the first exception a call raised.
  void parallel_for(int64_t count, const std::function<void(int64_t task, int worker)>& fn);

 private:
  void work(int worker);
  void run_tasks(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  int busy_ = 0;
  // The current loop.
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace tessel::cpu
