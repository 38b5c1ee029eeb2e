// backend/cpu/parallel.hpp — the threads that run a generated loop nest's outermost range in parts.
// A loop function whose outermost loop walks kept (not reduced) points writes disjoint elements
// for different indices of that loop, so its range splits into contiguous parts run at once:
// part 0 on the calling thread, the others on persistent worker threads (started on first use;
// they spin about 50 µs for the next job, then sleep on a futex). Every point is computed exactly
// as in one pass (reductions over inner dims stay inside a part), so results do not depend on the
// thread count. The count follows the BLAS's (tensor/blas.hpp: blas_threads, adapted to the
// load like the products'), so loops and products share the cores the same way.
#pragma once
#include <cstdint>

namespace sheaf::cpu {

using RangeFn = void (*)(void* const* args, int64_t lo, int64_t hi);

// fn(args, lo, hi) over [0, n) in up to `threads` contiguous parts; returns when every part is
// done. threads ≤ 1 or n < 2: one call on this thread. Not re-entrant (one job at a time).
void parallel_for(RangeFn fn, void* const* args, int64_t n, int threads);

}  // namespace sheaf::cpu
