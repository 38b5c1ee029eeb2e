// obs/summary.hpp — one-line summaries of values for traces, guard reports and profiles
// (SPEC §9.1):
//   tensor  f32[4x8] [min:-1.37e0 max:2.33e0] (128B)      normal level
//           f32[4x8] [mean:1.20e-1 min:-1.37e0 max:2.33e0] (128B)   verbose
//           f32[4x8] (128B)                                 fast
//           f32[4x1] [min:inf max:-inf] [NaN DETECTED]      a NaN or ±Inf inside (min/max skip NaN)
//   others  dict(keys:["a", "b"]), list(len:3), tuple(len:2), 0.700000, 3, "text cut at 50...",
//           true, nil, :key, <fn:name>
// Numbers print with a 2-decimal mantissa and an unpadded exponent (4.86e-1, 0.00e0, inf);
// sizes as NB, x.xxKB, x.xxMB (1024-based).
#pragma once
#include <span>
#include <string>

#include "value/value.hpp"

namespace sheaf::obs {

enum class Level { Fast, Normal, Verbose };

struct TensorStats {
  double min = 0, max = 0, mean = 0;  // over the non-NaN elements (min = inf, max = -inf when none)
  bool nonfinite = false;             // some NaN or ±Inf
};
TensorStats tensor_stats(const Tensor& t);
// True when a float tensor holds a NaN or ±Inf (a vectorised scan of the exponent bits for f32).
bool has_nonfinite(const Tensor& t);

std::string sci(double x);             // 4.86e-1, -1.37e0, 0.00e0, inf, nan
std::string bytes_str(uint64_t n);     // 128B, 1.50KB, 3.00MB
std::string elapsed_str(double seconds);  // 0.8μs, 12.41ms, 3.20s (trace: μs with 1 decimal)

// `v` in the trace format. `color` paints [NaN DETECTED] red.
std::string summarize(const Value& v, Level level = Level::Normal, bool color = false);
// Comma-separated summaries of call arguments.
std::string summarize_all(std::span<const Value> vs, Level level = Level::Normal, bool color = false);
// A tensor as `f32[4x1] [min:.. max:..]` (no size, no marker): the body of guard messages.
std::string tensor_brief(const Tensor& t);

}  // namespace sheaf::obs
