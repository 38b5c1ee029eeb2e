// backend/merge_heads.cpp — attention heads written one by one as one computation over a head
// axis (merge_heads.hpp).
//   Heads: softmax nodes of one type and axis none of which reads another's result (the heads of
//     one layer; a later layer's read all of them), in graph order.
//   Regions: each head's softmax grows into the nodes that correspond across the heads — the
//     producers of one operand (one distinct node per head, same op, attributes and types), or
//     the readers of a class's result that read, operand by operand, the same class, one shared
//     value, or one value per head; no member of a class reads another (the adds of a sum over the
//     heads would), and each head's node reads its own head's (else the region is dropped). Equal
//     constants (a mask each head folded on its own) count as one shared value. A class is one
//     node per head; the chain's products, scale,
//     mask, probabilities and, in a training step, their gradients become classes, and the
//     per-head projections (slices of the product merge_dots made) and the output's gradient are
//     where growing stops. Ops: elementwise ones (composites too), reduce, broadcast_in_dim,
//     reshape, transpose, slice, and dot_general reading no shared operand.
//   Rewrite: each class becomes one node over [H, ...] (its dims shifted by one, a product's head
//     axis its first batch dim); a shared operand is broadcast along the head axis (a view), the
//     per-head operands are stacked — as a view when they are slices of one value at a regular
//     stride along one axis (q, k and v of every head in the projection's columns, the output's
//     gradient in d(concat)), else by a concatenation. A head's result read outside the region is
//     its slice of the class's node; a concatenation of every head's output along one axis, in
//     head order, is a transpose and a reshape of it instead (the step writes that layout), and a
//     concatenation of several classes' results head by head (merge_dots' join of the heads'
//     gradients dq0 dk0 dv0 dq1 ..) is columns of one join of those classes, padded and summed
//     (the gradient's form in a batch-written model, which the AttentionGrad step writes in place);
//     a run of that join may start and end inside a head (merge_dots cuts long joins by size).
//   Re-merge: merge_dots runs again on the result, so that the products it had merged in runs over
//     the heads' gradients (a run of 36 does not pay for concatenating them; now they are one join)
//     become one each — the input and weight gradients of the projection, as in a batch-written
//     model —, then common subexpressions are merged (the weights' concatenations of the runs).
// Classes are ordered with the nodes around them (unit_order); heads whose classes would read
// each other through the rest of the graph (a cycle) are left as they are. Top level only.
#include "backend/merge_heads.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/merge_dots.hpp"
#include "ir/node_key.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace sheaf::fusion {

