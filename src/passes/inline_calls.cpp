// passes/inline_calls.cpp — see inline_calls.hpp. The graph is rebuilt node by node; a call's
// region is spliced in place with its parameters bound to the call's operands.
#include "passes/inline_calls.hpp"

#include <memory>

namespace sheaf::passes {
namespace {

using ir::Op;

bool has_calls(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    if (n.op == Op::Call) return true;
    for (const auto& r : n.attrs.regions)
      if (has_calls(*r)) return true;
  }
  return false;
}

// The nodes of f appended to `out` with args (ids of `out`) for its parameters; returns the ids
// of its results.
std::vector<int32_t> splice(ir::Graph& out, const ir::Graph& f, const std::vector<int32_t>& args) {
  std::vector<int32_t> ids(f.types.size(), -1);
  std::vector<bool> read(f.types.size(), false);
  for (const ir::Node& n : f.nodes)
    for (int32_t v : n.in) read[static_cast<size_t>(v)] = true;
  for (int32_t r : f.results) read[static_cast<size_t>(r)] = true;
  for (const ir::Node& n : f.nodes) {
    if (n.op == Op::Parameter) {
      ids[static_cast<size_t>(n.out)] = args[static_cast<size_t>(n.attrs.index)];
      continue;
    }
    std::vector<int32_t> in;
    for (int32_t v : n.in) in.push_back(ids[static_cast<size_t>(v)]);
    if (n.op == Op::Call) {
      const ir::Attrs& a = n.attrs;
      bool residuals_read = false;
      for (int32_t k = static_cast<int32_t>(a.k); a.regions.size() == 3 && k < n.nout; ++k) residuals_read |= read[static_cast<size_t>(n.out + k)];
      const ir::Graph& body = a.regions.size() == 3 && !residuals_read ? *a.regions[2] : *a.regions[0];
      std::vector<int32_t> r = splice(out, body, in);
      for (size_t k = 0; k < r.size(); ++k) ids[static_cast<size_t>(n.out) + k] = r[k];
      continue;
    }
    ir::Attrs a = n.attrs;
    for (auto& r : a.regions)
      if (has_calls(*r)) r = std::make_shared<const ir::Graph>(inline_calls(*r));
    std::vector<ir::Type> types(f.types.begin() + n.out, f.types.begin() + n.out + n.nout);
    int32_t first = out.add(n.op, std::move(in), std::move(a), std::move(types), n.loc);
    for (int32_t k = 0; k < n.nout; ++k) ids[static_cast<size_t>(n.out + k)] = first + k;
  }
  std::vector<int32_t> results;
  for (int32_t r : f.results) results.push_back(ids[static_cast<size_t>(r)]);
  return results;
}

}  // namespace

ir::Graph inline_calls(const ir::Graph& g) {
  if (!has_calls(g)) return g;
  ir::Graph out;
  out.name = g.name;
  std::vector<int32_t> params;
  for (int32_t p : g.params) {
    const ir::Node& n = g.producer(p);
    params.push_back(out.add(Op::Parameter, {}, n.attrs, {g.type(p)}, n.loc));
  }
  out.results = splice(out, g, params);
  return out;
}

}  // namespace sheaf::passes
