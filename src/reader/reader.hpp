// reader/reader.hpp — text → forms (SPEC §3).
// Produces Values: lists (with ListKind Paren/Bracket/Brace and a location), symbols (with a
// location), and self-evaluating atoms. 'x `x ~x ~@x become (quote x) (quasiquote x)
// (unquote x) (unquote-splicing x). A dtype keyword right after a bracket literal becomes the
// list's `suffix`. Parse errors are SheafErrors naming the location and the bracket involved.
#pragma once
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace sheaf {

struct Form {
  Value value;
  size_t begin = 0, end = 0;  // byte offsets of the form in the text
};

struct ReaderOptions {
  size_t max_depth = 10000;  // nesting limit; deeper input is a parse error, not a crash
};

std::vector<Form> read_forms(std::string_view text, uint32_t file, ReaderOptions opts = {});
std::vector<Value> read_all(std::string_view text, uint32_t file, ReaderOptions opts = {});

// For the REPL: is the text complete, still open (unclosed bracket or string), or broken?
enum class ReadStatus { Complete, Incomplete, Error };
ReadStatus read_status(std::string_view text);

// Atom classification alone (used by tests and by `read-string`-like helpers).
Value classify_atom(std::string_view atom, SrcLoc loc);

}  // namespace sheaf
