// runtime/run_once.hpp — run a transform of some arguments once, compiled, outside any trace.
// Transforms (value-and-grad, jvp, vmap) do their work inside the active trace; called eagerly
// (--no-jit, or where the JIT fell back), they trace themselves into a graph of their own with
// this, which is then optimised and run on the reference executor. Nothing is cached.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/source.hpp"
#include "value/value.hpp"

namespace sheaf {

// `body` receives symbolic versions of `args` (tensor leaves, and int/float leaves unless a
// retry needs them static) and returns the result pytree. A trace that needs a host scalar's
// value is retried once with scalars static. TraceAbort propagates to the caller.
// When a guard traced inside fails (obs/guards.hpp), `recheck` runs the computation interpreted
// so that the guard reports on concrete values; without one (or if it returns) the breach is
// reported for the transform as a whole.
Value run_once(std::span<const Value> args, SrcLoc site, std::string name,
               const std::function<Value(std::vector<Value>&)>& body, const std::function<void()>& recheck = {});

}  // namespace sheaf
