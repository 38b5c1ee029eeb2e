// eval/interp.cpp — evaluation of forms, calls, globals and the top-level driver.
#include "eval/interp.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "base/interrupt.hpp"
#include "base/stack.hpp"
#include "eval/constant_calls.hpp"
#include "eval/dtype_suffix.hpp"
#include "eval/hooks.hpp"
#include "eval/typed_params.hpp"
#include "eval/utf8.hpp"
#include "reader/reader.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "value/handle.hpp"
#include "value/missing_key.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

DepthGuard::DepthGuard(Interp& i, SrcLoc loc) : in(i) {
  if (++in.depth_ > in.limits_.max_depth || stack_exhausted()) {
    --in.depth_;
    throw SheafError("Maximum recursion depth exceeded (" + std::to_string(in.limits_.max_depth) + " nested calls)", loc);
  }
  if (in.interrupt.load(std::memory_order_relaxed)) {  // Ctrl-C (base/interrupt.hpp)
    in.interrupt = false;
    --in.depth_;
    throw Interrupted(loc);
  }
  if (in.limits_.max_steps && ++in.steps_ > in.limits_.max_steps) {
    --in.depth_;
    throw SheafError("Evaluation step limit exceeded", loc);
  }
}

Interp::Interp(std::ostream& out, Limits limits) : out_(out), limits_(limits) {
  check_hooks_installed();
  set_max_tensor_elements(limits_.max_elements);
  for (const SpecialForm& sf : special_forms()) {
    int id = symbols::intern(sf.name);
    if (special_.size() <= static_cast<size_t>(id)) special_.resize(static_cast<size_t>(id) + 1, nullptr);
    special_[static_cast<size_t>(id)] = &sf;
  }
  for (const BuiltinDef* d : builtin_table())
    builtins_[symbols::intern(d->name)] = Value::object(Kind::Builtin, std::make_shared<BuiltinObj>(d));
  use_module("macros", {});  // preloaded standard macros (SPEC §4.7)
  jit = eval_hooks.make_compiler();
}

Interp::~Interp() {
  // A module frame holds functions whose environments lead back to it: break the cycle.
  for (auto& [module, frame] : autoloaded_envs_) frame->vars.clear();
}

void Interp::check_elements(int64_t n, SrcLoc loc) const {
  if (n == std::numeric_limits<int64_t>::max())  // shape_numel saturates
    throw SheafError(fmt::format("cannot create more than 2^63 elements (limit {})", limits_.max_elements), loc);
  if (n > limits_.max_elements)
    throw SheafError(fmt::format("cannot create {} elements (limit {})", n, limits_.max_elements), loc);
}

// True when the form contains a list headed by the symbol `guard`.
static bool mentions_guard(const Value& form) {
  if (!form.is_list()) return false;
  const auto& items = form.as_list().items;
  if (!items.empty() && items[0].is(Kind::Symbol) && items[0].as_str() == "guard") return true;
  return std::any_of(items.begin(), items.end(), mentions_guard);
}

Value Interp::run_text(std::string_view text, const std::string& path, bool bundled) {
  return run_source(sources::add(path, std::string(text), bundled));
}

// Reads the registered text in place (a 20 MB string literal is not copied once more).
Value Interp::run_source(uint32_t file) {
  std::vector<Value> forms = read_all(sources::text(file), file);
  // A program with guard forms keeps the backtrace of recent calls from its first form on.
  if (!obs || !obs->keeps_backtrace())
    for (const Value& f : forms)
      if (mentions_guard(f)) {
        observer().keep_backtrace();
        break;
      }
  Value last;
  for (const Value& f : forms) last = eval_toplevel(f);
  return last;
}

Value Interp::run_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SheafError("cannot open file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = std::move(ss).str();  // the buffer itself, not a copy
  std::string saved = current_dir;
  current_dir = std::filesystem::absolute(path).parent_path().string();
  loaded_paths_.insert(std::filesystem::weakly_canonical(path).string());
  try {
    Value v = run_source(sources::add(path, std::move(text)));
    current_dir = saved;
    return v;
  } catch (...) {
    current_dir = saved;
    throw;
  }
}

