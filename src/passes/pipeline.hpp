// passes/pipeline.hpp — the optimisation pipeline: the passes in order, run to a fixed point.
// One round is fold_constants → simplify → recognise_composites (composites.hpp) →
// eliminate_common_subexpressions → eliminate_dead_code; rounds repeat until a round changes nothing (same_graph) or kMaxRounds
// have run, and the result is checked with ir::verify. The regions of while/case are optimised
// first, each as a graph of its own (recursively; not shown to the observer); the passes treat
// the control-flow nodes themselves as opaque. An observer sees the graph after every
// pass (for dumps such as the IR after each pass, SPEC tests/ir).
#pragma once
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "passes/passes.hpp"

namespace sheaf::passes {

// A pass as a round runs it: the new graph, or nullopt when it changed nothing (and rebuilt
// nothing: written-out composites, identical nodes and dead code are looked for first; fold and
// simplify copy nodes only from their first change on, Rewriter::Build::FromFirstChange).
struct Pass {
  std::string_view name;  // "fold", "simplify", "composites", "cse", "dce"
  std::optional<ir::Graph> (*run)(const ir::Graph&);
};

// The passes of one round, in order.
std::span<const Pass> pipeline();

inline constexpr int kMaxRounds = 8;

// Called after each pass with its name, the round (from 1) and the graph it produced.
using PassObserver = std::function<void(std::string_view pass, int round, const ir::Graph& g)>;

// optimize(g) with an observer; returns the number of rounds run.
int optimize(ir::Graph& g, const PassObserver& observe);

}  // namespace sheaf::passes
