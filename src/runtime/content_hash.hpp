// runtime/content_hash.hpp — the content hash of a user function (SPEC §7.9).
// A canonical, location-free serialization of the function's syntax tree — each node tagged and
// length-prefixed (S symbol, K keyword, I integer, F float by raw bits, T string, B boolean,
// N nil, L list, V vector, D dict, Q quote forms) — prefixed by the compiler version and the PRNG
// tag and followed by the hashes of the user functions and `def` constants it uses; hashed with
// two FNV-1a-64 passes with different offset bases → 32 hex digits. Equal source gives an equal
// hash wherever the file lives; editing a callee changes its callers' hashes.
#pragma once
#include <string>

#include "value/value.hpp"

namespace sheaf {

class Interp;

// `fn` is a user function value (Kind::Fn).
std::string content_hash(const Interp& in, const Value& fn);
// The same over the code alone: the `def` constants it reads count by name, not by value, so a
// changed setting (a constant computed from the command line) leaves it equal while content_hash
// differs. Lets a stale-cache notice say which of the two changed.
std::string code_hash(const Interp& in, const Value& fn);

}  // namespace sheaf
