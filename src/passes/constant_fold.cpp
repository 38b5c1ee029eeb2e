// passes/constant_fold.cpp — constant folding on the tensor IR.
// A node whose operands are all known at compile time (constants, iotas, splats) is evaluated
// with the reference kernels (ref::run_node) and replaced by constants. Guarantees:
//   - a folded value is exactly what the reference executor computes for the node;
//   - splats are never materialised: an elementwise op on splats (computed once, on the rank-0
//     elements, with the same kernel) and a broadcast / reshape / transpose / slice / reverse /
//     dynamic_slice of a splat become broadcast_in_dim(scalar constant), at any size; that
//     form is itself left alone, so folding reaches a fixed point;
//   - a reshape of a constant shares the constant's bytes, at any size;
//   - any other result of more than kFoldLimit elements stays unfolded, and iotas or splats
//     are only expanded as operands up to that size;
//   - parameters, constants and iotas themselves are kept (an iota is folded only into the
//     nodes that read it), so the graph's inputs and results keep their types;
//   - control flow (while, case) is never evaluated, even on known operands: a loop may run
//     long or forever. Their regions are optimised on their own (pipeline.cpp);
//   - all_reduce is never evaluated: its value depends on the other ranks, at run time.
#include "backend/ref/executor.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"
#include "tensor/shape.hpp"

namespace sheaf::passes {

using ir::Graph;
using ir::Node;
using ir::Op;

namespace {

constexpr int64_t kFoldLimit = int64_t{1} << 16;

// broadcast_in_dim of a rank-0 constant: the folded form of a splat already.
bool is_folded_splat(const Graph& g, const Node& n, const std::vector<int32_t>& in) {
  return n.op == Op::BroadcastInDim && g.type(in[0]).shape.empty() && is_constant(g, in[0]);
}

// Replaces `n` by a splat when its result is one; false when it is not known to be.
bool fold_splat(Rewriter& rw, const Node& n, const std::vector<int32_t>& in) {
  std::optional<Tensor> scalar;
  if (moves_elements(n.op)) {
    scalar = splat_scalar(rw.out(), in[0]);
  } else if (is_elementwise(n.op)) {
    std::vector<Tensor> xs;
    for (int32_t v : in) {
      auto s = splat_scalar(rw.out(), v);
      if (!s) return false;
      xs.push_back(std::move(*s));
    }
    scalar = ref::run_node(rw.src(), n, xs)[0];
  }
  if (!scalar) return false;
  rw.map_results(n, rw.splat(rw.src().type(n.out), *scalar, n.loc));
  return true;
}

// Evaluates `n` when all its operands are known and its results are small enough.
bool fold_known(Rewriter& rw, const Node& n, const std::vector<int32_t>& in) {
  const Graph& g = rw.out();
  if (n.op == Op::Reshape) {
    if (const Tensor* c = constant_value(g, in[0])) {
      rw.map_results(n, rw.constant(c->reshaped(rw.src().type(n.out).shape), n.loc));
      return true;
    }
  }
  for (int32_t v = n.out; v < n.out + n.nout; ++v)
    if (shape_numel(rw.src().type(v).shape) > kFoldLimit) return false;
  // every operand known before any is materialised: an update of a parameter by splats (an
  // optimizer's step sizes) would expand each splat only to meet the parameter
  for (int32_t v : in)
    if (!has_constant_tensor(g, v, kFoldLimit)) return false;
  std::vector<Tensor> xs;
  for (int32_t v : in) {
    auto t = constant_tensor(g, v, kFoldLimit);
    if (!t) return false;
    xs.push_back(std::move(*t));
  }
  std::vector<Tensor> results = ref::run_node(rw.src(), n, xs);
  int32_t first = -1;
  for (Tensor& t : results) {
    int32_t c = rw.constant(std::move(t), n.loc);
    if (first < 0) first = c;
  }
  rw.map_results(n, first);
  return true;
}

bool fold_node(Rewriter& rw, const Node& n) {
  if (n.op == Op::Constant || n.op == Op::Iota || n.op == Op::AllReduce || n.op == Op::OptimizationBarrier || !n.attrs.regions.empty()) return false;
  std::vector<int32_t> in = rw.map(n.in);
  if (is_folded_splat(rw.out(), n, in)) return false;
  return fold_splat(rw, n, in) || fold_known(rw, n, in);
}

}  // namespace

Graph fold_constants(const Graph& g) { return rewrite(g, fold_node); }

std::optional<Graph> constants_folded(const Graph& g) { return rewrite_if_changed(g, fold_node); }

}  // namespace sheaf::passes
