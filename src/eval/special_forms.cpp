// eval/special_forms.cpp — the special forms of SPEC §4, one handler each, and their table.
// A handler receives the unevaluated form; the table row also feeds `:help` and the docs.
#include <algorithm>
#include <optional>

#include "base/error.hpp"
#include "eval/hooks.hpp"
#include "eval/interp.hpp"
#include "eval/progress.hpp"
#include "eval/typed_params.hpp"
#include "tensor/elementwise.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {


std::string head(const ListObj& f) { return f.items[0].as_str(); }
SrcLoc at(const Value& v, const ListObj& f) { return v.loc().valid() ? v.loc() : f.loc; }

// A rank-0 bool computed from traced values: a condition known only at run time.
bool runtime_condition(const Value& v) {
  return v.is(Kind::Tensor) && v.as_tensor().is_symbolic() && v.as_tensor().rank() == 0 && v.as_tensor().dtype() == DType::Bool;
}

void need(const ListObj& f, size_t min_items, const char* usage) {
  if (f.items.size() < min_items) throw SheafError(head(f) + ": expected " + usage, f.loc);
}

const ListObj& binding_vector(const Value& v, const ListObj& f) {
  if (!v.is_list() || v.as_list().kind != ListKind::Bracket) {
    SheafError err(head(f) + ": expected a binding vector, got " + print_value(v, false), at(v, f));
    if (v.is_list() && v.as_list().kind == ListKind::Paren) err.hint = "bindings are written in square brackets: [x 1 y 2]";
    throw err;
  }
  return v.as_list();
}

int64_t count_value(Interp& in, const Value& form, const EnvPtr& env, const ListObj& f) {
  Value n = in.eval(form, env);
  auto d = number_of(n);
  if (!d || *d != static_cast<double>(static_cast<int64_t>(*d)) || *d < 0)
    throw SheafError(head(f) + ": count must be a non-negative integer, got " + print_value(n, false), at(form, f));
  return static_cast<int64_t>(*d);
}

// ---- definitions -------------------------------------------------------------------------

Value sf_def(Interp& in, const ListObj& f, const EnvPtr& env) {
  if (f.items.size() != 3 || !f.items[1].is(Kind::Symbol)) throw SheafError("def: expected (def name expr)", f.loc);
  int id = f.items[1].symbol();
  in.check_definable(id, at(f.items[1], f));
  Value v = in.eval(f.items[2], env);
  in.define(id, v, Interp::Global::Type::Def, at(f.items[1], f));
  return v;
}

// (fn [params] body...), (fn name [params] body...); defn/defmacro share the tail parsing.
Value make_fn(Interp& in, const ListObj& f, size_t start, std::string name, const EnvPtr& env, bool macro) {
  size_t i = start;
  std::string doc;
  auto skip_jit = [&] {
    while (i < f.items.size() && f.items[i].is(Kind::Keyword) && f.items[i].as_str() == "jit") ++i;
  };
  skip_jit();
  if (i + 1 < f.items.size() && f.items[i].is(Kind::Str)) doc = f.items[i++].as_str();
  skip_jit();
  if (i >= f.items.size()) throw SheafError(head(f) + ": missing parameter vector", f.loc);
  auto fn = std::make_shared<FnObj>();
  fn->params = parse_params(in, f.items[i], f.loc, !macro);
  size_t end = f.items.size();
  while (end > i + 1 && f.items[end - 1].is(Kind::Keyword) && f.items[end - 1].as_str() == "jit") --end;  // legacy
  fn->body.assign(f.items.begin() + static_cast<std::ptrdiff_t>(i + 1), f.items.begin() + static_cast<std::ptrdiff_t>(end));
  fn->name = std::move(name);
  fn->env = env;
  fn->loc = f.loc;
  fn->is_macro = macro;
  fn->doc = std::move(doc);
  fn->source = Value::list(f.items, f.kind, f.loc);
  return Value::object(Kind::Fn, std::move(fn));
}

