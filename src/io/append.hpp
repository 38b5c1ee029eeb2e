// io/append.hpp — `(io "append" path row)` (SPEC §7.2): one row added to a metrics log, written
// with one write(2) on a file opened for appending, so every row is in the file (and readable
// by another process) when the call returns, without an fsync. `.jsonl`: a dict, a list or a
// tensor as one line of JSON. `.csv`: a dict whose keys name the columns; the first row of a new or empty
// file writes the header, later rows must have the header's keys (in any order). Parent
// directories are created. Errors name the file; the builtin prefixes "io append: ".
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "value/value.hpp"

namespace sheaf {

// Keys and values in the order they are written (a dict's keys are sorted; `log-metrics` puts
// `step` first).
using Row = std::vector<std::pair<std::string, Value>>;

void io_append(const std::string& path, const Value& row);  // a dict, or a list (.jsonl only)
void append_row(const std::string& path, const Row& row);   // .jsonl or .csv by the extension

}  // namespace sheaf
