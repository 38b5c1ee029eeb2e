// tensor/layout.cpp — structural kernels. Every primitive here is one or more strided copies:
// element i of a box (row-major over `shape`) moves from src[a.offset + Σ idx·a.strides] to
// dst[b.offset + Σ idx·b.strides]. Before copying, unit axes are dropped and axes that are
// contiguous in both views are merged, so a transpose of [B,T,H,D] → [B,H,T,D] copies runs of
// D elements and a concatenation copies whole rows; true transpositions copy 32×32 tiles.
#include "tensor/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

struct Strided {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// Drops unit axes and merges axis d into d-1 where both views step through them contiguously.
void merge_axes(Shape& shape, Strided& a, Strided& b) {
  Shape s;
  std::vector<int64_t> sa, sb;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s.empty() && sa.back() == a.strides[d] * shape[d] && sb.back() == b.strides[d] * shape[d]) {
      s.back() *= shape[d];
      sa.back() = a.strides[d];
      sb.back() = b.strides[d];
      continue;
    }
    s.push_back(shape[d]);
    sa.push_back(a.strides[d]);
    sb.push_back(b.strides[d]);
  }
  shape = std::move(s);
  a.strides = std::move(sa);
  b.strides = std::move(sb);
}

// One 2-D plane: n0 × n1 elements. When the source is contiguous along axis 0 and the
// destination along axis 1 (a transposition), 32×32 tiles keep both sides in cache.
template <typename E>
void copy_plane(const E* p, int64_t pa0, int64_t pa1, E* q, int64_t qb0, int64_t qb1, int64_t n0, int64_t n1) {
  if (pa1 == 1 && qb1 == 1) {
    for (int64_t i = 0; i < n0; ++i) std::copy(p + i * pa0, p + i * pa0 + n1, q + i * qb0);
  } else if (pa0 == 1 && qb1 == 1) {
    constexpr int64_t B = 32;
    for (int64_t i0 = 0; i0 < n0; i0 += B)
      for (int64_t j0 = 0; j0 < n1; j0 += B)
        for (int64_t i = i0; i < std::min(n0, i0 + B); ++i)
          for (int64_t j = j0; j < std::min(n1, j0 + B); ++j) q[i * qb0 + j] = p[i + j * pa1];
  } else {
    for (int64_t i = 0; i < n0; ++i)
      for (int64_t j = 0; j < n1; ++j) q[i * qb0 + j * qb1] = p[i * pa0 + j * pa1];
  }
}

// The box as planes over its last two axes, the outer axes walked by an odometer.
template <typename E>
void copy_box(const E* src, const Strided& a, E* dst, const Strided& b, const Shape& shape) {
  size_t r = shape.size();
  if (r == 0) {
    dst[b.offset] = src[a.offset];
    return;
  }
  int64_t n0 = r > 1 ? shape[r - 2] : 1, pa0 = r > 1 ? a.strides[r - 2] : 0, qb0 = r > 1 ? b.strides[r - 2] : 0;
  size_t outer_axes = r > 1 ? r - 2 : 0;
  int64_t planes = shape_numel(shape) / (n0 * shape[r - 1]);
  Odometer<2> outer(shape.data(), outer_axes, {a.strides.data(), b.strides.data()}, {a.offset, b.offset});
  for (int64_t plane = 0; plane < planes; ++plane) {
    copy_plane(src + outer[0], pa0, a.strides[r - 1], dst + outer[1], qb0, b.strides[r - 1], n0, shape[r - 1]);
    outer.next();
  }
}

// Copies a box of `shape` elements between two tensors of the same dtype.
void copy_strided(const Tensor& src, Strided a, Tensor& dst, Strided b, Shape shape) {
  if (shape_numel(shape) == 0) return;
  merge_axes(shape, a, b);
  // A transposition: move the source's contiguous axis next to the last one, so that the
  // innermost plane is a tiled 2-D transpose.
  size_t r = shape.size();
  if (r > 2 && a.strides[r - 1] != 1 && b.strides[r - 1] == 1) {
    for (size_t p = 0; p + 2 < r; ++p)
      if (a.strides[p] == 1) {
        auto move = [&](auto& v) { std::rotate(v.begin() + static_cast<ptrdiff_t>(p), v.begin() + static_cast<ptrdiff_t>(p) + 1, v.end() - 1); };
        move(shape);
        move(a.strides);
        move(b.strides);
        break;
      }
  }
  switch (dtype_size(src.dtype())) {
    case 1: return copy_box(src.data<uint8_t>(), a, dst.mutable_data<uint8_t>(), b, shape);
    case 2: return copy_box(src.data<uint16_t>(), a, dst.mutable_data<uint16_t>(), b, shape);
    default: return copy_box(src.data<uint32_t>(), a, dst.mutable_data<uint32_t>(), b, shape);
  }
}

