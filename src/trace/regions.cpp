// trace/regions.cpp — control flow while tracing: a runtime `if` merged with select, loops whose
// condition is traced (`while`, `loop`/`recur`) as one IR while with cond and body regions, and
// the call nodes of `checkpoint` and `custom-vjp` with their regions (each region traced twice:
// once to discover the enclosing values it reads, then with those declared as parameters).
#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"
#include "trace/recording.hpp"
#include "trace/tracer.hpp"
#include "value/function.hpp"
#include "value/tensor_value.hpp"

namespace sheaf::trace {

using namespace detail;

namespace {

// A host number or bool leaf of a runtime `if` branch as a weak rank-0 tensor.
std::optional<Tensor> weak_scalar(const Value& v) {
  if (v.is(Kind::Int)) return Tensor::scalar(DType::I32, static_cast<double>(v.as_int()));
  if (v.is(Kind::Float)) return Tensor::scalar(DType::F32, v.as_float());
  if (v.is(Kind::Bool)) return Tensor::scalar(DType::Bool, v.as_bool());
  return std::nullopt;
}

Value merge(const Tensor& cond, const Value& a, const Value& b) {
  auto differ = [] { return TraceAbort("the branches of a runtime `if` differ in structure, shape or dtype"); };
  if (a.is(Kind::Tensor) || b.is(Kind::Tensor)) {
    std::optional<Tensor> x = a.is(Kind::Tensor) ? std::optional<Tensor>(a.as_tensor()) : weak_scalar(a);
    std::optional<Tensor> y = b.is(Kind::Tensor) ? std::optional<Tensor>(b.as_tensor()) : weak_scalar(b);
    if (!x || !y) throw differ();
    bool wx = !a.is(Kind::Tensor) || x->weak(), wy = !b.is(Kind::Tensor) || y->weak();
    // Interpreted, the branch taken decides the result's dtype: both branches must agree. A host
    // number in one branch and a rank-0 tensor of its dtype in the other (a clipped scalar
    // parameter) merge into the tensor: same value, same printing.
    if (x->shape() != y->shape() || x->dtype() != y->dtype()) throw differ();
    DType d = x->dtype();
    Tensor r = select(cond, convert(*x, d), convert(*y, d));
    if (wx && wy) r = r.as_weak();
    return Value::tensor(r);
  }
  if ((a.is_number() && b.is_number() && !equal(a, b)) || (a.is(Kind::Bool) && b.is(Kind::Bool) && a.as_bool() != b.as_bool())) {
    Tensor x = *weak_scalar(a), y = *weak_scalar(b);
    if (x.dtype() != y.dtype()) throw differ();  // an int in one branch, a float in the other
    return Value::tensor(select(cond, x, y).as_weak());
  }
  if (a.is_list() && b.is_list()) {
    const auto &xa = a.as_list().items, &xb = b.as_list().items;
    // (list ...) and [...] are the same kind of value (tree-map rebuilds one as the other); a
    // tuple is not.
    bool ta = a.as_list().kind == ListKind::Tuple, tb = b.as_list().kind == ListKind::Tuple;
    if (xa.size() != xb.size() || ta != tb) throw differ();
    std::vector<Value> items;
    for (size_t i = 0; i < xa.size(); ++i) items.push_back(merge(cond, xa[i], xb[i]));
    return Value::list(std::move(items), a.as_list().kind);
  }
  if (a.is(Kind::Dict) && b.is(Kind::Dict)) {
    const auto &ea = a.as_dict().entries, &eb = b.as_dict().entries;
    if (ea.size() != eb.size()) throw differ();
    std::vector<std::pair<std::string, Value>> entries;
    for (size_t i = 0; i < ea.size(); ++i) {
      if (ea[i].first != eb[i].first) throw differ();
      entries.emplace_back(ea[i].first, merge(cond, ea[i].second, eb[i].second));
    }
    return make_dict(std::move(entries));
  }
  if (a.is_callable() || b.is_callable() ? a.raw() != b.raw() : !equal(a, b)) throw differ();
  return a;
}

// ---- loops with a traced condition ----------------------------------------------------------

// The carried part of a loop state: its tensor and number leaves, in pytree order. Other leaves
// (strings, keywords, bools, functions, nil) are static and must come back unchanged.
struct StateLeaf {
  ir::Type type;
  bool weak;
};

void carried_leaves(const Value& v, std::vector<Tensor>& out, std::vector<bool>& weak) {
  if (v.is(Kind::Tensor)) {
    out.push_back(v.as_tensor());
    weak.push_back(v.as_tensor().weak());
  } else if (v.is_number()) {
    out.push_back(*weak_scalar(v));
    weak.push_back(true);
  } else if (v.is_list()) {
    for (const Value& x : v.as_list().items) carried_leaves(x, out, weak);
  } else if (v.is(Kind::Dict)) {
    for (const auto& [k, x] : v.as_dict().entries) carried_leaves(x, out, weak);
  }
}

// `v` with its carried leaves replaced, in order, by `leaves` (host numbers by weak tensors).
Value with_leaves(const Value& v, std::span<const Tensor> leaves, size_t& i) {
  if (v.is(Kind::Tensor) || v.is_number()) return Value::tensor(leaves[i++]);
  if (v.is_list()) {
    std::vector<Value> items;
    for (const Value& x : v.as_list().items) items.push_back(with_leaves(x, leaves, i));
    return Value::list(std::move(items), v.as_list().kind);
  }
  if (v.is(Kind::Dict)) {
    std::vector<std::pair<std::string, Value>> entries;
    for (const auto& [k, x] : v.as_dict().entries) entries.emplace_back(k, with_leaves(x, leaves, i));
    return make_dict(std::move(entries));
  }
  return v;
}

// True when `next` has the structure of `state` with the same static leaves.
bool same_structure(const Value& state, const Value& next) {
  bool leaf = state.is(Kind::Tensor) || state.is_number();
  if (leaf) return next.is(Kind::Tensor) || next.is_number();
  if (state.is_list()) {
    if (!next.is_list() || next.as_list().items.size() != state.as_list().items.size()) return false;
    for (size_t i = 0; i < state.as_list().items.size(); ++i)
      if (!same_structure(state.as_list().items[i], next.as_list().items[i])) return false;
    return true;
  }
  if (state.is(Kind::Dict)) {
    if (!next.is(Kind::Dict) || next.as_dict().entries.size() != state.as_dict().entries.size()) return false;
    for (size_t i = 0; i < state.as_dict().entries.size(); ++i)
      if (state.as_dict().entries[i].first != next.as_dict().entries[i].first ||
          !same_structure(state.as_dict().entries[i].second, next.as_dict().entries[i].second))
        return false;
    return true;
  }
  return state.is_callable() || next.is_callable() ? state.raw() == next.raw() : equal(state, next);
}

// A region over the carried leaves: parameters first (the carried types, then the captures),
// `run` maps the rebuilt state to the region's results.
std::shared_ptr<ir::Graph> trace_region(Tracer& outer, const Value& state, const std::vector<StateLeaf>& leaves,
                                        const std::vector<Tensor>& captures, bool discovering, bool pass_through,
                                        std::vector<Tensor>& found,
                                        const std::function<std::vector<Tensor>(const Value&)>& run) {
  Tracer t;
  t.parent = &outer;
  Scope scope(t);
  std::vector<Tensor> params;
  for (const StateLeaf& l : leaves) params.push_back(t.parameter(l.type.dtype, l.type.shape, l.weak));
  for (const Tensor& c : captures) t.declare_capture(c);
  t.discovering = discovering;
  size_t i = 0;
  Value rebuilt = with_leaves(state, params, i);
  for (const Tensor& r : run(rebuilt)) t.g.results.push_back(t.lift(r).symbol_id());
  for (size_t k = captures.size(); k < t.captures.size(); ++k) found.push_back(t.captures[k]);
  if (pass_through)  // captured values pass through the body unchanged: the region returns them
    for (size_t k = 0; k < captures.size(); ++k) t.g.results.push_back(t.g.params[leaves.size() + k]);
  return std::make_shared<ir::Graph>(std::move(t.g));
}

// The tensor and number leaves of v with their types (trace_region's state).
std::vector<StateLeaf> state_leaves(const Value& v, std::vector<Tensor>& tensors) {
  std::vector<bool> weak;
  carried_leaves(v, tensors, weak);
  std::vector<StateLeaf> leaves;
  for (size_t k = 0; k < tensors.size(); ++k) leaves.push_back({ir::Type{tensors[k].dtype(), tensors[k].shape()}, weak[k]});
  return leaves;
}

// The enclosing values found by discovery passes (trace_region), each once, in order.
std::vector<Tensor> distinct(const std::vector<Tensor>& found) {
  std::vector<Tensor> captures;
  for (const Tensor& f : found) {
    bool dup = false;
    for (const Tensor& c : captures) dup = dup || (c.trace_id() == f.trace_id() && c.symbol_id() == f.symbol_id());
    if (!dup) captures.push_back(f);
  }
  return captures;
}

// `v` rebuilt with `results` for its carried leaves, weak where the leaf was.
Value rebuilt(const Value& v, std::vector<Tensor> results) {
  std::vector<Tensor> ts;
  std::vector<StateLeaf> leaves = state_leaves(v, ts);
  for (size_t k = 0; k < leaves.size(); ++k)
    if (leaves[k].weak) results[k] = results[k].as_weak();
  size_t i = 0;
  return with_leaves(v, results, i);
}

}  // namespace

Value trace_while(const Value& init, const std::function<Value(const Value&)>& cond,
                  const std::function<Value(const Value&)>& body, int64_t trip_count) {
  if (!g_tracer) throw TraceAbort("internal: trace_while outside a trace");
  Tracer& outer = *g_tracer;
  std::vector<Tensor> init_leaves;
  std::vector<bool> init_weak;
  carried_leaves(init, init_leaves, init_weak);
  std::vector<StateLeaf> leaves;
  for (size_t k = 0; k < init_leaves.size(); ++k)
    leaves.push_back({ir::Type{init_leaves[k].dtype(), init_leaves[k].shape()}, init_weak[k]});
  auto cond_run = [&](const Value& st) {
    Value c = cond(st);
    if (c.is(Kind::Bool)) return std::vector<Tensor>{Tensor::scalar(DType::Bool, c.as_bool())};
    if (!c.is(Kind::Tensor) || c.as_tensor().rank() != 0 || c.as_tensor().dtype() != DType::Bool)
      throw TraceAbort("a `while` condition on traced values must be a boolean scalar");
    return std::vector<Tensor>{c.as_tensor()};
  };
  // A weak (host-number) leaf that the body turns into a tensor of the same dtype, like a loss
  // sum started at 0.0, is carried as that tensor: the loop is traced again with it strong.
  bool strengthened = false;
  auto body_run = [&](const Value& st) {
    Value next = body(st);
    if (!same_structure(st, next)) throw TraceAbort("the state of a `while` changes structure between iterations");
    std::vector<Tensor> out;
    std::vector<bool> weak;
    carried_leaves(next, out, weak);
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k].dtype() != leaves[k].type.dtype || out[k].shape() != leaves[k].type.shape)
        throw TraceAbort("the state of a `while` changes dtype or shape between iterations");
      if (leaves[k].weak && !weak[k]) leaves[k].weak = false, strengthened = true;
    }
    return out;
  };
  // Pass 1 finds the enclosing values the regions read; pass 2 traces them with those declared.
  std::vector<Tensor> captures, none;
  do {  // each repetition strengthens at least one more leaf
    strengthened = false;
    std::vector<Tensor> found;
    trace_region(outer, init, leaves, none, true, false, found, cond_run);
    trace_region(outer, init, leaves, none, true, false, found, body_run);
    captures = distinct(found);
  } while (strengthened);
  ir::Attrs a;
  a.k = trip_count;
  a.regions.push_back(trace_region(outer, init, leaves, captures, false, false, none, cond_run));
  a.regions.push_back(trace_region(outer, init, leaves, captures, false, true, none, body_run));
  std::vector<Tensor> operands = init_leaves;
  operands.insert(operands.end(), captures.begin(), captures.end());
  std::vector<Tensor> results = outer.record(ir::Op::While, operands, a, nullptr);
  for (size_t k = 0; k < leaves.size(); ++k)
    if (leaves[k].weak) results[k] = results[k].as_weak();
  size_t i = 0;
  return with_leaves(init, results, i);
}

