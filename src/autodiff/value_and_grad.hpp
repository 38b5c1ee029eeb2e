// autodiff/value_and_grad.hpp — `(value-and-grad f)` and `(grad f)` as values (SPEC §4.5, §5.10).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/source.hpp"
#include "value/value.hpp"

namespace sheaf {

// The function (value-and-grad f) (with_value) or (grad f) returns: called as (g p args...), it
// gives the tuple (value grads), or grads alone; grads mirrors the pytree p.
Value make_value_and_grad(const Value& f, bool with_value, SrcLoc site);

// The items of a list, or the elements of a rank-1 tensor as rank-0 tensors: `[y x]` of two
// scalars reads as a tensor, and functions that take a list of values (jvp's primals,
// custom-vjp's fwd and bwd results) accept it as a list. nullopt for anything else.
std::optional<std::vector<Value>> list_items(const Value& v);

// A function of a rest argument whose body is (builtin bound... args), the bound values held in
// its environment: what value-and-grad, checkpoint and custom-vjp return. Named name + suffix
// when name is not empty (so the JIT can compile it like a defn).
Value make_forwarding_fn(std::string_view builtin, const std::vector<Value>& bound, const std::string& name, std::string_view suffix,
                         SrcLoc site);

// Defines the special form (value-and-grad f) in the evaluator's table (init_runtime).
void install_value_and_grad_form();

}  // namespace sheaf
