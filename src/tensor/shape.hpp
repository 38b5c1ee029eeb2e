// tensor/shape.hpp — shape arithmetic shared by kernels and builtins: NumPy broadcasting,
// axis normalisation, row-major strides, and the `f32[2x3]` spelling used in messages.
#pragma once
#include <optional>
#include <string>

#include "tensor/tensor.hpp"

namespace sheaf {

std::string shape_str(const Shape& s);                 // "2x3" ("" for rank 0)
std::string type_str(DType d, const Shape& s);         // "f32[2x3]"
inline std::string type_str(const Tensor& t) { return type_str(t.dtype(), t.shape()); }

// NumPy broadcasting of two shapes; nullopt when they are incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// Row-major element strides.
std::vector<int64_t> strides_of(const Shape& s);

// Strides of `from` viewed in the broadcast shape `to` (0 on broadcast axes; `from` is
// right-aligned against `to`).
std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to);

// Negative axes count from the end; out of range throws "axis 3 out of range for rank 1".
int64_t normalize_axis(int64_t axis, int64_t rank);

}  // namespace sheaf
