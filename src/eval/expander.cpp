// eval/expander.cpp — macro expansion, run on each top-level form before evaluation.
// Expands user and prelude macros (defmacro), and the threading forms ->, ->>, as->, until no
// head names a macro. Quoted forms are left alone; inside quasiquote only unquoted parts are
// expanded. Forms a macro creates take the call site's location, so errors point at user code.
#include <unordered_set>

#include "base/error.hpp"
#include "base/stack.hpp"
#include "eval/interp.hpp"

namespace sheaf {
namespace {

bool head_named(const ListObj& l, std::string_view name) {
  return l.kind == ListKind::Paren && !l.items.empty() && l.items[0].is(Kind::Symbol) && l.items[0].as_str() == name;
}

// Adds the nodes of an argument form to the expansion's set (a node already there was walked
// with everything below it: a chain of macros passing their forms on walks each node once).
void collect(const Value& v, Interp::Expansion& e) {
  if (!v.raw() || !e.arg_nodes.insert(v.raw()).second) return;
  if (stack_exhausted()) throw SheafError("a macro argument is nested too deeply", v.loc());
  e.keep.push_back(v.shared());
  if (v.is_list())
    for (const Value& x : v.as_list().items) collect(x, e);
}

// Builds the relocated copy of one macro's result within the expansion's budget
// (Limits::max_expansion_forms): a macro whose expansion grows without end (each step doubling
// its form, or an unbounded recursion of small steps) stops with an error naming it, long
// before memory runs out.
struct Relocation {
  Interp::Expansion& e;
  uint64_t limit;
  const std::string& macro;
  SrcLoc site;

  void charge(uint64_t forms) {
    if (forms > e.left)
      throw SheafError(fmt::format("macro expansion built more than {} forms (expanding '{}'): does the macro grow its "
                                   "output without end?",
                                   limit, macro),
                       site);
    e.left -= forms;
  }

  // Gives every node the macro built (not one of its argument forms) the call-site location.
  Value relocate(const Value& v) {
    if (v.raw() && e.arg_nodes.count(v.raw())) return v;
    if (v.is(Kind::Symbol)) {
      charge(1);
      return Value::symbol_id(v.symbol(), site);
    }
    if (!v.is_list()) return v;
    const ListObj& l = v.as_list();
    charge(1 + l.items.size());  // the list and each of its elements
    if (stack_exhausted()) throw SheafError(fmt::format("macro '{}' returned a form nested too deeply", macro), site);
    std::vector<Value> items;
    items.reserve(l.items.size());
    for (const Value& x : l.items) items.push_back(relocate(x));
    Value r = Value::list(std::move(items), l.kind, site);
    if (l.suffix) const_cast<ListObj&>(r.as_list()).suffix = l.suffix;
    return r;
  }
};

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
  // One Expansion serves everything the outermost call expands (a top-level form, or a form
  // whose macro was defined after it was read); it is emptied when that call returns.
  struct Outermost {
    Interp& in;
    explicit Outermost(Interp& i) : in(i) {
      if (in.expanding_++ == 0) in.expansion_.left = in.limits_.max_expansion_forms;
    }
    ~Outermost() {
      if (--in.expanding_ == 0) in.expansion_ = {};
    }
  } outermost(*this);
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
      for (const Value& a : args) collect(a, expansion_);
      Value relocated = Relocation{expansion_, limits_.max_expansion_forms, name, l.loc}.relocate(result);
      return expand(relocated);
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