Value sf_defn_like(Interp& in, const ListObj& f, const EnvPtr& env, bool macro) {
  need(f, 3, macro ? "(defmacro name [params] body...)" : "(defn name [params] body...)");
  const Value& name = f.items[1];
  if (!name.is(Kind::Symbol)) throw SheafError(head(f) + ": expected a name, got " + print_value(name, false), at(name, f));
  in.check_definable(name.symbol(), at(name, f));
  Value fn = make_fn(in, f, 2, name.as_str(), env, macro);
  in.define(name.symbol(), fn, macro ? Interp::Global::Type::Macro : Interp::Global::Type::Defn, at(name, f));
  return fn;
}

Value sf_defn(Interp& in, const ListObj& f, const EnvPtr& env) { return sf_defn_like(in, f, env, false); }
Value sf_defmacro(Interp& in, const ListObj& f, const EnvPtr& env) { return sf_defn_like(in, f, env, true); }

Value sf_fn(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(fn [params] body...)");
  if (head(f) == "lambda" && !in.warned_lambda) {
    in.warned_lambda = true;
    fmt::print(stderr, "warning: 'lambda' is deprecated, use 'fn'\n");
  }
  if (f.items[1].is(Kind::Symbol)) {  // (fn name [params] body...)
    Value fn = make_fn(in, f, 2, f.items[1].as_str(), env, false);
    return fn;
  }
  return make_fn(in, f, 1, "", env, false);
}

// ---- binding -----------------------------------------------------------------------------

// Drops the bindings that `newest` shadows from the frames above it up to `outer` (exclusive)
// that nothing else holds: no closure captured them, so no lookup can reach those bindings again
// (lookups through `newest` find its own first), and their values are freed now rather than when
// the let ends, as a rebound name frees its old value in Python. `(let [s (step s) s (step s)]
// ...)` keeps one or two states alive, not one per binding. Stops at the first shared frame: a
// closure holding it sees every frame above it.
void release_shadowed(Env& newest, const Env* outer) {
  auto bound_in_newest = [&](int id) {
    return std::any_of(newest.vars.begin(), newest.vars.end(), [&](const auto& var) { return var.first == id; });
  };
  for (Env* frame = &newest; frame->parent.get() != outer && frame->parent.use_count() == 1; frame = frame->parent.get())
    std::erase_if(frame->parent->vars, [&](const auto& var) { return bound_in_newest(var.first); });
}

Value sf_let(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(let [name value ...] body...)");
  const ListObj& b = binding_vector(f.items[1], f);
  if (b.items.size() % 2 != 0) throw SheafError("let: binding vector needs an even number of forms (name value pairs)", b.loc);
  // One frame per binding: a closure created by an earlier binding keeps seeing the frame it
  // captured, never a later binding of the same let (values are immutable, SPEC §4.1).
  EnvPtr local = env;
  for (size_t i = 0; i < b.items.size(); i += 2) {
    check_pattern(b.items[i], b.loc);
    Value v = in.eval(b.items[i + 1], local);
    if (v.is(Kind::Recur)) throw SheafError("recur must be in tail position of a loop", at(b.items[i + 1], f));
    local = std::make_shared<Env>(local);
    bind_pattern(in, *local, b.items[i], v, at(b.items[i], f));
    release_shadowed(*local, env.get());
    if (in.obs && in.obs->checks_locals()) in.obs->bound_locals(*local);
  }
  return in.eval_body({f.items.begin() + 2, f.items.end()}, local);
}

Value sf_with_params(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(with-params [dict] body...)");
  Value d;
  const Value& spec = f.items[1];
  if (spec.is_list() && spec.as_list().kind == ListKind::Bracket) {
    const auto& s = spec.as_list().items;
    if (s.empty() || s.size() > 2) throw SheafError("with-params: expected [dict] or [dict :key]", at(spec, f));
    d = in.eval(s[0], env);
    if (s.size() == 2) {
      Value k = in.eval(s[1], env);
      auto name = key_name(k);
      const Value* sub = name && d.is(Kind::Dict) ? d.as_dict().find(*name) : nullptr;
      if (!sub) throw SheafError("with-params: key " + print_value(k, false) + " not found", at(spec, f));
      d = *sub;
    }
  } else {
    d = in.eval(spec, env);
  }
  if (!d.is(Kind::Dict)) throw SheafError("with-params: expected a dict, got " + std::string(kind_name(d.kind())), at(spec, f));
  auto local = std::make_shared<Env>(env);
  for (const auto& [k, v] : d.as_dict().entries) local->bind(symbols::intern(k), v);
  return in.eval_body({f.items.begin() + 2, f.items.end()}, local);
}

