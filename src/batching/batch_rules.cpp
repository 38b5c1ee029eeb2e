// batching/batch_rules.cpp — the batching rule of every IR op (contract in batch_rules.hpp).
// Notation: `x[k]` the operands, `b[k]` whether operand k is batched, `n` the batch size, `out`
// the per-example result types. The elementwise primitives broadcast NumPy-style (right-aligned),
// so an unbatched operand [...s] meets a batched one [n, ...s] without help; ops that need equal
// operand shapes (concatenate, scatter, dynamic_update_slice) spread the unbatched ones first.
// Gather and scatter with batched indices on a batched operand index one flat axis of n·D rows
// (D the indexed axis): index j of example i reads row i·D + j. Batched starts of dynamic_slice
// and dynamic_update_slice become such gathers, one per axis.
#include "batching/batch_rules.hpp"

#include <limits>
#include <optional>

#include "batching/vmap.hpp"
#include "dist/collectives.hpp"
#include "tensor/dot.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/reduce.hpp"
#include "tensor/gelu.hpp"
#include "tensor/softmax.hpp"
#include "trace/tracer.hpp"

namespace sheaf::batching {
namespace {

using ir::Op;
using Batch = std::vector<Tensor>;
using Axes = std::vector<int64_t>;

Shape with_batch(int64_t n, Shape s) {
  s.insert(s.begin(), n);
  return s;
}
Axes prepend(int64_t first, Axes v) {
  v.insert(v.begin(), first);
  return v;
}
// Axes of the example as axes of the batch.
Axes shifted(Axes axes) {
  for (int64_t& d : axes) ++d;
  return axes;
}
Axes axis_range(int64_t lo, int64_t hi) {
  Axes v;
  for (int64_t i = lo; i < hi; ++i) v.push_back(i);
  return v;
}
Axes join(std::initializer_list<Axes> parts) {
  Axes v;
  for (const Axes& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

// An unbatched operand repeated for every example: [...s] → [n, ...s].
Tensor spread(const Tensor& x, int64_t n) { return broadcast_to(x, with_batch(n, x.shape())); }

bool any_batched(const std::vector<bool>& b, size_t from) {
  for (size_t k = from; k < b.size(); ++k)
    if (b[k]) return true;
  return false;
}

// The fallback rule: the op recorded once per example on row i of the batched operands, the
// results stacked on a new axis 0.
Batch unrolled(const ir::Node& node, const std::vector<Tensor>& x, const std::vector<bool>& b, int64_t n,
               const std::vector<ir::Type>& out) {
  ++vmap_stats().unrolled;
  std::vector<std::vector<Tensor>> rows(out.size());
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Tensor> ops;
    for (size_t k = 0; k < x.size(); ++k) ops.push_back(b[k] ? example(x[k], i) : x[k]);
    std::vector<Tensor> r = ir::recorder().record(node.op, ops, node.attrs, &out[0]);
    for (size_t j = 0; j < r.size(); ++j) rows[j].push_back(reshape(r[j], with_batch(1, r[j].shape())));
  }
  Batch result;
  for (const std::vector<Tensor>& r : rows) result.push_back(concatenate(r, 0));
  return result;
}

// A while with a trip count over a batch: every carried value batched (the unbatched ones
// repeated), the body batched by batch_graph; every example runs the same number of iterations,
// counted by counted_loop's own counter.
Batch counted_while(const ir::Node& node, const std::vector<Tensor>& x, const std::vector<bool>& b, int64_t n) {
  std::vector<Tensor> carried;
  for (size_t k = 0; k < x.size(); ++k) carried.push_back(b[k] ? x[k] : spread(x[k], n));
  const ir::Graph& body = *node.attrs.regions[1];
  return trace::counted_loop(carried, node.attrs.k, [&](const Tensor&, std::span<const Tensor> st) { return batch_graph(body, st, n); });
}

// dot_general with a batched side. Both: the batch pairs up as one more batch dimension (the
// first, so the product starts with it). One: it is a free dimension of that side; the product
// lists batch dims, lhs free dims, rhs free dims, so it is moved to the front.
Tensor batched_dot(const Tensor& l, const Tensor& r, bool bl, bool br, DotDims d) {
  if (bl && br) {
    d.lhs_batch = prepend(0, shifted(d.lhs_batch));
    d.rhs_batch = prepend(0, shifted(d.rhs_batch));
    d.lhs_contract = shifted(d.lhs_contract);
    d.rhs_contract = shifted(d.rhs_contract);
    return dot_general(l, r, d);
  }
  int64_t at = static_cast<int64_t>(d.lhs_batch.size());
  if (bl) {
    d.lhs_batch = shifted(d.lhs_batch);
    d.lhs_contract = shifted(d.lhs_contract);
  } else {
    at += l.rank() - static_cast<int64_t>(d.lhs_batch.size() + d.lhs_contract.size());
    d.rhs_batch = shifted(d.rhs_batch);
    d.rhs_contract = shifted(d.rhs_contract);
  }
  return to_front(dot_general(l, r, d), at);
}

// x [n, pre..., D, post...] (D on axis + 1) → [n·D, pre..., post...].
Tensor flat_rows(const Tensor& x, int64_t axis) {
  Tensor t = transpose(x, join({{0, axis + 1}, axis_range(1, axis + 1), axis_range(axis + 2, x.rank())}));
  Shape s = t.shape();
  s[0] *= s[1];
  s.erase(s.begin() + 1);
  return reshape(t, s);
}

Tensor i32(int64_t v) { return Tensor::scalar(DType::I32, static_cast<double>(v)); }
// An i32 tensor of `shape` whose value is the index along `axis`.
Tensor index_along(const Shape& shape, int64_t axis) {
  ir::Type t{DType::I32, shape};
  return ir::record1(Op::Iota, {}, {.dtype = DType::I32, .axis = axis}, &t);
}

// The flat row of index idx[i, ...] (integers in [0, D)): i·D + idx, as i32.
Tensor flat_index(const Tensor& idx, int64_t dim) {
  return binary(Binary::Add, binary(Binary::Mul, index_along(idx.shape(), 0), i32(dim)), convert(idx, DType::I32));
}

// Whether the flat rows of a batched x of n examples with D rows each are addressable by i32.
bool flat_fits(int64_t n, int64_t dim) { return dim > 0 && n * dim < std::numeric_limits<int32_t>::max(); }

// take(x, idx, axis) per example; nullopt when the flat rows do not fit i32 (then unrolled).
std::optional<Tensor> batched_gather(const Tensor& x, const Tensor& idx, bool bx, bool bi, int64_t axis, int64_t n) {
  if (!bi) return take(x, idx, axis + 1);             // [n, pre, I, post]
  if (!bx) return to_front(take(x, idx, axis), axis);  // [pre, n, I, post] → [n, pre, I, post]
  int64_t dim = x.dim(axis + 1);
  if (!flat_fits(n, dim)) return std::nullopt;
  // take clamps indices into [0, D): clamp before they become flat rows.
  Tensor c = binary(Binary::Max, binary(Binary::Min, idx, Tensor::scalar(idx.dtype(), static_cast<double>(dim - 1))),
                    Tensor::scalar(idx.dtype(), 0));
  Tensor r = take(flat_rows(x, axis), flat_index(c, dim), 0);  // [n, I..., pre..., post...]
  int64_t q = idx.rank() - 1, p = axis;
  return transpose(r, join({{0}, axis_range(q + 1, q + p + 1), axis_range(1, q + 1), axis_range(q + p + 1, r.rank())}));
}

// scatter(x, idx, upd, axis) per example; nullopt when the flat rows do not fit i32.
std::optional<Tensor> batched_scatter(const std::vector<Tensor>& x, const std::vector<bool>& b, int64_t axis, ScatterMode mode,
                                      int64_t n) {
  Tensor xb = b[0] ? x[0] : spread(x[0], n), ub = b[2] ? x[2] : spread(x[2], n);
  const Tensor& idx = x[1];
  if (!b[1]) return scatter(xb, idx, ub, axis + 1, mode);
  int64_t dim = xb.dim(axis + 1);
  if (!flat_fits(n, dim)) return std::nullopt;
  // scatter skips out-of-range indices: send them to row n·D, past the flat rows.
  Tensor valid = binary(Binary::And, binary(Binary::Ge, idx, Tensor::scalar(idx.dtype(), 0)),
                        binary(Binary::Lt, idx, Tensor::scalar(idx.dtype(), static_cast<double>(dim))));
  Tensor flat = select(valid, flat_index(idx, dim), i32(n * dim));
  int64_t q = idx.rank() - 1, p = axis;
  // updates [n, pre, I, post] → [n, I, pre, post], the shape take gives on the flat rows
  Tensor u = transpose(ub, join({{0}, axis_range(p + 1, p + q + 1), axis_range(1, p + 1), axis_range(p + q + 1, ub.rank())}));
  Tensor s = scatter(flat_rows(xb, axis), flat, u, 0, mode);  // [n·D, pre, post]
  Shape unflat = s.shape();
  unflat[0] = dim;
  unflat.insert(unflat.begin(), n);  // [n, D, pre, post]
  return transpose(reshape(s, unflat), join({{0}, axis_range(2, p + 2), {1}, axis_range(p + 2, xb.rank())}));
}

// A start of a box of `size` on an axis of `dim`, clamped as dynamic_slice does: into
// [0, dim - size], as i32 (batched [n] or not []).
Tensor clamped_start(const Tensor& s, int64_t dim, int64_t size) {
  return binary(Binary::Max, binary(Binary::Min, convert(s, DType::I32), i32(dim - size)), i32(0));
}

// dynamic_slice(x, starts..., sizes) with some batched starts: the unbatched starts slice first
// (the axes with batched starts kept whole), then each of those axes gathers start + [0, size).
std::optional<Tensor> batched_dynamic_slice(const std::vector<Tensor>& x, const std::vector<bool>& b, const Axes& sizes, int64_t n) {
  Tensor t = b[0] ? x[0] : spread(x[0], n);
  std::vector<Tensor> starts{i32(0)};
  Shape box = with_batch(n, sizes);
  for (size_t d = 0; d < sizes.size(); ++d) {
    starts.push_back(b[d + 1] ? i32(0) : x[d + 1]);
    if (b[d + 1]) box[d + 1] = t.dim(static_cast<int64_t>(d) + 1);
  }
  t = dynamic_slice(t, starts, box);
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!b[d + 1]) continue;
    const int64_t ax = static_cast<int64_t>(d), size = sizes[d];
    Tensor s = clamped_start(x[d + 1], t.dim(ax + 1), size);                    // [n]
    Tensor idx = binary(Binary::Add, reshape(s, {n, 1}), index_along({n, size}, 1));  // [n, size]
    auto g = batched_gather(t, idx, true, true, ax, n);
    if (!g) return std::nullopt;
    t = *g;
  }
  return t;
}

// dynamic_update_slice(x, u, starts...) with some batched starts: position p of x reads u at
// p - start (gathered axis by axis) and takes it where p lies in the box on every axis.
std::optional<Tensor> batched_dynamic_update_slice(const std::vector<Tensor>& x, const std::vector<bool>& b, int64_t n) {
  Tensor xb = b[0] ? x[0] : spread(x[0], n), g = b[1] ? x[1] : spread(x[1], n), inside;
  const int64_t rank = xb.rank() - 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t dim = xb.dim(d + 1), size = g.dim(d + 1);
    const Tensor& start = x[static_cast<size_t>(d) + 2];
    Tensor s = clamped_start(start, dim, size);
    Tensor pos = binary(Binary::Sub, index_along({n, dim}, 1), b[static_cast<size_t>(d) + 2] ? reshape(s, {n, 1}) : s);  // [n, dim]
    auto h = batched_gather(g, pos, true, true, d, n);  // clamps pos into [0, size)
    if (!h) return std::nullopt;
    g = *h;
    Tensor in_box = binary(Binary::And, binary(Binary::Ge, pos, i32(0)), binary(Binary::Lt, pos, i32(size)));
    Shape unit(static_cast<size_t>(rank) + 1, 1);
    unit[0] = n;
    unit[static_cast<size_t>(d) + 1] = dim;
    in_box = reshape(in_box, unit);  // [n, 1.., dim, 1..]
    inside = d == 0 ? in_box : binary(Binary::And, inside, in_box);
  }
  return select(inside, g, xb);
}

}  // namespace

