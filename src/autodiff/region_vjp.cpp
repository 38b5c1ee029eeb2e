// autodiff/region_vjp.cpp — VJP rules of while and call (see region_vjp.hpp).
// A counted `while` (a `repeat` compiled as one loop, SPEC §6.4; attrs.k = N iterations): the
// body's VJP is traced once as a region of its own,
//   body_vjp(x_0..x_{n-1}, c_0..c_{n-1}) = (c · d body(x) / d x_k)_k ,
// and two loops are added to the trace:
//   forward   the loop again, carrying (x.., S_j..) with S_j[t] = x_j before iteration t, for
//             every carried value j that changes (loop invariants are read from the operands):
//             N × the changing state in memory, one more forward pass in time;
//   backward  iterations N-1 .. 0 carrying (c.., x.., S_j..): c ← body_vjp(x(i), c), where x(i)
//             is S_j[i] for a changing value and the operand for an invariant one.
// Both are trace::counted_loop (a counter of their own ahead of the state).
// The final c are the cotangents of the operands (seeded with the results' cotangents).
#include "autodiff/region_vjp.hpp"

#include <memory>

#include "autodiff/reverse.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "trace/tracer.hpp"

namespace sheaf::autodiff {
namespace {

// Zeros of type t as a broadcast in the trace (not a constant of that size).
Tensor zeros_like(const ir::Type& t) { return ir::recorder().lift(zeros(t.dtype, t.shape)); }
Tensor counter(int64_t v) { return Tensor::scalar(DType::I32, static_cast<double>(v)); }

Shape stacked(int64_t n, const Shape& s) {
  Shape r{n};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

// [t, 0, .., 0]: the start of row t of a stack of rank 1 + rank.
std::vector<Tensor> row_start(const Tensor& t, size_t rank) {
  std::vector<Tensor> starts{t};
  for (size_t d = 0; d < rank; ++d) starts.push_back(counter(0));
  return starts;
}

// The VJP of graph f as a graph of its own: (x_0..x_{n-1}, c_0..c_{r-1}) → (c · d f(x) / d x_k)_k.
std::shared_ptr<const ir::Graph> vjp_region(const ir::Graph& f) {
  std::vector<ir::Type> types;
  for (int32_t p : f.params) types.push_back(f.type(p));
  for (int32_t r : f.results) types.push_back(f.type(r));
  const size_t n = f.params.size();
  return std::make_shared<const ir::Graph>(trace::trace_graph(types, [&](std::span<const Tensor> p) {
    std::span<const Tensor> xs = p.first(n), cs = p.subspan(n);
    return vjp_of(trace::inline_graph(f, xs), cs, xs);
  }));
}

// The cotangents of a node's results, zeros where there is none.
std::vector<Tensor> cotangents(std::span<const Tensor> y, std::span<const std::optional<Tensor>> g) {
  std::vector<Tensor> c;
  for (size_t k = 0; k < y.size(); ++k) c.push_back(g[k] ? *g[k] : zeros_like({y[k].dtype(), y[k].shape()}));
  return c;
}

}  // namespace

std::vector<std::optional<Tensor>> counted_while_vjp(const ir::Node& n, std::span<const Tensor> x,
                                                     std::span<const std::optional<Tensor>> g, const std::vector<bool>& need) {
  const ir::Graph& body = *n.attrs.regions[1];
  const int64_t trips = n.attrs.k;
  const size_t count = x.size();
  std::vector<ir::Type> types;
  std::vector<size_t> changing;  // carried positions the body changes (stacked)
  for (size_t k = 0; k < count; ++k) {
    types.push_back(body.type(body.params[k]));
    if (body.results[k] != body.params[k]) changing.push_back(k);
  }

  std::shared_ptr<const ir::Graph> body_vjp = vjp_region(body);

  // forward: (x.., S..), iteration t writing row t of each stack
  std::vector<Tensor> fwd(x.begin(), x.end());
  for (size_t k : changing) fwd.push_back(zeros_like({types[k].dtype, stacked(trips, types[k].shape)}));
  std::vector<Tensor> f = trace::counted_loop(fwd, trips, [&](const Tensor& t, std::span<const Tensor> p) {
    std::vector<Tensor> out = trace::inline_graph(body, p.first(count));
    for (size_t j = 0; j < changing.size(); ++j) {
      const Tensor& xj = p[changing[j]];
      out.push_back(dynamic_update_slice(p[count + j], reshape(xj, stacked(1, xj.shape())), row_start(t, xj.shape().size())));
    }
    return out;
  });

  // backward: (c.., x.., S..), iteration t reading row N-1-t
  std::vector<Tensor> bwd = cotangents(std::span(x.data(), count), g);
  bwd.insert(bwd.end(), x.begin(), x.end());
  bwd.insert(bwd.end(), f.begin() + static_cast<std::ptrdiff_t>(count), f.end());
  std::vector<Tensor> b = trace::counted_loop(bwd, trips, [&](const Tensor& t, std::span<const Tensor> p) {
    Tensor row_index = binary(Binary::Sub, counter(trips - 1), t);
    std::vector<Tensor> args(p.begin() + static_cast<std::ptrdiff_t>(count), p.begin() + 2 * static_cast<std::ptrdiff_t>(count));
    for (size_t j = 0; j < changing.size(); ++j) {
      const ir::Type& tk = types[changing[j]];
      Tensor row = dynamic_slice(p[2 * count + j], row_start(row_index, tk.shape.size()), stacked(1, tk.shape));
      args[changing[j]] = reshape(row, tk.shape);
    }
    args.insert(args.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(count));
    std::vector<Tensor> out = trace::inline_graph(*body_vjp, args);
    out.insert(out.end(), p.begin() + static_cast<std::ptrdiff_t>(count), p.end());
    return out;
  });

  std::vector<std::optional<Tensor>> grads(count);
  for (size_t k = 0; k < count; ++k)
    if (need[k]) grads[k] = b[k];
  return grads;
}

std::vector<std::optional<Tensor>> call_vjp(const ir::Node& n, std::span<const Tensor> x, std::span<const Tensor> y,
                                            std::span<const std::optional<Tensor>> g, const std::vector<bool>& need) {
  const ir::Attrs& a = n.attrs;
  const auto args = static_cast<size_t>(a.index);
  std::vector<std::optional<Tensor>> grads(x.size());
  std::vector<Tensor> dx;
  if (a.regions.size() == 1) {  // checkpoint: recompute behind a barrier that waits for the cotangents
    std::vector<Tensor> c = cotangents(y, g), in(x.begin(), x.end());
    in.insert(in.end(), c.begin(), c.end());
    std::vector<Tensor> fenced = ir::recorder().record(ir::Op::OptimizationBarrier, in, {});
    fenced.resize(x.size());
    fenced.insert(fenced.end(), c.begin(), c.end());
    dx = trace::inline_graph(*vjp_region(*a.regions[0]), fenced);
  } else {  // custom-vjp: (residuals, output cotangents, captured values) → argument cotangents
    const auto outputs = static_cast<size_t>(a.k);
    std::vector<Tensor> in(y.begin() + static_cast<std::ptrdiff_t>(outputs), y.end());
    for (const Tensor& c : cotangents(y.first(outputs), g.first(outputs))) in.push_back(c);
    in.insert(in.end(), x.begin() + static_cast<std::ptrdiff_t>(args), x.end());
    dx = trace::inline_graph(*a.regions[1], in);
  }
  for (size_t k = 0; k < dx.size() && k < x.size(); ++k)
    if (need[k]) grads[k] = dx[k];
  return grads;
}

}  // namespace sheaf::autodiff
