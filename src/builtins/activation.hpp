// builtins/activation.hpp — log-softmax, shared by activations and losses (softmax is a primitive
// of its own: tensor/softmax.hpp). x is a float tensor; axis is normalised (in [0, rank)); rank 0
// reduces over no axes.
#pragma once
#include "tensor/tensor.hpp"

namespace sheaf {

Tensor log_softmax(const Tensor& x, int64_t axis);  // (x - max) - log(sum(exp(x - max)))

}  // namespace sheaf
