// value/tensor_value.hpp — moving between tensors and host values.
// Rank-0 tensors and host scalars are interchangeable (SPEC §2.1): these helpers convert.
#pragma once
#include <optional>

#include "value/value.hpp"

namespace sheaf {

// Host scalar of a rank-0 tensor: f32/f16/bf16 → float, i32/u32 → int, bool → bool.
Value scalar_value(const Tensor& t, int64_t flat_index = 0);
// Row i along axis 0 (a scalar for 1-D tensors). `i` must be in range.
Value row_value(const Tensor& t, int64_t i);
// Every row along axis 0, in order (rank ≥ 1).
std::vector<Value> row_values(const Tensor& t);
// A number (int, float, bool, rank-0 tensor) as double; nullopt otherwise.
std::optional<double> number_of(const Value& v);
// Builds a tensor of `dtype` from a flat list of doubles.
Tensor make_tensor(DType dtype, Shape shape, const std::vector<double>& values);

}  // namespace sheaf
