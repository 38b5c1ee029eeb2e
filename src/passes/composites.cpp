// passes/composites.cpp — recognising written-out softmax, and expanding composites (see
// composites.hpp).
#include "passes/composites.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "ir/composites.hpp"
#include "ir/node_key.hpp"
#include "passes/rewrite.hpp"
#include "tensor/gelu.hpp"
#include "tensor/shape.hpp"

namespace sheaf::passes {

using ir::Node;
using ir::Op;

namespace {

bool binary(const Node& n, Binary b) { return n.op == Op::Binary && n.attrs.binary == b; }

// Whether `b` repeats along the last axis of `of` the values of reduce(kind, of) over that axis:
// broadcast_in_dim(reshape(r) [.., 1]) or broadcast_in_dim(r).
bool row_values(const ir::Graph& g, int32_t b, Reduce kind, int32_t of) {
  const Shape& full = g.type(of).shape;
  const size_t rank = full.size();
  const Shape rows(full.begin(), full.end() - 1);
  const Node& bc = g.producer(b);
  if (bc.op != Op::BroadcastInDim || g.type(b).shape != full) return false;
  int32_t r = bc.in[0];
  if (g.producer(r).op == Op::Reshape) {
    Shape with_one = rows;
    with_one.push_back(1);
    if (g.type(r).shape != with_one || bc.attrs.dims != leading_axes(rank)) return false;
    r = g.producer(r).in[0];
  } else if (bc.attrs.dims != leading_axes(rank - 1)) {
    return false;
  }
  const Node& red = g.producer(r);
  return red.op == Op::Reduce && red.attrs.reduce == kind && red.in[0] == of &&
         red.attrs.dims == std::vector<int64_t>{static_cast<int64_t>(rank - 1)} && g.type(r).shape == rows;
}

// The factors of v through nested multiplies: splat constants multiplied into `coef`, the other
// values listed (GELU's have at most 4).
struct Factors {
  double coef = 1;
  std::vector<int32_t> of;
};
bool factors(const ir::Graph& g, int32_t v, Factors& f) {
  if (std::optional<Tensor> s = splat_scalar(g, v)) {
    f.coef *= s->get(0);
    return true;
  }
  const Node& n = g.producer(v);
  if (binary(n, Binary::Mul)) return factors(g, n.in[0], f) && factors(g, n.in[1], f);
  if (f.of.size() >= 4) return false;
  f.of.push_back(v);
  return true;
}
Factors factors(const ir::Graph& g, int32_t v) {
  Factors f;
  if (!factors(g, v, f)) f.of.clear(), f.coef = 0;
  return f;
}

// Whether a coefficient of dtype d is `want` as that type holds it (the written constant rounded).
bool near(double got, double want, DType d) {
  const double tol = d == DType::F32 ? 1e-6 : d == DType::F16 ? 1e-3 : 8e-3;
  return std::fabs(got - want) <= tol * std::fabs(want);
}

// Whether w is x + a·x³ (in any order of the sum and of the product) with x the given value.
bool cubic_term(const ir::Graph& g, int32_t w, int32_t x, DType d) {
  const Node& sum = g.producer(w);
  if (!binary(sum, Binary::Add)) return false;
  for (size_t j = 0; j < 2; ++j) {
    if (sum.in[j] != x) continue;
    const Factors c = factors(g, sum.in[1 - j]);
    if (c.of == std::vector<int32_t>{x, x, x} && near(c.coef, kGeluA, d)) return true;
  }
  return false;
}

}  // namespace

int32_t written_gelu(const ir::Graph& g, const Node& n) {
  if (!binary(n, Binary::Mul) || !is_float(g.type(n.out).dtype)) return -1;
  const DType d = g.type(n.out).dtype;
  const Factors f = factors(g, n.out);
  if (f.of.size() != 2 || !near(f.coef, 0.5, d)) return -1;
  for (size_t side = 0; side < 2; ++side) {
    const int32_t x = f.of[side];
    const Node& sum = g.producer(f.of[1 - side]);
    if (!binary(sum, Binary::Add) || g.type(x) != g.type(n.out)) continue;
    for (size_t k = 0; k < 2; ++k) {
      const Node& th = g.producer(sum.in[1 - k]);
      if (!is_splat_of(g, sum.in[k], 1.0) || th.op != Op::Unary || th.attrs.unary != Unary::Tanh) continue;
      const Factors u = factors(g, th.in[0]);
      if (u.of.size() == 1 && near(u.coef, kGeluC, d) && cubic_term(g, u.of[0], x, d)) return x;
    }
  }
  return -1;
}

int32_t written_softmax(const ir::Graph& g, const Node& div) {
  if (!binary(div, Binary::Div) || g.type(div.out).shape.empty() || !is_float(g.type(div.out).dtype)) return -1;
  const int32_t e = div.in[0];
  if (!row_values(g, div.in[1], Reduce::Sum, e)) return -1;
  const Node& ex = g.producer(e);
  if (ex.op != Op::Unary || ex.attrs.unary != Unary::Exp) return -1;
  const Node& sub = g.producer(ex.in[0]);
  if (!binary(sub, Binary::Sub) || !row_values(g, sub.in[1], Reduce::Max, sub.in[0])) return -1;
  return g.type(sub.in[0]) == g.type(div.out) ? sub.in[0] : -1;
}

namespace {

// The composite a written-out node is the last node of — its op, operand and attributes — or
// nullopt.
struct Written {
  Op op;
  int32_t x;
  ir::Attrs attrs;
};
std::optional<Written> written_composite(const ir::Graph& g, const Node& n) {
  if (const int32_t x = written_softmax(g, n); x >= 0)
    return Written{Op::Softmax, x, ir::Attrs{.axis = static_cast<int64_t>(g.type(x).shape.size()) - 1}};
  if (const int32_t x = written_gelu(g, n); x >= 0) return Written{Op::Gelu, x, {}};
  return std::nullopt;
}

}  // namespace

void recognise_composites_in_place(ir::Graph& g, size_t first) {
  for (size_t i = first; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    std::optional<Written> w = written_composite(g, n);
    if (!w) continue;
    n.op = w->op;
    n.in = {w->x};
    n.attrs = w->attrs;
  }
}

std::optional<ir::Graph> recognise_composites(const ir::Graph& g) {
  // nothing to recognise (every round after the first, as a rule): not rebuilt
  if (std::none_of(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return written_composite(g, n).has_value(); }))
    return std::nullopt;
  return rewrite(g, [](Rewriter& r, const Node& n) {
    std::optional<Written> w = written_composite(r.src(), n);
    if (!w) return false;
    r.map_results(n, r.emit(w->op, {r.map(w->x)}, w->attrs, n.loc));
    return true;
  });
}

