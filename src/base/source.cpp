// base/source.cpp — the process-wide registry of source texts behind SrcLoc.
#include "base/source.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <vector>

namespace sheaf::sources {
namespace {
struct File {
  std::string path, text;
  bool bundled;
};
std::deque<File>& files() {
  static std::deque<File> f;  // deque: references stay valid while files are added
  return f;
}
std::mutex& lock() {
  static std::mutex m;
  return m;
}
const std::string kUnknown = "<unknown>";
}  // namespace

uint32_t add(std::string path, std::string text, bool bundled) {
  std::lock_guard g(lock());
  files().push_back({std::move(path), std::move(text), bundled});
  return static_cast<uint32_t>(files().size());
}

const std::string& path(uint32_t file) {
  std::lock_guard g(lock());
  return file == 0 || file > files().size() ? kUnknown : files()[file - 1].path;
}

bool bundled(uint32_t file) {
  std::lock_guard g(lock());
  return file != 0 && file <= files().size() && files()[file - 1].bundled;
}

std::string_view text(uint32_t file) {
  std::lock_guard g(lock());
  return file == 0 || file > files().size() ? std::string_view() : std::string_view(files()[file - 1].text);
}

std::string_view line_text(uint32_t file, uint32_t line) {
  std::lock_guard g(lock());
  if (file == 0 || file > files().size() || line == 0) return {};
  std::string_view t = files()[file - 1].text;
  for (uint32_t l = 1; l < line; ++l) {
    size_t nl = t.find('\n');
    if (nl == std::string_view::npos) return {};
    t.remove_prefix(nl + 1);
  }
  size_t nl = t.find('\n');
  if (nl != std::string_view::npos) t = t.substr(0, nl);
  if (!t.empty() && t.back() == '\r') t.remove_suffix(1);
  return t;
}

std::string describe(const SrcLoc& loc) {
  std::string s = path(loc.file);
  if (loc.line) s += ":" + std::to_string(loc.line);
  if (loc.col) s += ":" + std::to_string(loc.col);
  return s;
}

std::string comment_above(const SrcLoc& loc) {
  std::vector<std::string_view> lines;  // bottom up
  for (uint32_t l = loc.line; l > 1; --l) {
    std::string_view t = line_text(loc.file, l - 1);
    size_t at = t.find_first_not_of(" \t");
    if (at == std::string_view::npos || t[at] != ';') break;
    t.remove_prefix(at);
    t.remove_prefix(std::min(t.find_first_not_of(';'), t.size()));
    if (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    lines.push_back(t);
  }
  std::string s;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) s += (s.empty() ? "" : "\n") + std::string(*it);
  return s;
}

}  // namespace sheaf::sources
