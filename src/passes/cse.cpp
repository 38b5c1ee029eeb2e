// passes/cse.cpp — common-subexpression elimination on the tensor IR.
// Two nodes are equal when op, attributes, operands and result types are equal (ir::node_key in
// ir/node_key.hpp: constants by dtype, shape and bytes when small, by storage identity when large;
// float attributes by bits, so a pad with -0.0 is not one with +0.0). The later node is replaced
// by the earlier, all its results at once. Operands are compared after mapping, so chains of
// equal nodes collapse in one sweep; runs after constant folding so folded constants dedupe too.
// Every op is pure (random numbers are integer ops on explicit keys), so merging is exact.
// Parameters are never merged: equal types do not make two inputs equal.
#include "ir/node_key.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace sheaf::passes {

ir::Graph eliminate_common_subexpressions(const ir::Graph& g) {
  ir::NodeKeyMap first;  // node key → first result id in the new graph
  std::vector<int32_t> in;
  return rewrite(g, [&](Rewriter& rw, const ir::Node& n) {
    in.clear();
    for (int32_t v : n.in) in.push_back(rw.map(v));
    if (const int32_t* earlier = first.find(rw.src(), n, in))
      rw.map_results(n, *earlier);
    else
      first.insert_pending(rw.copy(n));
    return true;
  });
}

std::optional<ir::Graph> common_subexpressions_merged(const ir::Graph& g) {
  // Keyed with the graph's own ids: until a rewrite merges a node, it maps each id to one of its
  // own in the same order, so it merges nothing when no two keys here are equal.
  ir::NodeKeyMap seen;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Parameter) continue;
    if (seen.find(g, n, n.in)) return eliminate_common_subexpressions(g);
    seen.insert_pending(n.out);
  }
  return std::nullopt;
}

}  // namespace sheaf::passes
