// eval/utf8.hpp — code points of UTF-8 text: Sheaf strings index, count and slice by code
// point, as Python does (the evaluator's string sequences, the string builtins, `format`).
#pragma once
#include <algorithm>
#include <string_view>
#include <vector>

namespace sheaf {

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
