// backend/ref/executor.cpp — IR interpreter over the eager kernels of src/tensor; while and case
// run their region graphs recursively with ref::run.
#include "backend/ref/executor.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"

namespace sheaf::ref {

using ir::Op;

namespace {

std::vector<int64_t> start_values(std::span<const Tensor> operands, size_t first) {
  std::vector<int64_t> s;
  for (size_t i = first; i < operands.size(); ++i) s.push_back(static_cast<int64_t>(operands[i].get(0)));
  return s;
}

// while: the carried values go through `body` as long as `cond` gives true. Both regions are
// planned once per execution of the node, not per iteration.
std::vector<Tensor> run_while(const ir::Graph& cond, const ir::Graph& body, std::span<const Tensor> init) {
  Plan pc = plan(cond), pb = plan(body);
  std::vector<Tensor> vals(init.begin(), init.end());
  while (run(cond, pc, vals)[0].get(0) != 0) vals = run(body, pb, vals);
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

std::vector<Tensor> run_node(const ir::Graph& g, const ir::Node& n, std::span<const Tensor> x) {
  const ir::Attrs& a = n.attrs;
  const ir::Type& out = g.type(n.out);
  switch (n.op) {
    case Op::Parameter: throw SheafError("internal: run_node on a parameter");
    case Op::Constant: return {a.value};
    case Op::Iota: return {iota(a.dtype, out.shape, a.axis)};
    case Op::Unary: return {unary(a.unary, x[0])};
    case Op::Binary: return {binary(a.binary, x[0], x[1])};
    case Op::Convert: return {convert(x[0], a.dtype)};
    case Op::Select: return {select(x[0], x[1], x[2])};
    case Op::BroadcastInDim: {
      Shape aligned(out.shape.size(), 1);
      for (size_t i = 0; i < a.dims.size(); ++i) aligned[static_cast<size_t>(a.dims[i])] = x[0].shape()[i];
      return {broadcast_to(reshape(x[0], aligned), out.shape)};
    }
    case Op::Reshape: return {reshape(x[0], out.shape)};
    case Op::Transpose: return {transpose(x[0], a.dims)};
    case Op::Slice: return {slice(x[0], a.starts, a.limits, a.strides)};
    case Op::Reverse: return {reverse(x[0], a.dims)};
    case Op::Concatenate: return {concatenate(std::vector<Tensor>(x.begin(), x.end()), a.axis)};
    case Op::Pad: return {pad(x[0], a.scalar, a.lo, a.hi)};
    case Op::DynamicSlice: return {dynamic_slice(x[0], start_values(x, 1), a.sizes)};
    case Op::DynamicUpdateSlice: return {dynamic_update_slice(x[0], x[1], start_values(x, 2))};
    case Op::Reduce: return {reduce(a.reduce, x[0], a.dims)};
    case Op::ArgReduce: return {arg_reduce(a.reduce, x[0], a.axis)};
    case Op::DotGeneral: return {dot_general(x[0], x[1], a.dot)};
    case Op::Gather: return {take(x[0], x[1], a.axis)};
    case Op::Scatter: return {scatter(x[0], x[1], x[2], a.axis, a.scatter)};
    case Op::Sort: {
      Sorted s = sort(x[0], a.axis, a.descending);
      return {s.values, s.indices};
    }
    case Op::TopK: {
      Sorted s = top_k(x[0], a.k);
      return {s.values, s.indices};
    }
    case Op::While: return run_while(*a.regions[0], *a.regions[1], x);
    case Op::Case: return run_case(a, x);
  }
  throw SheafError("internal: unknown IR op");
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
  std::vector<Tensor> operands;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == Op::Parameter) {
      vals[static_cast<size_t>(n.out)] = args[static_cast<size_t>(n.attrs.index)];
      continue;
    }
    operands.clear();
    for (int32_t v : n.in) operands.push_back(vals[static_cast<size_t>(v)]);
    if (p.implicit[static_cast<size_t>(n.out)]) {  // operand with unit axes; the readers broadcast
      const ir::Type& out = g.type(n.out);
      Shape aligned(out.shape.size(), 1);
      for (size_t k = 0; k < n.attrs.dims.size(); ++k) aligned[static_cast<size_t>(n.attrs.dims[k])] = operands[0].shape()[k];
      vals[static_cast<size_t>(n.out)] = reshape(operands[0], aligned);
    } else {
      std::vector<Tensor> r = run_node(g, n, operands);
      for (int32_t k = 0; k < n.nout; ++k) vals[static_cast<size_t>(n.out + k)] = std::move(r[static_cast<size_t>(k)]);
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
