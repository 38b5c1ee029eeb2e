// autodiff/reverse.cpp — activity analysis and the reverse sweep over the bindings of the
// active trace. The backward nodes are appended to the same graph, after the forward nodes they
// read, so one executable computes value and gradients and reuses the activations.
// Before the sweep, the nodes after the first wrt value are value-numbered (ir::node_key, the key
// CSE compares): a node equal to an earlier one — same op, attributes, result types and result
// activity, operands equal after numbering — hands its cotangents to that representative and
// applies no rule of its own. Every VJP is linear in its cotangent and the operands are the same
// values, so Σ_i VJP(n_i, c_i) = VJP(n, Σ_i c_i): a subexpression traced k times (a layer-norm
// per attention head) gets one backward pass instead of k. Every op is pure (random numbers are
// integer ops on explicit keys); multi-result nodes (while, case, call) merge all results at once,
// and only when they share their region graphs (node_key compares regions by identity): each
// call of a custom-vjp function, whose rule need not be linear in its cotangent (a clipped
// gradient), traces regions of its own and so never merges.
#include "autodiff/reverse.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>

#include "autodiff/vjp_rules.hpp"
#include "ir/node_key.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
#include "trace/tracer.hpp"

namespace sheaf::autodiff {

Tensor zeros(DType dtype, const Shape& shape) {
  Tensor z = Tensor::scalar(dtype, 0);
  return broadcast_to(!shape.empty() && ir::active_recorder() ? ir::recorder().lift(z) : z, shape);
}

namespace {

// For each node i of g in [first, end): the index of the earlier node it equals (its
// representative), or i itself. Parameters and wrt values are never merged (equal types do not
// make two inputs equal; a wrt value keeps its own cotangent). The result activity is part of the
// key: stop_gradient marks a value in place, so an equal node may differ in what it passes back.
std::vector<size_t> representatives(const ir::Graph& g, size_t first, size_t end, const std::vector<char>& active,
                                    const std::vector<char>& is_wrt) {
  std::vector<size_t> rep(end - first);
  std::iota(rep.begin(), rep.end(), first);
  std::vector<int32_t> number(g.types.size());  // value id → the value id of its representative
  std::iota(number.begin(), number.end(), 0);
  std::unordered_map<std::string, size_t> seen;
  std::vector<int32_t> in;
  for (size_t i = first; i < end; ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::Parameter || is_wrt[static_cast<size_t>(n.out)]) continue;
    in.clear();
    for (int32_t v : n.in) in.push_back(number[static_cast<size_t>(v)]);
    std::string key = ir::node_key(g, n, in);
    for (int32_t r = 0; r < n.nout; ++r) key.push_back(active[static_cast<size_t>(n.out + r)]);
    auto [it, fresh] = seen.try_emplace(std::move(key), i);
    if (fresh) continue;
    rep[i - first] = it->second;
    for (int32_t r = 0; r < n.nout; ++r) number[static_cast<size_t>(n.out + r)] = g.nodes[it->second].out + r;
  }
  return rep;
}

// cot[v] += c.
void accumulate(std::unordered_map<int32_t, Tensor>& cot, int32_t v, const Tensor& c) {
  auto [it, fresh] = cot.try_emplace(v, c);
  if (!fresh) it->second = binary(Binary::Add, it->second, c);
}

}  // namespace

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
  // A softmax written out is differentiated as the op (its VJP is softmax_grad, which the GPU's
  // attention steps recognise; the max's gradient, zero up to rounding, is not emitted), and a
  // GELU written out likewise (gelu_grad, which the GPU's products take as an epilogue).
  if (first < end) trace::recognise_composites(first);
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
    accumulate(cot, y.symbol_id(), convert(cotangents[i], y.dtype()));
  }
  if (cot.empty()) return out;
  std::vector<char> is_wrt(g.types.size(), 0);
  for (const Tensor& w : wrt)
    if (trace::in_current_trace(w)) is_wrt[static_cast<size_t>(w.symbol_id())] = 1;
  const std::vector<size_t> rep = representatives(g, first, end, active, is_wrt);
  for (size_t i = end; i-- > first;) {
    const ir::Node n = g.nodes[i];  // a copy: rules append nodes to the graph
    if (is_wrt[static_cast<size_t>(n.out)]) continue;  // the sweep ends at the inputs: keep their cotangents
    if (size_t r0 = rep[i - first]; r0 != i) {  // a duplicate: its representative (earlier) passes back the sum
      for (int32_t r = 0; r < n.nout; ++r)
        if (auto it = cot.find(n.out + r); it != cot.end()) {
          accumulate(cot, g.nodes[r0].out + r, it->second);
          cot.erase(it);
        }
      continue;
    }
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
      if (need[k] && k < gx.size() && gx[k]) accumulate(cot, n.in[k], *gx[k]);
    }
  }
  for (size_t i = 0; i < wrt.size(); ++i)
    if (auto it = cot.find(wrt[i].symbol_id()); it != cot.end() && trace::in_current_trace(wrt[i])) out[i] = it->second;
  return out;
}

}  // namespace sheaf::autodiff
