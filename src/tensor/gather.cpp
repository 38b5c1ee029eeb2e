// tensor/gather.cpp — gather/scatter along an axis, dynamic slices, sorting.
// A tensor seen along `axis` is [outer, n, inner]: take and scatter move runs of `inner`
// elements; sort works on the lines of n elements (stride `inner`) one at a time.
#include "tensor/gather.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const Shape& s, int64_t axis, const char* who) {
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
    throw SheafError(fmt::format("{}: axis {} out of range for rank {}", who, axis, s.size()));
  AxisSplit a;
  for (int64_t d = 0; d < axis; ++d) a.outer *= s[static_cast<size_t>(d)];
  a.n = s[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) a.inner *= s[d];
  return a;
}

// Index values as i64; `clamp` maps them into [0, n), otherwise out-of-range ones become -1.
std::vector<int64_t> index_values(const Tensor& idx, int64_t n, bool clamp, const char* who) {
  if (!is_int(idx.dtype())) throw SheafError(fmt::format("{}: indices must be an integer tensor, got {}", who, type_str(idx)));
  std::vector<int64_t> v(static_cast<size_t>(idx.numel()));
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t j = idx.dtype() == DType::I32 ? int64_t{idx.data<int32_t>()[i]} : int64_t{idx.data<uint32_t>()[i]};
    if (clamp) j = std::clamp<int64_t>(j, 0, std::max<int64_t>(n - 1, 0));
    else if (j < 0 || j >= n) j = -1;
    v[static_cast<size_t>(i)] = j;
  }
  return v;
}

Shape taken_shape(const Shape& xs, const Tensor& idx, int64_t axis) {
  Shape s(xs.begin(), xs.begin() + axis);
  s.insert(s.end(), idx.shape().begin(), idx.shape().end());
  s.insert(s.end(), xs.begin() + axis + 1, xs.end());
  return s;
}

template <typename E>
void take_runs(const E* x, E* out, const std::vector<int64_t>& idx, AxisSplit s) {
  int64_t m = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      const E* src = x + (o * s.n + idx[static_cast<size_t>(j)]) * s.inner;
      std::copy(src, src + s.inner, out + (o * m + j) * s.inner);
    }
}

template <typename T>
T plus(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a + b;
  else if constexpr (sizeof(T) == 1) return static_cast<T>(a | b);  // bool: or
  else return static_cast<T>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

template <typename E, bool Add>
void scatter_runs(E* x, const E* upd, const std::vector<int64_t>& idx, AxisSplit s) {
  int64_t m = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      int64_t i = idx[static_cast<size_t>(j)];
      if (i < 0) continue;
      E* dst = x + (o * s.n + i) * s.inner;
      const E* src = upd + (o * m + j) * s.inner;
      if constexpr (Add) for (int64_t k = 0; k < s.inner; ++k) dst[k] = plus(dst[k], src[k]);
      else std::copy(src, src + s.inner, dst);
    }
}

template <bool Add>
void scatter_typed(Tensor& out, const Tensor& upd, const std::vector<int64_t>& idx, AxisSplit s) {
  switch (out.dtype()) {
    case DType::F32: return scatter_runs<float, Add>(out.mutable_data<float>(), upd.data<float>(), idx, s);
    case DType::I32: return scatter_runs<int32_t, Add>(out.mutable_data<int32_t>(), upd.data<int32_t>(), idx, s);
    case DType::U32: return scatter_runs<uint32_t, Add>(out.mutable_data<uint32_t>(), upd.data<uint32_t>(), idx, s);
    case DType::Bool: return scatter_runs<uint8_t, Add>(out.mutable_data<uint8_t>(), upd.data<uint8_t>(), idx, s);
    default: return scatter_runs<uint16_t, Add>(out.mutable_data<uint16_t>(), upd.data<uint16_t>(), idx, s);  // Set only
  }
}

// Starts clamped so that a box of `sizes` fits in `shape`.
std::vector<int64_t> clamped_starts(std::vector<int64_t> starts, const Shape& sizes, const Tensor& x, const char* who) {
  if (starts.size() != x.shape().size() || sizes.size() != x.shape().size())
    throw SheafError(fmt::format("{}: {} needs {} start indices and sizes", who, type_str(x), x.rank()));
  for (size_t d = 0; d < starts.size(); ++d) {
    if (sizes[d] < 0 || sizes[d] > x.shape()[d])
      throw SheafError(fmt::format("{}: size {} does not fit axis {} of {}", who, sizes[d], d, type_str(x)));
    starts[d] = std::clamp<int64_t>(starts[d], 0, x.shape()[d] - sizes[d]);
  }
  return starts;
}

