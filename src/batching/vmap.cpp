// batching/vmap.cpp — the vmap transform (see vmap.hpp). In the active trace:
//   1. each mapped leaf, its axis moved to 0, is a batched value B [n, ...]; f gets in its place a
//      placeholder, example 0 of B — a node of its own, whose id maps to B;
//   2. f is called on the per-example arguments: its nodes land in the trace after `start`;
//   3. the nodes recorded since `start` that the outputs depend on and that read a batched value
//      are re-emitted by their batching rules, mapping each of their results to its batched
//      value; nodes that read none are reused as they are;
//   4. output leaves: their batched values, or (independent of the mapped inputs) repeated n times.
#include "batching/vmap.hpp"

#include <unordered_map>

#include "batching/batch_rules.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "eval/tensor_args.hpp"
#include "runtime/run_once.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"
#include "trace/tracer.hpp"

namespace sheaf::batching {
namespace {

// Value id of the current trace → its batched value [n, ...its type].
using BatchMap = std::unordered_map<int32_t, Tensor>;

// A mapped argument with each leaf replaced by its placeholder (step 1).
Value placeholders(const Value& arg, int64_t axis, BatchMap& batched, const CallArgs& a) {
  return tree_map(std::span<const Value>(&arg, 1), [&](std::span<const Value> leaf) {
    Tensor t = ir::recorder().lift(as_operand(leaf[0])->t);
    Tensor b = to_front(t, normalize_axis(axis, t.rank()));
    Tensor p = example(b, 0);
    batched.emplace(p.symbol_id(), b);
    return Value::tensor(p);
  }, a);
}

// live[v]: value v (defined by a node in [start, end)) is read, directly or not, by an output.
std::vector<char> live_values(const std::vector<int32_t>& outputs, size_t start, size_t end) {
  const ir::Graph& g = trace::current_graph();
  std::vector<char> live(g.types.size(), 0);
  for (int32_t v : outputs) live[static_cast<size_t>(v)] = 1;
  for (size_t i = end; i-- > start;) {
    const ir::Node& n = g.nodes[i];
    bool used = false;
    for (int32_t r = 0; r < n.nout; ++r) used = used || live[static_cast<size_t>(n.out + r)];
    if (used)
      for (int32_t v : n.in) live[static_cast<size_t>(v)] = 1;
  }
  return live;
}

// Step 3 over the nodes [start, end) of the current trace.
void batch_range(BatchMap& batched, const std::vector<char>& live, size_t start, size_t end, int64_t n) {
  for (size_t i = start; i < end; ++i) {
    const ir::Node node = trace::current_graph().nodes[i];  // a copy: rules append nodes
    bool used = false;
    for (int32_t r = 0; r < node.nout; ++r) used = used || live[static_cast<size_t>(node.out + r)];
    if (!used || batched.count(node.out)) continue;  // dead, or a placeholder
    std::vector<Tensor> x;
    std::vector<bool> b;
    bool any = false;
    for (int32_t v : node.in) {
      auto it = batched.find(v);
      b.push_back(it != batched.end());
      x.push_back(b.back() ? it->second : trace::current_value(v));
      any = any || b.back();
    }
    if (!any) continue;
    ++vmap_stats().by_op[node.op];
    std::vector<Tensor> r = batch_node(node, x, b, n);
    for (int32_t k = 0; k < node.nout; ++k) batched.emplace(node.out + k, r[static_cast<size_t>(k)]);
  }
}

// An output leaf for the whole batch (step 4). A leaf that is not a number or a tensor is the
// error the loop gives (stack_leaves throws it).
Value stacked(const Value& leaf, const BatchMap& batched, int64_t n, const CallArgs& a) {
  if (leaf.is(Kind::Tensor) && trace::in_current_trace(leaf.as_tensor()))
    if (auto it = batched.find(leaf.as_tensor().symbol_id()); it != batched.end()) return Value::tensor(it->second);
  Tensor one = leaf.is(Kind::Tensor) ? leaf.as_tensor() : example(stack_leaves(std::span<const Value>(&leaf, 1), a), 0);
  Tensor t = ir::recorder().lift(one);
  Shape s = t.shape();
  s.insert(s.begin(), n);
  return Value::tensor(broadcast_to(t, s));
}

Value transform(Interp& in, const Value& f, std::span<const Value> args, const MapSpec& spec, const CallArgs& a) {
  const size_t start = trace::current_graph().nodes.size();
  BatchMap batched;
  std::vector<Value> per_example(args.begin(), args.end());
  for (size_t j = 0; j < args.size(); ++j)
    if (spec.axes[j]) per_example[j] = placeholders(args[j], *spec.axes[j], batched, a);
  Value out = in.call(f, per_example, a.site);
  const size_t end = trace::current_graph().nodes.size();
  std::vector<Value> leaves;
  tree_leaves(out, leaves);
  std::vector<int32_t> outputs;
  for (const Value& l : leaves)
    if (l.is(Kind::Tensor) && trace::in_current_trace(l.as_tensor())) outputs.push_back(l.as_tensor().symbol_id());
  batch_range(batched, live_values(outputs, start, end), start, end, spec.n);
  return tree_map(std::span<const Value>(&out, 1), [&](std::span<const Value> leaf) { return stacked(leaf[0], batched, spec.n, a); }, a);
}

}  // namespace

std::vector<Tensor> batch_graph(const ir::Graph& g, std::span<const Tensor> args, int64_t n) {
  const size_t start = trace::current_graph().nodes.size();
  BatchMap batched;
  std::vector<Tensor> per_example;
  for (const Tensor& b : args) {
    per_example.push_back(example(b, 0));
    batched.emplace(per_example.back().symbol_id(), b);
  }
  std::vector<Tensor> out = trace::inline_graph(g, per_example);
  const size_t end = trace::current_graph().nodes.size();
  std::vector<int32_t> outputs;
  for (const Tensor& t : out)
    if (trace::in_current_trace(t)) outputs.push_back(t.symbol_id());
  batch_range(batched, live_values(outputs, start, end), start, end, n);
  std::vector<Tensor> r;
  for (const Tensor& t : out) {
    auto it = trace::in_current_trace(t) ? batched.find(t.symbol_id()) : batched.end();
    Shape s = t.shape();
    s.insert(s.begin(), n);
    r.push_back(it != batched.end() ? it->second : broadcast_to(ir::recorder().lift(t), s));
  }
  return r;
}

VmapStats& vmap_stats() {
  thread_local VmapStats stats;
  return stats;
}

Value vmap_traced(Interp& in, const Value& f, std::span<const Value> args, const MapSpec& spec, const CallArgs& a) {
  Value r = transform(in, f, args, spec, a);
  ++vmap_stats().traced;
  return r;
}

Value vmap_eager(Interp& in, const Value& f, std::span<const Value> args, const MapSpec& spec, const CallArgs& a) {
  Value r = run_once(args, a.site, f.is(Kind::Fn) ? f.as<FnObj>().name : "",
                     [&](std::vector<Value>& sym) { return transform(in, f, sym, spec, a); });
  ++vmap_stats().eager;
  return r;
}

}  // namespace sheaf::batching
