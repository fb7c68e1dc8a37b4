// The CPU runtime's thread pool: the parallel loop over a group's tasks (one task per outer tile
// of the sink) runs on a fixed set of std::threads that live as long as the compiled model.
// Tasks are handed out in contiguous ranges from an atomic counter, guided: each grab takes 1/(2 x
// workers) of what is left, at least one task. Early grabs are long runs of neighbouring tiles (each
// thread streams through consecutive memory, which the hardware prefetchers follow; one task at a
// time interleaved the threads every tile and cost streaming kernels half their bandwidth), late
// grabs are single tasks, so uneven tasks (border tiles, halos) still balance. The calling thread
// works too.
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

  /// Calls fn(begin, end, worker) for disjoint ranges covering [0, count), worker in [0, size());
  /// returns when all are done and rethrows the first exception a call raised.
  using RangeFn = std::function<void(int64_t begin, int64_t end, int worker)>;
  void parallel_for(int64_t count, const RangeFn& fn);

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
  const RangeFn* fn_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace tessel::cpu
