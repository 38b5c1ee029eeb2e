// tensor/gelu.cpp — the GELU composites and their expansions (see gelu.hpp).
#include "tensor/gelu.hpp"

#include "tensor/elementwise.hpp"
#include "tensor/op.hpp"
#include "tensor/recorder.hpp"

namespace sheaf {

namespace {

Tensor k(const Tensor& like, double v) { return Tensor::scalar(like.dtype(), v); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::Mul, a, b); }
Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::Add, a, b); }

// t = tanh(c·(x + a·x³))
Tensor gelu_tanh(const Tensor& x) {
  const Tensor x3 = mul(mul(x, x), x);
  return unary(Unary::Tanh, mul(k(x, kGeluC), add(x, mul(k(x, kGeluA), x3))));
}

// u'(x) = c·(1 + 3a·x²)
Tensor gelu_du(const Tensor& x) { return mul(k(x, kGeluC), add(k(x, 1), mul(k(x, 3 * kGeluA), mul(x, x)))); }

bool gelu_is_op(const Tensor& x) { return is_float(x.dtype()); }

}  // namespace

Tensor gelu_expansion(const Tensor& x) { return mul(x, mul(k(x, 0.5), add(k(x, 1), gelu_tanh(x)))); }

Tensor gelu_grad_expansion(const Tensor& x, const Tensor& g) {
  const Tensor t = gelu_tanh(x);
  const Tensor half = k(x, 0.5), one = k(x, 1);
  const Tensor du = gelu_du(x);
  const Tensor dt = binary(Binary::Sub, one, mul(t, t));  // 1 − t²
  const Tensor d = add(mul(half, add(one, t)), mul(mul(half, x), mul(dt, du)));
  return mul(g, d);
}

Tensor gelu_second(const Tensor& x) {
  const Tensor t = gelu_tanh(x);
  const Tensor one = k(x, 1);
  const Tensor du = gelu_du(x);
  const Tensor ddu = mul(k(x, 6 * kGeluC * kGeluA), x);
  const Tensor inner = add(binary(Binary::Sub, du, mul(mul(x, t), mul(du, du))), mul(mul(k(x, 0.5), x), ddu));
  return mul(binary(Binary::Sub, one, mul(t, t)), inner);
}

Tensor gelu(const Tensor& x) {
  if (x.is_symbolic() && gelu_is_op(x)) return ir::record1(ir::Op::Gelu, {x}, {});
  return gelu_expansion(x);
}

Tensor gelu_grad(const Tensor& x, const Tensor& g) {
  const bool alike = g.dtype() == x.dtype() && g.shape() == x.shape();
  if ((x.is_symbolic() || g.is_symbolic()) && alike && gelu_is_op(x)) return ir::record1(ir::Op::GeluGrad, {x, g}, {});
  return gelu_grad_expansion(x, g);
}

}  // namespace sheaf
