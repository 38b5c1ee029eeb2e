// base/source.hpp — source files and locations.
// Every syntax node carries a SrcLoc (file id, 1-based line and column, span length in bytes).
// File texts are kept in a process-wide registry so diagnostics can quote the offending line.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace sheaf {

struct SrcLoc {
  uint32_t file = 0;  // 0 = unknown
  uint32_t line = 0;  // 1-based; 0 = unknown
  uint32_t col = 0;   // 1-based
  uint32_t len = 0;   // span on the line, for carets
  bool valid() const { return line != 0; }
};

namespace sources {
// Registers a source text; returns its id (≥ 1). `bundled` marks prelude modules embedded in
// the binary: errors raised inside them are reported at the user's call site.
uint32_t add(std::string path, std::string text, bool bundled = false);
const std::string& path(uint32_t file);
bool bundled(uint32_t file);
// The whole text of a registered file (valid for the life of the process).
std::string_view text(uint32_t file);
// The text of one line (without newline); empty when unknown.
std::string_view line_text(uint32_t file, uint32_t line);
// "file:line:col" (or "file:line" when the column is unknown).
std::string describe(const SrcLoc& loc);
// The `;;` comment lines right above `loc`'s line (a definition's description), without the
// semicolons and one space, joined by newlines; empty when the line above is not a comment.
std::string comment_above(const SrcLoc& loc);
}  // namespace sources

}  // namespace sheaf