// ---- control flow ------------------------------------------------------------------------

Value sf_if(Interp& in, const ListObj& f, const EnvPtr& env) {
  if (f.items.size() < 3 || f.items.size() > 4) throw SheafError("if: expected (if cond then [else])", f.loc);
  Value c = in.eval(f.items[1], env);
  if (runtime_condition(c)) {
    // A runtime condition while tracing: both branches are traced and merged with select (SPEC §6.4).
    Value a = in.eval(f.items[2], env);
    Value b = f.items.size() == 4 ? in.eval(f.items[3], env) : Value();
    if (a.is(Kind::Recur) || b.is(Kind::Recur)) {
      if (!eval_hooks.trace.in_loop_trace()) throw TraceAbort("`recur` decided on traced values outside a loop being compiled");
      return eval_hooks.trace.merge_loop_exits(c.as_tensor(), a, b);
    }
    return eval_hooks.trace.merge_branches(c.as_tensor(), a, b);
  }
  if (c.truthy()) return in.eval(f.items[2], env);
  return f.items.size() == 4 ? in.eval(f.items[3], env) : Value();
}

Value sf_do(Interp& in, const ListObj& f, const EnvPtr& env) { return in.eval_body({f.items.begin() + 1, f.items.end()}, env); }

// (case x (1 a) (2 b)): clauses in parentheses, as `cond` or Scheme's case write them, would be
// compared as literal lists and match nothing: an error showing the flat form instead. A lone
// parenthesised form is the default, so it counts only when its head cannot be called: (1 a).
void reject_paren_clauses(const ListObj& f) {
  auto paren_pair = [](const Value& c) {
    if (!c.is_list() || c.as_list().kind != ListKind::Paren || c.as_list().items.size() != 2) return false;
    const Value& h = c.as_list().items[0];
    return !(h.is(Kind::Symbol) && (h.as_str() == "quote" || h.as_str() == "quasiquote"));  // 'a reads as (quote a)
  };
  if (f.items.size() < 3 || !std::all_of(f.items.begin() + 2, f.items.end(), paren_pair)) return;
  if (f.items.size() == 3 && f.items[2].as_list().items[0].is(Kind::Symbol)) return;
  std::string flat = "(case " + print_value(f.items[1], false);
  for (size_t i = 2; i < f.items.size(); ++i) {
    const Value& test = f.items[i].as_list().items[0];
    bool fallback = (test.is(Kind::Symbol) && (test.as_str() == "else" || test.as_str() == "_")) ||
                    (test.is(Kind::Keyword) && (test.as_str() == "else" || test.as_str() == "default"));
    if (!fallback) flat += " " + print_value(test, false);
    flat += " " + print_value(f.items[i].as_list().items[1], false);
  }
  throw SheafError("case: clauses are written as flat value/result pairs, not in parentheses", at(f.items[2], f),
                   "write " + flat + ")");
}

Value sf_case(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(case x v1 r1 ... [default])");
  reject_paren_clauses(f);
  Value x = in.eval(f.items[1], env);
  size_t n = f.items.size() - 2;
  for (size_t i = 2; i + 1 < f.items.size(); i += 2)
    if (equal(x, quote_data(f.items[i]))) return in.eval(f.items[i + 1], env);
  if (n % 2 == 1) return in.eval(f.items.back(), env);
  return Value();
}