namespace {

using ir::Graph;
using ir::Node;
using ir::Op;
using passes::Readers;

constexpr size_t kMaxHeads = 4096;  // softmax nodes considered (ancestor bitsets: one bit each)

bool growable(const Node& n) {
  if (n.nout != 1 || !n.attrs.regions.empty()) return false;
  switch (n.op) {
    case Op::Unary: case Op::Binary: case Op::Convert: case Op::Select: case Op::Softmax: case Op::SoftmaxGrad:
    case Op::Gelu: case Op::GeluGrad: case Op::Reduce: case Op::BroadcastInDim: case Op::Reshape: case Op::Transpose:
    case Op::Slice: case Op::DotGeneral:
      return true;
    default:
      return false;
  }
}

// Op, attributes, result and operand types: what the nodes of one class share.
std::string shape_key(const Graph& g, const Node& n) {
  const std::vector<int32_t> none(n.in.size(), 0);
  std::string key = ir::node_key(g, n, none);
  for (int32_t v : n.in) key += ir::type_str(g.type(v)) + ";";
  return key;
}

// Softmax nodes in groups of ≥ 2 of one shape_key, none reading another's result.
std::vector<std::vector<int32_t>> sibling_heads(const Graph& g) {
  std::vector<int32_t> seeds;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == Op::Softmax) seeds.push_back(static_cast<int32_t>(i));
  if (seeds.size() < 2 || seeds.size() > kMaxHeads) return {};
  const size_t words = (seeds.size() + 63) / 64;
  std::vector<uint64_t> anc(g.nodes.size() * words, 0);  // per node: the seeds it reads, itself included
  for (size_t i = 0, s = 0; i < g.nodes.size(); ++i) {
    uint64_t* a = &anc[i * words];
    for (int32_t v : g.nodes[i].in) {
      const uint64_t* b = &anc[static_cast<size_t>(g.def[static_cast<size_t>(v)]) * words];
      for (size_t w = 0; w < words; ++w) a[w] |= b[w];
    }
    if (s < seeds.size() && seeds[s] == static_cast<int32_t>(i)) a[s / 64] |= uint64_t{1} << (s % 64), ++s;
  }
  std::map<std::string, std::vector<size_t>> by_key;  // seed indices
  for (size_t s = 0; s < seeds.size(); ++s) by_key[shape_key(g, g.nodes[static_cast<size_t>(seeds[s])])].push_back(s);
  std::vector<std::vector<int32_t>> groups;
  for (auto& [key, list] : by_key) {
    std::vector<bool> taken(list.size(), false);
    for (size_t i = 0; i < list.size(); ++i) {
      if (taken[i]) continue;
      std::vector<size_t> group{list[i]};
      for (size_t j = i + 1; j < list.size(); ++j) {
        if (taken[j]) continue;
        const uint64_t* a = &anc[static_cast<size_t>(seeds[list[j]]) * words];
        if (std::none_of(group.begin(), group.end(), [&](size_t m) { return (a[m / 64] >> (m % 64)) & 1; }))
          group.push_back(list[j]), taken[j] = true;
      }
      if (group.size() < 2) continue;
      std::vector<int32_t> nodes;
      for (size_t m : group) nodes.push_back(seeds[m]);
      groups.push_back(std::move(nodes));
    }
  }
  return groups;
}

// The classes of one group of heads: classes[c][h] is head h's node of class c.
struct Region {
  std::vector<std::vector<int32_t>> classes;
};

class Grower {
 public:
  Grower(const Graph& g, const Readers& rd, std::vector<int32_t>& class_of, std::vector<int32_t>& head_of)
      : g_(g), rd_(rd), class_of_(class_of), head_of_(head_of) {}

  // The region grown from `seeds` (one softmax per head); its classes are numbered from `first`.
  Region grow(const std::vector<int32_t>& seeds, int32_t first) {
    first_ = first;
    region_ = {};
    add(seeds);
    for (size_t c = 0; c < region_.classes.size(); ++c) {
      const std::vector<int32_t> nodes = region_.classes[c];  // a copy: add() grows the classes
      up(nodes);
      down(nodes);
    }
    if (!consistent()) {
      for (const std::vector<int32_t>& nodes : region_.classes)
        for (int32_t i : nodes) class_of_[static_cast<size_t>(i)] = -1;
      region_.classes.clear();
    }
    return std::move(region_);
  }

 private:
  const Graph& g_;
  const Readers& rd_;
  std::vector<int32_t>& class_of_;
  std::vector<int32_t>& head_of_;
  int32_t first_ = 0;
  Region region_;
  std::vector<int32_t> seen_ = std::vector<int32_t>(g_.nodes.size(), 0);  // apart(): stamp (−stamp: a member)
  int32_t stamp_ = 0;

  const Node& node(int32_t i) const { return g_.nodes[static_cast<size_t>(i)]; }
  int32_t cls(int32_t v) const { return class_of_[static_cast<size_t>(g_.def[static_cast<size_t>(v)])]; }

  void add(std::vector<int32_t> nodes) {
    const auto c = first_ + static_cast<int32_t>(region_.classes.size());
    for (size_t h = 0; h < nodes.size(); ++h) class_of_[static_cast<size_t>(nodes[h])] = c, head_of_[static_cast<size_t>(nodes[h])] = static_cast<int32_t>(h);
    region_.classes.push_back(std::move(nodes));
  }

