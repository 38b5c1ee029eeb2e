// plot/table.hpp — a metrics log (.jsonl rows of objects, or .csv with a header, as `io
// "append"` and `log-metrics` write them) read as columns for `sheaf plot`.
#pragma once
#include <string>
#include <vector>

namespace sheaf {

struct Column {
  std::string name;
  std::vector<double> values;  // one per row; NaN where the row lacks the key or has null/empty
  bool numeric = true;         // false when some row holds a string, boolean, list or object
};

struct Table {
  std::vector<Column> columns;  // in the order the keys first appear
  size_t rows = 0;
  const Column* find(const std::string& name) const;
};

// Errors name the file (and line for JSONL); an empty file is an error.
Table read_table(const std::string& path);

}  // namespace sheaf
