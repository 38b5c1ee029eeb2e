// python/worker.hpp — the thread every Sheaf evaluation of the binding runs on.
// One thread with a 1 GiB stack (virtual; pages are committed on use), as the CLI runs its
// interpreter, so deep recursion ends in "Maximum recursion depth exceeded" (Limits::max_depth)
// rather than in a crash. Jobs run one at a time: the interpreter's process-wide state (source
// registry, symbol table users, JIT caches) is not meant for concurrent evaluation, so calls from
// several Python threads are serialised. The caller waits with the GIL released; on the main
// thread, for a job given an `on_interrupt`, it looks for Ctrl-C every 50 ms: a pending
// KeyboardInterrupt asks the evaluation to stop (`on_interrupt` sets Interp::interrupt) and is
// raised when the job has ended.
#pragma once
#include <functional>

namespace sheaf::python {

// Runs `job` on the worker and rethrows what it threw. Called with the GIL held; the job runs
// without it. On the worker itself (a nested call) the job runs inline.
void run_on_worker(const std::function<void()>& job, const std::function<void()>& on_interrupt = {});

// True on the worker thread.
bool on_worker();

}  // namespace sheaf::python
