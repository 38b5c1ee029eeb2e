// tensor/gelu.hpp — GELU (tanh approximation) and its VJP as composite primitives, like softmax
// (tensor/softmax.hpp): each is one IR op (gelu, gelu_grad) while a function is traced, and on
// concrete tensors, in the reference executor and in every lowering, its decomposition into the
// elementwise primitives below. As one op the GPU's fusion finds a GELU after a matrix product
// and its gradient before one, whatever a program's spelling, and runs both as cuBLASLt's GELU
// epilogues (backend/fusion.hpp, DotLayout::act); lowerings expand both (passes/composites.hpp).
//   gelu(x):          ½·x·(1 + t),  t = tanh(u), u = c·(x + a·x³), c = √(2/π), a = 0.044715
//   gelu_grad(x, g):  g·gelu'(x),   gelu'(x) = ½·(1 + t) + ½·x·(1 − t²)·c·(1 + 3a·x²)
//                     (the VJP of gelu at its operand x, for the result's cotangent g)
// Both keep the operand's dtype and shape (f16/bf16 as the primitives compute them: each op rounds
// to the dtype). Non-float operands and a cotangent of another type than x are never recorded as
// the op: the decomposition is.
#pragma once
#include "tensor/tensor.hpp"

namespace sheaf {

Tensor gelu(const Tensor& x);
Tensor gelu_grad(const Tensor& x, const Tensor& g);

// The expansions (what the ops compute; the reference executor and the lowerings run these).
Tensor gelu_expansion(const Tensor& x);
Tensor gelu_grad_expansion(const Tensor& x, const Tensor& g);

// gelu''(x) = (1 − t²)·(u' − x·t·u'² + ½·x·u''), u' = c·(1 + 3a·x²), u'' = 6ca·x: gelu_grad's
// VJP (autodiff/vjp_rules.cpp), in primitives.
Tensor gelu_second(const Tensor& x);

// The constants of the tanh approximation: c = √(2/π) and a.
inline constexpr double kGeluC = 0.7978845608028654, kGeluA = 0.044715;

}  // namespace sheaf
