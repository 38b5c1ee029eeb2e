// autodiff/reverse.cpp — activity analysis and the reverse sweep over the bindings of the
// active trace. The backward nodes are appended to the same graph, after the forward nodes they
// read, so one executable computes value and gradients and reuses the activations.
// A forward value recorded again (same op, attributes and operands, up to such repeats: what CSE
// later merges — a layer-norm that each attention head computes from the same input) passes its
// cotangent to its first recording, so the backward pass of the repeated computation runs once,
// on the sum of the cotangents (the VJPs are linear in them; only the order of additions changes).
#include "autodiff/reverse.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "autodiff/vjp_rules.hpp"
#include "ir/recorder.hpp"
#include "passes/rewrite.hpp"
#include "tensor/elementwise.hpp"
#include "trace/tracer.hpp"

namespace sheaf::autodiff {

Tensor zeros(DType dtype, const Shape& shape) {
  Tensor z = Tensor::scalar(dtype, 0);
  return broadcast_to(!shape.empty() && ir::active_recorder() ? ir::recorder().lift(z) : z, shape);
}

std::vector<Tensor> gradients(const Tensor& loss, std::span<const Tensor> wrt) {
  // The seed is a constant of the trace, so that the rules broadcast it in the graph (the VJP of a
  // sum expands it to the summed shape), never on the host.
  Tensor one = Tensor::scalar(loss.dtype(), 1);
  if (ir::active_recorder()) one = ir::recorder().lift(one);
  return vjp_of(std::span(&loss, 1), std::span(&one, 1), wrt);
}

namespace {

// For every value of g: the first value of [first, end) recorded with the same op, attributes and
// operands (operands compared through this map), else itself. Values that stop gradients and the
// wrt values are their own.
std::vector<int32_t> first_recordings(const ir::Graph& g, size_t first, size_t end, const std::vector<char>& is_wrt) {
  std::vector<int32_t> rep(g.types.size());
  for (size_t v = 0; v < rep.size(); ++v) rep[v] = static_cast<int32_t>(v);
  std::unordered_map<std::string, int32_t> seen;  // node key → first result id
  std::vector<int32_t> in;
  for (size_t i = first; i < end; ++i) {
    const ir::Node& n = g.nodes[i];
    bool own = n.op == ir::Op::Parameter;
    for (int32_t r = 0; r < n.nout; ++r)
      own |= is_wrt[static_cast<size_t>(n.out + r)] != 0 || trace::stops_gradient(n.out + r);
    if (own) continue;
    in.clear();
    for (int32_t v : n.in) in.push_back(rep[static_cast<size_t>(v)]);
    auto [it, fresh] = seen.try_emplace(passes::node_key(g, n, in), n.out);
    if (!fresh)
      for (int32_t r = 0; r < n.nout; ++r) rep[static_cast<size_t>(n.out + r)] = it->second + r;
  }
  return rep;
}

}  // namespace

std::vector<Tensor> vjp_of(std::span<const Tensor> outputs, std::span<const Tensor> cotangents, std::span<const Tensor> wrt) {
  std::vector<Tensor> out;
  out.reserve(wrt.size());
  for (const Tensor& w : wrt) out.push_back(zeros(w.dtype(), w.shape()));
  if (wrt.empty()) return out;

  const ir::Graph& g = trace::current_graph();
  const size_t end = g.nodes.size();
  size_t first = end;
  std::vector<char> active(g.types.size(), 0);
  for (const Tensor& w : wrt) {
    if (!trace::in_current_trace(w) || !is_float(w.dtype())) continue;
    active[static_cast<size_t>(w.symbol_id())] = 1;
    first = std::min(first, static_cast<size_t>(g.def[static_cast<size_t>(w.symbol_id())]));
  }
  // Forward: a float result of a node with an active operand is active, unless stop_gradient
  // marked it.
  for (size_t i = first + 1; i < end; ++i) {
    const ir::Node& n = g.nodes[i];
    bool any = std::any_of(n.in.begin(), n.in.end(), [&](int32_t v) { return active[static_cast<size_t>(v)] != 0; });
    if (!any) continue;
    for (int32_t r = 0; r < n.nout; ++r)
      if (is_float(g.type(n.out + r).dtype) && !trace::stops_gradient(n.out + r)) active[static_cast<size_t>(n.out + r)] = 1;
  }
  std::vector<char> is_wrt(g.types.size(), 0);
  for (const Tensor& w : wrt)
    if (trace::in_current_trace(w)) is_wrt[static_cast<size_t>(w.symbol_id())] = 1;
  const std::vector<int32_t> rep = first_recordings(g, first, end, is_wrt);
  // Backward: cotangents keyed by value id (a repeat's go to its first recording), seeded at the
  // active outputs.
  std::unordered_map<int32_t, Tensor> cot;
  auto add_cotangent = [&](int32_t v, const Tensor& c) {
    auto [it, fresh] = cot.try_emplace(rep[static_cast<size_t>(v)], c);
    if (!fresh) it->second = binary(Binary::Add, it->second, c);
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    if (!trace::in_current_trace(y) || !active[static_cast<size_t>(y.symbol_id())]) continue;
    add_cotangent(y.symbol_id(), convert(cotangents[i], y.dtype()));
  }
  if (cot.empty()) return out;
  for (size_t i = end; i-- > first;) {
    const ir::Node n = g.nodes[i];  // a copy: rules append nodes to the graph
    if (is_wrt[static_cast<size_t>(n.out)]) continue;  // the sweep ends at the inputs: keep their cotangents
    std::vector<std::optional<Tensor>> gs(static_cast<size_t>(n.nout));
    bool any = false;
    for (int32_t r = 0; r < n.nout; ++r) {
      auto it = cot.find(n.out + r);
      if (it == cot.end()) continue;
      gs[static_cast<size_t>(r)] = it->second;
      cot.erase(it);
      any = true;
    }
    if (!any || n.op == ir::Op::Parameter) continue;
    std::vector<bool> need(n.in.size());
    bool needed = false;
    for (size_t k = 0; k < n.in.size(); ++k) needed |= (need[k] = active[static_cast<size_t>(n.in[k])] != 0);
    if (!needed) continue;
    std::vector<Tensor> x, y;
    for (int32_t v : n.in) x.push_back(trace::current_value(v));
    for (int32_t r = 0; r < n.nout; ++r) y.push_back(trace::current_value(n.out + r));
    std::vector<std::optional<Tensor>> gx = vjp(n, x, y, gs, need);
    for (size_t k = 0; k < n.in.size(); ++k) {
      if (need[k] && k < gx.size() && gx[k]) add_cotangent(n.in[k], *gx[k]);
    }
  }
  for (size_t i = 0; i < wrt.size(); ++i)
    if (auto it = cot.find(wrt[i].symbol_id()); it != cot.end() && trace::in_current_trace(wrt[i])) out[i] = it->second;
  return out;
}

}  // namespace sheaf::autodiff
