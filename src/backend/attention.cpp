// backend/attention.cpp — scaled dot-product attention chains (see attention.hpp), matched from
// their last product backwards: the convert of the probabilities, the softmax (a site of its
// expansion), the prologue, the scores' product; then the backward pass from dO.
#include "backend/attention.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>

#include "passes/rewrite.hpp"
#include "tensor/dot.hpp"
#include "tensor/shape.hpp"

namespace sheaf::fusion {
namespace {

using passes::CompositeSites;
using passes::Readers;
using passes::SoftmaxGradSite;
using passes::SoftmaxSite;
using passes::constant_value;
using passes::is_splat_of;
using passes::splat_scalar;

using ir::Op;

class Matcher {
 public:
  Matcher(const ir::Graph& g, const CompositeSites& sites) : g_(g), sites_(sites), readers_(g) {}

  std::optional<AttentionMatch> match(int32_t out_node) {
    taken_.clear();
    const ir::Node& d2 = g_.nodes[static_cast<size_t>(out_node)];
    if (d2.op != Op::DotGeneral) return std::nullopt;
    const DType h = g_.type(d2.out).dtype;
    const int32_t pc = d2.in[0], v = d2.in[1];
    const Shape& ps = shape(pc);
    if ((!is_half(h) && h != DType::F32) || g_.type(v).dtype != h || ps.size() < 2 || !product_of_rows(d2, ps.size() - 2))
      return std::nullopt;
    take(d2);
    // p = softmax(x) over the last dim, in f32 (its expansion: a site); convert(p) feeds a half product
    int32_t p = pc;
    if (h != DType::F32) {
      const ir::Node& cv = def(pc);
      if (cv.op != Op::Convert || g_.type(cv.in[0]).dtype != DType::F32) return std::nullopt;
      take(cv);
      p = cv.in[0];
    }
    const SoftmaxSite* sm = softmax_site(p, ps.size() - 1);
    if (!sm) return std::nullopt;
    for (int32_t n : sm->nodes) taken_.push_back(n);
    const Forward f{.pb = pc, .p = sm->out, .row_max = sm->row_max, .row_sum = sm->row_sum};
    const int32_t x = sm->x;

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
    if (std::adjacent_find(taken_.begin(), taken_.end()) != taken_.end()) return std::nullopt;
    m.nodes = taken_;
    if (closed({out_node})) return with_biases(m);
    // a training step: the chain's other readers must be its backward pass
    taken_.clear();
    m.grad = backward(m, f);
    if (!m.grad) return std::nullopt;
    std::sort(taken_.begin(), taken_.end());
    m.grad->nodes = taken_;
    if (taken_.front() < out_node) return std::nullopt;  // the gradient's step runs after the chain's
    taken_.insert(taken_.end(), m.nodes.begin(), m.nodes.end());
    std::sort(taken_.begin(), taken_.end());
    if (std::adjacent_find(taken_.begin(), taken_.end()) != taken_.end() ||
        !closed({out_node, m.grad->dq.node, m.grad->dk.node, m.grad->dv.node}))
      return std::nullopt;
    find_concat(*m.grad);
    return with_biases(m);
  }

 private:
  // Values of a forward chain its backward pass reads: convert(p) and p; nodes: softmax's row max
  // and sum.
  struct Forward {
    int32_t pb = -1, p = -1, row_max = -1, row_sum = -1;
  };

  const ir::Graph& g_;
  const CompositeSites& sites_;
  Readers readers_;

  // The site of the softmax over `axis` whose result is p, or nullptr; its row reductions must be
  // its own (not nodes it shares with the rest of the graph), for the step computes them.
  const SoftmaxSite* softmax_site(int32_t p, size_t axis) const {
    auto own = [](const SoftmaxSite& s, int32_t n) { return std::binary_search(s.nodes.begin(), s.nodes.end(), n); };
    for (const SoftmaxSite& s : sites_.softmax)
      if (s.out == p && s.axis == static_cast<int64_t>(axis)) return own(s, s.row_max) && own(s, s.row_sum) ? &s : nullptr;
    return nullptr;
  }
  std::vector<int32_t> taken_;  // node indices of the chain so far