// (and a b ...) from operand i on; `is_and` false gives `or`. A runtime (traced) condition c
// splits like `if` (SPEC §6.4): and → (if c rest c), or → (if c c rest), merged with select.
Value and_or(Interp& in, const ListObj& f, const EnvPtr& env, size_t i, bool is_and) {
  Value v = Value::boolean(is_and);
  for (; i < f.items.size(); ++i) {
    v = in.eval(f.items[i], env);
    const bool last = i + 1 == f.items.size();
    if (!last && runtime_condition(v)) {
      Value rest = and_or(in, f, env, i + 1, is_and);
      return is_and ? eval_hooks.trace.merge_branches(v.as_tensor(), rest, v) : eval_hooks.trace.merge_branches(v.as_tensor(), v, rest);
    }
    if (last || v.truthy() != is_and) return v;
  }
  return v;
}

Value sf_and(Interp& in, const ListObj& f, const EnvPtr& env) { return and_or(in, f, env, 1, true); }
Value sf_or(Interp& in, const ListObj& f, const EnvPtr& env) { return and_or(in, f, env, 1, false); }

// An accumulator clause [acc init] (acc may be a pattern), present when a body follows it.
bool is_acc_clause(const ListObj& f, size_t i) {
  if (i + 1 >= f.items.size()) return false;
  const Value& v = f.items[i];
  if (!v.is_list() || v.as_list().kind != ListKind::Bracket || v.as_list().items.size() != 2) return false;
  const Value& target = v.as_list().items[0];
  return target.is(Kind::Symbol) || (target.is_list() && target.as_list().kind == ListKind::Bracket);
}

// The optional [acc init] clause of repeat/while (third item of the form) and the body after it.
struct Accumulator {
  Value pattern, value;  // pattern is nil when there is no accumulator
  std::span<const Value> body;
  void bind(Interp& in, Env& env, SrcLoc loc) const {
    if (!pattern.is_nil()) bind_pattern(in, env, pattern, value, loc);
  }
  void update(Value v) {
    if (!pattern.is_nil()) value = std::move(v);
  }
};

Accumulator accumulator(Interp& in, const ListObj& f, const EnvPtr& env) {
  Accumulator a;
  size_t body_start = 2;
  if (is_acc_clause(f, 2)) {
    a.pattern = f.items[2].as_list().items[0];
    check_pattern(a.pattern, f.loc);
    a.value = in.eval(f.items[2].as_list().items[1], env);
    body_start = 3;
  }
  a.body = {f.items.begin() + static_cast<std::ptrdiff_t>(body_start), f.items.end()};
  return a;
}

// Inside a compiled function, a repeat of more than kUnrolledRepeat iterations with an
// accumulator becomes one IR while (SPEC §6.4) carrying [i acc]: the body is traced once, with i
// a traced counter. A body that needs i (or anything else) as a static value cannot be a loop
// (nullopt): the repeat is then unrolled as the interpreter runs it.
constexpr int64_t kUnrolledRepeat = 8;

std::optional<Value> repeat_as_while(Interp& in, const ListObj& f, const EnvPtr& env, const Accumulator& acc, int index_id,
                                     int64_t n) {
  auto counter = [](const Value& st) { return st.as_list().items[0].as_tensor(); };
  auto cond = [&](const Value& st) { return Value::tensor(binary(Binary::Lt, counter(st), Tensor::scalar(DType::I32, static_cast<double>(n)))); };
  auto body = [&](const Value& st) {
    auto local = std::make_shared<Env>(env);
    if (index_id >= 0) local->bind(index_id, st.as_list().items[0]);
    bind_pattern(in, *local, acc.pattern, st.as_list().items[1], f.loc);
    Value next = in.eval_body(acc.body, local);
    return Value::list({Value::tensor(binary(Binary::Add, counter(st), Tensor::scalar(DType::I32, 1))), next});
  };
  try {
    return eval_hooks.trace.trace_while(Value::list({Value::integer(0), acc.value}), cond, body, n).as_list().items[1];
  } catch (const TraceAbort&) {
    return std::nullopt;
  }
}

