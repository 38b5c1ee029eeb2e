// backend/ref/executor.cpp — IR interpreter over the eager kernels of src/tensor; while and case
// run their region graphs recursively with ref::run.
#include "backend/ref/executor.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/interrupt.hpp"
#include "dist/collectives.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"
#include "tensor/gelu.hpp"
#include "tensor/softmax.hpp"

namespace sheaf::ref {

using ir::Op;

namespace {

// while: the carried values go through `body` as long as `cond` gives true. Both regions are
// planned once per execution of the node, not per iteration.
std::vector<Tensor> run_while(const ir::Graph& cond, const ir::Graph& body, std::span<const Tensor> init) {
  Plan pc = plan(cond), pb = plan(body);
  std::vector<Tensor> vals(init.begin(), init.end());
  while (!stop_requested() && run(cond, pc, vals)[0].get(0) != 0) vals = run(body, pb, vals);  // Ctrl-C: see base/interrupt.hpp
  return vals;
}

// case: branch `index`, or the last one when the index is out of range (as stablehlo.case).
std::vector<Tensor> run_case(const ir::Attrs& a, std::span<const Tensor> x) {
  auto i = static_cast<int64_t>(x[0].get(0));
  auto last = static_cast<int64_t>(a.regions.size()) - 1;
  if (i < 0 || i > last) i = last;
  return run(*a.regions[static_cast<size_t>(i)], x.subspan(1));
}

}  // namespace

// Evaluates node `n` on its operands x(0) .. x(nin-1) (each a const Tensor&) into r[0 .. nout-1].
// run_node (spans, for the passes) and run (operands read in place from the value table, no
// copies) share it.
template <typename X>
void eval_node(const ir::Graph& g, const ir::Node& n, size_t nin, const X& x, Tensor* r) {
  auto all = [&](size_t first) {
    std::vector<Tensor> v;
    for (size_t i = first; i < nin; ++i) v.push_back(x(i));
    return v;
  };
  auto starts = [&](size_t first) {
    std::vector<int64_t> v;
    for (size_t i = first; i < nin; ++i) v.push_back(static_cast<int64_t>(x(i).get(0)));
    return v;
  };
  auto results = [&](std::vector<Tensor> ts) { std::move(ts.begin(), ts.end(), r); };
  const ir::Attrs& a = n.attrs;
  const ir::Type& out = g.type(n.out);
  switch (n.op) {
    case Op::Parameter: throw SheafError("internal: run_node on a parameter");
    case Op::Constant: r[0] = a.value; return;
    case Op::Iota: r[0] = iota(a.dtype, out.shape, a.axis); return;
    case Op::Unary: r[0] = unary(a.unary, x(0)); return;
    case Op::Binary: r[0] = binary(a.binary, x(0), x(1)); return;
    case Op::Convert: r[0] = convert(x(0), a.dtype); return;
    case Op::Select: r[0] = select(x(0), x(1), x(2)); return;
    case Op::BroadcastInDim: {
      Shape aligned(out.shape.size(), 1);
      for (size_t i = 0; i < a.dims.size(); ++i) aligned[static_cast<size_t>(a.dims[i])] = x(0).shape()[i];
      r[0] = broadcast_to(reshape(x(0), aligned), out.shape);
      return;
    }
    case Op::Reshape: r[0] = reshape(x(0), out.shape); return;
    case Op::Transpose: r[0] = transpose(x(0), a.dims); return;
    case Op::Slice: r[0] = slice(x(0), a.starts, a.limits, a.strides); return;
    case Op::Reverse: r[0] = reverse(x(0), a.dims); return;
    case Op::Concatenate: r[0] = concatenate(all(0), a.axis); return;
    case Op::Pad: r[0] = pad(x(0), a.scalar, a.lo, a.hi); return;
    case Op::DynamicSlice: r[0] = dynamic_slice(x(0), starts(1), a.sizes); return;
    case Op::DynamicUpdateSlice: r[0] = dynamic_update_slice(x(0), x(1), starts(2)); return;
    case Op::Reduce: r[0] = reduce(a.reduce, x(0), a.dims); return;
    case Op::ArgReduce: r[0] = arg_reduce(a.reduce, x(0), a.axis); return;
    case Op::DotGeneral: r[0] = dot_general(x(0), x(1), a.dot); return;
    case Op::Gather: r[0] = take(x(0), x(1), a.axis); return;
    case Op::Scatter: r[0] = scatter(x(0), x(1), x(2), a.axis, a.scatter); return;
    case Op::Sort: {
      Sorted s = sort(x(0), a.axis, a.descending);
      results({s.values, s.indices});
      return;
    }
    case Op::TopK: {
      Sorted s = top_k(x(0), a.k);
      results({s.values, s.indices});
      return;
    }
    case Op::While: results(run_while(*a.regions[0], *a.regions[1], all(0))); return;
    case Op::Case: results(run_case(a, all(0))); return;
    case Op::AllReduce: results(dist::all_reduce_sum(all(0))); return;
    case Op::OptimizationBarrier: results(all(0)); return;
    case Op::Call: results(run(*a.regions[0], all(0))); return;
    case Op::Softmax: r[0] = softmax_expansion(x(0), a.axis).out; return;
    case Op::SoftmaxGrad: r[0] = softmax_grad_expansion(x(0), x(1), a.axis); return;
    case Op::Gelu: r[0] = gelu_expansion(x(0)); return;
    case Op::GeluGrad: r[0] = gelu_grad_expansion(x(0), x(1)); return;
  }
  throw SheafError("internal: unknown IR op");
}

std::vector<Tensor> run_node(const ir::Graph& g, const ir::Node& n, std::span<const Tensor> x) {
  std::vector<Tensor> r(static_cast<size_t>(n.nout));
  eval_node(g, n, x.size(), [&](size_t i) -> const Tensor& { return x[i]; }, r.data());
  return r;
}

Plan plan(const ir::Graph& g) {
  Plan p;
  p.last_use.assign(g.types.size(), -1);
  p.implicit.assign(g.types.size(), false);
  for (const ir::Node& n : g.nodes)
    if (n.op == Op::BroadcastInDim) p.implicit[static_cast<size_t>(n.out)] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    bool broadcasting_reader = n.op == Op::Binary || n.op == Op::Select;
    for (int32_t v : n.in) {
      p.last_use[static_cast<size_t>(v)] = static_cast<int32_t>(i);
      if (!broadcasting_reader) p.implicit[static_cast<size_t>(v)] = false;
    }
  }
  for (int32_t r : g.results) {
    p.last_use[static_cast<size_t>(r)] = static_cast<int32_t>(g.nodes.size());
    p.implicit[static_cast<size_t>(r)] = false;
  }
  // A reader whose operands were all left implicit would produce the unbroadcast shape: one of
  // them is materialised.
  for (const ir::Node& n : g.nodes)
    if ((n.op == Op::Binary || n.op == Op::Select) &&
        std::all_of(n.in.begin(), n.in.end(), [&](int32_t v) { return p.implicit[static_cast<size_t>(v)]; }))
      p.implicit[static_cast<size_t>(n.in[0])] = false;
  return p;
}

