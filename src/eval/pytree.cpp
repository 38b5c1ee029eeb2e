// eval/pytree.cpp — pytree traversal (see pytree.hpp).
#include "eval/pytree.hpp"

#include "eval/tensor_args.hpp"

#include "base/error.hpp"
#include "tensor/shape.hpp"
#include "value/handle.hpp"
#include "value/printer.hpp"

namespace sheaf {

bool is_tree_node(const Value& v) { return v.is_list() || v.is(Kind::Dict); }

std::string describe_node(const Value& v) {
  if (v.is(Kind::Dict)) {
    std::vector<std::string> keys;
    for (const auto& [k, x] : v.as_dict().entries) keys.push_back(":" + k);
    return fmt::format("dict {{{}}}", fmt::join(keys, " "));
  }
  if (v.is_list()) {
    bool tuple = v.as_list().kind == ListKind::Tuple;
    return fmt::format("{} of {}", tuple ? "tuple" : "list", v.as_list().items.size());
  }
  if (v.is(Kind::Tensor)) return "tensor " + type_str(v.as_tensor());
  return std::string(kind_name(v.kind()));
}

void tree_leaves(const Value& tree, std::vector<Value>& out) {
  if (tree.is(Kind::Dict)) {
    for (const auto& [k, v] : tree.as_dict().entries) tree_leaves(v, out);
  } else if (tree.is_list()) {
    for (const Value& v : tree.as_list().items) tree_leaves(v, out);
  } else {
    out.push_back(tree);
  }
}

Value map_leaves(const Value& tree, const std::function<Value(const Value& leaf)>& fn) {
  if (tree.is(Kind::Dict)) {
    std::vector<std::pair<std::string, Value>> entries;
    entries.reserve(tree.as_dict().entries.size());
    for (const auto& [k, v] : tree.as_dict().entries) entries.emplace_back(k, map_leaves(v, fn));
    return make_dict(std::move(entries));
  }
  if (tree.is_list()) {
    std::vector<Value> items;
    items.reserve(tree.as_list().items.size());
    for (const Value& v : tree.as_list().items) items.push_back(map_leaves(v, fn));
    return Value::list(std::move(items), tree.as_list().kind);
  }
  return fn(tree);
}

namespace {

// Rebuilds a node of the same kind as `like` around new children.
Value rebuild_list(const Value& like, std::vector<Value> items) {
  ListKind k = like.as_list().kind;
  return Value::list(std::move(items), k == ListKind::Tuple ? ListKind::Tuple : ListKind::Bracket);
}

bool same_node(const Value& x, const Value& y) {
  if (x.is(Kind::Dict) != y.is(Kind::Dict) || x.is_list() != y.is_list()) return false;
  if (x.is(Kind::Dict)) {
    const auto& a = x.as_dict().entries;
    const auto& b = y.as_dict().entries;
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].first != b[i].first) return false;
    return true;
  }
  if (x.is_list()) return x.as_list().items.size() == y.as_list().items.size();
  return true;  // two leaves
}

struct Mapper {
  const LeafFn& fn;
  const CallArgs& a;
  std::string_view what;
  std::vector<std::string> path;

  [[noreturn]] void mismatch(const Value& x, const Value& y) const {
    std::string where = path.empty() ? "the root" : fmt::format("{}", fmt::join(path, " -> "));
    throw SheafError(fmt::format("{}: {} at {}: {} vs {}", a.name, what, where, describe_node(x), describe_node(y)), a.site);
  }

  Value map(std::span<const Value> trees) {
    const Value& t0 = trees[0];
    for (size_t i = 1; i < trees.size(); ++i)
      if (!same_node(t0, trees[i])) mismatch(t0, trees[i]);
    if (!is_tree_node(t0)) return fn(trees);
    std::vector<Value> kids(trees.size());
    auto child = [&](size_t idx, std::string step) {
      for (size_t i = 0; i < trees.size(); ++i)
        kids[i] = trees[i].is(Kind::Dict) ? trees[i].as_dict().entries[idx].second : trees[i].as_list().items[idx];
      path.push_back(std::move(step));
      Value r = map(kids);
      path.pop_back();
      return r;
    };
    if (t0.is(Kind::Dict)) {
      std::vector<std::pair<std::string, Value>> out;
      const auto& entries = t0.as_dict().entries;
      for (size_t j = 0; j < entries.size(); ++j) out.emplace_back(entries[j].first, child(j, ":" + entries[j].first));
      return make_dict(std::move(out));
    }
    std::vector<Value> out;
    for (size_t j = 0; j < t0.as_list().items.size(); ++j) out.push_back(child(j, fmt::format("[{}]", j)));
    return rebuild_list(t0, std::move(out));
  }
};

}  // namespace

Value tree_def(const Value& tree) {
  if (tree.is(Kind::Dict)) {
    std::vector<std::pair<std::string, Value>> out;
    for (const auto& [k, v] : tree.as_dict().entries) out.emplace_back(k, tree_def(v));
    return make_dict(std::move(out));
  }
  if (tree.is_list()) {
    std::vector<Value> out;
    for (const Value& v : tree.as_list().items) out.push_back(tree_def(v));
    return rebuild_list(tree, std::move(out));
  }
  return Value::symbol("*");
}

Value tree_map(std::span<const Value> trees, const LeafFn& fn, const CallArgs& a, std::string_view what) {
  Mapper m{fn, a, what, {}};
  std::vector<Value> read;  // SPEC §7.3: a handle passed where a pytree is needed is materialized
  for (const Value& t : trees) read.push_back(t.is(Kind::Handle) ? t.as<HandleObj>().materialize(a.site) : t);
  return m.map(read);
}

Tensor stack_leaves(std::span<const Value> leaves, const CallArgs& a) {
  if (auto o = as_operand(Value::list({leaves.begin(), leaves.end()}))) return o->t;
  for (const Value& v : leaves)
    if (!as_operand(v))
      throw SheafError(fmt::format("{}: outputs must be numbers or tensors to stack, got {}", a.name, describe_node(v)), a.site);
  for (const Value& v : leaves)
    if (as_operand(v)->t.shape() != as_operand(leaves[0])->t.shape())
      throw SheafError(fmt::format("{}: cannot stack outputs {} and {} (shapes differ)", a.name, describe_node(leaves[0]), describe_node(v)), a.site);
  throw SheafError(fmt::format("{}: cannot stack the outputs", a.name), a.site);
}

}  // namespace sheaf
