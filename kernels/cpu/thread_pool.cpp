// The CPU runtime's thread pool (thread_pool.h).
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <system_error>

#include "tilegraph/error.h"

namespace tessel::cpu {

ThreadPool::ThreadPool(int threads) {
  TESSEL_ASSERT(threads >= 1, "thread pool of ", threads, " threads");
  // A thread the system refuses (a thread limit) leaves the pool smaller: size() is what it got.
  for (int w = 1; w < threads; ++w) {
    try {
      workers_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error&) {
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_tasks(int worker) {
  const int64_t divisor = 2 * static_cast<int64_t>(size());
  for (;;) {
    int64_t begin = next_.load(std::memory_order_relaxed), end = 0;
    do {
      if (begin >= count_) return;
      end = begin + std::max<int64_t>(1, (count_ - begin) / divisor);
    } while (!next_.compare_exchange_weak(begin, end, std::memory_order_relaxed));
    try {
      (*fn_)(begin, end, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(count_, std::memory_order_relaxed);  // stop handing out tasks
    }
  }
}

void ThreadPool::work(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_tasks(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t count, const RangeFn& fn) {
  if (count <= 0) return;
  if (workers_.empty() || count == 1) {
    fn(0, count, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    count_ = count;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_tasks(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace tessel::cpu
