// ir/ir.hpp — the tensor IR: typed SSA with static shapes, op set with StableHLO semantics.
// A Graph is a list of nodes in topological order; each node defines one or more values
// (consecutive value ids) and reads earlier values by id. Parameters come first (one per
// positional input, in the ABI order of SPEC §6.5); `results` names the outputs. The IR is
// ANF by construction: every value is a named binding, nothing is nested except the regions
// of control-flow ops (while, case, call).
//
// Regions are whole graphs: isolated from the enclosing graph, everything they read is passed
// as an operand (loop-carried for while).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/source.hpp"
#include "tensor/op.hpp"

namespace sheaf::ir {

std::string_view op_name(Op op);  // "dot_general"
// Unary, binary, convert and select: each result element from the operands' elements at its index.
inline bool is_elementwise(Op op) { return op == Op::Unary || op == Op::Binary || op == Op::Convert || op == Op::Select; }
std::string_view unary_name(Unary u);    // "exp"
std::string_view binary_name(Binary b);  // "add"
std::string_view reduce_name(Reduce r);  // "sum"

std::string type_str(const Type& t);  // "f32[4x2]", "f32[]"

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
  // Appends a copy of node `n` of any graph (op, attributes, location) reading `in`, with `n`'s
  // result types `out`; returns its first result id. Copies each part once, into place.
  int32_t add_copy(const Node& n, std::vector<int32_t> in, std::span<const Type> out);
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
