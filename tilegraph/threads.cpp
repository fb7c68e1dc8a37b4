// run_on_threads (threads.h).
#include "tilegraph/threads.h"

#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tessel {

int run_on_threads(int workers, const std::function<void(int worker)>& body) {
  std::exception_ptr error;
  std::mutex mutex;
  auto run = [&](int worker) {
    try {
      body(worker);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) {
    try {
      threads.emplace_back(run, w);
    } catch (const std::system_error&) {
      break;  // refused: the threads started so far, and this one, do the work
    }
  }
  run(0);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return static_cast<int>(threads.size()) + 1;
}

}  // namespace tessel
