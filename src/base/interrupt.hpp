// base/interrupt.hpp — Ctrl-C as a request that evaluation honours at its next safe point
// (SPEC §8 REPL, §10.1 on-interrupt). The interpreter owns the request flag (Interp::interrupt,
// set by a signal handler or the Python binding); safe points are interpreted calls and loop
// steps, and every iteration of a compiled loop. While a compiled call runs, its thread publishes
// the flag (StopFlagScope), so the backends can poll it without knowing the interpreter: a loop
// that sees it stops early and its call's results are dropped (they are fresh buffers; arguments
// are never written), then the caller raises Interrupted.
#pragma once
#include <atomic>
#include <exception>

#include "base/source.hpp"

namespace sheaf {

// Raised at a safe point after a stop request. Not a SheafError: no handler of language errors
// (fallback to the interpreter, error wrapping) may take it for one.
struct Interrupted : std::exception {
  SrcLoc loc;
  explicit Interrupted(SrcLoc l) : loc(l) {}
  const char* what() const noexcept override { return "Interrupted"; }
};

// Publishes `flag` as this thread's stop request for the scope's lifetime (nested scopes restore).
class StopFlagScope {
 public:
  explicit StopFlagScope(const std::atomic<bool>* flag);
  ~StopFlagScope();
  StopFlagScope(const StopFlagScope&) = delete;
  StopFlagScope& operator=(const StopFlagScope&) = delete;

 private:
  const std::atomic<bool>* saved_;
};

// The stop request of the compiled call running on this thread (a flag never set outside one).
const std::atomic<bool>& stop_flag();
inline bool stop_requested() { return stop_flag().load(std::memory_order_relaxed); }

}  // namespace sheaf
