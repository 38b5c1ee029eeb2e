// builtins/activation.hpp — softmax composites shared by activations and losses.
// x is a float tensor; axis is normalised (in [0, rank)); rank 0 reduces over no axes.
#pragma once
#include "tensor/tensor.hpp"

namespace sheaf {

Tensor softmax(const Tensor& x, int64_t axis);      // exp(x - max) / sum(exp(x - max))
Tensor log_softmax(const Tensor& x, int64_t axis);  // (x - max) - log(sum(exp(x - max)))

}  // namespace sheaf
