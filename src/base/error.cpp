// base/error.cpp — rendering of diagnostics and "did you mean" suggestions.
#include "base/error.hpp"

#include <algorithm>
#include <new>

namespace sheaf {

std::string render_error(const SheafError& e, bool color) {
  const char* red = color ? "\033[1;31m" : "";
  const char* blue = color ? "\033[1;34m" : "";
  const char* off = color ? "\033[0m" : "";
  std::string s = fmt::format("{}error{}: {}\n", red, off, e.what());
  if (e.loc.valid()) {
    s += fmt::format("{} -->{} {}\n", blue, off, sources::describe(e.loc));
    std::string_view text = sources::line_text(e.loc.file, e.loc.line);
    if (!text.empty() && e.loc.col > 0 && text.size() < 400) {
      std::string num = std::to_string(e.loc.line);
      std::string pad(num.size(), ' ');
      size_t col = e.loc.col - 1;
      size_t len = std::max<size_t>(1, std::min<size_t>(e.loc.len, text.size() > col ? text.size() - col : 1));
      std::string under;
      for (size_t i = 0; i < col && i < text.size(); ++i) under += text[i] == '\t' ? '\t' : ' ';
      s += fmt::format("{} {} |{}\n", blue, pad, off);
      s += fmt::format("{} {} |{} {}\n", blue, num, off, text);
      s += fmt::format("{} {} |{} {}{}{}{}\n", blue, pad, off, under, red, std::string(len, '^'), off);
    }
  }
  for (const auto& n : e.notes) s += fmt::format(" = {}\n", n);
  if (!e.hint.empty()) s += fmt::format(" = hint: {}\n", e.hint);
  return s;
}

SheafError foreign_error(const std::exception& e, SrcLoc loc, std::string_view who) {
  if (const auto* own = dynamic_cast<const SheafError*>(&e)) return *own;
  std::string what = dynamic_cast<const std::bad_alloc*>(&e) ? "out of memory" : e.what();
  return SheafError(who.empty() ? what : fmt::format("{}: {}", who, what), loc);
}

// Optimal-string-alignment distance: insertions, deletions, substitutions and transpositions
// of adjacent characters each cost 1 ("wehn" is one edit from "when").
static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::vector<std::string> suggest_names(const std::string& name,
                                       const std::vector<std::string>& candidates) {
  std::vector<std::pair<size_t, std::string>> hits;
  for (const auto& c : candidates) {
    if (c == name || c.rfind("__", 0) == 0) continue;
    if (c.size() > name.size() + 2 || name.size() > c.size() + 2) continue;
    size_t d = edit_distance(name, c);
    if (d <= 2) hits.emplace_back(d, c);
  }
  std::sort(hits.begin(), hits.end());
  hits.erase(std::unique(hits.begin(), hits.end()), hits.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < hits.size() && i < 3; ++i) out.push_back(hits[i].second);
  return out;
}

}  // namespace sheaf