Strided dense(const Shape& s, int64_t offset = 0) { return {offset, strides_of(s)}; }

// A new tensor of `shape` read from x through the view `a`.
Tensor gather_view(const Tensor& x, const Strided& a, const Shape& shape) {
  Tensor out = Tensor::empty(x.dtype(), shape);
  copy_strided(x, a, out, dense(shape), shape);
  return out;
}

void check_rank(const Tensor& x, size_t n, const char* who) {
  if (n != x.shape().size())
    throw SheafError(fmt::format("{}: {} needs {} per-axis values, got {}", who, type_str(x), x.rank(), n));
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  if (shape_numel(shape) != x.numel()) throw SheafError(fmt::format("reshape: cannot reshape {} into [{}]", type_str(x), shape_str(shape)));
  if (x.is_symbolic()) {
    if (x.shape() == shape) return x;
    ir::Type t{x.dtype(), shape};
    return ir::record1(ir::Op::Reshape, {x}, {}, &t);
  }
  return x.reshaped(shape);
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  check_rank(x, perm.size(), "transpose");
  if (is_identity_permutation(perm)) return x;  // immutable: nothing to move, nothing to record
  if (x.is_symbolic()) return ir::record1(ir::Op::Transpose, {x}, {.dims = perm});
  std::vector<int64_t> st = strides_of(x.shape());
  std::vector<bool> seen(perm.size(), false);
  Shape shape(perm.size());
  Strided a{0, std::vector<int64_t>(perm.size())};
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= x.rank() || seen[static_cast<size_t>(p)])
      throw SheafError(fmt::format("transpose: [{}] is not a permutation of the axes of {}", fmt::join(perm, ", "), type_str(x)));
    seen[static_cast<size_t>(p)] = true;
    shape[i] = x.dim(p);
    a.strides[i] = st[static_cast<size_t>(p)];
  }
  return gather_view(x, a, shape);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& limits,
             const std::vector<int64_t>& strides) {
  check_rank(x, starts.size(), "slice");
  check_rank(x, limits.size(), "slice");
  check_rank(x, strides.size(), "slice");
  Strided a = dense(x.shape());
  Shape shape(starts.size());
  for (size_t d = 0; d < starts.size(); ++d) {
    int64_t n = x.shape()[d];
    if (starts[d] < 0 || limits[d] > n || starts[d] > limits[d] || strides[d] < 1)
      throw SheafError(fmt::format("slice: bounds {}:{}:{} invalid for axis {} of {}", starts[d], limits[d], strides[d], d, type_str(x)));
    shape[d] = (limits[d] - starts[d] + strides[d] - 1) / strides[d];
    a.offset += starts[d] * a.strides[d];
    a.strides[d] *= strides[d];
  }
  if (a.offset == 0 && shape == x.shape()) return x;
  if (x.is_symbolic()) return ir::record1(ir::Op::Slice, {x}, {.starts = starts, .limits = limits, .strides = strides});
  return gather_view(x, a, shape);
}

Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t limit) {
  std::vector<int64_t> starts(x.shape().size(), 0), limits = x.shape(), strides(x.shape().size(), 1);
  starts[static_cast<size_t>(axis)] = start;
  limits[static_cast<size_t>(axis)] = limit;
  return slice(x, starts, limits, strides);
}

Tensor reverse(const Tensor& x, const std::vector<int64_t>& axes) {
  if (x.is_symbolic()) {
    for (int64_t ax : axes)
      if (ax < 0 || ax >= x.rank()) throw SheafError(fmt::format("reverse: axis {} out of range for {}", ax, type_str(x)));
    return ir::record1(ir::Op::Reverse, {x}, {.dims = axes});
  }
  Strided a = dense(x.shape());
  for (int64_t ax : axes) {
    if (ax < 0 || ax >= x.rank()) throw SheafError(fmt::format("reverse: axis {} out of range for {}", ax, type_str(x)));
    size_t d = static_cast<size_t>(ax);
    if (x.shape()[d] == 0) continue;
    a.offset += (x.shape()[d] - 1) * a.strides[d];
    a.strides[d] = -a.strides[d];
  }
  return gather_view(x, a, x.shape());
}

