// eval/args.hpp — argument helpers shared by builtin families: typed access with errors
// that name the builtin, and keyword-option parsing (SPEC §5.0).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "value/function.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

[[noreturn]] void type_error(const CallArgs& a, size_t i, std::string_view expected);

double arg_number(const CallArgs& a, size_t i);         // int, float or rank-0 tensor
int64_t arg_int(const CallArgs& a, size_t i);           // integral number
const std::string& arg_string(const CallArgs& a, size_t i);  // string (or symbol)
const Value& arg_callable(const CallArgs& a, size_t i);

// A static shape (SPEC §5.0): a list of integers ('[2 3], the result of `shape`), a 1-D integral
// tensor, or a single non-negative integer n meaning [n]. Negative dimensions are errors.
Shape arg_shape(const CallArgs& a, size_t i);
// A dtype keyword (:f32 :f16 :bf16 :i32 :u32 :bool); anything else is "name: unsupported dtype :x".
DType arg_dtype(const CallArgs& a, size_t i);
DType dtype_value(const Value& v, const CallArgs& a);

// Positional arguments and keyword options: `:key value`, or a flag (`:keepdims`) when the
// keyword is last or followed by another keyword. Unknown option names are an error.
struct Options {
  std::vector<Value> positional;
  std::map<std::string, Value, std::less<>> kw;
  const Value* get(std::string_view k) const {
    auto it = kw.find(k);
    return it == kw.end() ? nullptr : &it->second;
  }
  bool flag(std::string_view k) const {
    const Value* v = get(k);
    return v && v->truthy();
  }
};
Options parse_options(const CallArgs& a, std::initializer_list<std::string_view> known);

// Left fold of f over items (reduce, tree-reduce): with no init the first item seeds; an empty
// sequence without init is the error "<name>: empty <what> and no initial value".
Value left_fold(Interp& in, const Value& f, std::span<const Value> items, const Value* init, const CallArgs& a,
                std::string_view what);

}  // namespace sheaf
