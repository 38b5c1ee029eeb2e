// backend/cuda/pack_launches.hpp — small independent kernel launches of a rendering packed into
// one launch (pack_launches.cpp says which and how): GPT-2 small's training step launches the
// bf16 casts of its biases, the optimizer updates of its biases and gains and its column sums'
// finishing kernels in a few launches instead of one each; written with a weight and a bias per
// head, its optimizer updates, 432 of them for the per-head weights, in 17 launches.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/render.hpp"

namespace sheaf::cuda {

struct PackOptions {
  int64_t max_grid = 528;    // blocks of a packable launch, at most (0: nothing is packed)
  int64_t max_block = 256;   // threads per block of a packable launch, at most
  size_t max_params = 512;   // parameters of a packed kernel (4 KiB of pointers), at most
};

// Rewrites `k.launches` (and appends the packed kernels to `k.source`): each group of packable
// launches becomes one Launch at its first member's place, kernel "s{step}p" (or an identical
// earlier one), grid the members' grids summed, block their largest, slots theirs in order,
// `packs` the number of members.
void pack_launches(Kernels& k, const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, const PackOptions& o = {});

}  // namespace sheaf::cuda