  AttentionMatch with_biases(AttentionMatch& m) const {
    const ir::Node &d1 = g_.nodes[static_cast<size_t>(m.scores)], &d2 = g_.nodes[static_cast<size_t>(m.out)];
    const std::vector<int32_t> operands{d1.in[0], d1.in[1], d2.in[1]};
    m.bias_q = operand_bias(m, operands[0], operands);
    m.bias_k = operand_bias(m, operands[1], operands);
    m.bias_v = operand_bias(m, operands[2], operands);
    return std::move(m);
  }

  static bool reindexes(Op op) { return op == Op::Reshape || op == Op::Transpose || op == Op::Slice; }

  // The bias under operand x of chain m (OperandBias), `operands` its Q, K and V.
  OperandBias operand_bias(const AttentionMatch& m, int32_t x, const std::vector<int32_t>& operands) const {
    int32_t b = x;
    while (reindexes(def(b).op)) b = def(b).in[0];
    const ir::Node& add = def(b);
    if (add.op != Op::Binary || add.attrs.binary != Binary::Add || !is_half(g_.type(b).dtype)) return {};
    for (size_t k = 0; k < 2; ++k) {
      const ir::Node& bc = def(add.in[k]);
      const int32_t p = add.in[1 - k];
      if (bc.op != Op::BroadcastInDim || shape(bc.in[0]).size() != 1 || shape(b).empty() ||
          bc.attrs.dims != std::vector<int64_t>{static_cast<int64_t>(shape(b).size()) - 1} || g_.type(bc.in[0]).dtype != g_.type(b).dtype ||
          shape(p) != shape(b) || g_.type(p).dtype != g_.type(b).dtype)
        continue;
      if (!read_as_operands(b, m, operands)) return {};
      return {.sum = b, .product = p, .bias = bc.in[0]};
    }
    return {};
  }

  // Whether every node reading b, through reshapes, transposes and slices, is one of those or a
  // node of m (its chain or gradient) reading one of `operands`; none of those values a result.
  bool read_as_operands(int32_t b, const AttentionMatch& m, const std::vector<int32_t>& operands) const {
    auto in_m = [&](int32_t n) {
      auto has = [n](const std::vector<int32_t>& ns) { return std::binary_search(ns.begin(), ns.end(), n); };
      return has(m.nodes) || (m.grad && has(m.grad->nodes));
    };
    for (std::vector<int32_t> todo{b}; !todo.empty();) {
      const int32_t v = todo.back();
      todo.pop_back();
      const std::vector<int32_t>& readers = readers_.nodes[static_cast<size_t>(v)];
      if (readers_.uses[static_cast<size_t>(v)] != static_cast<int32_t>(readers.size())) return false;  // a result
      for (int32_t r : readers) {
        const ir::Node& n = g_.nodes[static_cast<size_t>(r)];
        if (reindexes(n.op)) todo.push_back(n.out);
        else if (!in_m(r) || std::find(operands.begin(), operands.end(), v) == operands.end()) return false;
      }
    }
    return true;
  }