// ---- calls with a differentiation rule of their own -------------------------------------------

Value trace_checkpoint(const Value& args, const std::function<Value(const Value&)>& fn) {
  if (!g_tracer) throw TraceAbort("internal: trace_checkpoint outside a trace");
  Tracer& outer = *g_tracer;
  std::vector<Tensor> operands, found, none;
  std::vector<StateLeaf> leaves = state_leaves(args, operands);
  Value out;
  auto run = [&](const Value& st) {
    out = fn(st);
    std::vector<Tensor> ts;
    state_leaves(out, ts);
    return ts;
  };
  trace_region(outer, args, leaves, none, true, false, found, run);
  std::vector<Tensor> captures = distinct(found);
  ir::Attrs a;
  a.index = static_cast<int64_t>(operands.size());
  a.regions.push_back(trace_region(outer, args, leaves, captures, false, false, none, run));
  operands.insert(operands.end(), captures.begin(), captures.end());
  return rebuilt(out, outer.record(ir::Op::Call, operands, a, nullptr));
}

Value trace_custom_vjp(const Value& args, const std::function<Value(const Value&)>& f, const std::function<Value(const Value&)>& fwd,
                       const std::function<std::vector<Tensor>(const Value& residuals, const Value& cotangents)>& bwd) {
  if (!g_tracer) throw TraceAbort("internal: trace_custom_vjp outside a trace");
  Tracer& outer = *g_tracer;
  std::vector<Tensor> operands, found, none;
  std::vector<StateLeaf> leaves = state_leaves(args, operands);
  Value out, residuals;
  size_t outputs = 0;
  auto fwd_run = [&](const Value& st) {  // fwd gives [out residuals]; validated by the caller's fwd
    Value r = fwd(st);
    out = r.as_list().items[0];
    residuals = r.as_list().items[1];
    std::vector<Tensor> ts, rs;
    state_leaves(out, ts);
    outputs = ts.size();
    state_leaves(residuals, rs);
    ts.insert(ts.end(), rs.begin(), rs.end());
    return ts;
  };
  // The VJP region's state: [residuals output-cotangents], the cotangents typed like the outputs.
  auto bwd_state = [&](std::vector<StateLeaf>& types) {
    Value st = Value::list({residuals, out});
    std::vector<Tensor> ts;
    types = state_leaves(st, ts);
    return st;
  };
  auto bwd_run = [&](const Value& st) { return bwd(st.as_list().items[0], st.as_list().items[1]); };
  auto f_run = [&](const Value& st) {  // the same outputs as fwd's
    std::vector<Tensor> ts;
    Value r = f(st);
    state_leaves(r, ts);
    if (!same_structure(out, r) || ts.size() != outputs) throw TraceAbort("custom-vjp: f and fwd give results of different structure");
    return ts;
  };
  std::vector<StateLeaf> bwd_types;
  trace_region(outer, args, leaves, none, true, false, found, fwd_run);
  Value st = bwd_state(bwd_types);
  trace_region(outer, st, bwd_types, none, true, false, found, bwd_run);
  trace_region(outer, args, leaves, none, true, false, found, f_run);
  std::vector<Tensor> captures = distinct(found);
  ir::Attrs a;
  a.index = static_cast<int64_t>(operands.size());
  a.regions.push_back(trace_region(outer, args, leaves, captures, false, false, none, fwd_run));
  a.k = static_cast<int64_t>(outputs);
  st = bwd_state(bwd_types);
  a.regions.push_back(trace_region(outer, st, bwd_types, captures, false, false, none, bwd_run));
  a.regions.push_back(trace_region(outer, args, leaves, captures, false, false, none, f_run));
  operands.insert(operands.end(), captures.begin(), captures.end());
  std::vector<Tensor> results = outer.record(ir::Op::Call, operands, a, nullptr);
  results.resize(outputs);
  return rebuilt(out, results);
}