// (repeat [i n] [acc init] body...) or (repeat n [acc init] body...)
Value sf_repeat(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(repeat [i n] [acc init] body...)");
  const Value& counter = f.items[1];
  int index_id = -1;
  int64_t n;
  if (counter.is_list() && counter.as_list().kind == ListKind::Bracket && counter.as_list().items.size() == 2 &&
      counter.as_list().items[0].is(Kind::Symbol)) {
    check_pattern(counter.as_list().items[0], f.loc);
    index_id = counter.as_list().items[0].symbol();
    n = count_value(in, counter.as_list().items[1], env, f);
  } else {
    n = count_value(in, counter, env, f);
  }
  Accumulator acc = accumulator(in, f, env);
  if (eval_hooks.trace.tracing() && n > kUnrolledRepeat && !acc.pattern.is_nil())
    if (std::optional<Value> r = repeat_as_while(in, f, env, acc, index_id, n)) return *r;
  std::optional<ProgressBar> bar;
  if (in.progress_bars && !eval_hooks.trace.tracing()) bar.emplace(in, n);
  for (int64_t i = 0; i < n; ++i) {
    auto local = std::make_shared<Env>(env);
    if (index_id >= 0) local->bind(index_id, Value::integer(i));
    acc.bind(in, *local, f.loc);
    acc.update(in.eval_body(acc.body, local));
    if (bar) bar->done(i + 1);
  }
  return acc.value;
}

// (while cond [acc init] body...)
Value sf_while(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(while cond [acc init] body...)");
  Accumulator acc = accumulator(in, f, env);
  for (;;) {
    auto local = std::make_shared<Env>(env);
    acc.bind(in, *local, f.loc);
    DepthGuard step(in, f.loc);  // counts steps for the evaluation limit
    Value c = in.eval(f.items[1], local);
    if (runtime_condition(c)) {
      // A data-dependent loop while tracing: the rest of it becomes one IR while (SPEC §6.4).
      if (acc.pattern.is_nil()) throw TraceAbort("`while` has a condition computed from traced values and no state to carry");
      auto in_state = [&](const Value& st, auto&& eval) {
        auto e = std::make_shared<Env>(env);
        bind_pattern(in, *e, acc.pattern, st, f.loc);
        return eval(e);
      };
      return eval_hooks.trace.trace_while(
          acc.value, [&](const Value& st) { return in_state(st, [&](const EnvPtr& e) { return in.eval(f.items[1], e); }); },
          [&](const Value& st) { return in_state(st, [&](const EnvPtr& e) { return in.eval_body(acc.body, e); }); }, 0);
    }
    if (!c.truthy()) break;
    acc.update(in.eval_body(acc.body, local));
  }
  return acc.value;
}

// recur may appear only in tail position of the loop body: checked before the loop runs.
void check_tail(const Value& form, bool tail) {
  if (!form.is_list()) return;
  const ListObj& l = form.as_list();
  if (l.kind != ListKind::Paren) {
    for (const Value& x : l.items) check_tail(x, false);
    return;
  }
  if (l.items.empty()) return;
  std::string h = l.items[0].is(Kind::Symbol) ? l.items[0].as_str() : "";
  if (h == "quote" || h == "quasiquote" || h == "fn" || h == "lambda" || h == "loop" || h == "defn" || h == "defmacro") return;
  if (h == "recur") {
    if (!tail) throw SheafError("recur must be in tail position of a loop", l.loc);
    for (size_t i = 1; i < l.items.size(); ++i) check_tail(l.items[i], false);
    return;
  }
  size_t first_tail = l.items.size();  // items at index ≥ first_tail inherit `tail`
  if (h == "if") first_tail = 2;
  else if (h == "do" || h == "and" || h == "or") first_tail = l.items.size() - 1;
  else if (h == "let" || h == "with-params") first_tail = l.items.size() - 1;
  for (size_t i = 1; i < l.items.size(); ++i) {
    bool t = tail && i >= first_tail;
    if (h == "case") t = tail && i >= 2 && (i % 2 == 1 || i == l.items.size() - 1);
    check_tail(l.items[i], t);
  }
}

