// eval/dtype_suffix.hpp — SPEC §10.1: the reader reads a dtype keyword right after a
// bracket literal as the literal's suffix (`[1 2] :i32`). In `(zeros [2 3] :i32)`, where the
// builtin's last parameter is a dtype that the call does not give, the user meant the dtype
// argument: the literal loses its suffix and the keyword is passed as that argument. Which
// builtins qualify is read from their signatures in the builtin table: the last parameter is
// `dtype`, `:dtype`, `[dtype]` (positional) or `[:dtype d]` (an option).
#pragma once
#include <optional>
#include <vector>

#include "value/function.hpp"

namespace sheaf {

struct SuffixAsDtype {
  Value literal;                  // the last argument form without its suffix
  std::vector<Value> dtype_args;  // appended to the evaluated arguments: `:i32`, or `:dtype :i32`
};

// For the call form `call` of builtin `d`; nullopt when the rule does not apply.
std::optional<SuffixAsDtype> suffix_as_dtype(const BuiltinDef& d, const ListObj& call);

}  // namespace sheaf
