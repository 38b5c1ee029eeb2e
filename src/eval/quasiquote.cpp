// eval/quasiquote.cpp — quote and quasiquote (SPEC §4.6).
// `(f ~x ~@xs): ~x inserts a value, ~@xs splices a list or a 1-D tensor. Nested quasiquotes
// raise the level; only level-1 unquotes are evaluated. Lists keep their ListKind so a macro
// result reads back as the same code.
#include "base/error.hpp"
#include "eval/interp.hpp"

namespace sheaf {
namespace {

bool head_is(const Value& form, std::string_view name) {
  if (!form.is_list()) return false;
  const ListObj& l = form.as_list();
  return l.kind == ListKind::Paren && l.items.size() == 2 && l.items[0].is(Kind::Symbol) && l.items[0].as_str() == name;
}

Value qq(Interp& in, const Value& form, const EnvPtr& env, int level) {
  if (!form.is_list()) return form;
  const ListObj& l = form.as_list();
  if (head_is(form, "unquote")) {
    if (level == 1) return in.eval(l.items[1], env);
    return Value::list({l.items[0], qq(in, l.items[1], env, level - 1)}, l.kind, l.loc);
  }
  if (head_is(form, "quasiquote")) return Value::list({l.items[0], qq(in, l.items[1], env, level + 1)}, l.kind, l.loc);
  if (head_is(form, "unquote-splicing") && level == 1)
    throw SheafError("Unquote-splicing (~@) must appear inside a list", l.loc);
  std::vector<Value> out;
  out.reserve(l.items.size());
  for (const Value& item : l.items) {
    if (head_is(item, "unquote-splicing") && level == 1) {
      Value spliced = in.eval(item.as_list().items[1], env);
      if (spliced.is_nil()) continue;
      if (spliced.is(Kind::Tensor) && spliced.as_tensor().rank() != 1)
        throw SheafError("~@ can splice a list or a 1-D tensor, got a rank-" + std::to_string(spliced.as_tensor().rank()) + " tensor", item.loc());
      if (!spliced.is_list() && !spliced.is(Kind::Tensor))
        throw SheafError("~@ can splice a list or a 1-D tensor, got " + std::string(kind_name(spliced.kind())), item.loc());
      for (Value& e : seq_elements(spliced, item.loc(), "~@")) out.push_back(std::move(e));
      continue;
    }
    out.push_back(qq(in, item, env, level));
  }
  Value r = Value::list(std::move(out), l.kind, l.loc);
  if (l.suffix) const_cast<ListObj&>(r.as_list()).suffix = l.suffix;  // fresh, unshared
  return r;
}

}  // namespace

Value eval_quasiquote(Interp& in, const Value& tmpl, const EnvPtr& env) { return qq(in, tmpl, env, 1); }

Value quote_data(const Value& form) {
  if (!form.is_list()) return form;
  const ListObj& l = form.as_list();
  if (l.kind == ListKind::Brace) {
    std::vector<std::pair<std::string, Value>> entries;
    for (size_t i = 0; i + 1 < l.items.size(); i += 2) {
      auto k = key_name(l.items[i]);
      if (!k) throw SheafError("dict keys must be keywords or strings", l.loc);
      entries.emplace_back(*k, quote_data(l.items[i + 1]));
    }
    return make_dict(std::move(entries));
  }
  bool changed = false;
  std::vector<Value> items;
  items.reserve(l.items.size());
  for (const Value& item : l.items) {
    items.push_back(quote_data(item));
    changed = changed || items.back().raw() != item.raw();
  }
  return changed ? Value::list(std::move(items), l.kind, l.loc) : form;
}

}  // namespace sheaf