  // Whether every class reads, operand by operand, head h's node of one class of this region from
  // its head h, or no class at all (a head reading another head's values, or another region's,
  // would be read from the wrong one).
  bool consistent() const {
    for (const std::vector<int32_t>& nodes : region_.classes)
      for (size_t k = 0; k < node(nodes[0]).in.size(); ++k) {
        const int32_t c = cls(node(nodes[0]).in[k]);
        for (size_t h = 0; h < nodes.size(); ++h) {
          const int32_t p = g_.def[static_cast<size_t>(node(nodes[h]).in[k])];
          if (class_of_[static_cast<size_t>(p)] != c || (c >= 0 && (c < first_ || region_.classes[static_cast<size_t>(c - first_)][h] != p))) return false;
        }
      }
    return true;
  }

  // Whether `nodes` (one per head, distinct, none classed) may be a class.
  bool alike(const std::vector<int32_t>& nodes) {
    const Node& n0 = node(nodes[0]);
    if (!growable(n0)) return false;
    const std::string key = shape_key(g_, n0);
    for (size_t h = 0; h < nodes.size(); ++h) {
      const Node& n = node(nodes[h]);
      if (class_of_[static_cast<size_t>(nodes[h])] >= 0 || (h > 0 && shape_key(g_, n) != key)) return false;
      for (size_t k = 0; k < h; ++k)
        if (nodes[k] == nodes[h]) return false;
    }
    if (n0.op == Op::DotGeneral)  // a product over a shared operand stays one per head
      for (size_t k = 0; k < n0.in.size(); ++k)
        if (std::all_of(nodes.begin(), nodes.end(), [&](int32_t i) { return node(i).in[k] == n0.in[k]; })) return false;
    return apart(nodes);
  }

  // Whether none of `nodes` reads another's result (the adds of a sum over the heads do).
  bool apart(const std::vector<int32_t>& nodes) {
    const int32_t first = *std::min_element(nodes.begin(), nodes.end());
    ++stamp_;
    for (int32_t i : nodes) seen_[static_cast<size_t>(i)] = -stamp_;  // a member
    std::vector<int32_t> todo;
    for (int32_t m : nodes) {
      todo.assign(1, m);
      while (!todo.empty()) {
        const int32_t i = todo.back();
        todo.pop_back();
        for (int32_t v : node(i).in) {
          const int32_t p = g_.def[static_cast<size_t>(v)];
          if (p < first) continue;  // nothing before the first member reads a member
          int32_t& s = seen_[static_cast<size_t>(p)];
          if (s == -stamp_) return false;
          if (s != stamp_) s = stamp_, todo.push_back(p);
        }
      }
    }
    return true;
  }
  // The producers of each operand that differs across the heads.
  void up(const std::vector<int32_t>& c) {
    for (size_t k = 0; k < node(c[0]).in.size(); ++k) {
      std::vector<int32_t> producers;
      for (int32_t i : c) producers.push_back(g_.def[static_cast<size_t>(node(i).in[k])]);
      if (alike(producers)) add(std::move(producers));
    }
  }

  // The readers of the class's result that correspond across the heads.
  void down(const std::vector<int32_t>& c) {
    const int32_t v0 = node(c[0]).out;
    for (int32_t r0 : rd_.nodes[static_cast<size_t>(v0)]) {
      if (class_of_[static_cast<size_t>(r0)] >= 0) continue;
      std::vector<int32_t> readers{r0};
      for (size_t h = 1; h < c.size(); ++h) {
        const int32_t r = partner(node(r0), node(c[h]).out, static_cast<int32_t>(h));
        if (r < 0) break;
        readers.push_back(r);
      }
      if (readers.size() == c.size() && alike(readers)) add(std::move(readers));
    }
  }

