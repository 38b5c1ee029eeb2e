// base/error.hpp — the one error type of the language, and its rendering.
// A SheafError carries the message, the source location of the offending form, notes (call
// sites, "in f") and an optional hint. Rendering follows SPEC §9.6 and STYLE §4:
//   error: <message>
//    --> file:line:col
//      |  quoted line with ^^^ under the form
//    = called from ...      = hint: ...
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "base/source.hpp"

namespace sheaf {

struct SheafError : std::runtime_error {
  SrcLoc loc;
  std::vector<std::string> notes;
  std::string hint;
  // Set when the error must not be re-wrapped by enclosing calls (guard breaches, exit).
  bool located_by_user_frame = false;
  explicit SheafError(std::string msg, SrcLoc l = {}, std::string h = {})
      : std::runtime_error(std::move(msg)), loc(l), hint(std::move(h)) {}
};

template <typename... A>
[[noreturn]] void fail(SrcLoc loc, fmt::format_string<A...> f, A&&... a) {
  throw SheafError(fmt::format(f, std::forward<A>(a)...), loc);
}

// The diagnostic for any exception reaching a boundary (a builtin call, a top-level form, the
// command line, the REPL): a SheafError as it is; another exception's text, or "out of memory"
// for std::bad_alloc, at `loc` and prefixed by `who` ("zeros: out of memory") when given.
SheafError foreign_error(const std::exception& e, SrcLoc loc = {}, std::string_view who = {});

// Full diagnostic text (ends with a newline). `color` adds ANSI red/bold.
std::string render_error(const SheafError& e, bool color);

// Names within edit distance 2 of `name`, closest first, at most 3.
std::vector<std::string> suggest_names(const std::string& name,
                                       const std::vector<std::string>& candidates);

}  // namespace sheaf