// Order-preserving 32-bit keys: comparing keys as unsigned integers orders the values, with
// -0 equal to +0 and every NaN above +inf (NumPy's order).
uint32_t order_key(float v) {
  if (std::isnan(v)) return 0xFFFFFFFFu;
  uint32_t b = std::bit_cast<uint32_t>(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}
uint32_t order_key(int32_t v) { return static_cast<uint32_t>(v) ^ 0x80000000u; }
uint32_t order_key(uint32_t v) { return v; }

// Sorts every line along `axis` and keeps the first k positions of each. Each element becomes
// one u64 (key, index) — descending flips the key, not the index — so plain integer order is
// the stable order, and top-k is a selection followed by a sort of the k chosen.
template <typename E, typename Conv>
Sorted sort_lines(const Tensor& x, int64_t axis, bool desc, int64_t k, Conv conv) {
  AxisSplit s = split_at(x.shape(), axis, "sort");
  Shape shape = x.shape();
  shape[static_cast<size_t>(axis)] = k;
  Sorted r{Tensor::empty(x.dtype(), shape), Tensor::empty(DType::I32, shape)};
  if (x.numel() == 0) return r;  // no lines to sort, however many an empty axis makes ([2^62 0])
  const E* src = x.data<E>();
  E* vals = r.values.mutable_data<E>();
  int32_t* inds = r.indices.mutable_data<int32_t>();
  std::vector<uint64_t> items(static_cast<size_t>(s.n));
  uint32_t flip = desc ? 0xFFFFFFFFu : 0u;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      const E* line = src + o * s.n * s.inner + in;
      for (int64_t i = 0; i < s.n; ++i)
        items[static_cast<size_t>(i)] = static_cast<uint64_t>(order_key(conv(line[i * s.inner])) ^ flip) << 32 | static_cast<uint64_t>(i);
      auto kth = items.begin() + k;
      if (k < s.n) std::nth_element(items.begin(), kth, items.end());
      std::sort(items.begin(), kth);
      int64_t base = o * k * s.inner + in;
      for (int64_t i = 0; i < k; ++i) {
        auto j = static_cast<int32_t>(items[static_cast<size_t>(i)] & 0xFFFFFFFFu);
        vals[base + i * s.inner] = line[j * s.inner];
        inds[base + i * s.inner] = j;
      }
    }
  return r;
}

Sorted sort_k(const Tensor& x, int64_t axis, bool desc, int64_t k) {
  switch (x.dtype()) {
    case DType::F32: return sort_lines<float>(x, axis, desc, k, [](float v) { return v; });
    case DType::F16: return sort_lines<uint16_t>(x, axis, desc, k, half_to_float);
    case DType::BF16: return sort_lines<uint16_t>(x, axis, desc, k, bf16_to_float);
    case DType::I32: return sort_lines<int32_t>(x, axis, desc, k, [](int32_t v) { return v; });
    case DType::U32: return sort_lines<uint32_t>(x, axis, desc, k, [](uint32_t v) { return v; });
    case DType::Bool: return sort_lines<uint8_t>(x, axis, desc, k, [](uint8_t v) { return static_cast<uint32_t>(v); });
  }
  return {};
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& indices, int64_t axis) {
  AxisSplit s = split_at(x.shape(), axis, "take");
  if (s.n == 0 && indices.numel() > 0) throw SheafError(fmt::format("take: cannot index the empty axis {} of {}", axis, type_str(x)));
  if (x.is_symbolic() || indices.is_symbolic()) {
    if (!is_int(indices.dtype())) throw SheafError(fmt::format("take: indices must be integers, got {}", type_str(indices)));
    return ir::record1(ir::Op::Gather, {x, indices}, {.axis = axis});
  }
  std::vector<int64_t> idx = index_values(indices, s.n, true, "take");
  Tensor out = Tensor::empty(x.dtype(), taken_shape(x.shape(), indices, axis));
  switch (dtype_size(x.dtype())) {
    case 1: take_runs(x.data<uint8_t>(), out.mutable_data<uint8_t>(), idx, s); break;
    case 2: take_runs(x.data<uint16_t>(), out.mutable_data<uint16_t>(), idx, s); break;
    default: take_runs(x.data<uint32_t>(), out.mutable_data<uint32_t>(), idx, s); break;
  }
  return out;
}

Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, ScatterMode mode) {
  AxisSplit s = split_at(x.shape(), axis, "scatter");
  if (updates.dtype() != x.dtype() || updates.shape() != taken_shape(x.shape(), indices, axis))
    throw SheafError(fmt::format("scatter: updates {} do not match {} indexed by {}", type_str(updates), type_str(x), type_str(indices)));
  if (x.is_symbolic() || indices.is_symbolic() || updates.is_symbolic()) {
    if (!is_int(indices.dtype())) throw SheafError(fmt::format("scatter: indices must be integers, got {}", type_str(indices)));
    return ir::record1(ir::Op::Scatter, {x, indices, updates}, {.scatter = mode, .axis = axis});
  }
  bool half = x.dtype() == DType::F16 || x.dtype() == DType::BF16;
  if (mode == ScatterMode::Add && half)  // accumulate in f32, round once
    return convert(scatter(convert(x, DType::F32), indices, convert(updates, DType::F32), axis, mode), x.dtype());
  std::vector<int64_t> idx = index_values(indices, s.n, false, "scatter");
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  if (x.nbytes()) std::memcpy(out.mutable_bytes(), x.bytes(), x.nbytes());
  if (mode == ScatterMode::Add) scatter_typed<true>(out, updates, idx, s);
  else scatter_typed<false>(out, updates, idx, s);
  return out;
}

