// eval/pytree.hpp — pytrees (SPEC §2.7), shared by the tree builtins, scan and (later)
// value-and-grad, vmap and collectives.
// A pytree is a dict, list or tuple of pytrees, or a leaf (anything else: tensors, numbers, …).
// Leaf order: depth first, dict keys sorted, list elements in order. Lists and tuples of the
// same length match each other; a result keeps the kinds of the first tree.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <span>
#include <vector>

#include "value/function.hpp"

namespace sheaf {

bool is_tree_node(const Value& v);  // dict, list or tuple
std::string describe_node(const Value& v);  // "dict {:a :b}", "list of 2", "tensor f32[2]", "int"

// True when some leaf of the pytree `v` satisfies `pred` (dicts, lists and tuples are walked).
template <typename Pred>
bool any_leaf(const Value& v, const Pred& pred) {
  if (v.is_list())
    return std::any_of(v.as_list().items.begin(), v.as_list().items.end(), [&](const Value& x) { return any_leaf(x, pred); });
  if (v.is(Kind::Dict))
    return std::any_of(v.as_dict().entries.begin(), v.as_dict().entries.end(), [&](const auto& e) { return any_leaf(e.second, pred); });
  return pred(v);
}

// Leaves in pytree order, appended to `out`.
void tree_leaves(const Value& tree, std::vector<Value>& out);

// The tree with each leaf replaced by fn(leaf), visited in pytree order; lists keep their kind.
Value map_leaves(const Value& tree, const std::function<Value(const Value& leaf)>& fn);

// The structure of a tree with every leaf replaced by the symbol `*`: `{:a *, :b [*, *]}`.
// This is the printable treedef returned by `flatten`.
Value tree_def(const Value& tree);

// fn applied leaf-wise across structurally identical trees; the result has the structure of
// trees[0]. A mismatch is "<name>: <what> at :b -> [1]: list of 2 vs list of 3".
using LeafFn = std::function<Value(std::span<const Value> leaves)>;
Value tree_map(std::span<const Value> trees, const LeafFn& fn, const CallArgs& a,
               std::string_view what = "pytree structure mismatch");

// Equal-shape leaves (numbers or tensors), one per step, stacked on a new axis 0 (SPEC §2.3
// dtypes: ints → i32, floats → f32). Used by scan and vmap to assemble their outputs.
Tensor stack_leaves(std::span<const Value> leaves, const CallArgs& a);

}  // namespace sheaf