  // AttentionGrad::concat and concat_nodes of `a`, when the gradients are concatenated so.
  void find_concat(AttentionGrad& a) const {
    std::vector<int32_t> nodes, pads, ends;
    int32_t top = -1, cat = -1;  // the adds' last value; the concatenation's node
    for (const GradProduct* p : {&a.dq, &a.dk, &a.dv}) {
      const ir::Node* n = sole_reader(g_.nodes[static_cast<size_t>(p->node)].out);
      int32_t end = g_.nodes[static_cast<size_t>(p->node)].out;
      for (; n && (n->op == Op::Transpose || n->op == Op::Reshape); n = sole_reader(n->out)) nodes.push_back(node_index(*n)), end = n->out;
      if (n && n->op == Op::Concatenate && pads.empty() && (cat < 0 || node_index(*n) == cat)) {  // merge_dots' concatenation
        cat = node_index(*n);
        ends.push_back(end);
        continue;
      }
      if (!n || n->op != Op::Pad || n->attrs.scalar != 0 || !ends.empty()) return;
      pads.push_back(node_index(*n));
      nodes.push_back(pads.back());
      int32_t v = n->out;
      for (n = sole_reader(v); n && n->op == Op::Binary && n->attrs.binary == Binary::Add; n = sole_reader(v)) {
        nodes.push_back(node_index(*n));
        v = n->out;
      }
      if (top >= 0 && v != top) return;
      top = v;
    }
    if (cat >= 0) {  // the concatenation reads exactly the three (distinct: each way is its own)
      std::vector<int32_t> in = g_.nodes[static_cast<size_t>(cat)].in;
      std::sort(in.begin(), in.end()), std::sort(ends.begin(), ends.end());
      if (in != ends) return;
      nodes.push_back(cat);
      std::sort(nodes.begin(), nodes.end());
      a.concat = cat;
      a.concat_nodes = std::move(nodes);
      return;
    }
    // the adds under `top` sum exactly the three pads, whose spans along one axis tile it
    std::vector<int32_t> leaves;
    for (std::vector<int32_t> todo{top}; !todo.empty();) {
      const ir::Node& n = def(todo.back());
      todo.pop_back();
      if (n.op == Op::Binary && n.attrs.binary == Binary::Add && std::find(nodes.begin(), nodes.end(), node_index(n)) != nodes.end())
        todo.insert(todo.end(), n.in.begin(), n.in.end());
      else leaves.push_back(node_index(n));
    }
    std::sort(leaves.begin(), leaves.end());
    std::sort(pads.begin(), pads.end());
    if (leaves != pads || !tile_one_axis(pads)) return;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    a.concat = g_.def[static_cast<size_t>(top)];
    a.concat_nodes = std::move(nodes);
  }

  // Whether the pads `pads` (of one shape and type) pad along one axis only, and their operands'
  // spans cover it once.
  bool tile_one_axis(const std::vector<int32_t>& pads) const {
    std::vector<std::pair<int64_t, int64_t>> spans;
    int64_t axis = -1;
    const ir::Node& first = g_.nodes[static_cast<size_t>(pads[0])];
    for (int32_t i : pads) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(i)];
      if (g_.type(n.out) != g_.type(first.out)) return false;
      for (size_t d = 0; d < n.attrs.lo.size(); ++d) {
        if (n.attrs.lo[d] < 0 || n.attrs.hi[d] < 0) return false;
        if (n.attrs.lo[d] == 0 && n.attrs.hi[d] == 0) continue;
        if (axis >= 0 && axis != static_cast<int64_t>(d)) return false;
        axis = static_cast<int64_t>(d);
      }
      if (axis >= 0) spans.emplace_back(n.attrs.lo[static_cast<size_t>(axis)], shape(n.in[0])[static_cast<size_t>(axis)]);
    }
    if (axis < 0 || spans.size() != pads.size()) return false;
    std::sort(spans.begin(), spans.end());
    int64_t at = 0;
    for (const auto& [lo, size] : spans) {
      if (lo != at) return false;
      at += size;
    }
    return at == shape(first.out)[static_cast<size_t>(axis)];
  }
  int32_t node_index(const ir::Node& n) const { return static_cast<int32_t>(&n - g_.nodes.data()); }

