// io/csv_text.hpp — the CSV text rules (RFC 4180) shared by `io "append"` (io/append.cpp) and
// `sheaf plot` (plot/table.cpp): comma-separated fields, a field quoted with '"' when it holds a
// comma, a quote or a line break, a quote inside a quoted field doubled.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sheaf {

// `s` as one field: unchanged, or quoted when it needs to be.
std::string csv_field(std::string_view s);

// The fields of the record that starts at `pos` (a quoted field may span lines); `pos` moves
// past the record's line end (LF or CRLF). An unterminated quote ends at the end of the text.
std::vector<std::string> csv_record(std::string_view text, size_t& pos);

}  // namespace sheaf
