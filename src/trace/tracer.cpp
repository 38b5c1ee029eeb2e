// trace/tracer.cpp — runs a user function on symbolic tensors and records the IR graph
// (trace/recording.hpp has the recorder): arguments become parameters, results a result tree,
// the specialization key of a call's arguments, and the queries primitives make of the active
// trace. Loop, checkpoint and custom-vjp regions are traced in regions.cpp.
#include "trace/tracer.hpp"

#include <atomic>

#include "base/error.hpp"
#include "eval/hooks.hpp"
#include "eval/interp.hpp"
#include "passes/composites.hpp"
#include "passes/inline_calls.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
#include "trace/recording.hpp"
#include "value/function.hpp"
#include "value/tensor_value.hpp"

namespace sheaf::trace {
namespace detail {

thread_local int g_depth = 0;
thread_local SrcLoc g_site;
thread_local Tracer* g_tracer = nullptr;

uint32_t next_serial() {
  static std::atomic<uint32_t> n{0};
  return ++n;
}

}  // namespace detail

using namespace detail;

namespace {

// Symbolic arguments: tensor leaves (and, unless static, int/float leaves) become parameters.
Value symbolic_args(Tracer& t, const Value& v, bool static_scalars) {
  switch (v.kind()) {
    case Kind::Tensor: return Value::tensor(t.parameter(v.as_tensor().dtype(), v.as_tensor().shape(), false));
    case Kind::Int:
      return static_scalars ? v : Value::tensor(t.parameter(DType::I32, {}, true));
    case Kind::Float:
      return static_scalars ? v : Value::tensor(t.parameter(DType::F32, {}, true));
    case Kind::List: {
      std::vector<Value> items;
      for (const Value& x : v.as_list().items) items.push_back(symbolic_args(t, x, static_scalars));
      return Value::list(std::move(items), v.as_list().kind, v.as_list().loc);
    }
    case Kind::Dict: {
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [k, x] : v.as_dict().entries) entries.emplace_back(k, symbolic_args(t, x, static_scalars));
      return make_dict(std::move(entries));
    }
    case Kind::Handle: throw TraceAbort("a data handle is passed as an argument (reading it is I/O)");
    default: return v;
  }
}

ResultTree result_tree(Tracer& t, const Value& v) {
  ResultTree r;
  switch (v.kind()) {
    case Kind::Tensor: {
      const Tensor& x = v.as_tensor();
      r.kind = ResultTree::Kind::Slot;
      r.slot = static_cast<int32_t>(t.g.results.size());
      r.weak = x.weak();
      t.g.results.push_back(t.lift(x).symbol_id());
      return r;
    }
    case Kind::List:
      r.kind = ResultTree::Kind::List;
      r.list_kind = v.as_list().kind;
      for (const Value& x : v.as_list().items) r.items.push_back(result_tree(t, x));
      return r;
    case Kind::Dict:
      r.kind = ResultTree::Kind::Dict;
      for (const auto& [k, x] : v.as_dict().entries) {
        r.keys.push_back(k);
        r.items.push_back(result_tree(t, x));
      }
      return r;
    case Kind::Fn: case Kind::Builtin: throw TraceAbort("the function returns a function");
    case Kind::Handle: throw TraceAbort("the function returns a data handle");
    default:
      r.value = v;
      return r;
  }
}

// `inputs[n++] = t`, reusing the element already there (its shape vector keeps its capacity, so
// a steady stream of calls with the same structure allocates nothing here).
void put_input(std::vector<Tensor>& inputs, size_t& n, const Tensor& t) {
  if (n < inputs.size()) inputs[n] = t;
  else inputs.push_back(t);
  ++n;
}

void key_of(const Value& v, bool static_scalars, std::string& key, std::vector<Tensor>& inputs, size_t& count) {
  auto put = [&](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  auto tag = [&](char c) { key.push_back(c); };
  switch (v.kind()) {
    case Kind::Tensor: {
      const Tensor& t = v.as_tensor();
      tag('T');
      tag(static_cast<char>(t.dtype()));
      tag(static_cast<char>(t.rank()));
      put(t.shape().data(), t.shape().size() * sizeof(int64_t));
      put_input(inputs, count, t);
      return;
    }
    case Kind::Int: case Kind::Float: {  // host scalars: static values, or weak rank-0 inputs
      bool is_int = v.is(Kind::Int);
      if (!static_scalars) {
        tag(is_int ? 'i' : 'f');
        put_input(inputs, count, Tensor::scalar(is_int ? DType::I32 : DType::F32, v.as_double()));
      } else if (is_int) {
        tag('I');
        int64_t i = v.as_int();
        put(&i, sizeof i);
      } else {
        tag('F');
        float f = v.as_float();
        put(&f, sizeof f);
      }
      return;
    }
    case Kind::Bool: tag(v.as_bool() ? 'B' : 'b'); return;
    case Kind::Nil: tag('N'); return;
    case Kind::Str: case Kind::Keyword: case Kind::Symbol: {
      tag(v.is(Kind::Str) ? 'S' : v.is(Kind::Keyword) ? 'K' : 'Y');
      const std::string& s = v.as_str();
      uint32_t n = static_cast<uint32_t>(s.size());
      put(&n, sizeof n);
      key += s;
      return;
    }
    case Kind::List: {
      // () and [] lists of values behave alike (printing, equality, tracing); a list made by
      // `map` and the same list rebuilt from a compiled result must share an executable.
      ListKind k = v.as_list().kind == ListKind::Bracket ? ListKind::Paren : v.as_list().kind;
      tag('L');
      tag(static_cast<char>(k));
      uint32_t n = static_cast<uint32_t>(v.as_list().items.size());
      put(&n, sizeof n);
      for (const Value& x : v.as_list().items) key_of(x, static_scalars, key, inputs, count);
      return;
    }
    case Kind::Dict: {
      tag('D');
      uint32_t n = static_cast<uint32_t>(v.as_dict().entries.size());
      put(&n, sizeof n);
      for (const auto& [k, x] : v.as_dict().entries) {
        uint32_t m = static_cast<uint32_t>(k.size());
        put(&m, sizeof m);
        key += k;
        key_of(x, static_scalars, key, inputs, count);
      }
      return;
    }
    default: {  // functions, slices, handles: by identity (the cache entry keeps the object alive)
      tag('O');
      const void* p = v.raw();
      put(&p, sizeof p);
      return;
    }
  }
}

Value rebuild_tree(const ResultTree& t, std::span<const Tensor> results) {
  switch (t.kind) {
    case ResultTree::Kind::Slot: {
      const Tensor& x = results[static_cast<size_t>(t.slot)];
      return t.weak ? scalar_value(x) : Value::tensor(x);
    }
    case ResultTree::Kind::Static: return t.value;
    case ResultTree::Kind::List: {
      std::vector<Value> items;
      items.reserve(t.items.size());
      for (const ResultTree& c : t.items) items.push_back(rebuild_tree(c, results));
      return Value::list(std::move(items), t.list_kind);
    }
    case ResultTree::Kind::Dict: {
      std::vector<std::pair<std::string, Value>> entries;
      entries.reserve(t.items.size());
      for (size_t i = 0; i < t.items.size(); ++i) entries.emplace_back(t.keys[i], rebuild_tree(t.items[i], results));
      return make_dict(std::move(entries));
    }
  }
  return Value();
}

}  // namespace

bool tracing() { return g_depth > 0; }

thread_local int g_muted = 0;
bool output_effects_muted() { return g_muted > 0; }
OutputEffectsMuted::OutputEffectsMuted() { ++g_muted; }
OutputEffectsMuted::~OutputEffectsMuted() { --g_muted; }

const ir::Graph& current_graph() {
  if (!g_tracer) throw TraceAbort("internal: no active trace");
  return g_tracer->g;
}
void recognise_composites(size_t first) {
  if (!g_tracer) throw TraceAbort("internal: no active trace");
  passes::recognise_composites_in_place(g_tracer->g, first);
}
bool in_current_trace(const Tensor& t) { return g_tracer && t.is_symbolic() && t.trace_id() == g_tracer->serial; }
void stop_gradient(const Tensor& t) {
  if (in_current_trace(t)) g_tracer->no_gradient.push_back(t.symbol_id());
}
bool stops_gradient(int32_t id) {
  return g_tracer && std::find(g_tracer->no_gradient.begin(), g_tracer->no_gradient.end(), id) != g_tracer->no_gradient.end();
}
Tensor current_value(int32_t id) {
  if (!g_tracer) throw TraceAbort("internal: no active trace");
  return g_tracer->symbolic(g_tracer->g.type(id), id, false);
}
void set_site(SrcLoc loc) { g_site = loc; }

void record_guard(const Tensor& passed) {
  if (!g_tracer) return;
  if (g_tracer->parent) throw TraceAbort("a guard inside a loop that is compiled as one `while`");
  g_tracer->guards.push_back(passed);
}

bool guards_passed(const Tensor& flag) { return flag.get(0) != 0; }

Traced trace_call(Interp& in, const Value& fn, std::span<const Value> args, SrcLoc site, bool static_scalars) {
  return trace_with(args, site, static_scalars, fn.is(Kind::Fn) ? fn.as<FnObj>().name : "",
                    [&](std::vector<Value>& sym) { return in.call(fn, sym, site); });
}

Traced trace_with(std::span<const Value> args, SrcLoc site, bool static_scalars, std::string name,
                  const std::function<Value(std::vector<Value>&)>& body) {
  Tracer t;
  t.g.name = std::move(name);
  Scope scope(t);
  g_site = site;
  std::vector<Value> sym;
  for (const Value& a : args) sym.push_back(symbolic_args(t, a, static_scalars));
  Value r = body(sym);
  Traced out;
  out.result = result_tree(t, r);
  if (!t.guards.empty()) {
    Tensor all = t.guards[0];
    for (size_t i = 1; i < t.guards.size(); ++i) all = binary(Binary::And, all, t.guards[i]);
    t.g.results.push_back(t.lift(all).symbol_id());
    out.guarded = true;
  }
  out.graph = passes::inline_calls(t.g);
  return out;
}

void flatten_args(std::span<const Value> args, bool static_scalars, std::string& key, std::vector<Tensor>& inputs) {
  size_t n = 0;
  for (const Value& a : args) key_of(a, static_scalars, key, inputs, n);
  inputs.resize(n);
}

Value rebuild(const ResultTree& tree, std::span<const Tensor> results) { return rebuild_tree(tree, results); }

void install_eval_hooks() {
  TraceHooks& h = eval_hooks.trace;
  h.tracing = tracing;
  h.output_effects_muted = output_effects_muted;
  h.set_site = set_site;
  h.in_loop_trace = in_loop_trace;
  h.in_loop_body = [](const std::function<Value()>& body) {
    LoopScope compiling;
    return body();
  };
  h.merge_branches = merge_branches;
  h.merge_loop_exits = merge_loop_exits;
  h.trace_while = trace_while;
  h.trace_loop = trace_loop;
  h.record_guard = record_guard;
}

}  // namespace sheaf::trace
