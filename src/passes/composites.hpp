// passes/composites.hpp — the composite ops (ir/composites.hpp: softmax, softmax_grad) in whole
// graphs.
//   recognise_softmax   a softmax a program writes out, e / bcast(Σ e) with e = exp(x − bcast(max x))
//                       over the last axis (the row values broadcast back from the reductions
//                       directly or through a reshape that keeps the axis as size 1), becomes the
//                       softmax op. The trace runs it on the forward nodes before the reverse sweep
//                       (trace::recognise_composites), so that such a softmax is differentiated as
//                       one (softmax_grad); the pipeline runs it on every graph (a program that is
//                       not differentiated). The written-out nodes stay; dead-code elimination drops
//                       those nothing else reads. The op's expansion computes the same ops, so
//                       results do not change.
//   lower_composites    every composite node replaced by its expansion (what the CPU's loops, and a
//                       GPU outside attention chains, run), reusing a node the graph already has
//                       where an expansion's node equals it (CSE across the composite's boundary);
//                       the sites say where each top-level composite went, for the GPU's attention
//                       matcher (backend/attention.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::passes {

// The operand x of a written-out softmax whose division is node `div` of g, or -1.
int32_t written_softmax(const ir::Graph& g, const ir::Node& div);
// Replaces each written-out softmax among g's nodes [first, end) by the softmax op, in place (same
// result value: no id changes).
void recognise_softmax_in_place(ir::Graph& g, size_t first);
// The pipeline's pass (passes/pipeline.cpp): the same, as a rewrite.
ir::Graph recognise_softmax(const ir::Graph& g);

// Where a composite went in a lowered graph: value ids of its operands and result, the node
// indices its expansion added (ascending; not those it reused), and for softmax its row
// reductions (node indices, which may be reused ones).
struct SoftmaxSite {
  int64_t axis = 0;
  int32_t x = -1, out = -1;
  int32_t row_max = -1, row_sum = -1;
  std::vector<int32_t> nodes;
};
struct SoftmaxGradSite {
  int64_t axis = 0;
  int32_t p = -1, g = -1, out = -1;
  std::vector<int32_t> nodes;
};
struct CompositeSites {
  std::vector<SoftmaxSite> softmax;
  std::vector<SoftmaxGradSite> softmax_grad;
};

struct Lowered {
  ir::Graph graph;
  CompositeSites sites;  // of graph's own nodes (not of its regions)
};
// `g` with every composite expanded; with `regions`, inside while/case regions too (recursively).
Lowered lower_composites(const ir::Graph& g, bool regions);

}  // namespace sheaf::passes
