// tensor/reduce.cpp — reduction kernels (see reduce.hpp).
// The input is contiguous, so adjacent axes that are both reduced or both kept merge into one
// ("coalescing"); size-1 axes drop out. What remains alternates kept/reduced groups. The kernel
// walks the input one innermost run at a time: when the innermost group is reduced the run folds
// to one value (pairwise for sums, eight lanes for max/min); when it is kept the run combines
// element by element into a contiguous output row (a vectorisable loop).
#include "tensor/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

// Coalesced iteration space: dims[i] with red[i] telling whether group i is reduced.
struct Plan {
  std::vector<int64_t> dims;
  std::vector<bool> red;
};

Plan coalesce(const Shape& shape, const std::vector<bool>& reduced) {
  Plan p;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!p.dims.empty() && p.red.back() == reduced[i]) {
      p.dims.back() *= shape[i];
    } else {
      p.dims.push_back(shape[i]);
      p.red.push_back(reduced[i]);
    }
  }
  return p;
}

template <typename T>
struct SumOp {
  static T identity() { return T(0); }
  static T combine(T a, T b) { return a + b; }
  // NumPy's pairwise summation: blocks of ≤ 128 with eight partial sums, halves above.
  static T run(const T* x, int64_t n) {
    if (n < 8) {
      T r = T(0);
      for (int64_t i = 0; i < n; ++i) r += x[i];
      return r;
    }
    if (n <= 128) {
      T r[8];
      for (int j = 0; j < 8; ++j) r[j] = x[j];
      int64_t i = 8;
      for (; i < n - n % 8; i += 8)
        for (int j = 0; j < 8; ++j) r[j] += x[i + j];
      T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
      for (; i < n; ++i) res += x[i];
      return res;
    }
    int64_t half = n / 2;
    half -= half % 8;
    return run(x, half) + run(x + half, n - half);
  }
};

template <typename T>
struct ProdOp {
  static T identity() { return T(1); }
  static T combine(T a, T b) { return a * b; }
  static T run(const T* x, int64_t n) {
    T r = T(1);
    for (int64_t i = 0; i < n; ++i) r *= x[i];
    return r;
  }
};

// Max/Min: NaN wins (b != b is false for integers).
template <typename T, bool Max>
struct ExtremeOp {
  static T identity() {
    if constexpr (std::is_same_v<T, uint8_t>)  // bool: any / all
      return Max ? 0 : 1;
    else if constexpr (std::numeric_limits<T>::has_infinity)
      return Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      return Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  static T combine(T a, T b) { return ((Max ? b > a : b < a) || b != b) ? b : a; }
  static T run(const T* x, int64_t n) {
    T r = identity();
    int64_t i = 0;
    if constexpr (std::is_same_v<T, float>) {  // four 4-wide lanes; GCC does not vectorise this itself
      i = n - n % 16;
      if (i) r = run_f32x4(x, i);
    }
    for (; i < n; ++i) r = combine(r, x[i]);
    return r;
  }
  static float run_f32x4(const float* x, int64_t n) {  // n: a positive multiple of 16
    using v4 = float __attribute__((vector_size(16)));
    v4 acc[4];
    for (auto& v : acc) v = v4{} + identity();
    for (int64_t i = 0; i < n; i += 16) {
      for (int j = 0; j < 4; ++j) {
        v4 v;
        std::memcpy(&v, x + i + 4 * j, sizeof v);
        acc[j] = ((Max ? v > acc[j] : v < acc[j]) || v != v) ? v : acc[j];
      }
    }
    float r = identity();
    for (const v4& v : acc)
      for (int k = 0; k < 4; ++k) r = combine(r, v[k]);
    return r;
  }
};

// out (already holding the identity) ⊕= x reduced according to the plan.
template <typename T, typename Op>
void run_plan(const T* x, T* out, const Plan& p) {
  if (p.dims.empty()) {  // a single element
    out[0] = Op::combine(out[0], x[0]);
    return;
  }
  const size_t outer = p.dims.size() - 1;
  const int64_t n = p.dims.back();
  const bool inner_reduced = p.red.back();
  // Output strides of the outer groups (0 for reduced ones).
  std::vector<int64_t> ostride(outer, 0);
  int64_t s = inner_reduced ? 1 : n;
  for (size_t i = outer; i-- > 0;) {
    if (!p.red[i]) {
      ostride[i] = s;
      s *= p.dims[i];
    }
  }
  int64_t rows = 1;
  for (size_t i = 0; i < outer; ++i) rows *= p.dims[i];
  Odometer<1> groups(p.dims.data(), outer, {ostride.data()});
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    int64_t off = groups[0];
    if (inner_reduced) {
      out[off] = Op::combine(out[off], Op::run(row, n));
    } else {
      T* dst = out + off;
      for (int64_t j = 0; j < n; ++j) dst[j] = Op::combine(dst[j], row[j]);
    }
    groups.next();
  }
}

template <typename T, typename Op>
void run_typed(const Tensor& x, Tensor& out, const Plan& p) {
  T* o = out.mutable_data<T>();
  std::fill(o, o + out.numel(), Op::identity());
  if (x.numel() > 0) run_plan<T, Op>(x.data<T>(), o, p);
}

template <typename T>
void dispatch_op(Reduce op, const Tensor& x, Tensor& out, const Plan& p) {
  switch (op) {
    case Reduce::Sum: return run_typed<T, SumOp<T>>(x, out, p);
    case Reduce::Prod: return run_typed<T, ProdOp<T>>(x, out, p);
    case Reduce::Max: return run_typed<T, ExtremeOp<T, true>>(x, out, p);
    case Reduce::Min: return run_typed<T, ExtremeOp<T, false>>(x, out, p);
  }
}

