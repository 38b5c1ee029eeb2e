// passes/simplify.cpp — algebraic simplification that is exact for IEEE floats.
// A node is replaced only by a value equal to it element for element under the reference
// kernels (src/tensor), signed zeros included. Rules (s: a splat, see rewrite.hpp):
//   add(x, -0.0) → x  (floats; x + +0.0 is NOT x: -0.0 + +0.0 = +0.0)    add(x, 0) → x  (ints)
//   sub(x, +0.0) → x  (x - -0.0 is x + +0.0, not x)                        mul(x, 1), div(x, 1) → x
//   or/xor(x, 0) → x (ints, bool)   and(x, true) → x (bool)   shifts by 0 → x   (commuted too)
//   neg(neg(x)) → x   floats and u32 only: the i32 kernel saturates -(-2^31) to 2^31 - 1
//   convert to x's dtype, reshape to x's shape, identity transpose, broadcast_in_dim to x's type,
//   slice covering x, reverse of size-1 axes, pad by nothing, concatenate(x) → x
//   reshape(reshape(x)) → reshape(x); transpose∘transpose and broadcast∘broadcast compose
//   transpose(dot_general(a, b)) read by nothing else → dot_general(b, a) when that leaves no
//   transpose or keeps the last axis last (dot_in_transposed_order; a·b = b·a exactly)
//   a reshape or transpose moves to the narrower side of a convert: reshape(convert(x)) →
//   convert(reshape(x)) when the convert widens (bf16 → f32), convert(reshape(x)) →
//   reshape(convert(x)) when it narrows — fusion then reads or writes the narrow value in memory
//   (a layout op of a value computed in a loop needs that value in a buffer)
//   concatenate drops operands that are empty along its axis
//   select(c, x, x) → x; select(splat c, x, y) → x or y
//   dynamic_slice of x's full size → x; with constant starts → slice (starts clamped like the
//   kernel clamps them); dynamic_update_slice(x, u, ...) with u of x's type → u
//   take(x, iota n) along an axis of size ≥ n → slice of the first n; scatter-add(x, iota n, u) →
//   add(x, pad(u) with -0.0) (the kernel adds each update to x's element once); scatter(x, iota n,
//   u) along an axis of size n → u
//   reduce over size-1 axes only (or none) → reshape(x), except float sums: the kernel adds each
//   element to +0.0, so -0.0 would become +0.0
//   a constant whose every element is its index along one axis (an arange, maybe broadcast, as
//   the class ids of a one-hot mask) → iota: kernels compute it from the index, no buffer is read;
//   broadcast_in_dim(iota) → iota along the axis the iota's axis becomes (not when it widens
//   a size-1 axis)
// Structural rules are exact. Rules that drop an arithmetic op return x itself, also when x is
// NaN, where the kernel returns a NaN of the same sign whose payload may differ (f16 NaNs are
// canonicalised, signalling NaNs quietened) — the only deviation from bit-identity.
#include <algorithm>
#include <cmath>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"
#include "tensor/shape.hpp"

