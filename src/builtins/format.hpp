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

// Byte offsets of the code points of UTF-8 text, followed by s.size(): indices into this
// vector are Python string indices.
std::vector<size_t> code_point_offsets(std::string_view s);

// Bytes of the UTF-8 sequence that starts with `lead` (a stray byte is a code point of its own).
size_t utf8_length(unsigned char lead);
// The code point starting at byte `at` of s (at < s.size()), as its bytes.
inline std::string_view code_point_at(std::string_view s, size_t at) {
  return s.substr(at, std::min(utf8_length(static_cast<unsigned char>(s[at])), s.size() - at));
}
// Number of code points of s, without storing their offsets.
size_t code_point_count(std::string_view s);

}  // namespace sheaf
