// ir/graph.cpp — building graphs, names of ops, the verifier and the readable printer.
// Both recurse into the regions of while/case (whole graphs of their own, see ir.hpp).
#include <iterator>
#include <sstream>

#include "base/error.hpp"
#include "ir/ir.hpp"
#include "tensor/print.hpp"
#include "tensor/shape.hpp"

namespace sheaf::ir {

std::string_view op_name(Op op) {
  static constexpr std::string_view names[] = {
#define SHEAF_IR_OP(Enum, printed, stablehlo) printed,
#include "tensor/ops.def"
  };
  static_assert(std::size(names) == kOpCount);
  return names[static_cast<size_t>(op)];
}

std::string_view unary_name(Unary u) {
  static constexpr std::string_view names[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
                                               "tan", "tanh", "floor", "ceil", "round", "sign", "logistic", "not"};
  static_assert(std::size(names) == static_cast<size_t>(Unary::Not) + 1, "one name per Unary, in enum order");
  return names[static_cast<size_t>(u)];
}

std::string_view binary_name(Binary b) {
  static constexpr std::string_view names[] = {"add", "sub", "mul", "div", "pow", "max", "min", "rem", "floor_div",
                                               "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor",
                                               "shift_left", "shift_right_logical", "shift_right_arithmetic"};
  static_assert(std::size(names) == static_cast<size_t>(Binary::ShiftRightArithmetic) + 1, "one name per Binary, in enum order");
  return names[static_cast<size_t>(b)];
}

std::string_view reduce_name(Reduce r) {
  static constexpr std::string_view names[] = {"sum", "prod", "max", "min"};
  static_assert(std::size(names) == static_cast<size_t>(Reduce::Min) + 1, "one name per Reduce, in enum order");
  return names[static_cast<size_t>(r)];
}

std::string type_str(const Type& t) { return sheaf::type_str(t.dtype, t.shape); }

namespace {

// The bookkeeping add and add_copy share: the result types [first, last) become the next value
// ids, a parameter joins the inputs, and the node is appended in place (the caller sets its
// attributes: clang 14, which builds the fuzzers, has no parenthesised aggregate init).
template <typename TypeIt>
Node& append(Graph& g, Op op, std::vector<int32_t> in, TypeIt first, TypeIt last, SrcLoc loc) {
  const auto out = static_cast<int32_t>(g.types.size());
  g.types.insert(g.types.end(), first, last);
  const auto nout = static_cast<int32_t>(g.types.size()) - out;
  g.def.insert(g.def.end(), static_cast<size_t>(nout), static_cast<int32_t>(g.nodes.size()));
  if (op == Op::Parameter) g.params.push_back(out);
  Node& n = g.nodes.emplace_back();
  n.op = op, n.in = std::move(in), n.out = out, n.nout = nout, n.loc = loc;
  return n;
}

}  // namespace

int32_t Graph::add(Op op, std::vector<int32_t> in, Attrs attrs, std::vector<Type> out, SrcLoc loc) {
  Node& n = append(*this, op, std::move(in), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()), loc);
  n.attrs = std::move(attrs);  // moved once
  return n.out;
}

int32_t Graph::add_copy(const Node& n, std::vector<int32_t> in, std::span<const Type> out) {
  Node& copy = append(*this, n.op, std::move(in), out.begin(), out.end(), n.loc);
  copy.attrs = n.attrs;
  return copy.out;
}

int32_t Graph::emit(Op op, std::vector<int32_t> in, Attrs attrs, SrcLoc loc) {
  std::vector<Type> ts;
  for (int32_t v : in) ts.push_back(type(v));
  std::vector<Type> out = infer_types(op, ts, attrs);
  return add(op, std::move(in), std::move(attrs), std::move(out), loc);
}

int32_t Graph::emit_constant(Tensor value, SrcLoc loc) {
  Attrs a;
  a.value = std::move(value);
  Type t{a.value.dtype(), a.value.shape()};
  return add(Op::Constant, {}, std::move(a), {t}, loc);
}

