// batching/batch_rules.hpp — one batching rule per IR op (SPEC §5.10): how a node recorded for
// one example is re-emitted for a batch of n examples. A batched value carries the batch on axis
// 0: a value of type T becomes [n, ...T]. A rule receives the node and its operands — batched
// ones [n, ...], the others the per-example values (symbolic in the current trace) — and records,
// with the tensor primitives, results [n, ...result type] whose row i is the op applied to row i
// of the batched operands and to the unbatched ones as they are.
// Vectorised: elementwise ops (unbatched operands broadcast), the structural ops (axes shifted
// by one), reduce, arg_reduce, dot_general (the batch becomes a batch or a free dimension),
// gather, scatter, dynamic_slice and dynamic_update_slice (any mix of batched operands, indices
// and starts), sort, top_k, a while with a trip count (one loop over the batched state: its
// regions batched by batch_graph). The rest — a data-dependent while, case, and indexing whose
// flat rows would not fit i32 — is unrolled: the op is recorded once per example and the results are stacked — correct
// for every op, just not vectorised; vmap_stats().unrolled counts those nodes.
#pragma once
#include <span>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::batching {

// Batched results of `n` (a copy of a node of the current trace: rules append to the graph),
// one per result. `x[k]` is operand k, batched ([size, ...]) when `batched[k]`; at least one is.
std::vector<Tensor> batch_node(const ir::Node& n, const std::vector<Tensor>& x, const std::vector<bool>& batched, int64_t size);

// The results of graph g for a batch: args are batched ([n, ...param type]); each result is
// batched ([n, ...]) — g's nodes are inlined into the current trace on example 0 and re-emitted by
// their rules, as vmap does with a function (batching/vmap.cpp).
std::vector<Tensor> batch_graph(const ir::Graph& g, std::span<const Tensor> args, int64_t n);

// Index i along `axis` of t, that axis removed (slice + reshape); example i of a batched value
// [n, ...s] → [...s] is example(b, i).
Tensor example(const Tensor& t, int64_t i, int64_t axis = 0);
// t with axis `from` moved to position 0, the other axes in order (t itself when from is 0).
Tensor to_front(const Tensor& t, int64_t from);

}  // namespace sheaf::batching
