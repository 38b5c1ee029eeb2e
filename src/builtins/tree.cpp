// builtins/tree.cpp — pytree builtins and scan (SPEC §2.7, §5.10):
// tree-map tree-map-zeros tree-reduce flatten scan.
// `flatten` returns the tuple (leaves treedef); the treedef is the tree with every leaf replaced
// by the symbol `*`, e.g. `{:b [*, *], :w *}` — printable, and comparable with `=`.
#include <array>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/shape.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

// (tree-map f t1 [t2 ...]): f on corresponding leaves.
Value b_tree_map(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  return tree_map(a.args.subspan(1), [&](std::span<const Value> leaves) { return in.call(f, leaves, a.site); }, a);
}

// (tree-map-zeros t): zero leaves of equal shape and dtype (host numbers give 0 / 0.0 / false).
Value b_tree_map_zeros(Interp&, const CallArgs& a) {
  return tree_map(a.args.first(1), [&](std::span<const Value> leaves) {
    const Value& v = leaves[0];
    if (v.is(Kind::Tensor) && v.as_tensor().weak()) {  // a host number being traced
      DType d = v.as_tensor().dtype();
      return is_float(d) ? Value::real(0) : d == DType::Bool ? Value::boolean(false) : Value::integer(0);
    }
    switch (v.kind()) {
      case Kind::Tensor: return Value::tensor(Tensor(v.as_tensor().dtype(), v.as_tensor().shape()));
      case Kind::Int: return Value::integer(0);
      case Kind::Float: return Value::real(0);
      case Kind::Bool: return Value::boolean(false);
      default:
        throw SheafError(fmt::format("tree-map-zeros: leaves must be tensors or numbers, got {}", kind_name(v.kind())), a.site);
    }
  }, a);
}

// (tree-reduce f t [init]): left fold over the leaves; without init the first leaf seeds.
Value b_tree_reduce(Interp& in, const CallArgs& a) {
  std::vector<Value> leaves;
  tree_leaves(a[1], leaves);
  return left_fold(in, arg_callable(a, 0), leaves, a.size() > 2 ? &a[2] : nullptr, a, "tree");
}

Value b_flatten(Interp&, const CallArgs& a) {
  std::vector<Value> leaves;
  tree_leaves(a[0], leaves);
  return Value::tuple({Value::list(std::move(leaves), ListKind::Bracket), tree_def(a[0])});
}

bool is_scalar(const Value& v) { return v.is_number() || (v.is(Kind::Tensor) && v.as_tensor().rank() == 0); }

// (scan f init xs): carry through f over the rows of a tensor (outputs stacked on a new axis 0)
// or the elements of a list (outputs collected in a list). f returns [new-carry output]; with a
// scalar carry a 2-element 1-D tensor (a bracket literal of two numbers) is accepted too.
Value b_scan(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  const Value& xs = a[2];
  bool over_tensor = xs.is(Kind::Tensor);
  if (over_tensor && xs.as_tensor().rank() == 0) type_error(a, 2, "a tensor with at least one axis or a list");
  if (!over_tensor && !xs.is_list()) type_error(a, 2, "a tensor or a list");
  std::vector<Value> elems = seq_elements(xs, a.site, a.name);
  Value carry = a[1];
  std::vector<Value> outs;
  outs.reserve(elems.size());
  for (const Value& x : elems) {
    std::array<Value, 2> args{carry, x};
    Value r = in.call(f, args, a.site);
    Value next, out;
    if (r.is_list() && r.as_list().items.size() == 2) {
      next = r.as_list().items[0];
      out = r.as_list().items[1];
    } else if (r.is(Kind::Tensor) && r.as_tensor().shape() == Shape{2} && is_scalar(carry)) {
      next = scalar_value(r.as_tensor(), 0);
      out = scalar_value(r.as_tensor(), 1);
    } else {
      std::string why = r.is(Kind::Tensor) && !is_scalar(carry) ? " (a tensor is read as [carry output] only when the carry is a scalar)" : "";
      throw SheafError(fmt::format("scan: f must return a list/tuple [new-carry output], got {}{}", describe_node(r), why), a.site);
    }
    std::array<Value, 2> pair{carry, next};
    tree_map(pair, [](std::span<const Value>) { return Value(); }, a, "the carry structure changed");
    carry = std::move(next);
    outs.push_back(std::move(out));
  }
  if (!over_tensor) return Value::tuple({carry, Value::list(std::move(outs), ListKind::Bracket)});
  if (outs.empty()) return Value::tuple({carry, Value::tensor(Tensor(DType::F32, {0}))});
  Value stacked = tree_map(outs, [&](std::span<const Value> leaves) { return Value::tensor(stack_leaves(leaves, a)); }, a,
                           "outputs differ in structure");
  return Value::tuple({carry, stacked});
}

const BuiltinDef kTree[] = {
    {"tree-map", "(tree-map f t1 [t2 ...])", "f leaf-wise over structurally identical pytrees, keeping the structure.", b_tree_map, 2, -1},
    {"tree-map-zeros", "(tree-map-zeros t)", "Same structure with zero leaves of equal shape and dtype.", b_tree_map_zeros, 1, 1},
    {"tree-reduce", "(tree-reduce f t [init])", "Left fold over the leaves in pytree order; without init the first leaf seeds.", b_tree_reduce, 2, 3},
    {"flatten", "(flatten t)", "Tuple (leaves treedef) in pytree order; the treedef shows leaves as *.", b_flatten, 1, 1},
    {"scan", "(scan f init xs)", "f: (carry, x) → [new-carry output]; returns (final-carry outputs), outputs stacked for a tensor xs.", b_scan, 3, 3},
};

}  // namespace

std::span<const BuiltinDef> tree_builtins() { return kTree; }

}  // namespace sheaf
