// dist/collectives.hpp — collectives on tensors: the primitive behind `all-reduce` (SPEC §10) and
// the broadcast behind `broadcast-tree`.
// While a function is traced it records an IR `all_reduce` node, even on constant operands (the
// compiled function runs the collective at that point: the backends execute the node with this
// same function); otherwise it sums across the ranks now.
#pragma once
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf::dist {

// Σ over ranks of each tensor, elementwise; results keep the operands' dtypes and shapes. All
// leaves travel in one message per element type (f16/bf16 are summed in f32). Every rank must
// pass the same dtypes and shapes in the same order: the collective is announced as
// "all-reduce of (f32[16], f32[])" (dist/comm.hpp's sequence check), so a mismatch is an error
// naming every rank's operand types. bool cannot be summed.
std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& xs);

// Every rank receives rank `root`'s tensors, in one message; announced as "broadcast-tree from
// rank 0 of (...)", so the ranks must pass the same root, dtypes and shapes. Concrete tensors only.
std::vector<Tensor> broadcast_from(const std::vector<Tensor>& xs, int root);

}  // namespace sheaf::dist
