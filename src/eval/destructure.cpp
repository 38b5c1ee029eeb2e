// eval/destructure.cpp — binding patterns (SPEC §4.1 destructuring).
// Patterns: a symbol; a vector [a [b c] & rest] matched against a list, tuple or tensor
// (axis 0; rows of a 1-D tensor are scalars); a map pattern {:keys [h c]}. In a function's
// parameter vector also a typed parameter (x [4 2]) or (p :as Schema), which binds its name
// (eval/typed_params.cpp checks the value when the function is called).
#include "base/error.hpp"
#include "eval/interp.hpp"
#include "eval/typed_params.hpp"
#include "value/printer.hpp"

namespace sheaf {

static bool is_amp(const Value& v) { return v.is(Kind::Symbol) && v.as_str() == "&"; }

void check_pattern(const Value& pattern, SrcLoc loc) {
  SrcLoc at = pattern.loc().valid() ? pattern.loc() : loc;
  if (pattern.is(Kind::Symbol)) {
    if (is_reserved_name(pattern.as_str())) throw SheafError("Cannot shadow special form '" + pattern.as_str() + "'", at);
    return;
  }
  if (pattern.is_list()) {
    const ListObj& l = pattern.as_list();
    if (l.kind == ListKind::Bracket) {
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (is_amp(l.items[i])) {
          if (i + 2 != l.items.size()) throw SheafError("'&' must be followed by exactly one name", at);
          continue;
        }
        check_pattern(l.items[i], loc);
      }
      return;
    }
    if (l.kind == ListKind::Brace) {
      for (size_t i = 0; i + 1 < l.items.size(); i += 2) {
        const Value& k = l.items[i];
        const Value& names = l.items[i + 1];
        if (!k.is(Kind::Keyword) || k.as_str() != "keys" || !names.is_list())
          throw SheafError("map destructuring supports {:keys [a b ...]}", at);
        for (const Value& n : names.as_list().items) check_pattern(n, loc);
      }
      return;
    }
    if (l.kind == ListKind::Paren)
      throw SheafError("invalid binding pattern " + print_value(pattern), at, "binding patterns use square brackets: [a b]");
  }
  throw SheafError("invalid binding target " + print_value(pattern, false) + " (expected a name or a [pattern])", at);
}

Params parse_params(const Interp& in, const Value& vec, SrcLoc loc, bool typed) {
  if (!vec.is_list() || vec.as_list().kind != ListKind::Bracket) {
    SheafError err("expected a parameter vector, got " + print_value(vec, false), vec.loc().valid() ? vec.loc() : loc);
    if (vec.is_list() && vec.as_list().kind == ListKind::Paren) err.hint = "parameters are written in square brackets: [x y]";
    throw err;
  }
  Params p;
  const auto& items = vec.as_list().items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (is_amp(items[i])) {
      if (i + 2 != items.size()) throw SheafError("'&' must be followed by exactly one parameter", vec.loc());
      check_pattern(items[i + 1], loc);
      p.rest = items[i + 1];
      break;
    }
    if (typed && is_typed_param(items[i])) check_typed_param(in, items[i], loc);
    else check_pattern(items[i], loc);
    p.patterns.push_back(items[i]);
  }
  return p;
}

void bind_pattern(Interp& in, Env& env, const Value& pattern, const Value& v, SrcLoc loc) {
  if (pattern.is(Kind::Symbol) || is_typed_param(pattern)) {  // a typed parameter was checked by the call
    env.bind(param_name(pattern).symbol(), v);
    return;
  }
  const ListObj& l = pattern.as_list();
  SrcLoc at = l.loc.valid() ? l.loc : loc;
  if (l.kind == ListKind::Brace) {
    for (size_t i = 0; i + 1 < l.items.size(); i += 2)
      for (const Value& n : l.items[i + 1].as_list().items) {
        const Value* found = v.is(Kind::Dict) ? v.as_dict().find(n.as_str()) : nullptr;
        env.bind(n.symbol(), found ? *found : Value());
      }
    return;
  }
  if (!v.is_list() && !v.is(Kind::Tensor))
    throw SheafError("let destructuring: cannot destructure " + std::string(kind_name(v.kind())) + " with pattern " +
                         print_value(pattern),
                     at);
  std::vector<Value> elems = seq_elements(v, at, "let destructuring");
  size_t i = 0;
  for (; i < l.items.size(); ++i) {
    if (is_amp(l.items[i])) {
      std::vector<Value> rest;
      for (size_t j = i; j < elems.size(); ++j) rest.push_back(elems[j]);
      bind_pattern(in, env, l.items[i + 1], Value::list(std::move(rest)), loc);
      return;
    }
    if (i >= elems.size()) throw SheafError("let destructuring: arity mismatch", at);
    bind_pattern(in, env, l.items[i], elems[i], loc);
  }
}

}  // namespace sheaf
