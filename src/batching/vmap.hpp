// batching/vmap.hpp — vmap as a transform of traced functions (SPEC §5.10, §10).
// f is traced once, on per-example placeholders, into the active trace; then every node that
// depends on a mapped input is re-emitted by its batching rule (batch_rules.hpp) on batched
// operands [n, ...], giving each output leaf for the whole batch. The per-example nodes are left
// to dead-code elimination. Because it works on the nodes of the active trace, it composes:
// nested vmap, vmap of (grad f) (the backward nodes are batched too: per-example gradients),
// vmap inside compiled functions. The per-index loop of builtins/transform.cpp remains for
// functions that cannot be traced (effects, data-dependent shapes).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "ir/ir.hpp"
#include "value/function.hpp"

namespace sheaf {
class Interp;
}

namespace sheaf::batching {

// What ran, for tests and profiling (counts since the start of the program, this thread).
struct VmapStats {
  uint64_t traced = 0;    // transforms recorded into an enclosing trace (compiled code, nesting)
  uint64_t eager = 0;     // transforms traced into a graph of their own and run once (top level)
  uint64_t loops = 0;     // calls that fell back to calling f once per index
  uint64_t unrolled = 0;  // nodes batched by unrolling over the examples (no vectorised rule)
  std::map<ir::Op, uint64_t> by_op;  // nodes batched (either way), per op
};
VmapStats& vmap_stats();

// How the arguments are mapped: axes[j] is the axis of every leaf of argument j (nullopt: not
// mapped, passed as it is to every example); n ≥ 1 is the common size of the mapped axes. The
// caller has checked them: every leaf of a mapped argument is a tensor (or nested list of
// numbers) of rank ≥ 1 whose (normalised) axis has size n.
struct MapSpec {
  std::vector<std::optional<int64_t>> axes;
  int64_t n = 0;
};

// (f args...) mapped over `spec`, recorded into the active trace (trace::tracing() is true).
// Output leaves are stacked on a new axis 0: batched values as computed, others (leaves that do
// not depend on the mapped inputs, host numbers) repeated n times. Throws TraceAbort when f
// cannot be traced; `a` names the builtin in errors ("vmap:").
Value vmap_traced(Interp& in, const Value& f, std::span<const Value> args, const MapSpec& spec, const CallArgs& a);

// The same outside a trace: traced into a graph of its own (host scalars traced, or static when
// f needs their values), optimised and run once on the reference executor. Throws TraceAbort
// when f cannot be traced.
Value vmap_eager(Interp& in, const Value& f, std::span<const Value> args, const MapSpec& spec, const CallArgs& a);

}  // namespace sheaf::batching
