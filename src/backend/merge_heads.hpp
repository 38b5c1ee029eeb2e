// backend/merge_heads.hpp — attention heads written one by one (a module per head) as one
// computation over all heads, so that a GPU runs each layer's attention as one fused call over
// batch × heads instead of one per head (12 single-head cuDNN calls fill under half of an H100's
// SMs); merge_heads.cpp. Keeps the contract of the optimisation passes (passes/passes.hpp): a new
// graph with the same parameters and results, equal under the reference executor (bit for bit:
// every element is computed by the same ops in the same order — but for products that merge_dots
// had merged in runs over the heads' gradients, which it merges again once the heads are merged:
// their sums add in another order), and no dead nodes. Not part of optimize: the CUDA backend runs
// it after merge_dots, before the composites are expanded.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::fusion {

// g itself when no heads merge (taken by value: the caller's temporary is moved, not copied).
ir::Graph merge_heads(ir::Graph g);

}  // namespace sheaf::fusion
