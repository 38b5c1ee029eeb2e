// passes/pipeline.cpp — runs the passes in rounds until nothing changes (see pipeline.hpp).
#include "passes/pipeline.hpp"

#include <map>
#include <memory>

#include "passes/composites.hpp"
#include "passes/rewrite.hpp"

namespace sheaf::passes {

namespace {

// Optimises the region graphs of g's while/case nodes (recursively, through optimize) once,
// before the rounds. A region is replaced only when it changed, and a region shared by several
// nodes stays shared: region identity is what CSE compares (node_key), and it must not change
// from round to round or the pipeline would never see a fixed point.
void optimize_regions(ir::Graph& g) {
  std::map<const ir::Graph*, std::shared_ptr<const ir::Graph>> done;
  for (ir::Node& n : g.nodes)
    for (std::shared_ptr<const ir::Graph>& r : n.attrs.regions) {
      auto [it, fresh] = done.try_emplace(r.get(), r);
      if (fresh) {
        ir::Graph copy = *r;
        optimize(copy);
        if (!same_graph(*r, copy)) it->second = std::make_shared<const ir::Graph>(std::move(copy));
      }
      r = it->second;
    }
}

}  // namespace

std::span<const Pass> pipeline() {
  static constexpr Pass passes[] = {
      {"fold", constants_folded},
      {"simplify", simplified},
      {"composites", recognise_composites},
      {"cse", common_subexpressions_merged},
      {"dce", dead_code_dropped},
  };
  return passes;
}

int optimize(ir::Graph& g, const PassObserver& observe) {
  optimize_regions(g);
  int round = 0;
  while (round < kMaxRounds) {
    ++round;
    ir::Graph next;
    const ir::Graph* cur = &g;  // the graph the last pass left: g while none has rebuilt it
    for (const Pass& p : pipeline()) {
      if (std::optional<ir::Graph> r = p.run(*cur)) {
        next = std::move(*r);
        cur = &next;
      }
      if (observe) observe(p.name, round, *cur);
    }
    if (cur == &g) break;  // no pass rebuilt it
    const bool fixed = same_graph(g, next);
    g = std::move(next);
    if (fixed) break;
  }
  ir::verify(g);
  return round;
}

void optimize(ir::Graph& g) { optimize(g, nullptr); }

}  // namespace sheaf::passes
