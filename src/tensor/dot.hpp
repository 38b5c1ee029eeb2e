// tensor/dot.hpp — the dot_general primitive (StableHLO semantics).
//   lhs, rhs: one dtype (callers promote first). Batch dims pair lhs_batch[i] with rhs_batch[i],
//   contracting dims pair lhs_contract[i] with rhs_contract[i]; paired sizes are equal.
//   result: the operands' dtype, shape [batch..., lhs free..., rhs free...], free dims in operand
//   order; the sum over contracting dims of lhs·rhs.
//   f32 runs on sgemm (operands are read in place, transposed when that avoids a copy); f16/bf16
//   compute in f32 and round back; i32/u32 wrap modulo 2^32; bool is OR of ANDs.
#pragma once
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf {

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch;
  std::vector<int64_t> lhs_contract, rhs_contract;
};

Tensor dot_general(const Tensor& lhs, const Tensor& rhs, const DotDims& dims);

// The free dims of a dot_general operand of rank `rank`: those in neither list, in order.
std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract);

}  // namespace sheaf