Tensor example(const Tensor& t, int64_t i, int64_t axis) {
  Shape s = t.shape();
  s.erase(s.begin() + axis);
  return reshape(slice_axis(t, axis, i, i + 1), s);
}

Tensor to_front(const Tensor& t, int64_t from) {
  return transpose(t, join({{from}, axis_range(0, from), axis_range(from + 1, t.rank())}));
}

Batch batch_node(const ir::Node& node, const std::vector<Tensor>& x, const std::vector<bool>& b, int64_t n) {
  std::vector<ir::Type> out;
  for (int32_t r = 0; r < node.nout; ++r) out.push_back(trace::current_graph().type(node.out + r));
  const ir::Attrs& a = node.attrs;
  auto all_batched = [&] {
    std::vector<Tensor> v;
    for (size_t k = 0; k < x.size(); ++k) v.push_back(b[k] ? x[k] : spread(x[k], n));
    return v;
  };
  switch (node.op) {
    case Op::Unary: return {unary(a.unary, x[0])};
    case Op::Binary: return {binary(a.binary, x[0], x[1])};
    case Op::Convert: return {convert(x[0], a.dtype)};
    case Op::Select: return {select(x[0], x[1], x[2])};
    case Op::BroadcastInDim: {
      ir::Attrs s = a;
      s.dims = prepend(0, shifted(a.dims));
      ir::Type t{out[0].dtype, with_batch(n, out[0].shape)};
      return {ir::record1(Op::BroadcastInDim, {x[0]}, s, &t)};
    }
    case Op::Reshape: return {reshape(x[0], with_batch(n, out[0].shape))};
    case Op::Transpose: return {transpose(x[0], prepend(0, shifted(a.dims)))};
    case Op::Slice: return {slice(x[0], prepend(0, a.starts), prepend(n, a.limits), prepend(1, a.strides))};
    case Op::Reverse: return {reverse(x[0], shifted(a.dims))};
    case Op::Concatenate: return {concatenate(all_batched(), a.axis + 1)};
    case Op::Pad: return {pad(x[0], a.scalar, prepend(0, a.lo), prepend(0, a.hi))};
    case Op::Reduce: return {reduce(a.reduce, x[0], shifted(a.dims))};
    case Op::Softmax: return {softmax(x[0], a.axis + 1)};
    case Op::SoftmaxGrad: {
      std::vector<Tensor> v = all_batched();
      return {softmax_grad(v[0], v[1], a.axis + 1)};
    }
    case Op::Gelu: return {gelu(x[0])};
    case Op::GeluGrad: {
      std::vector<Tensor> v = all_batched();
      return {gelu_grad(v[0], v[1])};
    }
    case Op::ArgReduce: return {arg_reduce(a.reduce, x[0], a.axis + 1)};
    case Op::DotGeneral: return {batched_dot(x[0], x[1], b[0], b[1], a.dot)};
    case Op::Gather:
      if (auto r = batched_gather(x[0], x[1], b[0], b[1], a.axis, n)) return {*r};
      break;
    case Op::Scatter:
      if (auto r = batched_scatter(x, b, a.axis, a.scatter, n)) return {*r};
      break;
    case Op::DynamicSlice:
      if (!any_batched(b, 1)) {
        std::vector<Tensor> starts{i32(0)};
        starts.insert(starts.end(), x.begin() + 1, x.end());
        return {dynamic_slice(x[0], starts, with_batch(n, a.sizes))};
      }
      if (auto r = batched_dynamic_slice(x, b, a.sizes, n)) return {*r};
      break;
    case Op::DynamicUpdateSlice:
      if (!any_batched(b, 2)) {
        std::vector<Tensor> v = all_batched();
        std::vector<Tensor> starts{i32(0)};
        starts.insert(starts.end(), x.begin() + 2, x.end());
        return {dynamic_update_slice(v[0], v[1], starts)};
      }
      if (auto r = batched_dynamic_update_slice(x, b, n)) return {*r};
      break;
    case Op::Sort: {
      Sorted s = sort(x[0], a.axis + 1, a.descending);
      return {s.values, s.indices};
    }
    case Op::TopK: {
      Sorted s = top_k(x[0], a.k);
      return {s.values, s.indices};
    }
    case Op::AllReduce: return dist::all_reduce_sum(all_batched());  // elementwise over ranks
    case Op::OptimizationBarrier: return ir::recorder().record(Op::OptimizationBarrier, all_batched(), a);
    // No operands, so never batched: listed for completeness of the switch.
    case Op::Parameter: case Op::Constant: case Op::Iota:
    case Op::While:  // a counted loop runs once over the batched state; others once per example
      if (a.k > 0) return counted_while(node, x, b, n);
      break;
    // Control flow: each example runs its own branch.
    case Op::Case: case Op::Call: break;
  }
  return unrolled(node, x, b, n, out);
}

}  // namespace sheaf::batching
