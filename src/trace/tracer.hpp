// trace/tracer.hpp — a user function → IR, by running the evaluator on symbolic tensors.
// Arguments are flattened in pytree order (SPEC §6.5): every tensor leaf becomes a parameter;
// host floats and ints become weak rank-0 parameters unless `static_scalars` (then, like bools,
// strings, keywords, nil and functions, they are part of the specialization key and constants
// of the trace). The function body is evaluated with the symbolic arguments bound: builtins
// record IR through the primitives, user functions inline, structure (dicts, lists, static
// `if`, static loops) is resolved. The result pytree's tensor leaves become the graph results.
// Tracing stops with TraceAbort (effects, data-dependent values or shapes, non-tensor results);
// SheafErrors raised while tracing are the user's errors and propagate as they are.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.hpp"
#include "value/value.hpp"

namespace sheaf {
class Interp;
}

namespace sheaf::trace {

// How a result pytree is rebuilt from the flat results: dicts, lists and tuples as they were,
// tensor leaves as slots (indices into the flat results), other leaves as static values.
struct ResultTree {
  enum class Kind : uint8_t { Slot, Static, List, Dict } kind = Kind::Static;
  int32_t slot = -1;
  bool weak = false;                // a host scalar: rebuilt as int/float/bool
  Value value;                      // Static leaf
  ListKind list_kind = ListKind::Bracket;
  std::vector<std::string> keys;    // Dict
  std::vector<ResultTree> items;    // List, Dict
};

struct Traced {
  ir::Graph graph;
  ResultTree result;
  // The trace recorded guard checks (record_guard): the graph's last result is a rank-0 bool,
  // true when all of them passed; it is not part of `result`.
  bool guarded = false;
};

// Traces `fn` (a user function) applied to `args`. Tensors in `args` only give shapes and
// dtypes (their values are not used). Throws TraceAbort when the call cannot be compiled.
Traced trace_call(Interp& in, const Value& fn, std::span<const Value> args, SrcLoc site, bool static_scalars);
// The same for any body: `body` receives the symbolic arguments and returns the result pytree.
// Transforms (value-and-grad, vmap) use it to build a graph around a user function.
Traced trace_with(std::span<const Value> args, SrcLoc site, bool static_scalars, std::string name,
                  const std::function<Value(std::vector<Value>&)>& body);

// The graph of this thread's innermost trace (tracing() must be true): transforms read the
// nodes recorded so far. It grows as primitives record, so hold indices, not references.
const ir::Graph& current_graph();
// Turns the written-out softmaxes and GELUs among the current trace's nodes from `first` on into
// their ops (passes/composites.hpp), in place, so that the reverse sweep differentiates each as one.
void recognise_composites(size_t first);
// True when `t` is a value of the innermost trace (not a constant, not from an enclosing trace).
bool in_current_trace(const Tensor& t);
// Marks a value of the current trace as a constant for differentiation (no gradient flows
// through it; autodiff/reverse.cpp). Used where the gradient is zero by construction, e.g. the
// row maximum softmax subtracts. Outside a trace, or for a value of another trace, nothing happens.
void stop_gradient(const Tensor& t);
bool stops_gradient(int32_t id);  // of the current trace
// The symbolic tensor standing for value `id` of the innermost trace.
Tensor current_value(int32_t id);

// Flattens the arguments of a call: `inputs` becomes the positional inputs in parameter order
// (tensor leaves; int/float scalars as rank-0 i32/f32 unless static_scalars) and `key` the
// specialization key, appended to `key` (tree structure, dtypes, shapes, static values; other
// objects by identity).
// Data handles must have been materialized (SPEC §7.3).
void flatten_args(std::span<const Value> args, bool static_scalars, std::string& key, std::vector<Tensor>& inputs);

// The result pytree from the flat results of a run.
Value rebuild(const ResultTree& tree, std::span<const Tensor> results);

// True while this thread is tracing (user function calls then inline instead of dispatching).
bool tracing();
// While an OutputEffectsMuted scope is alive, builtins whose only effect is output (print,
// progress) do nothing and return nil while tracing, instead of aborting the trace. A
// differentiated function with prints is traced this way after it ran once eagerly for its
// effects (SPEC §6.6: effects happen once per call).
bool output_effects_muted();
struct OutputEffectsMuted {
  OutputEffectsMuted();
  ~OutputEffectsMuted();
  OutputEffectsMuted(const OutputEffectsMuted&) = delete;
  OutputEffectsMuted& operator=(const OutputEffectsMuted&) = delete;
};
// Records a guard check on traced values (obs/guards.hpp): `passed` is a rank-0 bool of the
// innermost trace. Throws TraceAbort inside a loop region (a guard there is checked interpreted).
void record_guard(const Tensor& passed);
// True when the flag result of a guarded graph (Traced::guarded) says every guard passed.
bool guards_passed(const Tensor& flag);
// The call site of the builtin being evaluated while tracing: recorded nodes carry it.
void set_site(SrcLoc loc);
// A `while` whose condition depends on traced values (SPEC §6.4): the loop state (the
// accumulator pytree: its tensor and number leaves are carried, other leaves must not change) is
// lowered to one IR `while` whose regions are traced from `cond` and `body` (state → condition,
// state → next state). Values of the enclosing trace that the regions read are passed in as
// extra carried values. Returns the final state. Throws TraceAbort when the state changes
// structure, dtype or shape between iterations. A weak leaf (a host number) that the body makes
// a tensor of the same dtype is carried as a tensor. `trip_count` > 0 says the loop runs exactly
// that many times (a counted `repeat`; recorded as the node's attrs.k, which differentiation
// needs).
Value trace_while(const Value& init, const std::function<Value(const Value&)>& cond,
                  const std::function<Value(const Value&)>& body, int64_t trip_count = 0);
// `checkpoint` while tracing: fn applied to args (a list of arguments) recorded as one `call` node
// whose VJP recomputes fn in the backward pass (autodiff/region_vjp.hpp). Values of the enclosing
// trace that fn reads become extra operands.
Value trace_checkpoint(const Value& args, const std::function<Value(const Value&)>& fn);
// `custom-vjp` while tracing: a `call` node computing fwd(args) = [out residuals] (fwd must
// return such a list), whose VJP is bwd(residuals, cotangents of out) → one cotangent per tensor
// or number leaf of args, typed like it (bwd converts and checks), and which computes f(args)
// (the outputs alone) when it is not differentiated. Returns out.
Value trace_custom_vjp(const Value& args, const std::function<Value(const Value&)>& f, const std::function<Value(const Value&)>& fwd,
                       const std::function<std::vector<Tensor>(const Value& residuals, const Value& cotangents)>& bwd);
// A graph of its own (a region for a new control-flow node), traced while another trace is
// active: `fn` receives one parameter per type and returns the results. It must not read values
// of the enclosing trace (TraceAbort).
ir::Graph trace_graph(const std::vector<ir::Type>& params,
                      const std::function<std::vector<Tensor>(std::span<const Tensor> params)>& fn, std::string name = "");
// A while with a trip count recorded into the active trace: `body(t, state)` gives the next
// state (same types) for iteration t = 0 .. trips-1 (t a traced i32[], carried ahead of the state
// and tested by the condition). Returns the final state.
std::vector<Tensor> counted_loop(const std::vector<Tensor>& init, int64_t trips,
                                 const std::function<std::vector<Tensor>(const Tensor& t, std::span<const Tensor> state)>& body);
// The nodes of `g` recorded again into the active trace with `args` for its parameters; returns
// its results.
std::vector<Tensor> inline_graph(const ir::Graph& g, std::span<const Tensor> args);
// `loop` whose recur is decided by traced values (SPEC §10: compiled like while). While a
// LoopScope is alive (the body of a loop being traced), a runtime `if` with a `recur` in a branch
// gives a decision (merge_loop_exits: a RecurObj with a traced `go`) instead of aborting;
// trace_loop then lowers the loop from `vals` (the list of binding values) to one IR while
// carrying [go vals result], with `body` evaluating the loop body on a list of values.
struct LoopScope {
  LoopScope();
  ~LoopScope();
  LoopScope(const LoopScope&) = delete;
  LoopScope& operator=(const LoopScope&) = delete;
};
bool in_loop_trace();
Value merge_loop_exits(const Tensor& cond, const Value& then_v, const Value& else_v);
Value trace_loop(const Value& vals, const std::function<Value(const Value&)>& body);
// Runtime `if` (SPEC §6.4): both branches were traced; merges them leaf by leaf with select.
// Throws TraceAbort when they differ in structure, shape or dtype.
Value merge_branches(const Tensor& cond, const Value& then_v, const Value& else_v);

// Installs the tracing state and the traced control flow above into the evaluator's hooks
// (eval/hooks.hpp; init_runtime).
void install_eval_hooks();

}  // namespace sheaf::trace
