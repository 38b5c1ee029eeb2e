// io/csv_text.cpp — quoting and splitting of CSV records (see csv_text.hpp).
#include "io/csv_text.hpp"

namespace sheaf {

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> csv_record(std::string_view text, size_t& pos) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (; pos < text.size(); ++pos) {
    char c = text[pos];
    if (quoted) {
      if (c != '"') fields.back() += c;
      else if (pos + 1 < text.size() && text[pos + 1] == '"') fields.back() += text[++pos];
      else quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      ++pos;
      break;
    } else if (c != '\r' || pos + 1 >= text.size() || text[pos + 1] != '\n') {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace sheaf
