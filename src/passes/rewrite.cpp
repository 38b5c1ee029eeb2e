// passes/rewrite.cpp — the Rewriter (old → new value map over a graph rebuilt from scratch) and
// the helpers passes share: constants, splats, use counts, graph equality.
#include "passes/rewrite.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "backend/ref/executor.hpp"
#include "base/error.hpp"
#include "ir/node_key.hpp"
#include "tensor/shape.hpp"

namespace sheaf::passes {

using ir::Graph;
using ir::Node;
using ir::Op;

namespace {

// Whether g's parameters are its first values, in order (ir::verify's rule; a graph traced with
// captures declared as they are met has them later, and an eager rebuild moves them first).
bool parameters_first(const Graph& g) {
  for (size_t k = 0; k < g.params.size(); ++k)
    if (g.params[k] != static_cast<int32_t>(k)) return false;
  return true;
}

}  // namespace

Rewriter::Rewriter(const Graph& src, Build build)
    : src_(src), map_(src.types.size(), -1), unchanged_(build == Build::FromFirstChange && parameters_first(src)) {
  out_.name = src.name;
  out_.nodes.reserve(src.nodes.size());  // a pass rarely grows the graph: no node is moved while it is built
  out_.types.reserve(src.types.size());
  out_.def.reserve(src.types.size());
  for (int32_t p : src.params) {
    const Node& n = src.producer(p);
    map_[static_cast<size_t>(p)] = unchanged_ ? p : out_.add(Op::Parameter, {}, n.attrs, {src.type(p)}, n.loc);
  }
}

void Rewriter::diverge() {
  if (!unchanged_) return;
  unchanged_ = false;
  // Every node before at_ was kept as it is, under its own ids (parameters first: the constructor).
  const auto end = src_.nodes.begin() + static_cast<std::ptrdiff_t>(at_);
  const size_t values = at_ == 0 ? 0 : static_cast<size_t>(src_.nodes[at_ - 1].out + src_.nodes[at_ - 1].nout);
  out_.nodes.assign(src_.nodes.begin(), end);
  out_.types.assign(src_.types.begin(), src_.types.begin() + static_cast<std::ptrdiff_t>(values));
  out_.def.assign(src_.def.begin(), src_.def.begin() + static_cast<std::ptrdiff_t>(values));
  out_.params = src_.params;
}

int32_t Rewriter::map(int32_t old) const {
  int32_t v = map_.at(static_cast<size_t>(old));
  if (v < 0) throw SheafError(fmt::format("internal: a pass over '{}' read %{}, which it had dropped", src_.name, old));
  return v;
}

std::vector<int32_t> Rewriter::map(const std::vector<int32_t>& olds) const {
  std::vector<int32_t> r;
  r.reserve(olds.size());
  for (int32_t v : olds) r.push_back(map(v));
  return r;
}

void Rewriter::map_results(const Node& n, int32_t first) {
  if (first != n.out) diverge();
  for (int32_t k = 0; k < n.nout; ++k) {
    if (out_.type(first + k) != src_.type(n.out + k))
      throw SheafError(fmt::format("internal: a pass replaced %{} : {} by a value of type {}", n.out + k,
                                   ir::type_str(src_.type(n.out + k)), ir::type_str(out_.type(first + k))));
    map_[static_cast<size_t>(n.out + k)] = first + k;
  }
}

int32_t Rewriter::copy(const Node& n) {
  if (unchanged_) {  // its operands are old values under their own ids: the node stays as it is
    for (int32_t k = 0; k < n.nout; ++k) map_[static_cast<size_t>(n.out + k)] = n.out + k;
    return n.out;
  }
  const int32_t first = out_.add_copy(n, map(n.in), std::span(src_.types).subspan(static_cast<size_t>(n.out), static_cast<size_t>(n.nout)));
  map_results(n, first);
  return first;
}

int32_t Rewriter::add(Op op, std::vector<int32_t> in, ir::Attrs attrs, std::vector<ir::Type> types, SrcLoc loc) {
  diverge();
  return out_.add(op, std::move(in), std::move(attrs), std::move(types), loc);
}

int32_t Rewriter::emit(Op op, std::vector<int32_t> in, ir::Attrs attrs, SrcLoc loc) {
  diverge();
  return out_.emit(op, std::move(in), std::move(attrs), loc);
}

int32_t Rewriter::constant(Tensor value, SrcLoc loc) {
  diverge();
  return out_.emit_constant(std::move(value), loc);
}

int32_t Rewriter::splat(const ir::Type& t, const Tensor& scalar, SrcLoc loc) {
  if (scalar.rank() != 0 || scalar.dtype() != t.dtype)
    throw SheafError(fmt::format("internal: splat of {} as {}", type_str(scalar.dtype(), scalar.shape()), ir::type_str(t)));
  int32_t c = constant(scalar, loc);
  if (t.shape.empty()) return c;
  return add(Op::BroadcastInDim, {c}, {}, {t}, loc);
}

Graph Rewriter::finish() {
  if (unchanged_) {
    at_ = src_.nodes.size();
    diverge();
  }
  out_.results = map(src_.results);
  return std::move(out_);
}

std::optional<Graph> Rewriter::finish_if_changed() {
  if (unchanged_) return std::nullopt;
  return finish();
}

void Rewriter::visit_all(const Visit& visit) {
  for (at_ = 0; at_ < src_.nodes.size(); ++at_) {
    const Node& n = src_.nodes[at_];
    if (n.op == Op::Parameter) continue;
    if (!visit(*this, n)) {
      copy(n);
    } else if (unchanged_ && (n.nout == 0 || map_[static_cast<size_t>(n.out)] < 0)) {
      diverge();  // dropped: the nodes before it are kept
    }
  }
}

Graph rewrite(const Graph& g, const Visit& visit) {
  Rewriter rw(g);
  rw.visit_all(visit);
  return rw.finish();
}

std::optional<Graph> rewrite_if_changed(const Graph& g, const Visit& visit) {
  Rewriter rw(g, Rewriter::Build::FromFirstChange);
  rw.visit_all(visit);
  return rw.finish_if_changed();
}

namespace {

// rewrite_with_regions over one graph, with the regions rebuilt so far (original → rebuilt).
Graph rewrite_deep(const Graph& g, const Visit& visit, std::map<const Graph*, std::shared_ptr<const Graph>>& done) {
  return rewrite(g, [&](Rewriter& r, const Node& n) {
    if (visit(r, n)) return true;
    if (n.attrs.regions.empty()) return false;
    ir::Attrs a = n.attrs;
    for (std::shared_ptr<const Graph>& region : a.regions) {
      auto [it, fresh] = done.try_emplace(region.get());
      if (fresh) it->second = std::make_shared<const Graph>(rewrite_deep(*region, visit, done));
      region = it->second;
    }
    std::vector<ir::Type> types(g.types.begin() + n.out, g.types.begin() + n.out + n.nout);
    r.map_results(n, r.add(n.op, r.map(n.in), std::move(a), std::move(types), n.loc));
    return true;
  });
}

}  // namespace

Graph rewrite_with_regions(const Graph& g, const Visit& visit) {
  std::map<const Graph*, std::shared_ptr<const Graph>> done;
  return rewrite_deep(g, visit, done);
}

const Tensor* constant_value(const Graph& g, int32_t v) {
  const Node& n = g.producer(v);
  return n.op == Op::Constant ? &n.attrs.value : nullptr;
}

bool has_constant_tensor(const Graph& g, int32_t v, int64_t max_elements) {
  if (constant_value(g, v)) return true;
  const Node& n = g.producer(v);
  return shape_numel(g.type(v).shape) <= max_elements &&
         (n.op == Op::Iota || (n.op == Op::BroadcastInDim && g.type(n.in[0]).shape.empty() && constant_value(g, n.in[0])));
}

std::optional<Tensor> constant_tensor(const Graph& g, int32_t v, int64_t max_elements) {
  if (!has_constant_tensor(g, v, max_elements)) return std::nullopt;
  if (const Tensor* t = constant_value(g, v)) return *t;
  const Node& n = g.producer(v);
  return n.op == Op::Iota ? ref::run_node(g, n, {})[0] : ref::run_node(g, n, std::span(constant_value(g, n.in[0]), 1))[0];
}

bool moves_elements(Op op) {
  switch (op) {
    case Op::BroadcastInDim: case Op::Reshape: case Op::Transpose: case Op::Slice: case Op::Reverse: case Op::DynamicSlice:
      return true;
    default:
      return false;
  }
}

std::optional<Tensor> splat_scalar(const Graph& g, int32_t v) {
  if (shape_numel(g.type(v).shape) == 0) return std::nullopt;
  const Node* n = &g.producer(v);
  while (moves_elements(n->op)) n = &g.producer(n->in[0]);
  if (n->op != Op::Constant) return std::nullopt;
  const Tensor& t = n->attrs.value;
  if (t.numel() == 0) return std::nullopt;
  size_t es = dtype_size(t.dtype());
  const std::byte* p = t.bytes();
  for (int64_t i = 1; i < t.numel(); ++i)
    if (std::memcmp(p, p + static_cast<size_t>(i) * es, es) != 0) return std::nullopt;
  Tensor s = Tensor::empty(t.dtype(), {});
  std::memcpy(s.mutable_bytes(), p, es);
  return s;
}

bool is_splat_of(const Graph& g, int32_t v, double x) {
  auto s = splat_scalar(g, v);
  if (!s) return false;
  double e = s->get(0);
  return e == x && std::signbit(e) == std::signbit(x);
}

std::vector<int32_t> use_counts(const Graph& g) {
  std::vector<int32_t> uses(g.types.size(), 0);
  for (const Node& n : g.nodes)
    for (int32_t v : n.in) ++uses[static_cast<size_t>(v)];
  for (int32_t r : g.results) ++uses[static_cast<size_t>(r)];
  return uses;
}

Readers::Readers(const Graph& g) : uses(use_counts(g)), nodes(g.types.size()) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int32_t u : g.nodes[i].in) nodes[static_cast<size_t>(u)].push_back(static_cast<int32_t>(i));
}

bool same_graph(const Graph& a, const Graph& b) {
  if (a.nodes.size() != b.nodes.size() || a.types.size() != b.types.size() || a.params != b.params || a.results != b.results)
    return false;
  std::string ka, kb;  // reused: no allocation per node
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    ir::write_node_key(ka, a, a.nodes[i], a.nodes[i].in);
    ir::write_node_key(kb, b, b.nodes[i], b.nodes[i].in);
    if (ka != kb) return false;
  }
  return true;
}

}  // namespace sheaf::passes
