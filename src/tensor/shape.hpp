// tensor/shape.hpp — shape arithmetic shared by kernels and builtins: NumPy broadcasting,
// axis normalisation, row-major strides, and the `f32[2x3]` spelling used in messages.
#pragma once
#include <array>
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

// True when perm[i] == i for every i (a transpose that moves nothing).
bool is_identity_permutation(const std::vector<int64_t>& perm);
// The axes 0 .. n-1, in order.
std::vector<int64_t> leading_axes(size_t n);

// Negative axes count from the end; out of range throws "axis 3 out of range for rank 1".
int64_t normalize_axis(int64_t axis, int64_t rank);

// A multi-index over the first `axes` dimensions of `dims` (the last one fastest) that keeps K
// linear offsets in step: when index d advances, offset j moves by strides[j][d]. After the last
// index it wraps to all zeros. Kernels walk their outer axes with it and run a tight inner loop.
template <size_t K>
class Odometer {
 public:
  Odometer(const int64_t* dims, size_t axes, std::array<const int64_t*, K> strides, std::array<int64_t, K> start = {})
      : dims_(dims), strides_(strides), off_(start), idx_(axes, 0) {}
  int64_t operator[](size_t j) const { return off_[j]; }
  void next() {
    for (size_t d = idx_.size(); d-- > 0;) {
      for (size_t j = 0; j < K; ++j) off_[j] += strides_[j][d];
      if (++idx_[d] < dims_[d]) return;
      for (size_t j = 0; j < K; ++j) off_[j] -= strides_[j][d] * dims_[d];
      idx_[d] = 0;
    }
  }

 private:
  const int64_t* dims_;
  std::array<const int64_t*, K> strides_;
  std::array<int64_t, K> off_;
  std::vector<int64_t> idx_;
};

}  // namespace sheaf
