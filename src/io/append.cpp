// io/append.cpp — rows appended to .jsonl and .csv files (see append.hpp). A CSV file's header
// is read back from the file on every call, so a log continued by another run (a resumed
// training) is checked against the columns it already has.
#include "io/append.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/csv_text.hpp"
#include "io/json.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

enum class Log { Jsonl, Csv };

Log log_format(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.size() > 6 && name.ends_with(".jsonl")) return Log::Jsonl;
  if (name.size() > 4 && name.ends_with(".csv")) return Log::Csv;
  size_t dot = name.find_last_of('.');
  throw SheafError(fmt::format("'{}': unsupported format '{}' (append supports .jsonl and .csv)", path,
                               dot == std::string::npos ? name : name.substr(dot)));
}

[[noreturn]] void os_error(const std::string& path, std::string_view what) {
  throw SheafError(fmt::format("'{}': cannot {}: {}", path, what, std::strerror(errno)));
}

// The first line of the file, or "" when it is missing or empty.
std::string first_line(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return "";
    os_error(path, "read it");
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.find('\n') != std::string::npos || text.size() > (size_t{1} << 20)) break;
  }
  ::close(fd);
  return text.substr(0, text.find('\n'));
}

// The whole text in one write(2) on an O_APPEND descriptor: concurrent readers see whole rows.
void append_text(const std::string& path, std::string_view text) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) os_error(path, "open it for appending");
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      errno = e;
      os_error(path, "append to it");
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0) os_error(path, "append to it");
}

std::string jsonl_line(const std::string& path, const Row& row) {
  std::string line = "{";
  for (const auto& [k, v] : row) {
    if (line.size() > 1) line += ",";
    line += json_text(Value::string(k), path) + ":" + json_text(v, path);
  }
  return line + "}\n";
}

// One cell: a number (nan, inf and -inf spelled out), a string, true/false, or empty for nil.
std::string csv_cell(const std::string& path, const std::string& key, const Value& v) {
  switch (v.kind()) {
    case Kind::Nil: return "";
    case Kind::Str: case Kind::Keyword: case Kind::Symbol: return csv_field(v.as_str());
    case Kind::Bool: case Kind::Int: return json_text(v, path);
    case Kind::Float: case Kind::Tensor: {
      if (v.is(Kind::Tensor) && !v.as_tensor().shape().empty()) break;
      double x = v.is(Kind::Float) ? v.as_float() : v.as_tensor().get(0);
      if (std::isnan(x)) return "nan";
      if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
      return json_text(v, path);
    }
    default: break;
  }
  std::string what = v.is(Kind::Tensor) ? fmt::format("a {} tensor", type_str(v.as_tensor()))
                                        : fmt::format("a {}", kind_name(v.kind()));
  throw SheafError(fmt::format("'{}': the value of '{}' is {}; a CSV cell holds a number, a rank-0 tensor, a string, a "
                               "boolean or nil",
                               path, key, what));
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

// The row's cells in the header's column order; the keys must be the header's.
std::string csv_line(const std::string& path, const Row& row, const std::vector<std::string>& header) {
  std::vector<std::string> missing, extra;
  for (const std::string& h : header)
    if (std::none_of(row.begin(), row.end(), [&](const auto& e) { return e.first == h; })) missing.push_back(h);
  for (const auto& [k, v] : row)
    if (std::find(header.begin(), header.end(), k) == header.end()) extra.push_back(k);
  if (!missing.empty() || !extra.empty())
    throw SheafError(fmt::format("'{}' has the columns {}; the row lacks {} and has the new keys {} (every row of a CSV "
                                 "file has the same keys)",
                                 path, join(header), join(missing), join(extra)));
  std::string line;
  for (const std::string& h : header) {
    auto it = std::find_if(row.begin(), row.end(), [&](const auto& e) { return e.first == h; });
    line += (line.empty() ? "" : ",") + csv_cell(path, h, it->second);
  }
  return line + "\n";
}

std::string csv_rows(const std::string& path, const Row& row) {
  std::string head = first_line(path);
  if (!head.empty() && head.back() == '\r') head.pop_back();
  if (!head.empty()) {
    size_t pos = 0;
    return csv_line(path, row, csv_record(head, pos));
  }
  if (row.empty()) throw SheafError(fmt::format("'{}': the first row of a CSV file needs at least one key", path));
  std::vector<std::string> header;
  std::string text;
  for (const auto& [k, v] : row) {
    header.push_back(k);
    text += (text.empty() ? "" : ",") + csv_field(k);
  }
  return text + "\n" + csv_line(path, row, header);
}

}  // namespace

void append_row(const std::string& path, const Row& row) {
  Log f = log_format(path);
  append_text(path, f == Log::Jsonl ? jsonl_line(path, row) : csv_rows(path, row));
}

void io_append(const std::string& path, const Value& row) {
  Log f = log_format(path);
  if (row.is(Kind::Dict)) return append_row(path, row.as_dict().entries);
  bool array = row.is_list() || (row.is(Kind::Tensor) && !row.as_tensor().shape().empty());  // [1 2] is a tensor
  if (f == Log::Jsonl && array) return append_text(path, json_text(row, path) + "\n");
  throw SheafError(fmt::format("'{}': a row is {}, got {}", path,
                               f == Log::Jsonl ? "a dict or a list" : "a dict (its keys name the columns)", kind_name(row.kind())));
}

}  // namespace sheaf
