// eval/typed_params.hpp — defparams schemas and typed parameters `(x [4 2])`, `(p :as Name)`
// (SPEC §1.4, §4.1; eval/typed_params.cpp has the rules).
#pragma once
#include <span>
#include <string>

#include "value/function.hpp"

namespace sheaf {

class Interp;
struct ListObj;

// A typed parameter is a parenthesised pattern in a parameter vector.
bool is_typed_param(const Value& pattern);
// The name a parameter pattern binds when it is a typed parameter, else the pattern itself.
const Value& param_name(const Value& pattern);
// Validates a typed parameter at definition time: (x [d ...]) or (p :as Schema) with Schema
// declared already.
void check_typed_param(const Interp& in, const Value& pattern, SrcLoc loc);
// Checks the arguments of a call against the typed parameters; the error is located at `site`.
void check_typed_args(const Interp& in, const std::string& fn_name, const Params& params, std::span<const Value> args,
                      SrcLoc site);
// The special form (defparams Name {:k [shape] ...}).
Value sf_defparams(Interp& in, const ListObj& f, const EnvPtr& env);

}  // namespace sheaf
