// passes/composites.hpp — the composite ops (ir/composites.hpp: softmax, softmax_grad, gelu,
// gelu_grad) in whole graphs.
//   recognise_composites  a softmax or a tanh GELU that a program writes out becomes its op.
//                       Softmax: e / bcast(Σ e) with e = exp(x − bcast(max x))
//                       over the last axis (the row values broadcast back from the reductions
//                       directly or through a reshape that keeps the axis as size 1), becomes the
//                       softmax op. The trace runs it on the forward nodes before the reverse sweep
//                       (trace::recognise_composites), so that such a softmax is differentiated as
//                       one (softmax_grad; a GELU as gelu_grad); the pipeline runs it on every graph (a program that is
//                       not differentiated). The written-out nodes stay; dead-code elimination drops
//                       those nothing else reads. The op's expansion computes the same ops, so
//                       results do not change. GELU: ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//                       in any order of its products and sums (written_gelu); the expansion
//                       multiplies in its own order (results within an ulp of the written form's).
//   lower_composites    every composite node replaced by its expansion (what the CPU's loops, and a
//                       GPU outside attention chains, run), reusing a node the graph already has
//                       where an expansion's node equals it (CSE across the composite's boundary);
//                       the sites say where each top-level composite went, for the GPU's attention
//                       matcher (backend/attention.hpp) and its products' GELU epilogues
//                       (backend/fusion.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::passes {

// The operand x of a written-out softmax whose division is node `div` of g, or -1.
int32_t written_softmax(const ir::Graph& g, const ir::Node& div);
// The operand x of a written-out GELU (tanh approximation) whose last multiply is node `mul` of g,
// or -1: ½·x·(1 + tanh(c·(x + a·x³))) with its products and sums in any order and association,
// the constants (tensor/gelu.hpp) as x's dtype holds them.
int32_t written_gelu(const ir::Graph& g, const ir::Node& mul);
// Replaces each written-out softmax and GELU among g's nodes [first, end) by its op, in place
// (same result value: no id changes).
void recognise_composites_in_place(ir::Graph& g, size_t first);
// The pipeline's pass (passes/pipeline.cpp): the same, as a rewrite; nullopt (nothing rebuilt)
// when there is nothing to recognise.
std::optional<ir::Graph> recognise_composites(const ir::Graph& g);

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
// gelu (g −1) and gelu_grad: x, the cotangent g, the result (GPU: cuBLASLt's GELU epilogues).
struct GeluSite {
  int32_t x = -1, g = -1, out = -1;
  std::vector<int32_t> nodes;
};
struct CompositeSites {
  std::vector<SoftmaxSite> softmax;
  std::vector<SoftmaxGradSite> softmax_grad;
  std::vector<GeluSite> gelu, gelu_grad;
};

struct Lowered {
  ir::Graph graph;
  CompositeSites sites;  // of graph's own nodes (not of its regions)
};
// `g` with every composite expanded; with `regions`, inside while/case regions too (recursively).
Lowered lower_composites(const ir::Graph& g, bool regions);

}  // namespace sheaf::passes