  // Head h's reader of v (its result of the class r0 reads head 0's of) that reads what r0 reads,
  // operand by operand: the same class (head h's node), the same value, or any unclassed value.
  int32_t partner(const Node& r0, int32_t v, int32_t h) const {
    for (int32_t r : rd_.nodes[static_cast<size_t>(v)]) {
      const Node& n = node(r);
      if (n.op != r0.op || n.in.size() != r0.in.size() || class_of_[static_cast<size_t>(r)] >= 0) continue;
      bool same = true;
      for (size_t k = 0; k < n.in.size() && same; ++k) {
        const int32_t c0 = cls(r0.in[k]);
        if (c0 >= 0) same = cls(n.in[k]) == c0 && head_of_[static_cast<size_t>(g_.def[static_cast<size_t>(n.in[k])])] == h;
        else same = cls(n.in[k]) < 0;
      }
      if (same) return r;
    }
    return -1;
  }
};

Shape with_heads(int64_t heads, const Shape& s) {
  Shape r{heads};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

std::vector<int64_t> shifted_dims(std::vector<int64_t> dims) {
  for (int64_t& d : dims) ++d;
  return dims;
}

std::vector<int64_t> with_first(int64_t x, std::vector<int64_t> v) {
  v.insert(v.begin(), x);
  return v;
}

class HeadsEmitter {
 public:
  HeadsEmitter(const Graph& g, const Readers& rd, const std::vector<Region>& regions, const std::vector<int32_t>& class_of)
      : g_(g), rd_(rd), r_(g), class_of_(class_of) {
    for (const Region& region : regions)
      for (const std::vector<int32_t>& c : region.classes) classes_.push_back(&c);
    batched_.assign(classes_.size(), -1);
  }

  void node(const Node& n) {
    if (n.op == Op::Concatenate && joined(n)) return;
    r_.copy(n);
  }

  // Class c as one node over the head axis; each head's result read outside the region, its slice.
  void cls(size_t c) {
    const std::vector<int32_t>& nodes = *classes_[c];
    const Node& n0 = g_.nodes[static_cast<size_t>(nodes[0])];
    const auto heads = static_cast<int64_t>(nodes.size());
    const ir::Type& t0 = g_.type(n0.out);
    const ir::Type type{t0.dtype, with_heads(heads, t0.shape)};
    std::vector<int32_t> in;
    for (size_t k = 0; k < n0.in.size(); ++k) in.push_back(operand(nodes, k, t0.shape.size()));
    ir::Attrs a = n0.attrs;
    switch (n0.op) {
      case Op::Softmax: case Op::SoftmaxGrad: ++a.axis; break;
      case Op::Reduce: a.dims = shifted_dims(a.dims); break;
      case Op::BroadcastInDim: case Op::Transpose: a.dims = with_first(0, shifted_dims(a.dims)); break;
      case Op::Slice:
        a.starts = with_first(0, a.starts), a.limits = with_first(heads, a.limits), a.strides = with_first(1, a.strides);
        break;
      case Op::DotGeneral:
        a.dot.lhs_batch = with_first(0, shifted_dims(a.dot.lhs_batch)), a.dot.rhs_batch = with_first(0, shifted_dims(a.dot.rhs_batch));
        a.dot.lhs_contract = shifted_dims(a.dot.lhs_contract), a.dot.rhs_contract = shifted_dims(a.dot.rhs_contract);
        break;
      default: break;
    }
    const int32_t b = batched_[c] = r_.add(n0.op, std::move(in), std::move(a), {type}, n0.loc);
    for (size_t h = 0; h < nodes.size(); ++h) {
      const Node& n = g_.nodes[static_cast<size_t>(nodes[h])];
      if (read_outside(n.out)) r_.map_results(n, unstack(b, static_cast<int64_t>(h), t0.shape, n.loc));
    }
  }

  Graph finish() { return r_.finish(); }

 private:
  const Graph& g_;
  const Readers& rd_;
  passes::Rewriter r_;
  const std::vector<int32_t>& class_of_;
  std::vector<const std::vector<int32_t>*> classes_;
  std::vector<int32_t> batched_;                       // class → its node's value in the new graph
  std::map<std::vector<int32_t>, int32_t> stacks_;     // per-head values → their stack
  std::map<std::pair<std::vector<int32_t>, int64_t>, int32_t> joins_;  // (classes, axis) → their join (joined())

  int32_t class_of_value(int32_t v) const { return class_of_[static_cast<size_t>(g_.def[static_cast<size_t>(v)])]; }

  // u and v are one value, or constants of equal bytes (a mask each head folded on its own).
  bool same_value(int32_t u, int32_t v) const {
    if (u == v) return true;
    const Tensor *a = passes::constant_value(g_, u), *b = passes::constant_value(g_, v);
    return a && b && a->dtype() == b->dtype() && a->shape() == b->shape() && std::equal(a->bytes(), a->bytes() + a->nbytes(), b->bytes());
  }

  // Whether v is a result (its uses count its places among the results too) or a node outside the
  // classes reads it.
  bool read_outside(int32_t v) const {
    if (rd_.uses[static_cast<size_t>(v)] > static_cast<int32_t>(rd_.nodes[static_cast<size_t>(v)].size())) return true;
    return std::any_of(rd_.nodes[static_cast<size_t>(v)].begin(), rd_.nodes[static_cast<size_t>(v)].end(),
                       [&](int32_t r) { return class_of_[static_cast<size_t>(r)] < 0; });
  }

  // Operand k of class `nodes` over [H, ...]: its class's node, its heads' values stacked, or the
  // shared value broadcast along the head axis (a rank-0 operand of an op of higher rank as it is).
  int32_t operand(const std::vector<int32_t>& nodes, size_t k, size_t rank) {
    const int32_t u0 = g_.nodes[static_cast<size_t>(nodes[0])].in[k];
    if (const int32_t c = class_of_value(u0); c >= 0) return batched_[static_cast<size_t>(c)];
    std::vector<int32_t> per_head;
    for (int32_t i : nodes) per_head.push_back(g_.nodes[static_cast<size_t>(i)].in[k]);
    if (std::any_of(per_head.begin(), per_head.end(), [&](int32_t u) { return !same_value(u, u0); })) return stack(per_head);
    const ir::Type& t = g_.type(u0);
    if (t.shape.empty() && rank > 0) return r_.map(u0);
    std::vector<int64_t> dims(t.shape.size());
    std::iota(dims.begin(), dims.end(), 1);
    return r_.add(Op::BroadcastInDim, {r_.map(u0)}, {.dims = std::move(dims)}, {{t.dtype, with_heads(static_cast<int64_t>(nodes.size()), t.shape)}}, {});
  }

  // Values u_h [s] as one [H, s]: a view when they are slices of one value at a regular stride
  // along one axis (regular_slices), else their concatenation along a new first axis.
  int32_t stack(const std::vector<int32_t>& us) {
    auto [it, fresh] = stacks_.try_emplace(us, -1);
    if (!fresh) return it->second;
    if (const std::optional<int32_t> v = regular_slices(us)) return it->second = *v;
    const ir::Type& t = g_.type(us[0]);
    std::vector<int32_t> rows;
    for (int32_t u : us) rows.push_back(r_.add(Op::Reshape, {r_.map(u)}, {}, {{t.dtype, with_heads(1, t.shape)}}, {}));
    return it->second = r_.emit(Op::Concatenate, std::move(rows), {.axis = 0}, {});
  }

  // u_h = slice(X) with unit strides and equal bounds but along one axis a, where they start at
  // s + h·Δ (Δ > 0), w wide, within one of X's rows of Δ along a (X's dim a a multiple of Δ):
  // reshape X's axis a into [rows, Δ], slice rows s/Δ .. s/Δ + H and columns s mod Δ + [0, w),
  // and move the rows to the front.
  std::optional<int32_t> regular_slices(const std::vector<int32_t>& us) {
    std::vector<const Node*> s;
    for (int32_t u : us) {
      const Node& p = g_.producer(u);
      if (p.op != Op::Slice || p.in[0] != g_.producer(us[0]).in[0] ||
          std::any_of(p.attrs.strides.begin(), p.attrs.strides.end(), [](int64_t x) { return x != 1; }))
        return std::nullopt;
      s.push_back(&p);
    }
    const ir::Attrs& a0 = s[0]->attrs;
    const Shape& x = g_.type(s[0]->in[0]).shape;
    size_t axis = x.size();
    for (size_t d = 0; d < x.size(); ++d)
      if (s[1]->attrs.starts[d] != a0.starts[d]) axis = d;
    if (axis == x.size()) return std::nullopt;
    const auto heads = static_cast<int64_t>(s.size());
    const int64_t delta = s[1]->attrs.starts[axis] - a0.starts[axis], w = a0.limits[axis] - a0.starts[axis];
    for (int64_t h = 0; h < heads; ++h)
      for (size_t d = 0; d < x.size(); ++d) {
        const ir::Attrs& a = s[static_cast<size_t>(h)]->attrs;
        const int64_t shift = d == axis ? h * delta : 0;
        if (a.starts[d] != a0.starts[d] + shift || a.limits[d] != a0.limits[d] + shift) return std::nullopt;
      }
    if (delta <= 0 || x[axis] % delta != 0 || a0.starts[axis] % delta + w > delta || a0.starts[axis] / delta + heads > x[axis] / delta)
      return std::nullopt;
    Shape split = x;
    split[axis] = delta;
    split.insert(split.begin() + static_cast<std::ptrdiff_t>(axis), x[axis] / delta);
    const ir::Type& t = g_.type(s[0]->in[0]);
    const int32_t rows = r_.add(Op::Reshape, {r_.map(s[0]->in[0])}, {}, {{t.dtype, split}}, {});
    ir::Attrs cut{.starts = a0.starts, .limits = a0.limits, .strides = std::vector<int64_t>(split.size(), 1)};
    const int64_t row = a0.starts[axis] / delta, col = a0.starts[axis] % delta;
    cut.starts[axis] = col, cut.limits[axis] = col + w;
    cut.starts.insert(cut.starts.begin() + static_cast<std::ptrdiff_t>(axis), row);
    cut.limits.insert(cut.limits.begin() + static_cast<std::ptrdiff_t>(axis), row + heads);
    const int32_t cols = r_.emit(Op::Slice, {rows}, std::move(cut), {});
    std::vector<int64_t> perm{static_cast<int64_t>(axis)};
    for (size_t d = 0; d < split.size(); ++d)
      if (d != axis) perm.push_back(static_cast<int64_t>(d));
    return r_.emit(Op::Transpose, {cols}, {.dims = std::move(perm)}, {});
  }

  // Head h of b [H, s]: [s].
  int32_t unstack(int32_t b, int64_t h, const Shape& s, SrcLoc loc) {
    const Shape whole = with_heads(r_.out().type(b).shape[0], s);
    ir::Attrs a{.starts = std::vector<int64_t>(whole.size(), 0), .limits = whole, .strides = std::vector<int64_t>(whole.size(), 1)};
    a.starts[0] = h, a.limits[0] = h + 1;
    const int32_t one = r_.emit(Op::Slice, {b}, std::move(a), loc);
    return r_.add(Op::Reshape, {one}, {}, {{r_.out().type(b).dtype, s}}, loc);
  }

  // A concatenation along axis a of the results of R classes of one region (each [.., w, ..] at a),
  // head by head and class by class within a head — flat place f = h·R + r for head h's result of
  // the class of role r —, over a run of consecutive places f0 .. f0 + n − 1 in which every class
  // appears (its start and end need not be a head's: merge_dots cuts a long join into runs by
  // size): columns [f0·w, (f0 + n)·w) of their join J [.., H·R·w, ..]. One class (R = 1: the heads'
  // outputs joined for the output projection): its node with the head axis moved before a and
  // merged into it (the step writes that layout). Several (merge_dots' operand of an input gradient
  // over per-head q, k and v: d(qkv) of some heads): each class's node so moved, padded with zeros
  // to [.., H, R, w, ..] at its place among the R, the pads summed (the form a batch-written
  // model's gradient of slicing q, k and v from one tensor has, which an AttentionGrad step writes
  // in place) and reshaped. One J serves every such concatenation.
  bool joined(const Node& n) {
    std::vector<int32_t> cls, head;  // per operand
    for (int32_t u : n.in) {
      const int32_t c = class_of_value(u);
      if (c < 0) return false;
      const std::vector<int32_t>& nodes = *classes_[static_cast<size_t>(c)];
      cls.push_back(c);
      head.push_back(static_cast<int32_t>(std::find(nodes.begin(), nodes.end(), g_.def[static_cast<size_t>(u)]) - nodes.begin()));
    }
    const ir::Type& t = g_.type(n.in[0]);
    const auto heads = static_cast<int64_t>(classes_[static_cast<size_t>(cls[0])]->size());
    // Operand j at place f0 + j: role(c_j) − role(c_0) = j − (h_j − h_0)·R, one offset per class.
    // R is the number of classes the run reads: right when one of them appears twice (were R
    // larger, its two places would be R apart, not the R' found) or the run is one head's.
    const auto rs = static_cast<int64_t>(std::set<int32_t>(cls.begin(), cls.end()).size());
    const auto places = static_cast<int64_t>(n.in.size());
    if (places == rs && head.front() != head.back()) return false;
    std::map<int32_t, int64_t> offset;
    for (size_t j = 0; j < n.in.size(); ++j) {
      const int64_t d = static_cast<int64_t>(j) - (head[j] - head[0]) * rs;
      if (offset.try_emplace(cls[j], d).first->second != d || g_.type(n.in[j]) != t ||
          static_cast<int64_t>(classes_[static_cast<size_t>(cls[j])]->size()) != heads)
        return false;
    }
    const int64_t low = std::min_element(offset.begin(), offset.end(), [](auto& x, auto& y) { return x.second < y.second; })->second;
    std::vector<int32_t> role(offset.size(), -1);  // the classes by their role r
    for (const auto& [c, d] : offset) {
      if (d - low >= rs || role[static_cast<size_t>(d - low)] >= 0) return false;
      role[static_cast<size_t>(d - low)] = c;
    }
    const int64_t f0 = head[0] * rs - low;
    if (f0 < 0 || f0 + places > heads * rs) return false;
    const auto a = static_cast<size_t>(n.attrs.axis);
    const int64_t w = t.shape[a];
    auto [it, fresh] = joins_.try_emplace(std::pair(role, n.attrs.axis), -1);
    if (fresh && rs == 1) it->second = to_axis(batched_[static_cast<size_t>(role[0])], a, n.loc);
    if (fresh && rs > 1) {
      Shape one = t.shape;  // [.., H, 1, w, ..]
      one.insert(one.begin() + static_cast<std::ptrdiff_t>(a), {heads, 1});
      for (size_t r = 0; r < role.size(); ++r) {
        const int32_t moved = to_axis(batched_[static_cast<size_t>(role[r])], a, n.loc);
        const int32_t row = r_.add(Op::Reshape, {moved}, {}, {{t.dtype, one}}, n.loc);
        ir::Attrs pad{.lo = std::vector<int64_t>(one.size(), 0), .hi = std::vector<int64_t>(one.size(), 0), .scalar = 0.0};
        pad.lo[a + 1] = static_cast<int64_t>(r), pad.hi[a + 1] = rs - 1 - static_cast<int64_t>(r);
        const int32_t placed = r_.emit(Op::Pad, {row}, std::move(pad), n.loc);
        it->second = r == 0 ? placed : r_.emit(Op::Binary, {it->second, placed}, {.binary = Binary::Add}, n.loc);
      }
    }
    if (fresh) {
      Shape whole = t.shape;
      whole[a] = heads * rs * w;
      it->second = r_.add(Op::Reshape, {it->second}, {}, {{t.dtype, whole}}, n.loc);
    }
    int32_t v = it->second;
    if (places != heads * rs) {
      const Shape whole = r_.out().type(v).shape;
      ir::Attrs cut{.starts = std::vector<int64_t>(whole.size(), 0), .limits = whole, .strides = std::vector<int64_t>(whole.size(), 1)};
      cut.starts[a] = f0 * w, cut.limits[a] = (f0 + places) * w;
      v = r_.emit(Op::Slice, {v}, std::move(cut), n.loc);
    }
    r_.map_results(n, v);
    return true;
  }

  // b [H, d..] with its head axis moved to position a of d: [d0 .. d(a−1), H, d(a) ..].
  int32_t to_axis(int32_t b, size_t a, SrcLoc loc) {
    const auto rank = static_cast<int64_t>(r_.out().type(b).shape.size()) - 1;
    std::vector<int64_t> perm;
    for (int64_t d = 1; d <= static_cast<int64_t>(a); ++d) perm.push_back(d);
    perm.push_back(0);
    for (int64_t d = static_cast<int64_t>(a) + 1; d <= rank; ++d) perm.push_back(d);
    return r_.emit(Op::Transpose, {b}, {.dims = std::move(perm)}, loc);
  }
};

}  // namespace