ir::Graph trace_graph(const std::vector<ir::Type>& params,
                      const std::function<std::vector<Tensor>(std::span<const Tensor> params)>& fn, std::string name) {
  Tracer t;
  t.g.name = std::move(name);
  Scope scope(t);
  std::vector<Tensor> ps;
  for (const ir::Type& p : params) ps.push_back(t.parameter(p.dtype, p.shape, false));
  for (const Tensor& r : fn(ps)) t.g.results.push_back(t.lift(r).symbol_id());
  return std::move(t.g);
}

std::vector<Tensor> counted_loop(const std::vector<Tensor>& init, int64_t trips,
                                 const std::function<std::vector<Tensor>(const Tensor& t, std::span<const Tensor> state)>& body) {
  auto i32 = [](int64_t v) { return Tensor::scalar(DType::I32, static_cast<double>(v)); };
  std::vector<Tensor> carried{i32(0)};
  carried.insert(carried.end(), init.begin(), init.end());
  std::vector<ir::Type> types;
  for (const Tensor& x : carried) types.push_back({x.dtype(), x.shape()});
  ir::Attrs a;
  a.k = trips;
  a.regions.push_back(std::make_shared<const ir::Graph>(
      trace_graph(types, [&](std::span<const Tensor> p) { return std::vector<Tensor>{binary(Binary::Lt, p[0], i32(trips))}; })));
  a.regions.push_back(std::make_shared<const ir::Graph>(trace_graph(types, [&](std::span<const Tensor> p) {
    std::vector<Tensor> out{binary(Binary::Add, p[0], i32(1))};
    for (const Tensor& r : body(p[0], p.subspan(1))) out.push_back(r);
    return out;
  })));
  std::vector<Tensor> r = ir::recorder().record(ir::Op::While, carried, a);
  r.erase(r.begin());
  return r;
}

