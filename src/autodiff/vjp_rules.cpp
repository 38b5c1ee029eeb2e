// autodiff/vjp_rules.cpp — the VJP rule of every IR op (see vjp_rules.hpp for the contract).
// Conventions of the rules below: `g` is the result cotangent, `x[i]` the operands, `y[i]` the
// results. Elementwise operands have equal shapes in the IR (the tracer made broadcasts
// explicit), so NumPy broadcasting is reversed by the broadcast_in_dim rule alone: it sums over
// the axes it added and the size-1 axes it expanded.
// Ties: the reductions max/min send the cotangent to every position equal to the result (SPEC
// §5.6); element-wise maximum/minimum send it to the first operand only where it wins strictly,
// so relu (maximum(x, 0)) has derivative 0 at 0, as in PyTorch and JAX.
#include "autodiff/vjp_rules.hpp"

#include "autodiff/region_vjp.hpp"
#include "autodiff/reverse.hpp"

#include <algorithm>
#include <numeric>

#include "base/error.hpp"
#include "dist/collectives.hpp"
#include "tensor/dot.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"
#include "tensor/gelu.hpp"
#include "tensor/softmax.hpp"

namespace sheaf::autodiff {
namespace {

using ir::Op;
using Grads = std::vector<std::optional<Tensor>>;

Tensor k(const Tensor& like, double v) { return Tensor::scalar(like.dtype(), v); }
Tensor zeros(const Tensor& like) { return autodiff::zeros(like.dtype(), like.shape()); }
Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(Binary::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(Binary::Div, a, b); }
Tensor neg(const Tensor& a) { return unary(Unary::Neg, a); }
Tensor masked(const Tensor& mask, const Tensor& g) { return select(mask, g, zeros(g)); }

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

// Position of v among the sorted values of `xs`.
int64_t rank_among(const std::vector<int64_t>& xs, int64_t v) {
  return std::count_if(xs.begin(), xs.end(), [&](int64_t x) { return x < v; });
}

// g of a reduced shape (the `axes` of `shape` dropped) broadcast back to `shape`.
Tensor expand(const Tensor& g, const Shape& shape, const std::vector<int64_t>& axes) {
  Shape kept = shape;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  return broadcast_to(reshape(g, kept), shape);
}

// broadcast_in_dim reversed: x axis i went to result axis dims[i]; every other result axis and
// every expanded size-1 axis is summed away, by one reduction (a bias [H, 1, Hd] broadcast over
// [B, H, T, Hd] sums B and T in one pass over g, not one pass per kind of axis).
Tensor unbroadcast(const Tensor& g, const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> summed, kept;  // g's axes summed; those of x's axes that are not
  for (int64_t a = 0; a < g.rank(); ++a)
    if (std::find(dims.begin(), dims.end(), a) == dims.end()) summed.push_back(a);
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t a = dims[static_cast<size_t>(i)];
    if (x.dim(i) == 1 && g.dim(a) != 1) summed.push_back(a);
    else kept.push_back(a);
  }
  std::sort(summed.begin(), summed.end());
  Tensor r = summed.empty() ? g : reduce(Reduce::Sum, g, summed);
  std::vector<int64_t> perm(kept.size());  // r's axes follow sorted(kept)
  for (size_t i = 0; i < kept.size(); ++i) perm[i] = rank_among(kept, kept[i]);
  if (!std::is_sorted(kept.begin(), kept.end())) r = transpose(r, perm);
  return r.rank() == x.rank() ? r : reshape(r, x.shape());
}

// slice reversed: the cotangent placed back at the sliced positions, zeros elsewhere.
Tensor unslice(const Tensor& g, const Tensor& x, const ir::Attrs& a) {
  std::vector<int64_t> lo(x.shape().size(), 0), hi(x.shape().size(), 0);
  bool strided = false;
  for (size_t d = 0; d < lo.size(); ++d) {
    if (a.strides[d] != 1) {
      strided = true;
      continue;
    }
    lo[d] = a.starts[d];
    hi[d] = x.shape()[d] - a.limits[d];
  }
  Tensor r = pad(g, 0, lo, hi);
  if (!strided) return r;
  for (size_t d = 0; d < lo.size(); ++d) {  // strided axes: scatter rows start, start+stride, ...
    if (a.strides[d] == 1) continue;
    int64_t count = r.dim(static_cast<int64_t>(d));
    Tensor idx = add(mul(iota(DType::I32, {count}, 0), Tensor::scalar(DType::I32, static_cast<double>(a.strides[d]))),
                     Tensor::scalar(DType::I32, static_cast<double>(a.starts[d])));
    Shape s = r.shape();
    s[d] = x.shape()[d];
    r = scatter(autodiff::zeros(g.dtype(), s), idx, r, static_cast<int64_t>(d), ScatterMode::Add);
  }
  return r;
}

// Values picked by `idx` (i32, along `axis`, like sort/top_k results) routed back to an axis of
// size n: gx[..., j] = Σ_k g[..., k]·[idx[..., k] = j], one batched dot with a one-hot matrix.
Tensor unpick(const Tensor& g, const Tensor& idx, int64_t axis, int64_t n) {
  int64_t r = g.rank();
  std::vector<int64_t> perm;  // `axis` moved last
  for (int64_t i = 0; i < r; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  Tensor gt = transpose(g, perm), it = transpose(idx, perm);
  Shape col = it.shape();
  col.push_back(1);
  Tensor onehot = convert(binary(Binary::Eq, reshape(it, col), iota(DType::I32, {n}, 0)), g.dtype());  // [..., k, n]
  DotDims d;
  for (int64_t i = 0; i + 1 < r; ++i) {
    d.lhs_batch.push_back(i);
    d.rhs_batch.push_back(i);
  }
  d.lhs_contract = {r - 1};
  d.rhs_contract = {r - 1};
  return transpose(dot_general(gt, onehot, d), inverse(perm));  // [..., n] → original layout
}

Grads unary_vjp(Unary op, const Tensor& x, const Tensor& y, const Tensor& g) {
  switch (op) {
    case Unary::Neg: return {neg(g)};
    case Unary::Abs: return {mul(g, unary(Unary::Sign, x))};
    case Unary::Exp: return {mul(g, y)};
    case Unary::Log: return {div(g, x)};
    case Unary::Sqrt: return {div(mul(g, k(g, 0.5)), y)};
    case Unary::Rsqrt: return {mul(mul(g, k(g, -0.5)), mul(y, mul(y, y)))};
    case Unary::Sin: return {mul(g, unary(Unary::Cos, x))};
    case Unary::Cos: return {neg(mul(g, unary(Unary::Sin, x)))};
    case Unary::Tan: return {mul(g, add(k(y, 1), mul(y, y)))};
    case Unary::Tanh: return {mul(g, sub(k(y, 1), mul(y, y)))};
    case Unary::Logistic: return {mul(g, mul(y, sub(k(y, 1), y)))};
    case Unary::Floor: case Unary::Ceil: case Unary::Round: case Unary::Sign: case Unary::Not: return {std::nullopt};
  }
  return {std::nullopt};
}

Grads binary_vjp(Binary op, const Tensor& a, const Tensor& b, const Tensor& y, const Tensor& g, const std::vector<bool>& need) {
  auto both = [&](auto ga, auto gb) {
    return Grads{need[0] ? std::optional<Tensor>(ga()) : std::nullopt, need[1] ? std::optional<Tensor>(gb()) : std::nullopt};
  };
  switch (op) {
    case Binary::Add: return both([&] { return g; }, [&] { return g; });
    case Binary::Sub: return both([&] { return g; }, [&] { return neg(g); });
    case Binary::Mul: return both([&] { return mul(g, b); }, [&] { return mul(g, a); });
    case Binary::Div: return both([&] { return div(g, b); }, [&] { return neg(div(mul(g, y), b)); });
    case Binary::Pow:
      return both([&] { return mul(g, mul(b, binary(Binary::Pow, a, sub(b, k(b, 1))))); },
                  [&] { return masked(binary(Binary::Ne, a, k(a, 0)), mul(g, mul(y, unary(Unary::Log, a)))); });
    case Binary::Max: {
      Tensor first = binary(Binary::Gt, a, b);
      return both([&] { return masked(first, g); }, [&] { return select(first, zeros(g), g); });
    }
    case Binary::Min: {
      Tensor first = binary(Binary::Lt, a, b);
      return both([&] { return masked(first, g); }, [&] { return select(first, zeros(g), g); });
    }
    case Binary::Rem: return both([&] { return g; }, [&] { return neg(mul(g, binary(Binary::FloorDiv, a, b))); });
    default: return {std::nullopt, std::nullopt};  // floor division, comparisons, logic, shifts
  }
}

std::vector<Tensor> starts_of(std::span<const Tensor> x, size_t first) { return {x.begin() + static_cast<std::ptrdiff_t>(first), x.end()}; }

}  // namespace

Grads vjp(const ir::Node& n, std::span<const Tensor> x, std::span<const Tensor> y, std::span<const std::optional<Tensor>> gs,
          const std::vector<bool>& need) {
  const ir::Attrs& a = n.attrs;
  if (n.op == Op::While) {
    if (a.k > 0) return counted_while_vjp(n, x, gs, need);
    throw SheafError("reverse-mode differentiation through 'while' is not supported; use repeat or scan", n.loc);
  }
  if (n.op == Op::Call) return call_vjp(n, x, y, gs, need);
  if (n.op == Op::OptimizationBarrier) return Grads(gs.begin(), gs.end());
  if (n.op == Op::Case)
    throw SheafError("reverse-mode differentiation through a runtime conditional ('case') is not supported", n.loc);
  if (n.op == Op::AllReduce) {  // the adjoint of a sum over ranks: the sum over ranks of the cotangents
    std::vector<Tensor> present;
    for (const auto& gk : gs)
      if (gk) present.push_back(*gk);
    std::vector<Tensor> summed = present.empty() ? present : dist::all_reduce_sum(present);
    Grads out(x.size());
    for (size_t k = 0, at = 0; k < x.size(); ++k)
      if (gs[k]) out[k] = summed[at++];
    return out;
  }
  if (!gs[0]) return Grads(x.size());  // only sort/top_k have a second result, and it is an index
  const Tensor& g = *gs[0];
  switch (n.op) {
    case Op::Parameter: case Op::Constant: case Op::Iota: return {};
    case Op::Unary: return unary_vjp(a.unary, x[0], y[0], g);
    case Op::Binary: return binary_vjp(a.binary, x[0], x[1], y[0], g, need);
    case Op::Convert:
      if (!is_float(x[0].dtype()) || !is_float(y[0].dtype())) return {std::nullopt};
      return {convert(g, x[0].dtype())};
    case Op::Select: return {std::nullopt, masked(x[0], g), select(x[0], zeros(g), g)};
    case Op::BroadcastInDim: return {unbroadcast(g, x[0], a.dims)};
    case Op::Reshape: return {reshape(g, x[0].shape())};
    case Op::Transpose: return {transpose(g, inverse(a.dims))};
    case Op::Slice: return {unslice(g, x[0], a)};
    case Op::Reverse: return {reverse(g, a.dims)};
    case Op::Concatenate: {
      Grads out;
      int64_t off = 0;
      for (const Tensor& xi : x) {
        int64_t size = xi.dim(a.axis);
        out.push_back(slice_axis(g, a.axis, off, off + size));
        off += size;
      }
      return out;
    }
    case Op::Pad: {
      std::vector<int64_t> limits(a.lo.size()), strides(a.lo.size(), 1);
      for (size_t d = 0; d < limits.size(); ++d) limits[d] = a.lo[d] + x[0].shape()[d];
      return {slice(g, a.lo, limits, strides)};
    }
    case Op::DynamicSlice: {
      Grads out(x.size());
      out[0] = dynamic_update_slice(zeros(x[0]), g, starts_of(x, 1));
      return out;
    }
    case Op::DynamicUpdateSlice: {
      Grads out(x.size());
      std::vector<Tensor> starts = starts_of(x, 2);
      if (need[0]) out[0] = dynamic_update_slice(g, zeros(x[1]), starts);
      if (need[1]) out[1] = dynamic_slice(g, starts, x[1].shape());
      return out;
    }
    case Op::Reduce: {
      Tensor gx = expand(g, x[0].shape(), a.dims);
      switch (a.reduce) {
        case Reduce::Sum: return {gx};
        case Reduce::Prod: return {div(mul(gx, expand(y[0], x[0].shape(), a.dims)), x[0])};
        case Reduce::Max: case Reduce::Min:
          return {masked(binary(Binary::Eq, x[0], expand(y[0], x[0].shape(), a.dims)), gx)};
      }
      return {std::nullopt};
    }
    case Op::ArgReduce: return {std::nullopt};
    case Op::DotGeneral: {
      const DotDims& d = a.dot;
      const Tensor &lhs = x[0], &rhs = x[1];
      auto nb = static_cast<int64_t>(d.lhs_batch.size());
      std::vector<int64_t> lf = free_dims(lhs.rank(), d.lhs_batch, d.lhs_contract);
      std::vector<int64_t> rf = free_dims(rhs.rank(), d.rhs_batch, d.rhs_contract);
      auto nlf = static_cast<int64_t>(lf.size()), nrf = static_cast<int64_t>(rf.size());
      std::vector<int64_t> gbatch(static_cast<size_t>(nb));
      std::iota(gbatch.begin(), gbatch.end(), 0);
      Grads out(2);
      if (need[0]) {  // g [batch, lf, rf] · rhs over rf → [batch, lf, rhs contract axes (sorted)]
        DotDims dd{gbatch, d.rhs_batch, {}, rf};
        for (int64_t j = 0; j < nrf; ++j) dd.lhs_contract.push_back(nb + nlf + j);
        std::vector<int64_t> pos(static_cast<size_t>(lhs.rank()));
        for (int64_t i = 0; i < nb; ++i) pos[static_cast<size_t>(d.lhs_batch[static_cast<size_t>(i)])] = i;
        for (int64_t j = 0; j < nlf; ++j) pos[static_cast<size_t>(lf[static_cast<size_t>(j)])] = nb + j;
        for (size_t c = 0; c < d.lhs_contract.size(); ++c)
          pos[static_cast<size_t>(d.lhs_contract[c])] = nb + nlf + rank_among(d.rhs_contract, d.rhs_contract[c]);
        out[0] = transpose(dot_general(g, rhs, dd), pos);
      }
      if (need[1]) {  // lhs · g over lf → [batch, lhs contract axes (sorted), rf]: rhs's layout for a plain matmul
        DotDims dd{d.lhs_batch, gbatch, lf, {}};
        for (int64_t j = 0; j < nlf; ++j) dd.rhs_contract.push_back(nb + j);
        auto nc = static_cast<int64_t>(d.lhs_contract.size());
        std::vector<int64_t> pos(static_cast<size_t>(rhs.rank()));
        for (int64_t i = 0; i < nb; ++i) pos[static_cast<size_t>(d.rhs_batch[static_cast<size_t>(i)])] = i;
        for (size_t c = 0; c < d.rhs_contract.size(); ++c)
          pos[static_cast<size_t>(d.rhs_contract[c])] = nb + rank_among(d.lhs_contract, d.lhs_contract[c]);
        for (int64_t j = 0; j < nrf; ++j) pos[static_cast<size_t>(rf[static_cast<size_t>(j)])] = nb + nc + j;
        out[1] = transpose(dot_general(lhs, g, dd), pos);
      }
      return out;
    }
    case Op::Gather: return {scatter(zeros(x[0]), x[1], g, a.axis, ScatterMode::Add), std::nullopt};
    case Op::Scatter: {
      Grads out(3);
      if (need[0]) out[0] = a.scatter == ScatterMode::Add ? g : scatter(g, x[1], zeros(x[2]), a.axis, ScatterMode::Set);
      if (need[2]) out[2] = take(g, x[1], a.axis);
      return out;
    }
    case Op::Sort: return {unpick(g, y[1], a.axis, x[0].dim(a.axis))};
    case Op::TopK: return {unpick(g, y[1], x[0].rank() - 1, x[0].dim(x[0].rank() - 1))};
    case Op::Softmax: return {softmax_grad(y[0], g, a.axis)};
    case Op::SoftmaxGrad: {  // y = p · (dy − Σ dy·p): dp = g · (dy − Σ dy·p) − dy · Σ g·p, d(dy) = softmax_grad(p, g)
      const Tensor &p = x[0], &dy = x[1];
      auto row_sum = [&](const Tensor& t) { return reduce(Reduce::Sum, t, {a.axis}, true); };
      Grads out(2);
      if (need[0]) out[0] = sub(mul(g, sub(dy, row_sum(mul(dy, p)))), mul(dy, row_sum(mul(g, p))));
      if (need[1]) out[1] = softmax_grad(p, g, a.axis);
      return out;
    }
    case Op::Gelu: return {gelu_grad(x[0], g)};
    case Op::GeluGrad: {  // y = dy · gelu'(x): dx = g · dy · gelu''(x), d(dy) = gelu_grad(x, g)
      Grads out(2);
      if (need[0]) out[0] = mul(mul(g, x[1]), gelu_second(x[0]));
      if (need[1]) out[1] = gelu_grad(x[0], g);
      return out;
    }
    case Op::While: case Op::Case: case Op::AllReduce: case Op::Call: case Op::OptimizationBarrier: break;  // handled above
  }
  throw SheafError(fmt::format("no gradient rule for '{}'", ir::op_name(n.op)), n.loc);
}

}  // namespace sheaf::autodiff
