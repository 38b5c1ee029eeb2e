// tensor/reduce.hpp — reduction primitives on host tensors (StableHLO `reduce` with one of the
// standard bodies, and the argmax/argmin pattern).
//   reduce:     op over a set of axes (each in [0, rank), no repeats); the reduced axes are
//               dropped, or kept with size 1 under `keepdims`; dtype unchanged.
//               f32 sums are pairwise along contiguous runs (NumPy's order); f16/bf16 accumulate
//               in f32 and round once; i32/u32 sums and products wrap. Max/Min propagate NaN.
//               Bool supports Max/Min only (any/all). An empty reduction gives the identity
//               (0, 1, -inf or the lowest integer, +inf or the highest integer).
//   arg_reduce: i32 index of the first largest (Max) or smallest (Min) element along one
//               non-empty axis; a NaN counts as the extreme, so the first NaN wins (NumPy).
// Callers (builtins) normalise axes and phrase errors; these throw plain SheafErrors on misuse.
#pragma once
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf {

enum class Reduce { Sum, Prod, Max, Min };

Tensor reduce(Reduce op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = false);
Tensor arg_reduce(Reduce op, const Tensor& x, int64_t axis, bool keepdims = false);

}  // namespace sheaf
