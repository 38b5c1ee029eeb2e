// eval/tensor_args.hpp — arguments of the structural builtins (shape, index, sort, get):
// values as tensors, integer lists (shapes, axes, permutations, starts), axes, and running a
// primitive so that its errors name the builtin.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "eval/promote.hpp"
#include "value/function.hpp"

namespace sheaf {

// A value as an array: tensors as they are; numbers and bools as rank-0 tensors (int → i32,
// float → f32); nested lists of numbers or equal-shape tensors stacked, with the dtype of
// SPEC §2.3 (all ints → i32, any float → f32). nullopt for anything else.
std::optional<Operand> as_operand(const Value& v);
Operand array_operand(const CallArgs& a, size_t i);  // error when not an array
Tensor array_arg(const CallArgs& a, size_t i);

// Operands converted to their common dtype (SPEC §2.3, folded left to right).
std::vector<Tensor> promote_all(const CallArgs& a, const std::vector<Operand>& ops);

// Integers from one integer, a list/tuple of integral numbers or a 1-D integral tensor.
std::vector<int64_t> int_list(const CallArgs& a, const Value& v, size_t arg_index);
bool is_int_list(const Value& v);  // a list or a 1-D tensor (the many-integers form)
std::string list_str(const std::vector<int64_t>& v);  // "[4, 2]"
Value shape_value(const Shape& s);                     // list of ints, printed [4, 2]

// True for a traced (symbolic) tensor: its elements are unknown until the compiled code runs.
inline bool is_traced(const Value& v) { return v.is(Kind::Tensor) && v.as_tensor().is_symbolic(); }

// An integer argument that may be a runtime value (a start, a shift, a diagonal offset) as a
// rank-0 i32 tensor: a host integer or integral rank-0 tensor, checked like any integer (else
// the type error "<name>: argument i must be <expected>"), or a traced rank-0 value.
Tensor int_scalar(const CallArgs& a, const Value& v, size_t arg_index, std::string_view expected = "an integer");

// Axis value v (negative counts from the end) checked against `rank`: the error names the builtin.
int64_t axis_of(const CallArgs& a, const Value& v, int64_t rank);

// Runs a primitive; its errors are prefixed with the builtin's name and located at the call.
template <typename F>
auto run_primitive(const CallArgs& a, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (SheafError& e) {
    std::string msg = e.what();
    if (msg.rfind(std::string(a.name) + ":", 0) != 0) msg = fmt::format("{}: {}", a.name, msg);
    throw SheafError(msg, a.site, e.hint);
  }
}

// Integral values as an integer tensor (SPEC §2.3: integer operations accept floats holding
// integers): an i32 conversion of a float tensor whose known elements are all integral (traced
// ones cannot be checked and are converted, truncating); nullopt when one is not integral.
std::optional<Tensor> integral_tensor(const Tensor& t);

// Gather along `axis` with language semantics: integral float indices accepted, negative
// indices count from the end, the rest clamped (SPEC §4.4 embedding lookup).
Tensor take_index(const Tensor& x, const Tensor& idx, int64_t axis, std::string_view who, SrcLoc loc);

}  // namespace sheaf