std::vector<Tensor> run(const ir::Graph& g, const Plan& p, std::span<const Tensor> args) {
  if (args.size() != g.params.size())
    throw SheafError(fmt::format("internal: '{}' takes {} inputs, got {}", g.name, g.params.size(), args.size()));
  std::vector<Tensor> vals(g.types.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == Op::Parameter) {
      vals[static_cast<size_t>(n.out)] = args[static_cast<size_t>(n.attrs.index)];
      continue;
    }
    auto x = [&](size_t k) -> const Tensor& { return vals[static_cast<size_t>(n.in[k])]; };
    if (p.implicit[static_cast<size_t>(n.out)]) {  // operand with unit axes; the readers broadcast
      const ir::Type& out = g.type(n.out);
      Shape aligned(out.shape.size(), 1);
      for (size_t k = 0; k < n.attrs.dims.size(); ++k) aligned[static_cast<size_t>(n.attrs.dims[k])] = x(0).shape()[k];
      vals[static_cast<size_t>(n.out)] = reshape(x(0), aligned);
    } else {
      eval_node(g, n, n.in.size(), x, &vals[static_cast<size_t>(n.out)]);
    }
    for (int32_t v : n.in)
      if (p.last_use[static_cast<size_t>(v)] == static_cast<int32_t>(i)) vals[static_cast<size_t>(v)] = Tensor();
  }
  std::vector<Tensor> results;
  for (int32_t r : g.results) results.push_back(vals[static_cast<size_t>(r)]);
  return results;
}

std::vector<Tensor> run(const ir::Graph& g, std::span<const Tensor> args) { return run(g, plan(g), args); }

}  // namespace sheaf::ref