Tensor concatenate(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw SheafError("concatenate: no operands");
  const Tensor& x0 = xs[0];
  if (axis < 0 || axis >= x0.rank()) throw SheafError(fmt::format("concatenate: axis {} out of range for {}", axis, type_str(x0)));
  size_t ax = static_cast<size_t>(axis);
  Shape shape = x0.shape();
  shape[ax] = 0;
  for (const Tensor& x : xs) {
    bool same = x.dtype() == x0.dtype() && x.rank() == x0.rank();
    for (size_t d = 0; same && d < shape.size(); ++d) same = d == ax || x.shape()[d] == x0.shape()[d];
    if (!same) throw SheafError(fmt::format("concatenate: {} and {} differ outside axis {}", type_str(x0), type_str(x), axis));
    shape[ax] += x.shape()[ax];
  }
  if (std::any_of(xs.begin(), xs.end(), [](const Tensor& x) { return x.is_symbolic(); }))
    return ir::record1(ir::Op::Concatenate, xs, {.axis = axis});
  Tensor out = Tensor::empty(x0.dtype(), shape);
  Strided b = dense(shape);
  for (const Tensor& x : xs) {
    copy_strided(x, dense(x.shape()), out, b, x.shape());
    b.offset += x.shape()[ax] * b.strides[ax];
  }
  return out;
}

Tensor overwrite(const Tensor& x, const Tensor& window, const std::vector<int64_t>& starts) {
  check_rank(x, starts.size(), "overwrite");
  bool fits = window.dtype() == x.dtype() && window.rank() == x.rank();
  for (size_t d = 0; fits && d < starts.size(); ++d)
    fits = starts[d] >= 0 && starts[d] + window.shape()[d] <= x.shape()[d];
  if (!fits)
    throw SheafError(fmt::format("overwrite: {} does not fit in {} at [{}]", type_str(window), type_str(x), fmt::join(starts, ", ")));
  if (x.is_symbolic() || window.is_symbolic()) {
    std::vector<Tensor> ops{x, window};
    for (int64_t s : starts) ops.push_back(Tensor::scalar(DType::I32, static_cast<double>(s)));
    return ir::record1(ir::Op::DynamicUpdateSlice, ops, {});
  }
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  if (x.nbytes()) std::memcpy(out.mutable_bytes(), x.bytes(), x.nbytes());
  Strided b = dense(x.shape());
  for (size_t d = 0; d < starts.size(); ++d) b.offset += starts[d] * b.strides[d];
  copy_strided(window, dense(window.shape()), out, b, window.shape());
  return out;
}

Tensor pad(const Tensor& x, double value, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  check_rank(x, lo.size(), "pad");
  check_rank(x, hi.size(), "pad");
  Shape shape = x.shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (lo[d] < 0 || hi[d] < 0) throw SheafError(fmt::format("pad: negative padding for {}", type_str(x)));
    shape[d] += lo[d] + hi[d];
  }
  if (x.is_symbolic()) return ir::record1(ir::Op::Pad, {x}, {.lo = lo, .hi = hi, .scalar = value});
  return overwrite(broadcast_to(Tensor::scalar(x.dtype(), value), shape), x, lo);
}

Tensor iota(DType dtype, const Shape& shape, int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    throw SheafError(fmt::format("iota: axis {} out of range for [{}]", axis, shape_str(shape)));
  int64_t n = shape[static_cast<size_t>(axis)];
  Tensor line = Tensor::empty(dtype, {n});
  // Typed loops where set()'s conversions are exact (constant folding expands iotas of 64Ki elements)
  auto count = [&]<typename T>(T*) {
    T* p = reinterpret_cast<T*>(line.mutable_bytes());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  };
  if (dtype == DType::I32 && n <= (int64_t{1} << 31)) count(static_cast<int32_t*>(nullptr));
  else if (dtype == DType::U32 && n <= (int64_t{1} << 32)) count(static_cast<uint32_t*>(nullptr));
  else if (dtype == DType::F32 && n <= (int64_t{1} << 24)) count(static_cast<float*>(nullptr));
  else
    for (int64_t i = 0; i < n; ++i) line.set(i, static_cast<double>(i));
  Shape unit(shape.size(), 1);
  unit[static_cast<size_t>(axis)] = n;
  return broadcast_to(line.reshaped(unit), shape);
}

}  // namespace sheaf