std::vector<Tensor> inline_graph(const ir::Graph& g, std::span<const Tensor> args) {
  ir::Recorder& rec = ir::recorder();
  std::vector<Tensor> vals(g.types.size());
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Parameter) {
      vals[static_cast<size_t>(n.out)] = args[static_cast<size_t>(n.attrs.index)];
    } else if (n.op == ir::Op::Constant) {
      vals[static_cast<size_t>(n.out)] = rec.lift(n.attrs.value);
    } else {
      std::vector<Tensor> in;
      for (int32_t v : n.in) in.push_back(vals[static_cast<size_t>(v)]);
      std::vector<Tensor> out = rec.record(n.op, in, n.attrs, &g.type(n.out));
      for (int32_t k = 0; k < n.nout; ++k) vals[static_cast<size_t>(n.out + k)] = out[static_cast<size_t>(k)];
    }
  }
  std::vector<Tensor> results;
  for (int32_t r : g.results) results.push_back(vals[static_cast<size_t>(r)]);
  return results;
}

namespace {

// A loop exit as a runtime decision: a plain recur goes on, any other value ends the loop.
const RecurObj& as_decision(const Value& v, RecurObj& scratch) {
  if (v.is(Kind::Recur) && static_cast<const RecurObj&>(*v.raw()).go) return static_cast<const RecurObj&>(*v.raw());
  if (v.is(Kind::Recur)) {
    scratch.args = static_cast<const RecurObj&>(*v.raw()).args;
    scratch.go = Tensor::scalar(DType::Bool, 1);
  } else {
    scratch.has_args = false;
    scratch.go = Tensor::scalar(DType::Bool, 0);
    scratch.result = v;
    scratch.has_result = true;
  }
  return scratch;
}

// v with zeros for its tensor and number leaves (host numbers, or weak tensors, stay host numbers).
Value zeros_like(const Value& v) {
  if (v.is(Kind::Tensor) && v.as_tensor().weak()) return is_float(v.as_tensor().dtype()) ? Value::real(0) : Value::integer(0);
  if (v.is(Kind::Tensor)) return Value::tensor(broadcast_to(Tensor::scalar(v.as_tensor().dtype(), 0), v.as_tensor().shape()));
  if (v.is_number()) return v.is(Kind::Int) ? Value::integer(0) : Value::real(0);
  if (v.is_list()) {
    std::vector<Value> items;
    for (const Value& x : v.as_list().items) items.push_back(zeros_like(x));
    return Value::list(std::move(items), v.as_list().kind);
  }
  if (v.is(Kind::Dict)) {
    std::vector<std::pair<std::string, Value>> entries;
    for (const auto& [k, x] : v.as_dict().entries) entries.emplace_back(k, zeros_like(x));
    return make_dict(std::move(entries));
  }
  return v;
}

thread_local int g_loop_depth = 0;

}  // namespace