Value Interp::eval_toplevel(const Value& form) {
  try {
    Value expanded = expand(form);
    auto env = std::make_shared<Env>(module_env_);
    Value v = eval(expanded, env);
    if (v.is(Kind::Recur)) throw SheafError("recur must be in tail position of a loop", form.loc());
    return v;
  } catch (const SheafError&) {
    throw;
  } catch (const ReportedError&) {  // its report is printed as it is
    throw;
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {  // out of memory outside a builtin, a filesystem error, ...: this form
    throw foreign_error(e, form.loc());
  }
}

const Interp::Global* Interp::global(int id) const {
  auto it = globals_.find(id);
  return it == globals_.end() ? nullptr : &it->second;
}

void Interp::check_definable(int id, SrcLoc loc) const {
  const std::string& name = symbols::name(id);
  if (is_reserved_name(name)) throw SheafError("Cannot shadow special form '" + name + "'", loc);
  auto it = globals_.find(id);
  if (it != globals_.end() && !module_env_ && !it->second.shadowable)
    throw SheafError("Redefinition of '" + name + "' is not allowed.", loc);
}

void Interp::define(int id, Value v, Global::Type type, SrcLoc loc) {
  check_definable(id, loc);
  if (module_env_) {  // nn/optim: their functions see their own definitions first
    module_env_->bind(id, v);
    if (globals_.count(id)) return;  // a user definition made before the module loaded stays
  } else if (eval_hooks.trace.tracing()) {
    throw TraceAbort("defines the global '" + symbols::name(id) + "'");
  }
  bool replaces = globals_.count(id) || builtins_.count(id);
  globals_[id] = Global{type, std::move(v), module_name, module_env_ != nullptr};
  // Compiled code inlined the definition this one replaces.
  if (replaces && jit) jit->forget_compiled();
}

void Interp::clear_user_definitions() {
  for (auto it = globals_.begin(); it != globals_.end();)
    it = it->second.module.empty() ? globals_.erase(it) : std::next(it);
  // the definitions of nn/optim that user definitions shadowed are visible again
  for (const auto& [module, frame] : autoloaded_envs_)
    for (const auto& [id, v] : frame->vars) {
      Global::Type type = !v.is(Kind::Fn) ? Global::Type::Def : v.as<FnObj>().is_macro ? Global::Type::Macro : Global::Type::Defn;
      globals_.try_emplace(id, Global{type, v, module, true});
    }
}

const BuiltinDef* Interp::builtin_def(std::string_view name) const {
  auto it = builtins_.find(symbols::intern(name));
  return it == builtins_.end() ? nullptr : it->second.as<BuiltinObj>().def;
}

std::vector<std::string> Interp::all_names() const {
  std::vector<std::string> names;
  for (const auto& [id, v] : builtins_) names.push_back(symbols::name(id));
  for (const auto& [id, g] : globals_) names.push_back(symbols::name(id));
  for (const SpecialForm& sf : special_forms()) names.emplace_back(sf.name);
  for (const auto& [id, m] : autoload_index())
    if (!globals_.count(id) && !symbols::name(id).starts_with("__")) names.push_back(symbols::name(id));
  return names;
}

Value Interp::lookup(const Value& sym, const EnvPtr& env, bool call_position) {
  int id = sym.symbol();
  static const int kEllipsis = symbols::intern("...");
  if (id == kEllipsis) return sym;  // the ellipsis marker evaluates to itself: (get x ... 0)
  if (const Value* v = env->find(id)) return *v;
  if (auto it = globals_.find(id); it != globals_.end()) return it->second.value;
  if (auto it = builtins_.find(id); it != builtins_.end()) return it->second;
  if (autoload(id, sym.loc())) return lookup(sym, env, call_position);
  const std::string& name = symbols::name(id);
  std::vector<std::string> names = all_names();
  for (const Env* e = env.get(); e; e = e->parent.get())
    for (const auto& [vid, _] : e->vars) names.push_back(symbols::name(vid));
  SheafError err((call_position ? "Unknown function: " : "Undefined symbol: ") + name, sym.loc());
  if (name == "import") {
    err.hint = "Sheaf loads modules with (use name)";
  } else if (special_form(id)) {
    err.hint = "'" + name + "' is a special form and cannot be used as a value";
  } else if (auto s = suggest_names(name, names); !s.empty()) {
    err.hint = "did you mean " + fmt::format("{}", fmt::join(s, ", ")) + "?";
  } else {
    err.hint = "nothing named '" + name + "' is defined here: define it with (defn " + name +
               " ...) or (def " + name + " ...) before this use, or load its module with (use ...)";
  }
  throw err;
}

Value Interp::eval(const Value& form, const EnvPtr& env) {
  switch (form.kind()) {
    case Kind::Symbol: return lookup(form, env);
    case Kind::List: break;
    default: return form;
  }
  const ListObj& l = form.as_list();
  switch (l.kind) {
    case ListKind::Bracket: return eval_vector(l, env);
    case ListKind::Tuple: return form;
    case ListKind::Brace: {
      std::vector<std::pair<std::string, Value>> entries;
      for (size_t i = 0; i + 1 < l.items.size(); i += 2) {
        Value k = eval(l.items[i], env);
        auto name = key_name(k);
        if (!name) throw SheafError("dict keys must be keywords or strings, got " + std::string(kind_name(k.kind())), l.items[i].loc().valid() ? l.items[i].loc() : l.loc);
        entries.emplace_back(*name, eval(l.items[i + 1], env));
      }
      return make_dict(std::move(entries));
    }
    case ListKind::Paren: return eval_call(l, env);
  }
  return form;
}

Value Interp::eval_call(const ListObj& l, const EnvPtr& env) {
  if (l.items.empty()) throw SheafError("Cannot compile empty list", l.loc, "use '[] for an empty list");
  DepthGuard guard(*this, l.loc);
  const Value& head = l.items[0];
  Value f;
  if (head.is(Kind::Symbol)) {
    if (const SpecialForm* sf = special_form(head.symbol()); sf)
      return sf->fn(*this, l, env);
    f = lookup(head, env, true);
  } else {
    f = eval(head, env);
  }
  if (f.is(Kind::Fn) && f.as<FnObj>().is_macro) {  // a macro defined after this form was expanded
    Value form = Value::list(l.items, ListKind::Paren, l.loc);
    return eval(expand(form), env);
  }
  if (!f.is_callable() && !f.is(Kind::Handle)) {
    SheafError err(fmt::format("Cannot call {} {}", kind_name(f.kind()), print_value(f, false)), head.loc().valid() ? head.loc() : l.loc);
    if (f.is_number()) err.hint = "data literals use square brackets: [" + print_value(f) + " ...]";
    throw err;
  }
  // `(zeros [2 3] :i32)`: the literal's dtype suffix is the dtype argument left out (SPEC §10.1).
  std::optional<SuffixAsDtype> moved = f.is(Kind::Builtin) ? suffix_as_dtype(*f.as<BuiltinObj>().def, l) : std::nullopt;
  std::vector<Value> args;
  args.reserve(l.items.size() + 1);
  for (size_t i = 1; i < l.items.size(); ++i) {
    args.push_back(eval(moved && i + 1 == l.items.size() ? moved->literal : l.items[i], env));
    if (args.back().is(Kind::Recur)) throw SheafError("recur must be in tail position of a loop", l.items[i].loc());
  }
  if (moved) args.insert(args.end(), moved->dtype_args.begin(), moved->dtype_args.end());
  return call(f, args, l.loc);
}

// SPEC §2.5: numbers → 1-D f32 tensor (booleans only, host or rank-0 → bool); literal vectors of
// equal-shape tensors → stacked; anything else → list. A dtype suffix converts the result.
Value Interp::eval_vector(const ListObj& l, const EnvPtr& env) {
  std::vector<Value> items;
  items.reserve(l.items.size());
  for (const Value& f : l.items) items.push_back(eval(f, env));
  if (items.empty()) return Value::list({}, ListKind::Bracket);
  bool numbers = true, nested = true, bools = true, host_bool = false;
  for (size_t i = 0; i < items.size(); ++i) {
    const Value& v = items[i];
    bool rank0 = v.is(Kind::Tensor) && v.as_tensor().rank() == 0;
    bools = bools && (v.is(Kind::Bool) || (rank0 && v.as_tensor().dtype() == DType::Bool));
    host_bool = host_bool || v.is(Kind::Bool);
    numbers = numbers && (v.is_number() || rank0 || v.is(Kind::Bool));
    bool literal_vec = l.items[i].is_list() && l.items[i].as_list().kind == ListKind::Bracket;
    nested = nested && literal_vec && v.is(Kind::Tensor) && v.as_tensor().shape() == items[0].as_tensor().shape() &&
             items[0].is(Kind::Tensor);
  }
  numbers = numbers && (!host_bool || bools || l.suffix);  // host booleans mixed with numbers: a list
  DType dt = l.suffix.value_or(bools ? DType::Bool : DType::F32);
  bool symbolic = std::any_of(items.begin(), items.end(), [](const Value& v) { return v.is(Kind::Tensor) && v.as_tensor().is_symbolic(); });
  if ((numbers || nested) && symbolic) {  // traced elements: stack them with primitives
    std::vector<Tensor> rows;
    for (const Value& v : items) {
      Tensor t = v.is(Kind::Tensor) ? v.as_tensor() : Tensor::scalar(dt, v.is(Kind::Bool) ? v.as_bool() : *number_of(v));
      if (numbers || l.suffix) t = convert(t, dt);
      Shape s{1};
      s.insert(s.end(), t.shape().begin(), t.shape().end());
      rows.push_back(reshape(t, s));
    }
    return Value::tensor(concatenate(rows, 0));
  }
  if (numbers) {
    std::vector<double> vals;
    for (const Value& v : items) vals.push_back(v.is(Kind::Bool) ? v.as_bool() : *number_of(v));
    return Value::tensor(make_tensor(dt, {static_cast<int64_t>(items.size())}, vals));
  }
  if (nested) {
    const Tensor& first = items[0].as_tensor();
    Shape shape{static_cast<int64_t>(items.size())};
    shape.insert(shape.end(), first.shape().begin(), first.shape().end());
    check_elements(shape_numel(shape), l.loc);
    std::vector<double> vals;
    vals.reserve(static_cast<size_t>(shape_numel(shape)));
    for (const Value& v : items)
      for (int64_t i = 0; i < v.as_tensor().numel(); ++i) vals.push_back(v.as_tensor().get(i));
    return Value::tensor(make_tensor(l.suffix ? dt : first.dtype(), shape, vals));
  }
  if (l.suffix) throw SheafError(fmt::format("dtype suffix :{} needs numeric elements", dtype_name(dt)), l.loc);
  return Value::list(std::move(items), ListKind::Bracket);
}

Value Interp::eval_body(std::span<const Value> body, const EnvPtr& env) {
  Value last;
  for (const Value& f : body) last = eval(f, env);
  return last;
}

#ifndef SHEAF_OBSERVABILITY
#define SHEAF_OBSERVABILITY 1
#endif

// Internal builtins (`__vag-apply`) are plumbing, not calls the user wrote: not observed.
static bool observed(const Value& f) {
  return f.is(Kind::Fn) || (f.is(Kind::Builtin) && !f.as<BuiltinObj>().def->name.starts_with("__"));
}

Value Interp::call(const Value& f, std::span<const Value> args, SrcLoc site) {
  // SHEAF_OBSERVABILITY=0 compiles the hook out (bench/: the cost of the test when it is off).
  if (SHEAF_OBSERVABILITY && obs && observed(f)) [[unlikely]] {
    CallObserver::Call c(*obs, f, args);
    return c.leave(call_unobserved(f, args, site));
  }
  return call_unobserved(f, args, site);
}

CallObserver& Interp::observer() {
  if (!obs) obs = eval_hooks.make_observer();
  return *obs;
}

Value Interp::call_unobserved(const Value& f, std::span<const Value> args, SrcLoc site) {
  if (f.is(Kind::Builtin)) {
    const BuiltinDef& d = *f.as<BuiltinObj>().def;
    int n = static_cast<int>(args.size());
    if (n < d.min_args || (d.max_args >= 0 && n > d.max_args)) {
      std::string expected = d.max_args < 0 ? fmt::format("at least {}", d.min_args)
                             : d.min_args == d.max_args ? std::to_string(d.min_args)
                                                        : fmt::format("{} to {}", d.min_args, d.max_args);
      throw SheafError(fmt::format("{}: expected {} argument{}, got {}; usage: {}", d.name, expected,
                                   d.max_args == 1 && d.min_args == 1 ? "" : "s", n, d.signature),
                       site);
    }
    std::optional<std::string> known;  // while tracing: the key of a call on known arguments (constant_calls.hpp)
    if (eval_hooks.trace.tracing()) {
      if (d.effectful) {
        if (eval_hooks.trace.output_effects_muted() && (d.name == "print" || d.name == "progress")) return Value();
        throw TraceAbort(fmt::format("calls '{}', which has effects", d.name));
      }
      eval_hooks.trace.set_site(site);
      known = constant_call_key(d, args);
      if (known)
        if (const Value* kept = find_constant_call(*known)) return *kept;
    }
    try {
      Value r = d.fn(*this, CallArgs{args, site, d.name});
      if (known) keep_constant_call(std::move(*known), r, args);
      return r;
    } catch (SheafError& e) {
      note_missing_key(e, args);  // a nil argument from a lookup that found nothing says so
      if (!e.loc.valid()) {  // raised by a kernel, not by a nested call: name the builtin
        std::string msg = e.what();
        if (msg.rfind(std::string(d.name) + ":", 0) != 0) {
          SheafError named(std::string(d.name) + ": " + msg, site, e.hint);
          named.notes = e.notes;
          throw named;
        }
        e.loc = site;
      }
      throw;
    } catch (const TraceAbort&) {
      throw;
    } catch (const ReportedError&) {
      throw;
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception& e) {  // std::bad_alloc, a filesystem error, ...: named here
      throw foreign_error(e, site, d.name);
    }
  }
  if (f.is(Kind::Fn)) return call_fn(f, args, site);
  if (f.is(Kind::Handle)) {  // (h i), (h 100:200)
    if (args.size() != 1) throw SheafError(fmt::format("a data handle takes one index or slice, got {} arguments", args.size()), site);
    if (eval_hooks.trace.tracing()) throw TraceAbort("reads a data handle (I/O)");
    return f.as<HandleObj>().read(args[0], site);
  }
  throw SheafError(fmt::format("Cannot call {} {}", kind_name(f.kind()), print_value(f, false)), site);
}

static std::string describe_args(std::span<const Value> args) {
  std::vector<std::string> parts;
  for (const Value& a : args) {
    if (a.is(Kind::Tensor)) {
      const Tensor& t = a.as_tensor();
      parts.push_back(fmt::format("{}[{}]", dtype_name(t.dtype()), fmt::join(t.shape(), "x")));
    } else {
      parts.emplace_back(kind_name(a.kind()));
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

Value Interp::call_fn(const Value& fv, std::span<const Value> args, SrcLoc site, bool allow_macro) {
  const FnObj& fn = fv.as<FnObj>();
  if (fn.is_macro && !allow_macro) throw SheafError("Cannot call macro '" + fn.name + "' as a function", site);
  const Params& p = fn.params;
  size_t n = p.patterns.size();
  if (args.size() < n || (p.rest.is_nil() && args.size() > n)) {
    std::string name = fn.name.empty() ? "<lambda>" : fn.name;
    throw SheafError(fmt::format("{}: expected {}{} argument{} {}, got {}{}{}", name, p.rest.is_nil() ? "" : "at least ", n,
                                 n == 1 ? "" : "s", p.describe(), args.size(), args.empty() ? "" : ": ", describe_args(args)),
                     site);
  }
  if (std::any_of(p.patterns.begin(), p.patterns.end(), is_typed_param)) check_typed_args(*this, fn.name, p, args, site);
  // A macro takes forms, never tensors: not a call to compile (nor to walk its forms for them).
  if (jit && !fn.is_macro && !fn.name.empty() && !eval_hooks.trace.tracing() && !(obs && obs->wants_interior()))
    if (std::optional<Value> r = jit->call(*this, fv, args, site)) return *r;
  auto env = std::make_shared<Env>(fn.env);
  env->vars.reserve(n + 1);
  DepthGuard guard(*this, site);
  try {
    for (size_t i = 0; i < n; ++i) bind_pattern(*this, *env, p.patterns[i], args[i], fn.loc);
    if (!p.rest.is_nil())
      bind_pattern(*this, *env, p.rest, Value::list({args.begin() + static_cast<std::ptrdiff_t>(n), args.end()}), fn.loc);
    Value r = eval_body(fn.body, env);
    if (r.is(Kind::Recur)) throw SheafError("recur must be in tail position of a loop", fn.loc);
    return r;
  } catch (SheafError& e) {
    // Errors inside bundled modules are reported at the user's call site (SPEC §9.6).
    if (sources::bundled(fn.loc.file) && site.valid() && !sources::bundled(site.file) && !e.located_by_user_frame) {
      std::string msg = (fn.name.empty() ? "<lambda>" : fn.name) + " -> " + e.what();
      SheafError wrapped(msg, site, e.hint);
      wrapped.notes = e.notes;
      wrapped.notes.push_back("called from " + sources::describe(site));
      wrapped.located_by_user_frame = true;
      throw wrapped;
    }
    if (!fn.name.empty() && site.valid() && e.notes.size() < 8 && !sources::bundled(fn.loc.file)) {
      std::string note = "in " + fn.name + ", called from " + sources::describe(site);
      if (e.notes.empty() || e.notes.back() != note) e.notes.push_back(std::move(note));
    }
    throw;
  }
}

// The one-byte strings, shared: a string split into its characters costs a Value (32 bytes) a
// character, not a string object each. Never destroyed (values may outlive static destructors).
static const Value& one_byte_string(unsigned char c) {
  static const auto* table = [] {
    auto* t = new std::array<Value, 256>;
    for (size_t i = 0; i < t->size(); ++i) (*t)[i] = Value::string(std::string(1, static_cast<char>(i)));
    return t;
  }();
  return (*table)[c];
}

std::vector<Value> seq_elements(const Value& v, SrcLoc loc, std::string_view who) {
  if (v.is_list()) return v.as_list().items;
  if (v.is(Kind::Tensor)) {
    const Tensor& t = v.as_tensor();
    if (t.rank() == 0) throw SheafError(fmt::format("{}: cannot iterate a scalar tensor", who), loc);
    return row_values(t);
  }
  if (v.is(Kind::Str)) {
    const std::string& s = v.as_str();
    std::vector<Value> chars;
    chars.reserve(code_point_count(s));
    for (size_t i = 0; i < s.size();) {
      std::string_view c = code_point_at(s, i);
      chars.push_back(c.size() == 1 ? one_byte_string(static_cast<unsigned char>(c[0])) : Value::string(std::string(c)));
      i += c.size();
    }
    return chars;
  }
  if (v.is_nil()) return {};
  if (v.is(Kind::Dict)) {
    std::vector<Value> pairs;
    for (const auto& [k, x] : v.as_dict().entries) pairs.push_back(Value::list({Value::keyword(k), x}));
    return pairs;
  }
  throw SheafError(fmt::format("{}: expected a list, tuple or tensor, got {}", who, kind_name(v.kind())), loc);
}

}  // namespace sheaf