  // The backward pass of forward chain `m` (attention.hpp), its nodes taken.
  std::optional<AttentionGrad> backward(const AttentionMatch& m, const Forward& f) {
    const ir::Node &d1 = g_.nodes[static_cast<size_t>(m.scores)], &d2 = g_.nodes[static_cast<size_t>(m.out)];
    const Shape& ps = shape(f.pb);
    const size_t nb = ps.size() - 2, rank = ps.size();
    const DType h = g_.type(f.pb).dtype;
    AttentionGrad a{.row_max = f.row_max, .row_sum = f.row_sum, .probs = f.p};
    // dV = convert(p)ᵀ·dO: the reader of convert(p) beside the value product (f32: the product
    // reading p beside it; softmax's VJP reads p too)
    const ir::Node* dv = nullptr;
    int32_t products = 0;
    for (int32_t r : readers_.nodes[static_cast<size_t>(f.pb)])
      if (const ir::Node& n = g_.nodes[static_cast<size_t>(r)]; r != m.out && (h != DType::F32 || n.op == Op::DotGeneral)) dv = &n, ++products;
    if (!dv || products != 1 || (h != DType::F32 && readers_.uses[static_cast<size_t>(f.pb)] != 2)) return std::nullopt;
    auto gv = grad_product(*dv, f.pb, nb, nb, a.d_out, a.d_out_batch, a.d_out_rows);
    if (!gv || g_.type(a.d_out).dtype != h) return std::nullopt;
    take(*dv);
    a.dv = *gv;
    a.d_out_head = free_dim(shape(a.d_out).size(), a.d_out_batch, a.d_out_rows);
    // dPb = dO·Vᵀ, dP = convert(dPb)
    const DotDims& pv = d2.attrs.dot;
    const int64_t v_head = free_dim(shape(d2.in[1]).size(), pv.rhs_batch, pv.rhs_contract[0]);
    const ir::Node* dpb = nullptr;
    for (int32_t r : readers_.nodes[static_cast<size_t>(a.d_out)]) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(r)];
      const DotDims& d = n.attrs.dot;
      if (n.op == Op::DotGeneral && n.in[0] == a.d_out && n.in[1] == d2.in[1] && d.lhs_batch == a.d_out_batch &&
          d.rhs_batch == pv.rhs_batch && d.lhs_contract == std::vector<int64_t>{a.d_out_head} &&
          d.rhs_contract == std::vector<int64_t>{v_head} && shape(n.out) == ps && g_.type(n.out).dtype == h)
        dpb = &n;
    }
    if (!dpb) return std::nullopt;
    take(*dpb);
    const ir::Node* dp = h == DType::F32 ? dpb : sole_reader(dpb->out);  // dP = convert(dPb), or dPb in f32
    if (h != DType::F32) {
      if (!dp || dp->op != Op::Convert || g_.type(dp->out).dtype != DType::F32) return std::nullopt;
      take(*dp);
    }
    // softmax's VJP: softmax_grad(p, dP) over the same dim (its expansion: a site)
    const SoftmaxGradSite* sg = nullptr;
    for (const SoftmaxGradSite& site : sites_.softmax_grad)
      if (site.p == f.p && site.g == dp->out && site.axis == static_cast<int64_t>(rank - 1)) sg = &site;
    if (!sg) return std::nullopt;
    for (int32_t n : sg->nodes) taken_.push_back(n);
    int32_t grad = sg->out;
    // the prologue's VJPs, last op first
    for (size_t i = m.prologue.size(); i-- > 1;) {
      const ScoreOp& op = m.prologue[i];
      const DType before = m.prologue[i - 1].dtype;
      if ((op.kind == ScoreOp::Kind::Round && op.dtype == before) || op.additive) continue;  // no node
      const ir::Node* n = sole_reader(grad);
      if (!n || !prologue_grad(*n, grad, op, before, m.mask)) return std::nullopt;
      take(*n);
      grad = n->out;
    }
    if (g_.type(grad).dtype != h || readers_.uses[static_cast<size_t>(grad)] != 2) return std::nullopt;
    // dQ = dS·K (contracting S), dK = dSᵀ·Q (contracting T)
    const DotDims& qk = d1.attrs.dot;
    for (int32_t r : readers_.nodes[static_cast<size_t>(grad)]) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(r)];
      int32_t y = -1;
      std::vector<int64_t> batch;
      int64_t rows = -1;
      if (auto p = grad_product(n, grad, nb + 1, nb, y, batch, rows);
          p && y == d1.in[1] && batch == qk.rhs_batch && rows == free_dim(rank, qk.rhs_batch, qk.rhs_contract[0]))
        a.dq = *p, take(n);
      else if (auto p2 = grad_product(n, grad, nb, nb, y, batch, rows);
               p2 && y == d1.in[0] && batch == qk.lhs_batch && rows == free_dim(rank, qk.lhs_batch, qk.lhs_contract[0]))
        a.dk = *p2, take(n);
    }
    if (a.dq.node < 0 || a.dk.node < 0) return std::nullopt;
    return a;
  }

  // Whether node n, reading the gradient `grad` of prologue op `op`'s result, is that op's VJP
  // (its operand's gradient; `before`: the operand's dtype).
  bool prologue_grad(const ir::Node& n, int32_t grad, const ScoreOp& op, DType before, int32_t mask) const {
    switch (op.kind) {
      case ScoreOp::Kind::Round: return n.op == Op::Convert && g_.type(n.out).dtype == before;
      case ScoreOp::Kind::Mul: return binary(n, Binary::Mul) && splat(other(n, grad)) == op.c;
      case ScoreOp::Kind::Div: return binary(n, Binary::Div) && n.in[0] == grad && splat(n.in[1]) == op.c;
      case ScoreOp::Kind::Mask:
        return n.op == Op::Select && n.in[0] == mask && n.in[op.keep_if ? 1 : 2] == grad &&
               is_splat_of(g_, n.in[op.keep_if ? 2 : 1], 0.0);
    }
    return false;
  }

  // A product of the gradient (attention.hpp's GradProduct): n = dot_general(x, y) or
  // dot_general(y, x) with nb batch dims (x's first, y's `y_batch`), contracting x's dim `contract`
  // with y's dim `y_rows`, of x's dtype.
  std::optional<GradProduct> grad_product(const ir::Node& n, int32_t x, int64_t contract, size_t nb, int32_t& y,
                                          std::vector<int64_t>& y_batch, int64_t& y_rows) {
    if (n.op != Op::DotGeneral || g_.type(n.out).dtype != g_.type(x).dtype) return std::nullopt;
    const DotDims& d = n.attrs.dot;
    const bool lhs = n.in[0] == x;
    if (!lhs && n.in[1] != x) return std::nullopt;
    const auto &xb = lhs ? d.lhs_batch : d.rhs_batch, &xc = lhs ? d.lhs_contract : d.rhs_contract;
    const auto &yb = lhs ? d.rhs_batch : d.lhs_batch, &yc = lhs ? d.rhs_contract : d.lhs_contract;
    y = n.in[lhs ? 1 : 0];
    if (y == x || xb != leading_axes(nb) || xc != std::vector<int64_t>{contract} ||
        !one_free_dim(shape(y).size(), yb, yc, nb))
      return std::nullopt;
    y_batch = yb, y_rows = yc[0];
    return GradProduct{.node = static_cast<int32_t>(&n - g_.nodes.data()), .transposed = !lhs};
  }

  // The one free dim of an operand whose other dims are `batch` and `contract`.
  static int64_t free_dim(size_t rank, const std::vector<int64_t>& batch, int64_t contract) {
    return free_dims(static_cast<int64_t>(rank), batch, {contract}).front();
  }

  // The node reading v when it is read once, else nullptr.
  const ir::Node* sole_reader(int32_t v) const {
    const int32_t n = readers_.sole(v);
    return n < 0 ? nullptr : &g_.nodes[static_cast<size_t>(n)];
  }

  // The operand of binary node n that is not v (-1 when neither or both are).
  static int32_t other(const ir::Node& n, int32_t v) {
    if (n.in[0] == v && n.in[1] != v) return n.in[1];
    if (n.in[1] == v && n.in[0] != v) return n.in[0];
    return -1;
  }

  const Shape& shape(int32_t v) const { return g_.type(v).shape; }
  const ir::Node& def(int32_t v) const { return g_.producer(v); }
  void take(const ir::Node& n) { taken_.push_back(static_cast<int32_t>(&n - g_.nodes.data())); }
  static bool binary(const ir::Node& n, Binary b) { return n.op == Op::Binary && n.attrs.binary == b; }

  std::optional<double> splat(int32_t v) const {
    if (v < 0) return std::nullopt;
    auto s = splat_scalar(g_, v);
    if (!s) return std::nullopt;
    return s->get(0);
  }

  // One prologue node (the producer of the chain's value): its ScoreOp appended to `backwards`;
  // returns the chain's operand, or -1 when the node does not belong in a prologue.
  // The fill of an additive causal bias (ScoreOp::additive): a float constant [.., T, S], 0 where
  // s ≤ t and one finite value ≤ -1e9 elsewhere, broadcast over the batch dims (v [b.., T, S]);
  // else nullopt.
  std::optional<double> causal_bias(int32_t v) {
    const Shape& sh = shape(v);
    if (sh.size() < 2) return std::nullopt;
    const int64_t t_n = sh[sh.size() - 2], s_n = sh.back();
    int32_t c = v;
    for (const ir::Node* b = &def(c); b->op == Op::BroadcastInDim; b = &def(c)) {  // T and S stay the last dims
      const Shape& from = shape(b->in[0]);
      const auto r = static_cast<int64_t>(shape(c).size());
      const std::vector<int64_t>& d = b->attrs.dims;
      if (from.size() < 2 || d[d.size() - 2] != r - 2 || d.back() != r - 1 || from[from.size() - 2] != t_n || from.back() != s_n)
        return std::nullopt;
      c = b->in[0];
    }
    const Tensor* t = constant_value(g_, c);
    if (!t || !is_float(t->dtype())) return std::nullopt;
    auto [known, fresh] = causal_fills_.try_emplace(c);  // one scan per constant: heads as modules share it
    if (!fresh) return known->second;
    std::optional<double>& fill = known->second;
    for (int64_t i = 0, n = t->numel(); i < n; ++i) {
      const double x = t->get(i);
      const bool kept = i % s_n <= i / s_n % t_n;
      if (kept != (x == 0) || (!kept && (x > -1e9 || !std::isfinite(x) || (fill && *fill != x)))) return fill = std::nullopt;
      if (!kept) fill = x;
    }
    return fill;
  }
  std::map<int32_t, std::optional<double>> causal_fills_;  // causal_bias of each constant scanned (its last two dims are T, S)

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
    } else if (binary(n, Binary::Add) && mask < 0) {
      for (size_t k = 0; k < 2 && from < 0; ++k)
        if (auto f = causal_bias(n.in[k])) {
          op.kind = ScoreOp::Kind::Mask, op.c = *f, op.keep_if = false, op.additive = true;
          from = n.in[1 - k], mask = n.in[k];
        }
    }
    if (from < 0) return -1;
    take(n);
    backwards.push_back(op);
    return from;
  }

  // An operand of rank nb + 2 with nb batch dims, one contracted dim and one free dim.
  static bool one_free_dim(size_t rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract, size_t nb) {
    return rank == nb + 2 && batch.size() == nb && contract.size() == 1;
  }

  // dot_general(convert(p) [b.., T, S], V): p's dims in order (batch, rows, contracted S).
  bool product_of_rows(const ir::Node& d2, size_t nb) const {
    const DotDims& d = d2.attrs.dot;
    return d.lhs_batch == leading_axes(nb) && d.lhs_contract == std::vector<int64_t>{static_cast<int64_t>(nb + 1)} &&
           one_free_dim(shape(d2.in[1]).size(), d.rhs_batch, d.rhs_contract, nb);
  }

  // dot_general(Q, K) contracting one dim of each, nb batch dims.
  bool scores_product(const ir::Node& d1, size_t nb) const {
    const DotDims& d = d1.attrs.dot;
    return one_free_dim(shape(d1.in[0]).size(), d.lhs_batch, d.lhs_contract, nb) &&
           one_free_dim(shape(d1.in[1]).size(), d.rhs_batch, d.rhs_contract, nb);
  }

  // Whether every value the taken nodes compute but those of `outs` (node indices) is read only
  // by taken nodes (and is not a result).
  bool closed(std::initializer_list<int32_t> outs) const {
    std::vector<int32_t> inside(g_.types.size(), 0);
    for (int32_t ni : taken_)
      for (int32_t u : g_.nodes[static_cast<size_t>(ni)].in) ++inside[static_cast<size_t>(u)];
    for (int32_t ni : taken_) {
      const int32_t v = g_.nodes[static_cast<size_t>(ni)].out;
      if (std::find(outs.begin(), outs.end(), ni) == outs.end() && inside[static_cast<size_t>(v)] != readers_.uses[static_cast<size_t>(v)])
        return false;
    }
    return true;
  }
};

}  // namespace

std::vector<AttentionMatch> find_attention(const ir::Graph& g, const CompositeSites& sites) {
  std::vector<AttentionMatch> found;
  std::vector<bool> used(g.nodes.size(), false);
  Matcher m(g, sites);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto a = m.match(static_cast<int32_t>(i));
    if (!a || std::any_of(a->nodes.begin(), a->nodes.end(), [&](int32_t n) { return used[static_cast<size_t>(n)]; })) continue;
    for (int32_t n : a->nodes) used[static_cast<size_t>(n)] = true;
    found.push_back(std::move(*a));
  }
  return found;
}

}  // namespace sheaf::fusion
