// eval/utf8.cpp — code points of UTF-8 text (see utf8.hpp).
#include "eval/utf8.hpp"

namespace sheaf {

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;  // stray byte: its own code point
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> off;
  for (size_t i = 0; i < s.size(); i += code_point_at(s, i).size()) off.push_back(i);
  off.push_back(s.size());
  return off;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += code_point_at(s, i).size()) ++n;
  return n;
}

}  // namespace sheaf