void verify(const Graph& g) {
  auto fail = [&](size_t i, const std::string& why) {
    throw SheafError(fmt::format("IR verifier: graph '{}', node {} ({}): {}", g.name, i, op_name(g.nodes[i].op), why));
  };
  if (g.def.size() != g.types.size()) throw SheafError("IR verifier: value table and definition table differ in size");
  size_t params = 0;
  int32_t next = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.out != next || n.nout < 1) fail(i, "results are not numbered in order");
    for (int32_t v = n.out; v < n.out + n.nout; ++v)
      if (g.def[static_cast<size_t>(v)] != static_cast<int32_t>(i)) fail(i, "definition table disagrees");
    next = n.out + n.nout;
    std::vector<Type> ins;
    for (int32_t v : n.in) {
      if (v < 0 || v >= n.out) fail(i, fmt::format("operand %{} is not defined before use", v));
      ins.push_back(g.type(v));
    }
    if (n.op == Op::Parameter) {
      if (params != i) fail(i, "parameters must come first");
      if (n.attrs.index != static_cast<int64_t>(params) || g.params.size() <= params || g.params[params] != n.out)
        fail(i, "parameters must be numbered in order");
      ++params;
    }
    std::vector<Type> declared(g.types.begin() + n.out, g.types.begin() + n.out + n.nout);
    std::vector<Type> expect;
    try {
      expect = infer_types(n.op, ins, n.attrs, &declared[0]);
    } catch (const SheafError& e) {
      fail(i, e.what());
    }
    if (expect != declared) fail(i, "result type differs from the shape rule");
    for (size_t k = 0; k < n.attrs.regions.size(); ++k) {
      try {
        verify(*n.attrs.regions[k]);  // non-null: the shape rule checked the signatures
      } catch (const SheafError& e) {
        fail(i, fmt::format("region {}: {}", k, e.what()));
      }
    }
  }
  if (next != static_cast<int32_t>(g.types.size())) throw SheafError("IR verifier: values without a defining node");
  if (params != g.params.size()) throw SheafError("IR verifier: parameter list disagrees with the nodes");
  for (int32_t r : g.results)
    if (r < 0 || r >= next) throw SheafError(fmt::format("IR verifier: result %{} is not defined", r));
}

