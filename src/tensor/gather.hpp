// tensor/gather.hpp — indexed and data-dependent structural primitives (StableHLO semantics).
//   take                  gather along `axis`: out.shape = x.shape[:axis] + idx.shape + x.shape[axis+1:];
//                         out[..., j..., ...] = x[..., idx[j...], ...]. Indices (any integer
//                         dtype) are clamped into [0, dim) like stablehlo.gather.
//   scatter               x with the slices that `take` would read replaced (Set) or accumulated
//                         (Add) from `updates` (shaped like take's result); out-of-range indices
//                         are skipped like stablehlo.scatter. With Add, repeated indices add up.
//   dynamic_slice         box of `sizes` at `starts` (one per axis), starts clamped into
//                         [0, dim - size] so the box fits
//   dynamic_update_slice  x with `update` written at `starts`, clamped the same way
//   sort                  along `axis`, stable (equal keys keep index order, also descending);
//                         NaN sorts above every number. Returns values and i32 indices.
//   top_k                 the k largest along the last axis, descending, first index on ties
#pragma once
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf {

enum class ScatterMode { Set, Add };

Tensor take(const Tensor& x, const Tensor& indices, int64_t axis);
Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, ScatterMode mode);
Tensor dynamic_slice(const Tensor& x, std::vector<int64_t> starts, const Shape& sizes);
Tensor dynamic_update_slice(const Tensor& x, const Tensor& update, std::vector<int64_t> starts);
// The same with starts given as rank-0 integer tensors (symbolic while tracing).
Tensor dynamic_slice(const Tensor& x, const std::vector<Tensor>& starts, const Shape& sizes);
Tensor dynamic_update_slice(const Tensor& x, const Tensor& update, const std::vector<Tensor>& starts);

struct Sorted {
  Tensor values;
  Tensor indices;  // i32, positions along the sorted axis
};
Sorted sort(const Tensor& x, int64_t axis, bool descending);
Sorted top_k(const Tensor& x, int64_t k);

}  // namespace sheaf
