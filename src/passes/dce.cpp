// passes/dce.cpp — dead-code elimination on the tensor IR.
// A node is live when one of its results is read by a live node or is a result of the graph;
// everything else is dropped. One backward sweep over use counts decides it: a node whose
// results have no uses left is dead and releases its operands. Parameters are always kept (they
// are the function's inputs, in ABI order), and a multi-result node (sort, top_k, while, case)
// stays whole when any one of its results is used. Surviving values are renumbered densely, in order.
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace sheaf::passes {

namespace {

// live[i]: node i stays.
std::vector<bool> live_nodes(const ir::Graph& g) {
  std::vector<int32_t> uses = use_counts(g);
  std::vector<bool> live(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& n = g.nodes[i];
    for (int32_t v = n.out; v < n.out + n.nout; ++v)
      if (uses[static_cast<size_t>(v)] > 0) live[i] = true;
    if (!live[i])
      for (int32_t v : n.in) --uses[static_cast<size_t>(v)];
  }
  return live;
}

ir::Graph without_dead(const ir::Graph& g, const std::vector<bool>& live) {
  return rewrite(g, [&](Rewriter&, const ir::Node& n) { return !live[static_cast<size_t>(g.def[static_cast<size_t>(n.out)])]; });
}

}  // namespace

ir::Graph eliminate_dead_code(const ir::Graph& g) { return without_dead(g, live_nodes(g)); }

std::optional<ir::Graph> dead_code_dropped(const ir::Graph& g) {
  const std::vector<bool> live = live_nodes(g);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!live[i] && g.nodes[i].op != ir::Op::Parameter) return without_dead(g, live);
  return std::nullopt;
}

}  // namespace sheaf::passes
