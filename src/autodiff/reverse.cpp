// autodiff/reverse.cpp — activity analysis and the reverse sweep over the bindings of the
// active trace. The backward nodes are appended to the same graph, after the forward nodes they
// read, so one executable computes value and gradients and reuses the activations.
#include "autodiff/reverse.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "autodiff/vjp_rules.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
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
  // Backward: cotangents keyed by value id, seeded at the active outputs.
  std::unordered_map<int32_t, Tensor> cot;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    if (!trace::in_current_trace(y) || !active[static_cast<size_t>(y.symbol_id())]) continue;
    Tensor c = convert(cotangents[i], y.dtype());
    auto [it, fresh] = cot.try_emplace(y.symbol_id(), c);
    if (!fresh) it->second = binary(Binary::Add, it->second, c);
  }
  if (cot.empty()) return out;
  std::vector<char> is_wrt(g.types.size(), 0);
  for (const Tensor& w : wrt)
    if (trace::in_current_trace(w)) is_wrt[static_cast<size_t>(w.symbol_id())] = 1;
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
      if (!need[k] || k >= gx.size() || !gx[k]) continue;
      auto [it, fresh] = cot.try_emplace(n.in[k], *gx[k]);
      if (!fresh) it->second = binary(Binary::Add, it->second, *gx[k]);
    }
  }
  for (size_t i = 0; i < wrt.size(); ++i)
    if (auto it = cot.find(wrt[i].symbol_id()); it != cot.end() && trace::in_current_trace(wrt[i])) out[i] = it->second;
  return out;
}

}  // namespace sheaf::autodiff
