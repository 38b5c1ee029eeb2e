// ir/ir.hpp — the tensor IR: typed SSA with static shapes, op set with StableHLO semantics.
// A Graph is a list of nodes in topological order; each node defines one or more values
// (consecutive value ids) and reads earlier values by id. Parameters come first (one per
// positional input, in the ABI order of SPEC §6.5); `results` names the outputs. The IR is
// ANF by construction: every value is a named binding, nothing is nested except the regions
// of control-flow ops (while, case, call).
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
// Regions are whole graphs: isolated from the enclosing graph, everything they read is passed
// as an operand (loop-carried for while).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/source.hpp"
#include "tensor/dot.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/reduce.hpp"

namespace sheaf::ir {

// The op list is ir/ops.def (names and StableHLO spellings beside each enumerator).
enum class Op : uint8_t {
#define SHEAF_IR_OP(Enum, printed, stablehlo) Enum,
#include "ir/ops.def"
};
inline constexpr size_t kOpCount = 0
#define SHEAF_IR_OP(Enum, printed, stablehlo) +1
#include "ir/ops.def"
    ;
std::string_view op_name(Op op);  // "dot_general"
// Unary, binary, convert and select: each result element from the operands' elements at its index.
inline bool is_elementwise(Op op) { return op == Op::Unary || op == Op::Binary || op == Op::Convert || op == Op::Select; }
std::string_view unary_name(Unary u);    // "exp"
std::string_view binary_name(Binary b);  // "add"
std::string_view reduce_name(Reduce r);  // "sum"

struct Type {
  DType dtype = DType::F32;
  Shape shape;
  friend bool operator==(const Type&, const Type&) = default;
};
std::string type_str(const Type& t);  // "f32[4x2]", "f32[]"

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

struct Node {
  Op op;
  std::vector<int32_t> in;  // operand value ids
  int32_t out = -1;         // first result id; results are out .. out + nout - 1
  int32_t nout = 1;
  Attrs attrs;
  SrcLoc loc;  // the source form that produced it
};

struct Graph {
  std::string name;
  std::vector<Type> types;     // type of each value id
  std::vector<int32_t> def;    // value id → index of its node
  std::vector<Node> nodes;     // topological order
  std::vector<int32_t> params; // parameter value ids, in input order
  std::vector<int32_t> results;

  const Type& type(int32_t v) const { return types[static_cast<size_t>(v)]; }
  const Node& producer(int32_t v) const { return nodes[static_cast<size_t>(def[static_cast<size_t>(v)])]; }
  // Appends a node whose result types are `out`; returns its first result id.
  int32_t add(Op op, std::vector<int32_t> in, Attrs attrs, std::vector<Type> out, SrcLoc loc = {});
  // Appends a node, inferring its result types with the shape rule (ir/shape_rules.cpp).
  int32_t emit(Op op, std::vector<int32_t> in, Attrs attrs, SrcLoc loc = {});
  int32_t emit_constant(Tensor value, SrcLoc loc = {});
};

// Shape rule: result types of `op` on operands of types `in`. Throws SheafError naming the op and
// the operand types when they are not valid for it.
std::vector<Type> infer_types(Op op, const std::vector<Type>& in, const Attrs& a, const Type* declared = nullptr);

// Checks the invariants: operands defined before use, types equal to the shape rule, parameters
// first and numbered in order, results defined; region graphs are verified recursively. Throws
// SheafError describing the first violation.
void verify(const Graph& g);

// Readable text: one binding per line, `%3 = add(%1, %2) : f32[4x8]  ; file.shf:3:5`; the regions
// of while/case follow their node as indented `cond(%0: i32[]) { ... }` / `branch 1(...) { ... }`.
std::string print(const Graph& g, bool with_locations = false);

}  // namespace sheaf::ir