LoopScope::LoopScope() { ++g_loop_depth; }
LoopScope::~LoopScope() { --g_loop_depth; }
bool in_loop_trace() { return g_loop_depth > 0; }

Value merge_loop_exits(const Tensor& cond, const Value& then_v, const Value& else_v) {
  RecurObj sa, sb;
  const RecurObj& a = as_decision(then_v, sa);
  const RecurObj& b = as_decision(else_v, sb);
  auto r = std::make_shared<RecurObj>();
  r->go = select(cond, *a.go, *b.go);
  r->has_args = a.has_args || b.has_args;
  if (a.has_args && b.has_args) r->args = merge(cond, Value::list(a.args), Value::list(b.args)).as_list().items;
  else r->args = a.has_args ? a.args : b.args;
  r->has_result = a.has_result || b.has_result;
  if (a.has_result && b.has_result) r->result = merge(cond, a.result, b.result);
  else r->result = a.has_result ? a.result : b.result;
  return Value::object(Kind::Recur, std::move(r));
}

Value trace_loop(const Value& vals, const std::function<Value(const Value&)>& body) {
  if (!g_tracer) throw TraceAbort("internal: trace_loop outside a trace");
  Tracer& outer = *g_tracer;
  // A probe of the body gives the structure and types of the loop's result.
  Value result_like;
  bool ends = false;
  auto probe = [&](const Value& st) {
    Value r = body(st);
    RecurObj scratch;
    const RecurObj& d = as_decision(r, scratch);
    if (d.has_result) result_like = d.result, ends = true;
    return std::vector<Tensor>{};
  };
  std::vector<Tensor> ts, found, none;
  trace_region(outer, vals, state_leaves(vals, ts), none, true, false, found, probe);
  if (!ends) throw TraceAbort("a `loop` whose body always recurs never ends");
  // The while carries [go vals result]: `go` says whether the body runs again.
  Value init = Value::list({Value::tensor(Tensor::scalar(DType::Bool, 1)), vals, zeros_like(result_like)});
  auto cond = [](const Value& st) { return st.as_list().items[0]; };
  auto step = [&](const Value& st) {
    const std::vector<Value>& s = st.as_list().items;
    RecurObj scratch;
    Value r = body(s[1]);
    const RecurObj& d = as_decision(r, scratch);
    // The result is replaced only when the loop ends (so it is read where it goes on: IREE
    // cannot compile a while whose regions never read one of its carried values).
    return Value::list({Value::tensor(*d.go), d.has_args ? Value::list(d.args, s[1].as_list().kind) : s[1],
                        d.has_result ? merge(*d.go, s[2], d.result) : s[2]});
  };
  return trace_while(init, cond, step).as_list().items[2];
}

Value merge_branches(const Tensor& cond, const Value& then_v, const Value& else_v) {
  if (cond.dtype() != DType::Bool || cond.rank() != 0) throw TraceAbort("internal: runtime if on a non-boolean");
  return merge(cond, then_v, else_v);
}

}  // namespace sheaf::trace
