// Running work on several threads when the system may refuse to create one (a process or user
// thread limit, ulimit -u): every parallel loop in Tessel goes through run_on_threads, which runs
// with the threads it got instead of ending the process (a std::thread that cannot start throws
// std::system_error, and any thread already started but never joined would call std::terminate).
#pragma once

#include <functional>

namespace tessel {

/// Runs body(worker) on up to `workers` threads -- the caller's (worker 0) and workers - 1 new
/// ones -- and joins them all. When the system refuses a thread, runs with those it has: `body`
/// must take its work from a shared counter, not from its worker number, so that the work is done
/// by however many run. The first exception a body throws is rethrown after every thread has
/// joined. Returns how many threads ran.
int run_on_threads(int workers, const std::function<void(int worker)>& body);

}  // namespace tessel