namespace {

std::string ints(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string attr_text(const Node& n) {
  const Attrs& a = n.attrs;
  switch (n.op) {
    case Op::Parameter: return fmt::format("index={}", a.index);
    case Op::Constant: {
      if (a.value.numel() > 8) return fmt::format("<{} elements>", a.value.numel());
      std::string s = print_tensor(a.value);
      for (char& c : s)
        if (c == '\n') c = ' ';
      return s;
    }
    case Op::Iota: return fmt::format("axis={}", a.axis);
    case Op::Convert: return std::string(dtype_name(a.dtype));
    case Op::BroadcastInDim: case Op::Transpose: case Op::Reverse: case Op::Reduce: return "dims=" + ints(a.dims);
    case Op::Slice: return fmt::format("starts={} limits={} strides={}", ints(a.starts), ints(a.limits), ints(a.strides));
    case Op::Concatenate: case Op::ArgReduce: case Op::Gather: case Op::Scatter: case Op::Softmax: case Op::SoftmaxGrad:
      return fmt::format("axis={}", a.axis);
    case Op::Sort: return fmt::format("axis={}{}", a.axis, a.descending ? " descending" : "");
    case Op::Pad: return fmt::format("lo={} hi={} value={}", ints(a.lo), ints(a.hi), a.scalar);
    case Op::DynamicSlice: return "sizes=" + ints(a.sizes);
    case Op::DotGeneral:
      return fmt::format("batch={}x{} contract={}x{}", ints(a.dot.lhs_batch), ints(a.dot.rhs_batch), ints(a.dot.lhs_contract),
                         ints(a.dot.rhs_contract));
    case Op::TopK: return fmt::format("k={}", a.k);
    case Op::Case: return fmt::format("branches={}", a.regions.size());
    case Op::While: return a.k > 0 ? fmt::format("trip_count={}", a.k) : "";
    case Op::Call:
      return a.regions.size() > 1 ? fmt::format("args={} outputs={} custom_vjp", a.index, a.k) : fmt::format("args={} checkpoint", a.index);
    default: return "";
  }
}

std::string op_text(const Node& n) {
  switch (n.op) {
    case Op::Unary: return std::string(unary_name(n.attrs.unary));
    case Op::Binary: return std::string(binary_name(n.attrs.binary));
    case Op::Reduce: return "reduce_" + std::string(reduce_name(n.attrs.reduce));
    case Op::ArgReduce: return n.attrs.reduce == Reduce::Max ? "argmax" : "argmin";
    case Op::Scatter: return n.attrs.scatter == ScatterMode::Add ? "scatter_add" : "scatter";
    default: return std::string(op_name(n.op));
  }
}

std::string param_list(const Graph& g) {
  std::vector<std::string> ps;
  for (int32_t p : g.params) ps.push_back(fmt::format("%{}: {}", p, type_str(g.type(p))));
  return fmt::format("{}", fmt::join(ps, ", "));
}

// Names of the regions of `n`: cond/body for while, branch k for case.
std::string region_name(const Node& n, size_t k) {
  if (n.op == Op::While) return k == 0 ? "cond" : "body";
  if (n.op == Op::Call) return k == 0 ? (n.attrs.regions.size() == 1 ? "function" : "fwd") : k == 1 ? "vjp" : "primal";
  return fmt::format("branch {}", k);
}

// The nodes and the return of `g`, each line indented by `indent` spaces; regions follow their
// node as `cond(%0: i32[]) { ... }` blocks, two spaces deeper (their value ids are their own).
void print_body(std::ostringstream& os, const Graph& g, size_t indent, bool with_locations) {
  std::string pad(indent, ' ');
  for (const Node& n : g.nodes) {
    if (n.op == Op::Parameter) continue;
    std::vector<std::string> outs, ins, ts;
    for (int32_t v = n.out; v < n.out + n.nout; ++v) {
      outs.push_back(fmt::format("%{}", v));
      ts.push_back(type_str(g.type(v)));
    }
    for (int32_t v : n.in) ins.push_back(fmt::format("%{}", v));
    std::string attrs = attr_text(n);
    os << pad << fmt::format("{}", fmt::join(outs, ", ")) << " = " << op_text(n) << "(" << fmt::format("{}", fmt::join(ins, ", ")) << ")";
    if (!attrs.empty()) os << " {" << attrs << "}";
    os << " : " << fmt::format("{}", fmt::join(ts, ", "));
    if (with_locations && n.loc.valid()) os << "  ; " << sources::describe(n.loc);
    os << "\n";
    for (size_t k = 0; k < n.attrs.regions.size(); ++k) {
      const Graph* r = n.attrs.regions[k].get();
      if (!r) {
        os << pad << "  " << region_name(n, k) << " <missing>\n";
        continue;
      }
      os << pad << "  " << region_name(n, k) << "(" << param_list(*r) << ") {\n";
      print_body(os, *r, indent + 4, with_locations);
      os << pad << "  }\n";
    }
  }
  std::vector<std::string> rs;
  for (int32_t r : g.results) rs.push_back(fmt::format("%{}", r));
  os << pad << "return " << fmt::format("{}", fmt::join(rs, ", ")) << "\n";
}

}  // namespace

std::string print(const Graph& g, bool with_locations) {
  std::ostringstream os;
  os << "func @" << (g.name.empty() ? "main" : g.name) << "(" << param_list(g) << ") {\n";
  print_body(os, g, 2, with_locations);
  os << "}\n";
  return os.str();
}

}  // namespace sheaf::ir