Value sf_loop(Interp& in, const ListObj& f, const EnvPtr& env) {
  need(f, 2, "(loop [name init ...] body...)");
  const ListObj& b = binding_vector(f.items[1], f);
  if (b.items.size() % 2 != 0) throw SheafError("loop: binding vector needs an even number of forms", b.loc);
  std::span<const Value> body{f.items.begin() + 2, f.items.end()};
  for (size_t i = 0; i < body.size(); ++i) check_tail(body[i], i + 1 == body.size());
  std::vector<Value> patterns, vals;
  EnvPtr init = env;
  for (size_t i = 0; i < b.items.size(); i += 2) {
    check_pattern(b.items[i], b.loc);
    patterns.push_back(b.items[i]);
    vals.push_back(in.eval(b.items[i + 1], init));
    init = std::make_shared<Env>(init);
    bind_pattern(in, *init, b.items[i], vals.back(), b.loc);
  }
  auto run_body = [&](const std::vector<Value>& values) {
    auto local = std::make_shared<Env>(env);
    for (size_t i = 0; i < patterns.size(); ++i) bind_pattern(in, *local, patterns[i], values[i], b.loc);
    if (!eval_hooks.trace.tracing()) return in.eval_body(body, local);
    return eval_hooks.trace.in_loop_body([&] { return in.eval_body(body, local); });
  };
  for (;;) {
    DepthGuard step(in, f.loc);
    Value r = run_body(vals);
    if (!r.is(Kind::Recur)) return r;
    // While tracing, a recur decided by traced values: the rest of the loop becomes one IR while.
    if (static_cast<const RecurObj&>(*r.raw()).go)
      return eval_hooks.trace.trace_loop(Value::list(vals), [&](const Value& st) { return run_body(st.as_list().items); });
    auto& args = static_cast<const RecurObj&>(*r.raw()).args;
    if (args.size() != patterns.size())
      throw SheafError(fmt::format("recur: expected {} value{} (one per loop binding), got {}", patterns.size(),
                                   patterns.size() == 1 ? "" : "s", args.size()),
                       f.loc);
    vals = args;
  }
}

Value sf_recur(Interp& in, const ListObj& f, const EnvPtr& env) {
  auto r = std::make_shared<RecurObj>();
  for (size_t i = 1; i < f.items.size(); ++i) r->args.push_back(in.eval(f.items[i], env));
  return Value::object(Kind::Recur, std::move(r));
}

// ---- quoting, threading, modules ---------------------------------------------------------

Value sf_quote(Interp&, const ListObj& f, const EnvPtr&) {
  if (f.items.size() != 2) throw SheafError("quote: expected one form", f.loc);
  return quote_data(f.items[1]);
}

Value sf_quasiquote(Interp& in, const ListObj& f, const EnvPtr& env) {
  if (f.items.size() != 2) throw SheafError("quasiquote: expected one form", f.loc);
  return eval_quasiquote(in, f.items[1], env);
}

Value sf_unquote(Interp&, const ListObj& f, const EnvPtr&) {
  throw SheafError(head(f) == "unquote" ? "Unquote (~) outside of quasiquote" : "Unquote-splicing (~@) outside of quasiquote", f.loc);
}

Value sf_expand_then_eval(Interp& in, const ListObj& f, const EnvPtr& env) {
  return in.eval(in.expand(Value::list(f.items, f.kind, f.loc)), env);
}

Value sf_use(Interp& in, const ListObj& f, const EnvPtr&) {
  if (f.items.size() != 2) throw SheafError("use: expected (use module-name)", f.loc);
  const Value& m = f.items[1];
  std::string name;
  if (m.is(Kind::Symbol) || m.is(Kind::Str) || m.is(Kind::Keyword)) name = m.as_str();
  else if (m.is_list() && m.as_list().items.size() == 2 && m.as_list().items[1].is(Kind::Symbol)) name = m.as_list().items[1].as_str();
  else throw SheafError("use: expected a module name, got " + print_value(m, false), at(m, f));
  in.use_module(name, f.loc);
  return Value();
}

Value sf_static(Interp& in, const ListObj& f, const EnvPtr& env) {
  if (f.items.size() != 2) throw SheafError("static: expected one form", f.loc);
  return in.eval(f.items[1], env);
}

