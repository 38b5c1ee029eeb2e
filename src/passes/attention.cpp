// passes/attention.cpp — scaled dot-product attention chains (see attention.hpp), matched from
// their last product backwards: the convert of the probabilities, softmax's division, exp and
// subtraction (with their row values), the prologue, the scores' product.
#include "passes/attention.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

#include "passes/rewrite.hpp"

namespace sheaf::passes {
namespace {

using ir::Op;

std::vector<int64_t> first_dims(size_t n) {
  std::vector<int64_t> d(n);
  std::iota(d.begin(), d.end(), 0);
  return d;
}

class Matcher {
 public:
  explicit Matcher(const ir::Graph& g) : g_(g), uses_(use_counts(g)) {}

  std::optional<AttentionMatch> match(int32_t out_node) {
    taken_.clear();
    const ir::Node& d2 = g_.nodes[static_cast<size_t>(out_node)];
    if (d2.op != Op::DotGeneral) return std::nullopt;
    const DType h = g_.type(d2.out).dtype;
    const int32_t pc = d2.in[0], v = d2.in[1];
    const Shape& ps = shape(pc);
    if (!is_half(h) || g_.type(v).dtype != h || ps.size() < 2 || !product_of_rows(d2, ps.size() - 2)) return std::nullopt;
    take(d2);
    // p = e / Σ e, e = exp(x - max x), in f32; convert(p) feeds the product
    const ir::Node& cv = def(pc);
    if (cv.op != Op::Convert || g_.type(cv.in[0]).dtype != DType::F32) return std::nullopt;
    take(cv);
    const int32_t e = with_row_value(def(cv.in[0]), Binary::Div, Reduce::Sum, ps);
    if (e < 0) return std::nullopt;
    const ir::Node& ex = def(e);
    if (ex.op != Op::Unary || ex.attrs.unary != Unary::Exp) return std::nullopt;
    take(ex);
    const int32_t x = with_row_value(def(ex.in[0]), Binary::Sub, Reduce::Max, ps);
    if (x < 0) return std::nullopt;

    AttentionMatch m;
    m.out = out_node;
    std::vector<ScoreOp> backwards;
    int32_t scores = -1;
    for (int32_t y = x;; y = prologue_operand(def(y), backwards, m.mask)) {
      if (y < 0 || shape(y) != ps || !is_float(g_.type(y).dtype)) return std::nullopt;
      if (def(y).op == Op::DotGeneral) {
        scores = y;
        break;
      }
    }
    const ir::Node& d1 = def(scores);
    if (g_.type(d1.out).dtype != h || g_.type(d1.in[0]).dtype != h || g_.type(d1.in[1]).dtype != h ||
        !scores_product(d1, ps.size() - 2))
      return std::nullopt;
    take(d1);
    m.scores = g_.def[static_cast<size_t>(scores)];
    m.prologue.push_back({.kind = ScoreOp::Kind::Round, .dtype = h});
    m.prologue.insert(m.prologue.end(), backwards.rbegin(), backwards.rend());
    std::sort(taken_.begin(), taken_.end());
    if (std::adjacent_find(taken_.begin(), taken_.end()) != taken_.end() || !closed(out_node)) return std::nullopt;
    m.nodes = taken_;
    return m;
  }

 private:
  const ir::Graph& g_;
  std::vector<int32_t> uses_;
  std::vector<int32_t> taken_;  // node indices of the chain so far

  const Shape& shape(int32_t v) const { return g_.type(v).shape; }
  const ir::Node& def(int32_t v) const { return g_.producer(v); }
  void take(const ir::Node& n) { taken_.push_back(static_cast<int32_t>(&n - g_.nodes.data())); }
  static bool binary(const ir::Node& n, Binary b) { return n.op == Op::Binary && n.attrs.binary == b; }

  std::optional<double> splat(int32_t v) const {
    auto s = splat_scalar(g_, v);
    if (!s) return std::nullopt;
    return s->get(0);
  }

  // One prologue node (the producer of the chain's value): its ScoreOp appended to `backwards`;
  // returns the chain's operand, or -1 when the node does not belong in a prologue.
  int32_t prologue_operand(const ir::Node& n, std::vector<ScoreOp>& backwards, int32_t& mask) {
    ScoreOp op{.dtype = g_.type(n.out).dtype};
    int32_t from = -1;
    if (n.op == Op::Convert) {
      op.kind = ScoreOp::Kind::Round, from = n.in[0];
    } else if (binary(n, Binary::Mul)) {
      op.kind = ScoreOp::Kind::Mul;
      if (auto c = splat(n.in[1])) op.c = *c, from = n.in[0];
      else if (auto c0 = splat(n.in[0])) op.c = *c0, from = n.in[1];
    } else if (binary(n, Binary::Div)) {
      op.kind = ScoreOp::Kind::Div;
      if (auto c = splat(n.in[1])) op.c = *c, from = n.in[0];
    } else if (n.op == Op::Select && mask < 0 && g_.type(n.in[0]).dtype == DType::Bool) {
      op.kind = ScoreOp::Kind::Mask;
      if (auto f = splat(n.in[2])) op.c = *f, from = n.in[1];
      else if (auto t = splat(n.in[1])) op.c = *t, op.keep_if = false, from = n.in[2];
      if (from >= 0) mask = n.in[0];
    }
    if (from < 0) return -1;
    take(n);
    backwards.push_back(op);
    return from;
  }

