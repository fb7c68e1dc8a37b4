// Compiling a schedule's kernels in parallel, for both backends: one worker per hardware thread
// (at most one per kernel), and a progress line on a terminal when it takes more than a second.
#pragma once

#include <functional>
#include <string>

namespace tessel {

/// How many workers compile_in_parallel uses for `n` kernels.
int compile_workers(int n);

/// Runs `work(index, worker)` for every index in [0, n) on compile_workers(n) threads (`worker`
/// in [0, compile_workers(n)) names the thread, for per-thread state such as a target machine).
/// While it runs longer than a second and stderr is a terminal, a line "compiling N WHAT: K done"
/// is kept up to date on stderr and cleared at the end; nothing is printed otherwise (piped output
/// stays quiet). The first exception a call throws is rethrown after every worker has stopped
/// (the others stop taking new indices).
void compile_in_parallel(int n, const std::string& what, const std::function<void(int index, int worker)>& work);

}  // namespace tessel
