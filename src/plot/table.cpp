// plot/table.cpp — reading JSONL and CSV metrics logs into numeric columns (see table.hpp).
// CSV cells are numbers when strtod reads all of them ("nan", "inf" included); an empty cell is
// missing. JSON numbers are numbers, null is missing.
#include "plot/table.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/csv_text.hpp"
#include "io/json.hpp"
#include "io/data_file.hpp"

namespace sheaf {
namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

Column& column(Table& t, const std::string& name) {
  for (Column& c : t.columns)
    if (c.name == name) return c;
  t.columns.push_back({name, std::vector<double>(t.rows, kMissing), true});
  return t.columns.back();
}

// The value of column c in the row being read (row t.rows).
void put(Table& t, Column& c, double x) {
  c.values.resize(t.rows + 1, kMissing);
  c.values[t.rows] = x;
}

// Ends the row being read: columns it lacks get NaN.
void end_row(Table& t) {
  ++t.rows;
  for (Column& c : t.columns) c.values.resize(t.rows, kMissing);
}

void read_jsonl(Table& t, const std::string& path, std::string_view text) {
  size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view l = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string where = fmt::format("{}:{}", path, line);
    nlohmann::json row = parse_json(l, where);
    if (!row.is_object()) throw SheafError(fmt::format("'{}': a row to plot is a JSON object, got {}", where, row.type_name()));
    for (const auto& [k, v] : row.items()) {
      Column& c = column(t, k);
      if (v.is_number()) put(t, c, v.get<double>());
      else if (!v.is_null()) c.numeric = false;
    }
    end_row(t);
  }
}

void read_csv(Table& t, const std::string& path, std::string_view text) {
  size_t pos = 0;
  std::vector<std::string> header = csv_record(text, pos);
  for (const std::string& h : header) column(t, h);
  for (int line = 2; pos < text.size(); ++line) {
    std::vector<std::string> cells = csv_record(text, pos);
    if (cells.size() == 1 && cells[0].empty()) continue;  // a blank line
    if (cells.size() != header.size())
      throw SheafError(fmt::format("'{}:{}': {} cells for the {} columns of the header", path, line, cells.size(), header.size()));
    for (size_t i = 0; i < cells.size(); ++i) {
      if (cells[i].empty()) continue;
      char* end = nullptr;
      double x = std::strtod(cells[i].c_str(), &end);
      if (end == cells[i].c_str() + cells[i].size()) put(t, t.columns[i], x);
      else t.columns[i].numeric = false;
    }
    end_row(t);
  }
}

}  // namespace

const Column* Table::find(const std::string& name) const {
  for (const Column& c : columns)
    if (c.name == name) return &c;
  return nullptr;
}

Table read_table(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext != ".jsonl" && ext != ".csv")
    throw SheafError(fmt::format("'{}': sheaf plot reads .jsonl and .csv metrics logs", path));
  std::string text = read_file(path);
  Table t;
  if (ext == ".jsonl") read_jsonl(t, path, text);
  else read_csv(t, path, text);
  if (t.rows == 0) throw SheafError(fmt::format("'{}': no rows to plot", path));
  return t;
}

}  // namespace sheaf
