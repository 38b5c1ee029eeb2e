// passes/inline_calls.hpp — `call` nodes exist only while a function is traced: they carry a
// differentiation rule of their own (checkpoint, custom-vjp) until the reverse sweep has used it.
// When a trace ends, every call is replaced by the nodes of its function region, in the graph and
// in the regions of its while/case nodes; the optimization_barrier a checkpoint's VJP placed
// stays. A custom-vjp call whose residuals nothing reads (it was not differentiated) becomes f
// (regions[2]) instead of fwd. Graphs without calls are returned as they are.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::passes {

ir::Graph inline_calls(const ir::Graph& g);

}  // namespace sheaf::passes
