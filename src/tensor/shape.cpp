// tensor/shape.cpp — broadcasting, strides and axis rules.
#include "tensor/shape.hpp"

#include <fmt/format.h>

#include <numeric>

#include "base/error.hpp"

namespace sheaf {

std::string shape_str(const Shape& s) { return fmt::format("{}", fmt::join(s, "x")); }

std::string type_str(DType d, const Shape& s) { return fmt::format("{}[{}]", dtype_name(d), shape_str(s)); }

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to) {
  std::vector<int64_t> own = strides_of(from), out(to.size(), 0);
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) out[off + i] = from[i] == 1 ? 0 : own[i];
  return out;
}

bool is_identity_permutation(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::vector<int64_t> leading_axes(size_t n) {
  std::vector<int64_t> axes(n);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1) || (rank == 0))
    throw SheafError(fmt::format("axis {} out of range for rank {}", axis, rank));
  return a;
}

}  // namespace sheaf