ir::Graph merge_heads(ir::Graph g) {
  const std::vector<std::vector<int32_t>> groups = sibling_heads(g);
  if (groups.empty()) return g;
  const Readers rd(g);
  std::vector<int32_t> class_of(g.nodes.size(), -1), head_of(g.nodes.size(), -1);
  std::vector<Region> regions;
  {
    Grower grower(g, rd, class_of, head_of);
    int32_t classes = 0;
    for (const std::vector<int32_t>& seeds : groups) {
      if (std::any_of(seeds.begin(), seeds.end(), [&](int32_t i) { return class_of[static_cast<size_t>(i)] >= 0; })) continue;
      regions.push_back(grower.grow(seeds, classes));
      classes += static_cast<int32_t>(regions.back().classes.size());
    }
  }
  // Classes in units; a region whose classes form a cycle with the rest is dropped whole.
  std::optional<std::vector<int32_t>> order;
  for (;;) {
    std::vector<std::vector<int32_t>> units;
    std::vector<size_t> region_of;
    for (size_t r = 0; r < regions.size(); ++r)
      for (const std::vector<int32_t>& c : regions[r].classes) units.push_back(c), region_of.push_back(r);
    size_t stuck = 0;
    if ((order = unit_order(g, units, stuck))) break;
    regions.erase(regions.begin() + static_cast<std::ptrdiff_t>(region_of[stuck]));
  }
  if (regions.empty()) return g;
  // The classes renumbered as the units above (a dropped region leaves a gap).
  std::fill(class_of.begin(), class_of.end(), -1);
  int32_t c = 0;
  for (const Region& region : regions)
    for (const std::vector<int32_t>& nodes : region.classes) {
      for (int32_t i : nodes) class_of[static_cast<size_t>(i)] = c;
      ++c;
    }
  HeadsEmitter e(g, rd, regions, class_of);
  for (int32_t u : *order) {
    if (u < 0) e.cls(static_cast<size_t>(-1 - u));
    else e.node(g.nodes[static_cast<size_t>(u)]);
  }
  // The heads' joins are now slices of one value: products that merge_dots merged in runs over
  // them (the input and weight gradients of per-head projections) merge again, whole.
  Graph merged = merge_dots(e.finish());
  if (std::optional<Graph> shared = passes::common_subexpressions_merged(merged)) return std::move(*shared);
  return merged;
}

}  // namespace sheaf::fusion
