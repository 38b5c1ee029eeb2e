// base/clock.hpp — the monotonic clock that the JIT's and the backends' profiles time phases with.
#pragma once
#include <chrono>

namespace sheaf {

using Clock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace sheaf
