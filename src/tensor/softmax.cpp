// tensor/softmax.cpp — the softmax composites and their expansions (see softmax.hpp).
#include "tensor/softmax.hpp"

#include <vector>

#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/op.hpp"
#include "tensor/recorder.hpp"
#include "tensor/reduce.hpp"

namespace sheaf {

std::vector<int64_t> softmax_axes(const Tensor& x, int64_t axis) {
  return x.rank() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{axis};
}

namespace {

// Row values r (the axis dropped) with the axis kept as size 1, to broadcast against the rows.
Tensor kept(const Tensor& r, const Tensor& x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return r;
  Shape s = x.shape();
  s[static_cast<size_t>(axes[0])] = 1;
  return reshape(r, s);
}

// Whether softmax / softmax_grad on x becomes the op (float, rank ≥ 1, axis in range).
bool softmax_is_op(const Tensor& x, int64_t axis) { return is_float(x.dtype()) && axis >= 0 && axis < x.rank(); }

}  // namespace

SoftmaxParts softmax_expansion(const Tensor& x, int64_t axis) {
  const std::vector<int64_t> axes = softmax_axes(x, axis);
  SoftmaxParts s;
  s.row_max = reduce(Reduce::Max, x, axes);
  const Tensor e = unary(Unary::Exp, binary(Binary::Sub, x, kept(s.row_max, x, axes)));
  s.row_sum = reduce(Reduce::Sum, e, axes);
  s.out = binary(Binary::Div, e, kept(s.row_sum, x, axes));
  return s;
}

Tensor softmax_grad_expansion(const Tensor& p, const Tensor& g, int64_t axis) {
  const std::vector<int64_t> axes = softmax_axes(p, axis);
  Tensor s = reduce(Reduce::Sum, binary(Binary::Mul, g, p), axes);
  return binary(Binary::Mul, p, binary(Binary::Sub, g, kept(s, p, axes)));
}

Tensor softmax(const Tensor& x, int64_t axis) {
  if (x.is_symbolic() && softmax_is_op(x, axis)) return ir::record1(ir::Op::Softmax, {x}, {.axis = axis});
  return softmax_expansion(x, axis).out;
}

Tensor softmax_grad(const Tensor& p, const Tensor& g, int64_t axis) {
  const bool alike = g.dtype() == p.dtype() && g.shape() == p.shape();
  if ((p.is_symbolic() || g.is_symbolic()) && alike && softmax_is_op(p, axis)) return ir::record1(ir::Op::SoftmaxGrad, {p, g}, {.axis = axis});
  return softmax_grad_expansion(p, g, axis);
}

}  // namespace sheaf