  // x when `n` is binary(x, b) with b the row values reduce(kind, x) (softmax's x − max x and
  // e / Σ e over the last dim of `full`), else -1.
  int32_t with_row_value(const ir::Node& n, Binary op, Reduce kind, const Shape& full) {
    if (!binary(n, op) || !row_reduction(n.in[1], kind, n.in[0], full)) return -1;
    take(n);
    return n.in[0];
  }

  // `b` repeats along the last dim of `full` the values of r = reduce(kind, of) over that dim:
  // broadcast_in_dim(reshape(r) [.., 1]) or broadcast_in_dim(r).
  bool row_reduction(int32_t b, Reduce kind, int32_t of, const Shape& full) {
    const size_t rank = full.size();
    const Shape rows(full.begin(), full.end() - 1);
    const ir::Node& bc = def(b);
    if (bc.op != Op::BroadcastInDim || shape(b) != full) return false;
    int32_t r = bc.in[0];
    if (def(r).op == Op::Reshape) {
      Shape with_one = rows;
      with_one.push_back(1);
      if (shape(r) != with_one || bc.attrs.dims != first_dims(rank)) return false;
      take(def(r));
      r = def(r).in[0];
    } else if (bc.attrs.dims != first_dims(rank - 1)) {
      return false;
    }
    const ir::Node& red = def(r);
    if (red.op != Op::Reduce || red.attrs.reduce != kind || red.in[0] != of ||
        red.attrs.dims != std::vector<int64_t>{static_cast<int64_t>(rank - 1)} || shape(r) != rows)
      return false;
    take(bc);
    take(red);
    return true;
  }

  // An operand of rank nb + 2 with nb batch dims, one contracted dim and one free dim.
  static bool one_free_dim(size_t rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract, size_t nb) {
    return rank == nb + 2 && batch.size() == nb && contract.size() == 1;
  }

  // dot_general(convert(p) [b.., T, S], V): p's dims in order (batch, rows, contracted S).
  bool product_of_rows(const ir::Node& d2, size_t nb) const {
    const DotDims& d = d2.attrs.dot;
    return d.lhs_batch == first_dims(nb) && d.lhs_contract == std::vector<int64_t>{static_cast<int64_t>(nb + 1)} &&
           one_free_dim(shape(d2.in[1]).size(), d.rhs_batch, d.rhs_contract, nb);
  }

  // dot_general(Q, K) contracting one dim of each, nb batch dims.
  bool scores_product(const ir::Node& d1, size_t nb) const {
    const DotDims& d = d1.attrs.dot;
    return one_free_dim(shape(d1.in[0]).size(), d.lhs_batch, d.lhs_contract, nb) &&
           one_free_dim(shape(d1.in[1]).size(), d.rhs_batch, d.rhs_contract, nb);
  }

  // Whether every value the taken nodes compute but the last product's is read only by taken
  // nodes (and is not a result).
  bool closed(int32_t out_node) const {
    std::vector<int32_t> inside(g_.types.size(), 0);
    for (int32_t ni : taken_)
      for (int32_t u : g_.nodes[static_cast<size_t>(ni)].in) ++inside[static_cast<size_t>(u)];
    for (int32_t ni : taken_) {
      const int32_t v = g_.nodes[static_cast<size_t>(ni)].out;
      if (ni != out_node && inside[static_cast<size_t>(v)] != uses_[static_cast<size_t>(v)]) return false;
    }
    return true;
  }
};

}  // namespace

std::vector<AttentionMatch> find_attention(const ir::Graph& g) {
  std::vector<AttentionMatch> found;
  std::vector<bool> used(g.nodes.size(), false);
  Matcher m(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto a = m.match(static_cast<int32_t>(i));
    if (!a || std::any_of(a->nodes.begin(), a->nodes.end(), [&](int32_t n) { return used[static_cast<size_t>(n)]; })) continue;
    for (int32_t n : a->nodes) used[static_cast<size_t>(n)] = true;
    found.push_back(std::move(*a));
  }
  return found;
}

}  // namespace sheaf::passes