namespace sheaf::passes {

using ir::Graph;
using ir::Node;
using ir::Op;
using ir::Type;

namespace {

using Simplified = std::optional<int32_t>;  // the new value that replaces the node's result


Simplified binary_identity(const Graph& g, Binary op, int32_t a, int32_t b) {
  DType d = g.type(a).dtype;
  bool fl = is_float(d), in = is_int(d), bo = d == DType::Bool;
  auto right = [&](double x) -> Simplified { return is_splat_of(g, b, x) ? Simplified(a) : std::nullopt; };
  auto either = [&](double x) -> Simplified {
    if (is_splat_of(g, b, x)) return a;
    if (is_splat_of(g, a, x)) return b;
    return std::nullopt;
  };
  switch (op) {
    case Binary::Add: return fl ? either(-0.0) : in ? either(0.0) : std::nullopt;
    case Binary::Sub: return fl || in ? right(0.0) : std::nullopt;
    case Binary::Mul: return fl || in ? either(1.0) : std::nullopt;
    case Binary::Div: return fl || in ? right(1.0) : std::nullopt;
    case Binary::Or: case Binary::Xor: return in || bo ? either(0.0) : std::nullopt;
    case Binary::And: return bo ? either(1.0) : std::nullopt;
    case Binary::ShiftLeft: case Binary::ShiftRightLogical: case Binary::ShiftRightArithmetic:
      return in ? right(0.0) : std::nullopt;
    default: return std::nullopt;
  }
}

// x as a value of type t (same elements in row-major order).
int32_t reshape_to(Rewriter& rw, int32_t x, const Type& t, SrcLoc loc) {
  return rw.out().type(x) == t ? x : rw.add(Op::Reshape, {x}, {}, {t}, loc);
}

Simplified simplify_dynamic_slice(Rewriter& rw, const Node& n, const std::vector<int32_t>& in, const Type& t) {
  const Shape shape = rw.out().type(in[0]).shape;  // a copy: adding nodes moves the type table
  if (n.attrs.sizes == shape) return in[0];  // the starts clamp to 0
  ir::Attrs a;
  for (size_t d = 0; d < shape.size(); ++d) {
    auto s = constant_tensor(rw.out(), in[d + 1], 1);
    if (!s) return std::nullopt;
    int64_t size = n.attrs.sizes[d];
    a.starts.push_back(std::clamp<int64_t>(static_cast<int64_t>(s->get(0)), 0, shape[d] - size));
    a.limits.push_back(a.starts.back() + size);
    a.strides.push_back(1);
  }
  return rw.add(Op::Slice, {in[0]}, std::move(a), {t}, n.loc);
}

Simplified simplify_concatenate(Rewriter& rw, const Node& n, const std::vector<int32_t>& in, const Type& t) {
  std::vector<int32_t> kept;
  for (int32_t v : in)
    if (rw.out().type(v).shape[static_cast<size_t>(n.attrs.axis)] != 0) kept.push_back(v);
  if (in.size() == 1) return in[0];
  if (kept.size() == 1) return kept[0];
  if (kept.empty() || kept.size() == in.size()) return std::nullopt;
  return rw.add(Op::Concatenate, std::move(kept), n.attrs, {t}, n.loc);
}

Simplified simplify_reduce(Rewriter& rw, const Node& n, int32_t x, const Type& t) {
  const Type& xt = rw.out().type(x);
  if (n.attrs.reduce == Reduce::Sum && is_float(xt.dtype)) return std::nullopt;
  for (int64_t d : n.attrs.dims)
    if (xt.shape[static_cast<size_t>(d)] != 1) return std::nullopt;
  return reshape_to(rw, x, t, n.loc);
}

// The axis along which constant `v` (rank ≥ 1, ≥ 2 elements, numeric) counts 0, 1, 2, … while
// staying the same along every other axis, if there is one: then v == iota(dtype, shape, axis).
// The element one step along axis k is at flat index stride(k), and holds 1 only for that k.
std::optional<int64_t> iota_axis(const Tensor& v) {
  const Shape& s = v.shape();
  if (s.empty() || v.numel() < 2 || v.dtype() == DType::Bool) return std::nullopt;
  auto is = [&](int64_t i, double want) {
    double x = v.get(i);
    return x == want && !std::signbit(x);  // -0.0 is not iota's +0.0
  };
  if (!is(0, 0)) return std::nullopt;
  int64_t stride = 1;
  for (int64_t k = static_cast<int64_t>(s.size()) - 1; k >= 0; stride *= s[static_cast<size_t>(k)], --k) {
    const int64_t extent = s[static_cast<size_t>(k)];
    if (extent < 2 || !is(stride, 1)) continue;
    for (int64_t i = 0; i < v.numel(); ++i)
      if (!is(i, static_cast<double>((i / stride) % extent))) return std::nullopt;
    return k;
  }
  return std::nullopt;
}

// The length n of `idx` when it is a rank-1 integer iota (0, 1, .., n − 1) and n ≤ `extent`:
// every index in range, each once, in order.
std::optional<int64_t> iota_indices(const Graph& g, int32_t idx, int64_t extent) {
  const Node& p = g.producer(idx);
  const Type& t = g.type(idx);
  if (p.op != Op::Iota || t.shape.size() != 1 || !is_int(t.dtype) || t.shape[0] > extent) return std::nullopt;
  return t.shape[0];
}

// take(x, iota n) along a → x's first n entries along a (`(get pos (range T))`).
Simplified simplify_gather(Rewriter& rw, const Node& n, const std::vector<int32_t>& in, const Type& t) {
  const Shape shape = rw.out().type(in[0]).shape;  // a copy: adding nodes moves the type table
  const auto axis = static_cast<size_t>(n.attrs.axis);
  const std::optional<int64_t> len = iota_indices(rw.out(), in[1], shape[axis]);
  if (!len) return std::nullopt;
  ir::Attrs a{.starts = std::vector<int64_t>(shape.size(), 0), .limits = shape, .strides = std::vector<int64_t>(shape.size(), 1)};
  a.limits[axis] = *len;
  return rw.add(Op::Slice, {in[0]}, std::move(a), {t}, n.loc);
}

// scatter(x, iota n, u) along a: the first n entries of x along a are updated once each, in
// order. Add: add(x, u padded to x's shape with -0.0, which adds nothing to any x) — the kernel
// adds each update to x's element; the gradient of `(get pos (range T))` is then a sum over the
// batch, not a scatter. Set with n = x's extent: u.
Simplified simplify_scatter(Rewriter& rw, const Node& n, const std::vector<int32_t>& in, const Type& t) {
  const auto axis = static_cast<size_t>(n.attrs.axis);
  const std::optional<int64_t> len = iota_indices(rw.out(), in[1], t.shape[axis]);
  if (!len || rw.out().type(in[2]).shape.size() != t.shape.size()) return std::nullopt;
  if (n.attrs.scatter == ScatterMode::Set) return *len == t.shape[axis] ? Simplified(in[2]) : std::nullopt;
  int32_t u = in[2];
  if (*len < t.shape[axis]) {
    ir::Attrs a{.lo = std::vector<int64_t>(t.shape.size(), 0), .hi = std::vector<int64_t>(t.shape.size(), 0)};
    a.hi[axis] = t.shape[axis] - *len;
    a.scalar = is_float(t.dtype) ? -0.0 : 0.0;
    u = rw.add(Op::Pad, {u}, std::move(a), {t}, n.loc);
  }
  return rw.add(Op::Binary, {in[0], u}, {.binary = Binary::Add}, {t}, n.loc);
}

bool is_layout(Op op) { return op == Op::Reshape || op == Op::Transpose; }

// n is a layout op of a widening convert, or a narrowing convert of a layout op: the same two ops
// in the other order, the layout op on the narrow side.
Simplified layout_to_narrow_side(Rewriter& rw, const Node& n, int32_t x, const Type& t) {
  const Graph& g = rw.out();  // grows with every rw.add: copy what is read from it first
  const Node& p = g.producer(x);
  const Op op = p.op;
  const ir::Attrs attrs = p.attrs;
  const int32_t y = p.in.empty() ? -1 : p.in[0];
  if (is_layout(n.op) && op == Op::Convert && dtype_size(t.dtype) > dtype_size(g.type(y).dtype)) {
    const Type moved{g.type(y).dtype, t.shape};
    return rw.add(Op::Convert, {rw.add(n.op, {y}, n.attrs, {moved}, n.loc)}, attrs, {t}, n.loc);
  }
  if (n.op == Op::Convert && is_layout(op) && dtype_size(t.dtype) < dtype_size(g.type(x).dtype)) {
    const Type narrowed{t.dtype, g.type(y).shape};
    return rw.add(op, {rw.add(Op::Convert, {y}, n.attrs, {narrowed}, n.loc)}, attrs, {t}, n.loc);
  }
  return std::nullopt;
}

// transpose(dot_general(a, b)) (x: the product) read by nothing else → dot_general(b, a),
// transposed by what is left of the permutation: the swapped product has the free dims of b before those of a. Done
// when that leaves no transpose, or when it keeps the last axis last where the old one did not
// (whoever reads the transpose then walks rows; a cotangent of dot_general's rhs, as dK of
// q·kᵀ, is such a transpose). Exact: a·b = b·a, and the contracting dims pair in the same order.
Simplified dot_in_transposed_order(Rewriter& rw, const Node& n, int32_t x, const Type& t) {
  const Graph& g = rw.out();  // grows with every rw.add: copy what is read from it first
  const Node& dot = g.producer(x);
  ir::Attrs attrs = dot.attrs;
  const DotDims d = attrs.dot;
  const int32_t a = dot.in[0], b = dot.in[1];
  const auto nb = static_cast<int64_t>(d.lhs_batch.size());
  const auto nlf = static_cast<int64_t>(g.type(a).shape.size() - d.lhs_batch.size() - d.lhs_contract.size());
  const auto nrf = static_cast<int64_t>(g.type(b).shape.size() - d.rhs_batch.size() - d.rhs_contract.size());
  std::vector<int64_t> swapped;  // old product axis → axis of the swapped one
  for (int64_t i = 0; i < nb; ++i) swapped.push_back(i);
  for (int64_t j = 0; j < nlf; ++j) swapped.push_back(nb + nrf + j);
  for (int64_t j = 0; j < nrf; ++j) swapped.push_back(nb + j);
  std::vector<int64_t> perm;  // out.shape[i] = swapped product.shape[perm[i]]
  for (int64_t q : n.attrs.dims) perm.push_back(swapped[static_cast<size_t>(q)]);
  const auto last = static_cast<int64_t>(perm.size()) - 1;
  const bool better = is_identity_permutation(perm) || (n.attrs.dims.back() != last && perm.back() == last);
  if (!better) return std::nullopt;
  Shape shape(g.type(b).shape.begin(), g.type(b).shape.begin() + nb);  // batch, b free, a free
  for (size_t i = static_cast<size_t>(nb); i < t.shape.size(); ++i) shape.push_back(0);
  for (size_t i = 0; i < perm.size(); ++i) shape[static_cast<size_t>(perm[i])] = t.shape[i];
  attrs.dot = DotDims{d.rhs_batch, d.lhs_batch, d.rhs_contract, d.lhs_contract};
  const int32_t product = rw.add(Op::DotGeneral, {b, a}, std::move(attrs), {Type{t.dtype, shape}}, n.loc);
  return is_identity_permutation(perm) ? product : rw.add(Op::Transpose, {product}, {.dims = perm}, {t}, n.loc);
}

Simplified simplify_node(Rewriter& rw, const Node& n, const std::vector<int32_t>& in, const std::vector<int32_t>& uses) {
  const Graph& g = rw.out();
  const ir::Attrs& a = n.attrs;
  const Type& t = rw.src().type(n.out);
  auto operand_is = [&](Op op) -> const Node* {
    const Node& p = g.producer(in[0]);
    return p.op == op ? &p : nullptr;
  };
  switch (n.op) {
    case Op::Constant: {
      auto axis = iota_axis(a.value);
      return axis ? Simplified(rw.add(Op::Iota, {}, {.dtype = t.dtype, .axis = *axis}, {t}, n.loc)) : std::nullopt;
    }
    case Op::Binary: return binary_identity(g, a.binary, in[0], in[1]);
    case Op::Unary: {
      const Node* inner = operand_is(Op::Unary);
      bool exact = is_float(t.dtype) || t.dtype == DType::U32;
      if (a.unary == Unary::Neg && exact && inner && inner->attrs.unary == Unary::Neg) return inner->in[0];
      return std::nullopt;
    }
    case Op::Convert:
      if (g.type(in[0]).dtype == a.dtype) return in[0];
      return layout_to_narrow_side(rw, n, in[0], t);
    case Op::Reshape: {
      const Node* inner = operand_is(Op::Reshape);
      if (g.type(in[0]) == t) return in[0];
      return inner ? Simplified(reshape_to(rw, inner->in[0], t, n.loc)) : layout_to_narrow_side(rw, n, in[0], t);
    }
    case Op::Transpose: {
      if (is_identity_permutation(a.dims)) return in[0];
      if (operand_is(Op::DotGeneral) && uses[static_cast<size_t>(n.in[0])] == 1) return dot_in_transposed_order(rw, n, in[0], t);
      const Node* inner = operand_is(Op::Transpose);
      if (!inner) return layout_to_narrow_side(rw, n, in[0], t);
      ir::Attrs c;  // out.shape[i] = inner.shape[q[i]] = x.shape[p[q[i]]]
      for (int64_t q : a.dims) c.dims.push_back(inner->attrs.dims[static_cast<size_t>(q)]);
      return is_identity_permutation(c.dims) ? inner->in[0] : rw.add(Op::Transpose, {inner->in[0]}, std::move(c), {t}, n.loc);
    }
    case Op::BroadcastInDim: {
      if (g.type(in[0]) == t) return in[0];
      if (const Node* iota = operand_is(Op::Iota)) {  // counts along the axis its axis becomes
        const int64_t to = a.dims[static_cast<size_t>(iota->attrs.axis)];
        if (g.type(in[0]).shape[static_cast<size_t>(iota->attrs.axis)] == t.shape[static_cast<size_t>(to)])
          return rw.add(Op::Iota, {}, {.dtype = t.dtype, .axis = to}, {t}, n.loc);
      }
      const Node* inner = operand_is(Op::BroadcastInDim);
      if (!inner) return std::nullopt;
      ir::Attrs c;  // x axis i → inner axis d1[i] → result axis d2[d1[i]]
      for (int64_t d : inner->attrs.dims) c.dims.push_back(a.dims[static_cast<size_t>(d)]);
      return rw.add(Op::BroadcastInDim, {inner->in[0]}, std::move(c), {t}, n.loc);
    }
    case Op::Slice: {
      bool from_zero = std::all_of(a.starts.begin(), a.starts.end(), [](int64_t s) { return s == 0; });
      return from_zero && g.type(in[0]) == t ? Simplified(in[0]) : std::nullopt;
    }
    case Op::Reverse: {
      bool trivial = std::all_of(a.dims.begin(), a.dims.end(), [&](int64_t d) { return t.shape[static_cast<size_t>(d)] <= 1; });
      return trivial ? Simplified(in[0]) : std::nullopt;
    }
    case Op::Pad: return g.type(in[0]) == t ? Simplified(in[0]) : std::nullopt;
    case Op::Concatenate: return simplify_concatenate(rw, n, in, t);
    case Op::Select: {
      if (in[1] == in[2]) return in[1];
      if (auto c = splat_scalar(g, in[0])) return c->get(0) != 0 ? in[1] : in[2];
      if (t.dtype == DType::Bool) {  // select(c, true, false) = c; select(c, false, true) = not c
        auto x = splat_scalar(g, in[1]), y = splat_scalar(g, in[2]);
        if (x && y && (x->get(0) != 0) != (y->get(0) != 0))
          return x->get(0) != 0 ? Simplified(in[0]) : rw.add(Op::Unary, {in[0]}, {.unary = Unary::Not}, {t}, n.loc);
      }
      return std::nullopt;
    }
    case Op::DynamicSlice: return simplify_dynamic_slice(rw, n, in, t);
    case Op::DynamicUpdateSlice: return g.type(in[1]) == t ? Simplified(in[1]) : std::nullopt;
    case Op::Reduce: return simplify_reduce(rw, n, in[0], t);
    case Op::Gather: return simplify_gather(rw, n, in, t);
    case Op::Scatter: return simplify_scatter(rw, n, in, t);
    default: return std::nullopt;
  }
}

// The pass's visit, with the use counts of the graph it walks.
Visit simplifier(const std::vector<int32_t>& uses) {
  return [&uses](Rewriter& rw, const Node& n) {
    if (n.nout != 1) return false;
    Simplified r = simplify_node(rw, n, rw.map(n.in), uses);
    if (r) rw.map_results(n, *r);
    return r.has_value();
  };
}

}  // namespace

Graph simplify(const Graph& g) {
  const std::vector<int32_t> uses = use_counts(g);
  return rewrite(g, simplifier(uses));
}

std::optional<Graph> simplified(const Graph& g) {
  const std::vector<int32_t> uses = use_counts(g);
  return rewrite_if_changed(g, simplifier(uses));
}

}  // namespace sheaf::passes