Lowered lower_composites(const ir::Graph& g, bool regions) {
  Lowered l;
  // Per graph being rebuilt, from its first composite on: its nodes by key (ir::node_key), so
  // that an expansion's node and a node equal to it, before or after it, become one (a softmax's
  // row max and a loss's over the same rows), as CSE would had the expansion been there all along.
  struct Seen {
    bool active = false;
    std::unordered_map<std::string, int32_t> first;  // key → first result id
    size_t indexed = 0;                              // nodes of the new graph keyed so far
  };
  std::map<const ir::Graph*, Seen> seen;
  auto catch_up = [](Seen& s, const Rewriter& r) {
    for (const ir::Graph& o = r.out(); s.indexed < o.nodes.size(); ++s.indexed) {
      const Node& on = o.nodes[s.indexed];
      if (on.op != Op::Parameter) s.first.try_emplace(ir::node_key(o, on, on.in), on.out);
    }
  };
  Visit visit = [&](Rewriter& r, const Node& n) {
    Seen& s = seen[&r.src()];
    if (!ir::is_composite(n.op)) {
      if (!s.active) return false;
      catch_up(s, r);
      auto it = s.first.find(ir::node_key(r.src(), n, r.map(n.in)));
      if (it == s.first.end()) return false;  // copied (and keyed at the next catch_up)
      r.map_results(n, it->second);
      return true;
    }
    s.active = true;
    catch_up(s, r);
    std::vector<ir::Type> in;
    for (int32_t v : n.in) in.push_back(r.src().type(v));
    const ir::Expansion x = ir::expand(n, in);
    std::vector<int32_t> id(x.graph.types.size(), -1);  // expansion value → new value
    for (size_t k = 0; k < x.graph.params.size(); ++k) id[static_cast<size_t>(x.graph.params[k])] = r.map(n.in[k]);
    std::vector<int32_t> nodes;  // the expansion's new nodes
    for (const Node& e : x.graph.nodes) {
      if (e.op == Op::Parameter) continue;
      std::vector<int32_t> ops;
      for (int32_t v : e.in) ops.push_back(id[static_cast<size_t>(v)]);
      auto [it, fresh] = s.first.try_emplace(ir::node_key(x.graph, e, ops), -1);
      if (fresh) {
        std::vector<ir::Type> types;
        for (int32_t k = 0; k < e.nout; ++k) types.push_back(x.graph.type(e.out + k));
        nodes.push_back(static_cast<int32_t>(r.out().nodes.size()));
        it->second = r.add(e.op, std::move(ops), e.attrs, std::move(types), n.loc);
      }
      for (int32_t k = 0; k < e.nout; ++k) id[static_cast<size_t>(e.out + k)] = it->second + k;
    }
    s.indexed = r.out().nodes.size();
    const int32_t out = id[static_cast<size_t>(x.graph.results[0])];
    r.map_results(n, out);
    if (&r.src() != &g) return true;  // a region's: no site
    auto node_of = [&](int32_t v) { return r.out().def[static_cast<size_t>(id[static_cast<size_t>(v)])]; };
    if (n.op == Op::Softmax)
      l.sites.softmax.push_back({.axis = n.attrs.axis, .x = r.map(n.in[0]), .out = out,
                                 .row_max = node_of(x.row_max), .row_sum = node_of(x.row_sum), .nodes = std::move(nodes)});
    else if (n.op == Op::SoftmaxGrad)
      l.sites.softmax_grad.push_back({.axis = n.attrs.axis, .p = r.map(n.in[0]), .g = r.map(n.in[1]), .out = out, .nodes = std::move(nodes)});
    else
      (n.op == Op::Gelu ? l.sites.gelu : l.sites.gelu_grad)
          .push_back({.x = r.map(n.in[0]), .g = n.op == Op::Gelu ? -1 : r.map(n.in[1]), .out = out, .nodes = std::move(nodes)});
    return true;
  };
  l.graph = regions ? rewrite_with_regions(g, visit) : rewrite(g, visit);
  return l;
}

}  // namespace sheaf::passes
