// eval/dtype_suffix.cpp — a bracket literal's dtype suffix as the call's missing dtype
// argument (SPEC §10.1), decided from the builtin's signature.
#include "eval/dtype_suffix.hpp"

#include <string_view>

#include "tensor/dtype.hpp"

namespace sheaf {

namespace {

// The parameters of a signature "(name p1 [p2] [:opt v])": words and bracketed groups.
std::vector<std::string_view> parameters(std::string_view sig) {
  std::vector<std::string_view> out;
  if (sig.size() < 2 || sig.front() != '(' || sig.back() != ')') return out;
  sig = sig.substr(1, sig.size() - 2);
  size_t i = sig.find(' ');  // after the name
  while (i != std::string_view::npos && i < sig.size()) {
    while (i < sig.size() && sig[i] == ' ') ++i;
    if (i >= sig.size()) break;
    size_t start = i;
    int depth = 0;
    for (; i < sig.size() && (depth > 0 || sig[i] != ' '); ++i) depth += sig[i] == '[' ? 1 : sig[i] == ']' ? -1 : 0;
    out.push_back(sig.substr(start, i - start));
  }
  return out;
}

}  // namespace

std::optional<SuffixAsDtype> suffix_as_dtype(const BuiltinDef& d, const ListObj& call) {
  if (call.items.size() < 2) return std::nullopt;
  const Value& last = call.items.back();
  if (!last.is_list() || last.as_list().kind != ListKind::Bracket || !last.as_list().suffix) return std::nullopt;
  std::vector<std::string_view> params = parameters(d.signature);
  if (params.size() != call.items.size()) return std::nullopt;  // only the last parameter is left out
  std::string_view p = params.back();
  if (p.starts_with('[') && p.ends_with(']')) p = p.substr(1, p.size() - 2);
  bool option = p == ":dtype d";
  if (!option && p != "dtype" && p != ":dtype") return std::nullopt;
  const ListObj& l = last.as_list();
  SuffixAsDtype r{Value::list(l.items, ListKind::Bracket, l.loc), {}};
  if (option) r.dtype_args.push_back(Value::keyword("dtype"));
  r.dtype_args.push_back(Value::keyword(dtype_name(*l.suffix)));
  return r;
}

}  // namespace sheaf
