// tensor/layout.hpp — structural primitives with StableHLO semantics: they move elements and
// never look at their values, so every dtype is handled by element size.
//   reshape      x → same elements in row-major order, another shape (shares the bytes)
//   transpose    out.shape[i] = x.shape[perm[i]]
//   slice        per axis x[start : limit : stride], static bounds, stride ≥ 1
//   reverse      x with the listed axes flipped
//   concatenate  operands of one dtype, equal dims except `axis`, joined along it
//   pad          x surrounded by lo[i]/hi[i] elements of a scalar value (both ≥ 0)
//   overwrite    x with the box starting at `starts` replaced by `window` (it must fit)
//   iota         dtype tensor of `shape` whose value is the index along `axis`
// Callers (builtins) check arguments and phrase errors; these throw plain SheafErrors on
// misuse.
#pragma once
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf {

Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm);
Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& limits,
             const std::vector<int64_t>& strides);
Tensor reverse(const Tensor& x, const std::vector<int64_t>& axes);
Tensor concatenate(const std::vector<Tensor>& xs, int64_t axis);
Tensor pad(const Tensor& x, double value, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi);
Tensor overwrite(const Tensor& x, const Tensor& window, const std::vector<int64_t>& starts);
Tensor iota(DType dtype, const Shape& shape, int64_t axis);

// Slice of x along one axis, [start, limit), every other axis whole.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t limit);

}  // namespace sheaf
