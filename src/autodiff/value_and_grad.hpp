// autodiff/value_and_grad.hpp — `(value-and-grad f)` and `(grad f)` as values (SPEC §4.5, §5.10).
#pragma once
#include "base/source.hpp"
#include "value/value.hpp"

namespace sheaf {

// The function (value-and-grad f) (with_value) or (grad f) returns: called as (g p args...), it
// gives the tuple (value grads), or grads alone; grads mirrors the pytree p.
Value make_value_and_grad(const Value& f, bool with_value, SrcLoc site);

}  // namespace sheaf
