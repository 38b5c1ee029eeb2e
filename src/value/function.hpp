// value/function.hpp — callable values: user closures (and macros) and builtins; environments.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace sheaf {

class Interp;

// Lexical environment frame: (symbol id, value) bindings, searched innermost first.
struct Env {
  std::shared_ptr<Env> parent;
  std::vector<std::pair<int, Value>> vars;
  explicit Env(std::shared_ptr<Env> p = nullptr) : parent(std::move(p)) {}
  const Value* find(int id) const;
  void bind(int id, Value v) { vars.emplace_back(id, std::move(v)); }
};
using EnvPtr = std::shared_ptr<Env>;

// A parameter list: patterns (symbols, nested vectors, {:keys [...]}) and an optional `& rest`.
struct Params {
  std::vector<Value> patterns;
  Value rest;  // nil when absent
  std::string describe() const;  // "[x y & more]"
};

// A form as source text: (f [x y] {:k v}) keeps its brackets (print_value prints lists as [a, b]).
std::string form_text(const Value& form);

struct FnObj : Obj {
  std::string name;  // empty for anonymous closures
  Params params;
  std::vector<Value> body;
  EnvPtr env;  // captured at creation
  SrcLoc loc;
  bool is_macro = false;
  std::string doc;
  Value source;  // the defining form, for :show
};

// Arguments of a builtin call: evaluated values plus the call site.
struct CallArgs {
  std::span<const Value> args;
  SrcLoc site;
  std::string_view name;
  size_t size() const { return args.size(); }
  const Value& operator[](size_t i) const { return args[i]; }
};

using BuiltinFn = Value (*)(Interp&, const CallArgs&);

// One row of the builtin table: it feeds dispatch, `:help`, completion and generated docs.
struct BuiltinDef {
  std::string_view name;
  std::string_view signature;  // "(get coll key [default])"
  std::string_view doc;        // one line
  BuiltinFn fn;
  int min_args = 0;
  int max_args = -1;  // -1: variadic
  bool effectful = false;
};

struct BuiltinObj : Obj {
  const BuiltinDef* def;
  explicit BuiltinObj(const BuiltinDef* d) : def(d) {}
};

}  // namespace sheaf
