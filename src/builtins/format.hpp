// builtins/format.hpp — the format-string engine behind `print` and `(str-call "format" …)`
// (SPEC §5.13): `{}` and `{:spec}` fields, `{{`/`}}` escapes, and Python's format-spec
// mini-language `[[fill]align][sign][0][width][.precision][type]` with types d f e g s %.
// Numbers format as Python's format() would format the same int or (f32-valued) float.
#pragma once
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace sheaf {

// True when `s` reads as a format: it has a `{` with a `}` somewhere after it.
bool is_format_string(std::string_view s);

// Expands `fmt` with `args` (extra arguments are ignored). Errors start with `who`.
std::string format_string(std::string_view fmt, std::span<const Value> args, std::string_view who,
                          SrcLoc site);

// Python's format(v, spec) for one value; `spec` is the text after the ':'.
std::string format_value(const Value& v, std::string_view spec, std::string_view who, SrcLoc site);

}  // namespace sheaf
