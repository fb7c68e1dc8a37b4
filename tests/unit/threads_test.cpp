// run_on_threads (tilegraph/threads.h): every item of shared work is done once, by however many
// threads ran; the first exception comes back after all joined. (That a refused thread only makes
// the run smaller cannot be provoked here: CI runs as root, which thread limits do not bind.)
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "tilegraph/threads.h"

using namespace tessel;

TEST_CASE("run_on_threads: shared work is done once whatever the thread count, and errors come back") {
  for (int workers : {1, 2, 7}) {
    std::vector<std::atomic<int>> done(1000);
    std::atomic<int> next{0};
    const int ran = run_on_threads(workers, [&](int) {
      for (int i = next++; i < 1000; i = next++) ++done[i];
    });
    CHECK(ran >= 1);
    CHECK(ran <= workers);
    int once = 0;
    for (auto& d : done) once += d == 1;
    CHECK(once == 1000);
  }
  std::atomic<int> finished{0};
  CHECK_THROWS_AS(run_on_threads(4, [&](int worker) {
                    if (worker == 0) throw std::runtime_error("worker 0 failed");
                    ++finished;
                  }),
                  std::runtime_error);
  CHECK(finished <= 3);
}
