// Parallel kernel compilation with a progress line (parallel_compile.h).
#include "kernels/parallel_compile.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tilegraph/threads.h"

namespace tessel {
namespace {

/// Seconds of silence before the progress line appears (short compilations print nothing).
constexpr double kProgressAfterSeconds = 1.0;

}  // namespace

int compile_workers(int n) {
  const int host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(n, host));
}

void compile_in_parallel(int n, const std::string& what, const std::function<void(int index, int worker)>& work) {
  if (n <= 0) return;
  const int workers = compile_workers(n);
  const bool tty = ::isatty(2) != 0;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mutex;  // guards `error` and the progress line
  bool shown = false;
  auto report = [&]() {
    if (!tty) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed < kProgressAfterSeconds) return;
    std::fprintf(stderr, "\rcompiling %d %s: %d done", n, what.c_str(), done.load());
    std::fflush(stderr);
    shown = true;
  };
  auto run = [&](int worker) {
    for (int i = next++; i < n && !failed; i = next++) {
      try {
        work(i, worker);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
      ++done;
      std::lock_guard lock(mutex);
      report();
    }
  };
  run_on_threads(workers, run);
  if (shown) {
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(what.size()) + 40, "");
    std::fflush(stderr);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tessel
