// value/missing_key.hpp — a nil that remembers the lookup that produced it.
// `(get m :W)` on a dict without :W returns nil; that nil carries (as its object) the call site,
// the key and the dict's key names (the first 20), so that when it later reaches a builtin that
// rejects it, the error can say where it came from, which key was missing and which keys exist.
// The nil is an ordinary nil everywhere else (printing, `=`, `nil?`, hashing ignore the record),
// and the dict's values are not kept alive by it.
#pragma once
#include <span>
#include <string>

#include "base/error.hpp"
#include "value/value.hpp"

namespace sheaf {

// nil, recording that `fn` (get, get-in) at `site` found no `key` in `coll`.
Value missing_key_nil(const Value& coll, const Value& key, SrcLoc site, std::string_view fn);

// When an argument is such a nil, adds a note to `e` naming its lookup (once per error).
void note_missing_key(SheafError& e, std::span<const Value> args);

}  // namespace sheaf