Tensor dynamic_slice(const Tensor& x, const std::vector<Tensor>& starts, const Shape& sizes) {
  bool symbolic = x.is_symbolic() || std::any_of(starts.begin(), starts.end(), [](const Tensor& s) { return s.is_symbolic(); });
  if (!symbolic) {
    std::vector<int64_t> v;
    for (const Tensor& s : starts) v.push_back(static_cast<int64_t>(s.get(0)));
    return dynamic_slice(x, v, sizes);
  }
  if (starts.size() != sizes.size() || static_cast<int64_t>(sizes.size()) != x.rank())
    throw SheafError(fmt::format("dynamic_slice: {} needs {} starts and sizes", type_str(x), x.rank()));
  std::vector<Tensor> ops{x};
  for (const Tensor& s : starts) ops.push_back(convert(s, DType::I32));
  return ir::record1(ir::Op::DynamicSlice, ops, {.sizes = sizes});
}

Tensor dynamic_update_slice(const Tensor& x, const Tensor& update, const std::vector<Tensor>& starts) {
  bool symbolic = x.is_symbolic() || update.is_symbolic() ||
                  std::any_of(starts.begin(), starts.end(), [](const Tensor& s) { return s.is_symbolic(); });
  if (!symbolic) {
    std::vector<int64_t> v;
    for (const Tensor& s : starts) v.push_back(static_cast<int64_t>(s.get(0)));
    return dynamic_update_slice(x, update, v);
  }
  if (starts.size() != static_cast<size_t>(x.rank()))
    throw SheafError(fmt::format("dynamic_update_slice: {} needs {} starts", type_str(x), x.rank()));
  std::vector<Tensor> ops{x, update};
  for (const Tensor& s : starts) ops.push_back(convert(s, DType::I32));
  return ir::record1(ir::Op::DynamicUpdateSlice, ops, {});
}

Tensor dynamic_slice(const Tensor& x, std::vector<int64_t> starts, const Shape& sizes) {
  if (x.is_symbolic()) {
    std::vector<Tensor> ts;
    for (int64_t s : starts) ts.push_back(Tensor::scalar(DType::I32, static_cast<double>(s)));
    return dynamic_slice(x, ts, sizes);
  }
  starts = clamped_starts(std::move(starts), sizes, x, "dynamic_slice");
  std::vector<int64_t> limits(starts.size()), strides(starts.size(), 1);
  for (size_t d = 0; d < starts.size(); ++d) limits[d] = starts[d] + sizes[d];
  return slice(x, starts, limits, strides);
}

Tensor dynamic_update_slice(const Tensor& x, const Tensor& update, std::vector<int64_t> starts) {
  if (update.rank() != x.rank())
    throw SheafError(fmt::format("dynamic_update_slice: update {} and operand {} differ in rank", type_str(update), type_str(x)));
  if (x.is_symbolic() || update.is_symbolic()) {
    std::vector<Tensor> ts;
    for (int64_t s : starts) ts.push_back(Tensor::scalar(DType::I32, static_cast<double>(s)));
    return dynamic_update_slice(x, update, ts);
  }
  return overwrite(x, update, clamped_starts(std::move(starts), update.shape(), x, "dynamic_update_slice"));
}

Sorted sort(const Tensor& x, int64_t axis, bool descending) {
  split_at(x.shape(), axis, "sort");
  if (x.is_symbolic()) {
    auto r = ir::recorder().record(ir::Op::Sort, {x}, {.axis = axis, .descending = descending});
    return {r[0], r[1]};
  }
  return sort_k(x, axis, descending, x.dim(axis));
}

Sorted top_k(const Tensor& x, int64_t k) {
  if (x.rank() == 0) throw SheafError(fmt::format("top_k: {} has no last axis", type_str(x)));
  int64_t n = x.dim(x.rank() - 1);
  if (k < 0 || k > n) throw SheafError(fmt::format("top_k: k = {} out of range for last axis of {}", k, type_str(x)));
  if (x.is_symbolic()) {
    auto r = ir::recorder().record(ir::Op::TopK, {x}, {.k = k});
    return {r[0], r[1]};
  }
  return sort_k(x, x.rank() - 1, true, k);
}

}  // namespace sheaf