// The rows of guard (obs/session.cpp) and value-and-grad (autodiff/value_and_grad.cpp) get their
// handlers from those layers at start-up (define_special_form).
constinit SpecialForm kSpecialForms[] = {
    {"def", "(def name expr)", "Global immutable constant, evaluated once.", sf_def},
    {"defn", "(defn name [params] body...)",
     "Global named function; `& rest` collects extra arguments; (x [4 2]) and (p :as Schema) check arguments.", sf_defn},
    {"fn", "(fn [params] body...)", "Anonymous function closing over the enclosing locals.", sf_fn},
    {"lambda", "(lambda [params] body...)", "Deprecated alias of fn.", sf_fn},
    {"let", "(let [n1 e1 n2 e2 ...] body...)", "Sequential local bindings with destructuring.", sf_let},
    {"if", "(if c then [else])", "Branch on truthiness (only false and nil are falsy).", sf_if},
    {"case", "(case x v1 r1 ... [default])", "Compare x with unevaluated literals using =.", sf_case},
    {"do", "(do e1 ... en)", "Evaluate in order, return the last.", sf_do},
    {"repeat", "(repeat [i n] [acc init] body...)", "Counted loop rebinding acc to the body's value.", sf_repeat},
    {"while", "(while cond [acc init] body...)", "Loop while cond (which sees acc) is truthy.", sf_while},
    {"loop", "(loop [n1 e1 ...] body...)", "Tail-recursive loop; see recur.", sf_loop},
    {"recur", "(recur v1 ...)", "Restart the enclosing loop with new values (tail position only).", sf_recur},
    {"and", "(and e...)", "Short-circuit: first falsy value or the last value; (and) is true.", sf_and},
    {"or", "(or e...)", "Short-circuit: first truthy value or the last value; (or) is false.", sf_or},
    {"guard", "(guard :no-nan e) / (guard :range [lo hi] e) / (guard :shape [d...] e)",
     "Runtime assertion returning e unchanged; a breach reports and exits with status 1.", nullptr},
    {"->", "(-> x f (g a) ...)", "Thread-first: x becomes the first argument of each step.", sf_expand_then_eval},
    {"->>", "(->> x (f a) ...)", "Thread-last: x becomes the last argument of each step.", sf_expand_then_eval},
    {"as->", "(as-> x name step...)", "Bind the running value to name in each step.", sf_expand_then_eval},
    {"use", "(use name) / (use ./path.shf)", "Load a module once and import its definitions and macros.", sf_use},
    {"defparams", "(defparams Name {:k [shape] ...})",
     "Declare a parameter schema for typed parameters (p :as Name); leaves are shapes, groups or schemas.", sf_defparams},
    {"defmacro", "(defmacro name [params] body...)", "Define a macro: receives forms, returns a form.", sf_defmacro},
    {"quote", "(quote x) or 'x", "The form as data.", sf_quote},
    {"quasiquote", "`form", "Template with ~x (unquote) and ~@xs (splice).", sf_quasiquote},
    {"unquote", "~x", "Insert a value inside a quasiquote.", sf_unquote},
    {"unquote-splicing", "~@xs", "Splice a list inside a quasiquote.", sf_unquote},
    {"with-params", "(with-params [d] body...) / (with-params [d :k] body...)", "Bind every key of dict d as a local.",
     sf_with_params},
    {"value-and-grad", "(value-and-grad f)", "Function returning (value grads) of f at its first argument.", nullptr},
    {"static", "(static e)", "Legacy; evaluates to e.", sf_static},
};

}  // namespace

std::span<const SpecialForm> special_forms() { return kSpecialForms; }

void define_special_form(std::string_view name, SpecialFormFn fn) {
  auto it = std::find_if(std::begin(kSpecialForms), std::end(kSpecialForms), [&](const SpecialForm& sf) { return sf.name == name; });
  if (it == std::end(kSpecialForms)) throw std::logic_error("define_special_form: no special form '" + std::string(name) + "'");
  it->fn = fn;
}

bool is_reserved_name(std::string_view name) {
  static const std::string_view kExtra[] = {"dict", "get", "get-in", "assoc", "last"};
  for (const SpecialForm& sf : kSpecialForms)
    if (sf.name == name) return true;
  return std::find(std::begin(kExtra), std::end(kExtra), name) != std::end(kExtra);
}

}  // namespace sheaf
