// dist/collectives.hpp — collectives on tensors: the primitive behind `all-reduce` (SPEC §10).
// While a function is traced it records an IR `all_reduce` node, even on constant operands (the
// compiled function runs the collective at that point: the backends execute the node with this
// same function); otherwise it sums across the ranks now.
#pragma once
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf::dist {

// Σ over ranks of each tensor, elementwise; results keep the operands' dtypes and shapes. All
// leaves travel in one message per element type (f16/bf16 are summed in f32). Every rank must
// pass the same dtypes and shapes in the same order: the ranks compare a fingerprint of them
// first, and a mismatch is an error naming both ranks' operand types. bool cannot be summed.
std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& xs);

// Throws SheafError (naming `what`, this rank's operand types and a rank that disagrees) unless
// every rank passes the same dtypes and shapes. A collective of its own (one 8-byte allgather).
void check_agreement(const std::vector<Tensor>& xs, const char* what);

}  // namespace sheaf::dist
