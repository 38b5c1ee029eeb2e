// io/text.cpp — text files (SPEC §7.2, §7.8): load/read give the whole file as one string,
// `lines` the lines without their newlines (a list for now, not a lazy sequence), saving text
// writes the printed form of the value (a string's own characters).
#include "base/error.hpp"
#include "io/atomic_write.hpp"
#include "io/formats.hpp"
#include "io/data_file.hpp"
#include "value/printer.hpp"

namespace sheaf {

Value load_text(const std::string& path) { return Value::string(read_file(path)); }

Value load_lines(const std::string& path) {
  std::string text = read_file(path);
  std::vector<Value> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    size_t end = eol > pos && text[eol - 1] == '\r' ? eol - 1 : eol;
    lines.push_back(Value::string(text.substr(pos, end - pos)));
    pos = eol + 1;
  }
  return Value::list(std::move(lines));
}

void save_text(const std::string& path, const Value& v) { write_file_atomic(path, print_value(v, true)); }

}  // namespace sheaf
