// passes/rewrite.hpp — the machinery every pass shares.
// A pass never edits a graph in place: a Rewriter rebuilds it node by node into a fresh Graph,
// keeping a map from old value ids to new ones. The new graph therefore keeps the invariants
// of ir::verify by construction: parameters first and in input order (the Rewriter adds them
// before anything else), value ids dense and numbered in node order, every operand defined
// before its use. A value may be mapped to any new value of the same type (a rewrite), and a
// node may be left unmapped (dropped); reading a dropped value is an internal error.
//
// Helpers look at the graph being built: constants, splats (constants whose elements are all
// bit-identical, seen through broadcast/reshape/transpose/slice/reverse chains), use counts,
// and structural graph equality (over the node keys of ir/node_key.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::passes {

class Rewriter;
// A pass's step over one node (see rewrite below).
using Visit = std::function<bool(Rewriter&, const ir::Node&)>;

class Rewriter {
 public:
  // Eagerly: every node is copied as it is visited. FromFirstChange: while the pass has changed
  // nothing, nothing is copied and out() is src itself (every value so far has its own id);
  // the first change (an added node, a result mapped elsewhere, a dropped node) copies the nodes
  // before it at once, and a pass that changes nothing builds nothing (finish_if_changed). A
  // graph whose parameters are not its first values is rebuilt eagerly, which moves them first.
  enum class Build { Eagerly, FromFirstChange };
  explicit Rewriter(const ir::Graph& src, Build build = Build::Eagerly);  // the new graph starts with src's parameters

  const ir::Graph& src() const { return src_; }
  // What has been built so far: look values up by id only (while nothing has changed, src
  // itself, which also holds the nodes not yet visited).
  const ir::Graph& out() const { return unchanged_ ? src_ : out_; }

  // New id of an old value; throws when the pass dropped it.
  int32_t map(int32_t old) const;
  std::vector<int32_t> map(const std::vector<int32_t>& olds) const;

  // The results of `n` become new values first .. first + n.nout - 1 (types must agree).
  void map_results(const ir::Node& n, int32_t first);

  // `n` with its operands mapped, same attributes, types and location; maps its results.
  int32_t copy(const ir::Node& n);
  // New nodes (operands are new ids). `add` takes the result types, `emit` infers them.
  int32_t add(ir::Op op, std::vector<int32_t> in, ir::Attrs attrs, std::vector<ir::Type> types, SrcLoc loc);
  int32_t emit(ir::Op op, std::vector<int32_t> in, ir::Attrs attrs, SrcLoc loc);
  int32_t constant(Tensor value, SrcLoc loc);
  // A value of type `t` whose every element is the rank-0 `scalar`: the scalar constant itself
  // for rank 0, else broadcast_in_dim(constant scalar) — splats are never materialised.
  int32_t splat(const ir::Type& t, const Tensor& scalar, SrcLoc loc);

  // The new graph, its results mapped.
  ir::Graph finish();
  // The same, or nullopt when the pass changed nothing (Build::FromFirstChange).
  std::optional<ir::Graph> finish_if_changed();

 private:
  friend ir::Graph rewrite(const ir::Graph&, const Visit&);
  friend std::optional<ir::Graph> rewrite_if_changed(const ir::Graph&, const Visit&);
  void visit_all(const Visit& visit);
  void diverge();  // the first change: copies src's nodes before the one being visited

  const ir::Graph& src_;
  ir::Graph out_;
  std::vector<int32_t> map_;  // old value id → new id, -1 while unmapped or dropped
  bool unchanged_ = false;    // Build::FromFirstChange, before the first change
  size_t at_ = 0;             // index in src of the node being visited
};

// Runs `visit` on every non-parameter node of `g` in order. When it returns false the node is
// copied unchanged; when true, `visit` has mapped the node's results itself (or dropped it).
ir::Graph rewrite(const ir::Graph& g, const Visit& visit);
// rewrite() with Build::FromFirstChange: nullopt, having copied nothing, when no visit changed
// anything (the pipeline's form of the passes that rewrite node by node).
std::optional<ir::Graph> rewrite_if_changed(const ir::Graph& g, const Visit& visit);
// rewrite(), also inside the regions of while/case nodes, recursively (a region shared by several
// nodes stays shared; a node whose regions it rebuilt keeps its op, operands and types). For the
// lowerings a backend applies to a whole program (backend/cpu/lowering.hpp: widen_halves; backend/canonical_dots.hpp).
ir::Graph rewrite_with_regions(const ir::Graph& g, const Visit& visit);

// The value of a constant node, or nullptr.
const Tensor* constant_value(const ir::Graph& g, int32_t v);
inline bool is_constant(const ir::Graph& g, int32_t v) { return constant_value(g, v) != nullptr; }

// Concrete elements of a value known at compile time: a constant, an iota, or a canonical splat
// (broadcast_in_dim of a rank-0 constant). Values that would have to be materialised (iota,
// splat) are only returned up to `max_elements`; anything else gives nullopt.
std::optional<Tensor> constant_tensor(const ir::Graph& g, int32_t v, int64_t max_elements);
// Whether constant_tensor(g, v, max_elements) has a value, without materialising it.
bool has_constant_tensor(const ir::Graph& g, int32_t v, int64_t max_elements);

// Ops that only select elements of their first operand, without looking at their values:
// broadcast_in_dim, reshape, transpose, slice, reverse, dynamic_slice. Of a splat they give
// the same splat.
bool moves_elements(ir::Op op);

// The rank-0 element of a splat value (bit-exact), or nullopt. A splat is a non-empty constant
// whose elements are all bit-identical, or a non-empty moves_elements op of a splat.
std::optional<Tensor> splat_scalar(const ir::Graph& g, int32_t v);
// True when `v` is a splat of exactly `x`: equal value and equal sign (so -0.0 ≠ +0.0).
bool is_splat_of(const ir::Graph& g, int32_t v, double x);

// Number of reads of every value: operands of nodes plus appearances among the results.
std::vector<int32_t> use_counts(const ir::Graph& g);

// Who reads each value of a graph: `uses` as use_counts, `nodes` the node indices reading it (a
// node once per operand slot; results are not nodes).
struct Readers {
  explicit Readers(const ir::Graph& g);
  std::vector<int32_t> uses;
  std::vector<std::vector<int32_t>> nodes;
  // The node reading v when that is v's only use (v not a result), else -1.
  int32_t sole(int32_t v) const {
    return uses[static_cast<size_t>(v)] == 1 && nodes[static_cast<size_t>(v)].size() == 1 ? nodes[static_cast<size_t>(v)][0] : -1;
  }
};

// Structural equality of two graphs (node keys, parameters and results), for fixed points.
bool same_graph(const ir::Graph& a, const ir::Graph& b);

}  // namespace sheaf::passes
