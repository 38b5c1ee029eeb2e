// eval/expander.cpp — macro expansion, run on each top-level form before evaluation.
// Expands user and prelude macros (defmacro), and the threading forms ->, ->>, as->, until no
// head names a macro. Quoted forms are left alone; inside quasiquote only unquoted parts are
// expanded. Forms a macro creates take the call site's location, so errors point at user code.
#include <unordered_set>

#include "base/error.hpp"
#include "eval/interp.hpp"
#include "obs/session.hpp"

namespace sheaf {
namespace {

bool head_named(const ListObj& l, std::string_view name) {
  return l.kind == ListKind::Paren && !l.items.empty() && l.items[0].is(Kind::Symbol) && l.items[0].as_str() == name;
}

void collect(const Value& v, std::unordered_set<const Obj*>& seen) {
  if (!v.raw() || !seen.insert(v.raw()).second) return;
  if (v.is_list())
    for (const Value& x : v.as_list().items) collect(x, seen);
}

// Gives every node the macro built (not one of its argument forms) the call-site location.
Value relocate(const Value& v, const std::unordered_set<const Obj*>& args, SrcLoc site) {
  if (v.raw() && args.count(v.raw())) return v;
  if (v.is(Kind::Symbol)) return Value::symbol_id(v.symbol(), site);
  if (!v.is_list()) return v;
  const ListObj& l = v.as_list();
  std::vector<Value> items;
  items.reserve(l.items.size());
  for (const Value& x : l.items) items.push_back(relocate(x, args, site));
  Value r = Value::list(std::move(items), l.kind, site);
  if (l.suffix) const_cast<ListObj&>(r.as_list()).suffix = l.suffix;
  return r;
}

// (-> x f (g a)) → (g (f x) a);  (->> x (g a)) → (g a x)
Value thread(const ListObj& l, bool last) {
  if (l.items.size() < 2) throw SheafError(l.items[0].as_str() + " needs an initial value", l.loc);
  Value acc = l.items[1];
  for (size_t i = 2; i < l.items.size(); ++i) {
    const Value& step = l.items[i];
    SrcLoc at = step.loc().valid() ? step.loc() : l.loc;
    if (step.is_list() && step.as_list().kind == ListKind::Paren && !step.as_list().items.empty()) {
      std::vector<Value> items = step.as_list().items;
      if (last) items.push_back(acc);
      else items.insert(items.begin() + 1, acc);
      acc = Value::list(std::move(items), ListKind::Paren, at);
    } else {
      acc = Value::list({step, acc}, ListKind::Paren, at);
    }
  }
  return acc;
}

// (as-> x name s1 s2) → (let [name x name s1 name s2] name)
Value thread_as(const ListObj& l) {
  if (l.items.size() < 3 || !l.items[2].is(Kind::Symbol))
    throw SheafError("as-> expects (as-> value name steps...)", l.loc);
  std::vector<Value> bindings{l.items[2], l.items[1]};
  for (size_t i = 3; i < l.items.size(); ++i) {
    bindings.push_back(l.items[2]);
    bindings.push_back(l.items[i]);
  }
  return Value::list({Value::symbol("let", l.loc), Value::list(std::move(bindings), ListKind::Bracket, l.loc), l.items[2]},
                     ListKind::Paren, l.loc);
}

}  // namespace

Value Interp::expand_qq(const Value& form, int level) {
  if (!form.is_list()) return form;
  const ListObj& l = form.as_list();
  int inner = level;
  if (head_named(l, "unquote") || head_named(l, "unquote-splicing")) {
    if (level == 1 && l.items.size() == 2) return Value::list({l.items[0], expand(l.items[1])}, l.kind, l.loc);
    inner = level - 1;
  } else if (head_named(l, "quasiquote")) {
    inner = level + 1;
  }
  std::vector<Value> items;
  bool changed = false;
  for (const Value& x : l.items) {
    items.push_back(expand_qq(x, inner));
    changed = changed || items.back().raw() != x.raw();
  }
  if (!changed) return form;
  Value r = Value::list(std::move(items), l.kind, l.loc);
  if (l.suffix) const_cast<ListObj&>(r.as_list()).suffix = l.suffix;
  return r;
}

Value Interp::expand(const Value& form) {
  if (!form.is_list()) return form;
  const ListObj& l = form.as_list();
  DepthGuard guard(*this, l.loc);
  if (l.kind == ListKind::Paren && !l.items.empty() && l.items[0].is(Kind::Symbol)) {
    const std::string& name = l.items[0].as_str();
    if (name == "quote") return form;
    if (name == "guard") observer().keep_backtrace();  // also a guard written by a macro
    if (name == "quasiquote") {
      if (l.items.size() != 2) throw SheafError("quasiquote expects one form", l.loc);
      return Value::list({l.items[0], expand_qq(l.items[1], 1)}, l.kind, l.loc);
    }
    if (name == "unquote" || name == "unquote-splicing")
      throw SheafError(name == "unquote" ? "Unquote (~) outside of quasiquote" : "Unquote-splicing (~@) outside of quasiquote", l.loc);
    if (name == "->" || name == "->>") return expand(thread(l, name == "->>"));
    if (name == "as->") return expand(thread_as(l));
    auto it = globals_.find(l.items[0].symbol());
    if (it != globals_.end() && it->second.type == Global::Type::Macro) {
      std::vector<Value> args(l.items.begin() + 1, l.items.end());
      Value result = call_fn(it->second.value, args, l.loc, /*allow_macro=*/true);
      std::unordered_set<const Obj*> arg_nodes;
      for (const Value& a : args) collect(a, arg_nodes);
      return expand(relocate(result, arg_nodes, l.loc));
    }
  }
  std::vector<Value> items;
  items.reserve(l.items.size());
  bool changed = false;
  for (const Value& x : l.items) {
    items.push_back(expand(x));
    changed = changed || items.back().raw() != x.raw();
  }
  if (!changed) return form;
  Value r = Value::list(std::move(items), l.kind, l.loc);
  if (l.suffix) const_cast<ListObj&>(r.as_list()).suffix = l.suffix;
  return r;
}

}  // namespace sheaf