std::vector<bool> reduced_mask(const Tensor& x, const std::vector<int64_t>& axes) {
  std::vector<bool> mask(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= x.rank()) throw SheafError(fmt::format("reduce: axis {} out of range for rank {}", a, x.rank()));
    if (mask[static_cast<size_t>(a)]) throw SheafError(fmt::format("reduce: repeated axis {}", a));
    mask[static_cast<size_t>(a)] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& s, const std::vector<bool>& mask, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!mask[i]) out.push_back(s[i]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

}  // namespace

Tensor reduce(Reduce op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  std::vector<bool> mask = reduced_mask(x, axes);
  Shape shape = reduced_shape(x.shape(), mask, keepdims);
  if (x.is_symbolic()) {
    ir::Attrs a{.reduce = op};
    for (size_t d = 0; d < mask.size(); ++d)
      if (mask[d]) a.dims.push_back(static_cast<int64_t>(d));
    Tensor r = ir::record1(ir::Op::Reduce, {x}, a);
    return keepdims ? reshape(r, shape) : r;
  }
  if (x.dtype() == DType::F16 || x.dtype() == DType::BF16)
    return convert(reduce(op, convert(x, DType::F32), axes, keepdims), x.dtype());
  Plan p = coalesce(x.shape(), mask);
  Tensor out = Tensor::empty(x.dtype(), shape);
  bool wraps = op == Reduce::Sum || op == Reduce::Prod;  // integer sums/products wrap: unsigned arithmetic
  switch (x.dtype()) {
    case DType::F32: dispatch_op<float>(op, x, out, p); break;
    case DType::I32:
      if (wraps) dispatch_op<uint32_t>(op, x, out, p);
      else dispatch_op<int32_t>(op, x, out, p);
      break;
    case DType::U32: dispatch_op<uint32_t>(op, x, out, p); break;
    case DType::Bool:
      if (wraps) throw SheafError("reduce: sum and product are not defined on bool; convert first");
      dispatch_op<uint8_t>(op, x, out, p);
      break;
    default: break;
  }
  return out;
}

namespace {

// x viewed as [outer, k, inner]: out[o, i] = index of the first extreme x[o, :, i].
template <typename T, bool Max>
void arg_typed(const T* x, int32_t* out, int64_t outer, int64_t k, int64_t inner) {
  if (inner == 1) {  // contiguous rows: find the extreme (vectorised), then its first position
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = x + o * k;
      T m = ExtremeOp<T, Max>::run(row, k);
      int64_t j = 0;
      if (m != m) {
        while (row[j] == row[j]) ++j;
      } else {
        while (row[j] != m) ++j;
      }
      out[o] = static_cast<int32_t>(j);
    }
    return;
  }
  std::vector<T> best(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T* base = x + o * k * inner;
    int32_t* idx = out + o * inner;
    std::copy(base, base + inner, best.begin());
    std::fill(idx, idx + inner, 0);
    for (int64_t j = 1; j < k; ++j) {
      const T* row = base + j * inner;
      for (int64_t i = 0; i < inner; ++i) {
        T v = row[i], b = best[static_cast<size_t>(i)];
        bool better = (Max ? v > b : v < b) || (v != v && b == b);
        best[static_cast<size_t>(i)] = better ? v : b;
        idx[i] = better ? static_cast<int32_t>(j) : idx[i];
      }
    }
  }
}

template <typename T>
void arg_dispatch(Reduce op, const Tensor& x, Tensor& out, int64_t outer, int64_t k, int64_t inner) {
  if (op == Reduce::Max) arg_typed<T, true>(x.data<T>(), out.mutable_data<int32_t>(), outer, k, inner);
  else arg_typed<T, false>(x.data<T>(), out.mutable_data<int32_t>(), outer, k, inner);
}

}  // namespace

Tensor arg_reduce(Reduce op, const Tensor& x, int64_t axis, bool keepdims) {
  if (op != Reduce::Max && op != Reduce::Min) throw SheafError("arg_reduce: only Max and Min select an index");
  std::vector<bool> mask = reduced_mask(x, {axis});
  const int64_t k = x.dim(axis);
  if (k == 0) throw SheafError(fmt::format("arg_reduce: axis {} of {} is empty", axis, type_str(x)));
  if (x.is_symbolic()) {
    Tensor r = ir::record1(ir::Op::ArgReduce, {x}, {.reduce = op, .axis = axis});
    return keepdims ? reshape(r, reduced_shape(x.shape(), mask, true)) : r;
  }
  if (x.dtype() == DType::F16 || x.dtype() == DType::BF16) return arg_reduce(op, convert(x, DType::F32), axis, keepdims);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  Tensor out = Tensor::empty(DType::I32, reduced_shape(x.shape(), mask, keepdims));
  if (out.numel() == 0) return out;
  switch (x.dtype()) {
    case DType::F32: arg_dispatch<float>(op, x, out, outer, k, inner); break;
    case DType::I32: arg_dispatch<int32_t>(op, x, out, outer, k, inner); break;
    case DType::U32: arg_dispatch<uint32_t>(op, x, out, outer, k, inner); break;
    case DType::Bool: arg_dispatch<uint8_t>(op, x, out, outer, k, inner); break;
    default: break;
  }
  return out;
}

}  // namespace sheaf
