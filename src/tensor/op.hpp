// tensor/op.hpp — the op set of the tensor IR: the ops, their result types and attributes.
// The primitives of src/tensor are the IR ops: a kernel called on symbolic operands records
// itself as an op (tensor/recorder.hpp), so the op set is declared here, beside the kernels, and
// the graph built from the ops lives a layer above (src/ir, ir/ir.hpp). The names are the IR's
// (namespace ir). A Graph is only named here (the regions of control-flow ops).
//
// Operand conventions (all shapes static; elementwise ops need equal shapes — the tracer
// inserts broadcast_in_dim for NumPy broadcasting):
//   parameter                       attrs.index = position among the inputs
//   constant                        attrs.value (a host tensor)
//   iota                            attrs.dtype, attrs.axis; the result type gives the shape
//   unary(x)                        attrs.unary
//   binary(a, b)                    attrs.binary; comparisons give bool
//   convert(x)                      result dtype = attrs.dtype
//   select(pred, a, b)              pred bool of a's shape
//   broadcast_in_dim(x)             attrs.dims: operand axis i → result axis dims[i] (size 1 expands)
//   reshape(x)                      result type gives the shape
//   transpose(x)                    attrs.dims = permutation: out.shape[i] = x.shape[dims[i]]
//   slice(x)                        attrs.starts / limits / strides
//   reverse(x)                      attrs.dims = axes
//   concatenate(x...)               attrs.axis
//   pad(x)                          attrs.lo / hi (≥ 0), attrs.scalar = padding value
//   dynamic_slice(x, s0.. sr-1)     attrs.sizes; starts are rank-0 integer values, clamped
//   dynamic_update_slice(x, u, s..) starts as above
//   reduce(x)                       attrs.reduce over attrs.dims (sorted, dropped)
//   arg_reduce(x)                   attrs.reduce (Max/Min) along attrs.axis (dropped) → i32
//   dot_general(a, b)               attrs.dot
//   gather(x, idx)                  take along attrs.axis (tensor/gather.hpp)
//   scatter(x, idx, upd)            attrs.axis, attrs.scatter (Set/Add)
//   sort(x)                         2 results (values, i32 indices), attrs.axis, attrs.descending
//   top_k(x)                        2 results, attrs.k, along the last axis
//   while(v0.. vn-1)                attrs.regions = {cond, body}: both take n parameters of the
//                                   operand types; cond returns one bool[], body returns the next
//                                   n values (same types). Results: the values when cond is false.
//   case(index, x0.. xm-1)          attrs.regions = branches (≥ 1); index is i32[] (out of range
//                                   → the last branch, like stablehlo.case); every branch takes
//                                   the m operands x as parameters and returns values of the
//                                   node's result types.
//   all_reduce(x0.. xn-1)           n results: each x summed elementwise over the ranks of the
//                                   job (attrs.reduce = sum; dist/collectives.hpp), in one
//                                   collective; types as the operands, never bool
//   optimization_barrier(x0.. xn-1) the operands unchanged (n results); passes never look
//                                   through it, so what reads its results is not merged with,
//                                   and not computed before, what its operands need (remat)
//   call(x0.. xm-1)                 only while tracing (inlined when the trace ends: see
//                                   passes/inline_calls.hpp): a function with a rule of its own
//                                   under differentiation. regions[0] takes the m operands and
//                                   gives the results. attrs.index = a: the first a operands are
//                                   the arguments, the rest values it reads from the enclosing
//                                   trace. Without regions[1] (`checkpoint`) the VJP recomputes
//                                   regions[0]; with it (`custom-vjp`) the first attrs.k results
//                                   are the outputs and the others residuals, regions[1]
//                                   takes (residuals, output cotangents, captured values) and
//                                   gives one cotangent per argument, and regions[2] computes the
//                                   outputs alone (f: what the call is when the residuals are
//                                   never read, i.e. it was not differentiated)
//   softmax(x)                      attrs.axis; x float of rank ≥ 1; a composite (tensor/softmax.hpp):
//                                   exp(x − max) / Σ exp(x − max) along the axis, expanded into
//                                   the ops above by every lowering (passes/composites.hpp)
//   softmax_grad(p, g)              attrs.axis; p, g of one float type: p · (g − Σ g·p) along the
//                                   axis, softmax's VJP at its result p (a composite, likewise)
//   gelu(x)                         x float: GELU's tanh approximation (a composite:
//                                   tensor/gelu.hpp), expanded likewise
//   gelu_grad(x, g)                 x, g of one float type: g · gelu'(x), gelu's VJP at its
//                                   operand x (a composite, likewise)
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/dot.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/reduce.hpp"

namespace sheaf::ir {

// The op list is tensor/ops.def (names and StableHLO spellings beside each enumerator).
enum class Op : uint8_t {
#define SHEAF_IR_OP(Enum, printed, stablehlo) Enum,
#include "tensor/ops.def"
};
inline constexpr size_t kOpCount = 0
#define SHEAF_IR_OP(Enum, printed, stablehlo) +1
#include "tensor/ops.def"
    ;

struct Type {
  DType dtype = DType::F32;
  Shape shape;
  friend bool operator==(const Type&, const Type&) = default;
};

struct Attrs {
  Unary unary = Unary::Neg;
  Binary binary = Binary::Add;
  Reduce reduce = Reduce::Sum;
  ScatterMode scatter = ScatterMode::Set;
  DType dtype = DType::F32;
  int64_t axis = 0;
  int64_t k = 0;
  int64_t index = 0;
  bool descending = false;
  std::vector<int64_t> dims, starts, limits, strides, lo, hi, sizes;
  DotDims dot;
  double scalar = 0;
  Tensor value;
  std::vector<std::shared_ptr<const struct Graph>> regions;  // While: {cond, body}; Case: branches
};

}  // namespace sheaf::ir
