// passes/pipeline.cpp — runs the passes in rounds until nothing changes (see pipeline.hpp).
#include "passes/pipeline.hpp"

#include "passes/rewrite.hpp"

namespace sheaf::passes {

std::span<const Pass> pipeline() {
  static constexpr Pass passes[] = {
      {"fold", fold_constants},
      {"simplify", simplify},
      {"cse", eliminate_common_subexpressions},
      {"dce", eliminate_dead_code},
  };
  return passes;
}

int optimize(ir::Graph& g, const PassObserver& observe) {
  int round = 0;
  while (round < kMaxRounds) {
    ++round;
    ir::Graph next;
    const ir::Graph* cur = &g;
    for (const Pass& p : pipeline()) {
      next = p.run(*cur);
      cur = &next;
      if (observe) observe(p.name, round, next);
    }
    bool fixed = same_graph(g, next);
    g = std::move(next);
    if (fixed) break;
  }
  ir::verify(g);
  return round;
}

void optimize(ir::Graph& g) { optimize(g, nullptr); }

}  // namespace sheaf::passes
