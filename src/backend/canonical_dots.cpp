// backend/canonical_dots.cpp — dot_general operands whose dims a matrix product cannot walk as
// one matrix, transposed first into the order it can (canonical_dots.hpp; both backends run
// products as strided matrix products: fusion.hpp's Dot steps, OpenBLAS's or cuBLASLt's).
// A Dot step reads each operand as matrices: the free dims merged into one axis and the
// contracting dims into another (batch dims each their own loop). Dims merge when they are
// adjacent in memory, outermost first; in an operand laid out row-major that means adjacent and
// in order. An einsum such as "bhtk,hkd->btd" (an attention output projection on a weight
// reshaped to [H Hd D]) contracts h and k, which are not adjacent in [b h t k]: such an operand
// becomes transpose(x) to (batch.., free.., contracting..) for the left operand and (batch..,
// contracting.., free..) for the right one, with the dims renumbered; the result is unchanged
// (free dims keep their order). Fusion reads the transpose as a view and copies it into a
// buffer of its own only when the view's dims still do not merge (a strided Copy step instead of
// the whole product on the host). A transpose made for one product serves another that reads the
// same operand when that product's dims merge in it too (the projection "bhtk,hkd->btd" and its
// weight gradient "bhtk,btd->hkd": one [b t h k] value, which an attention step then writes in
// place). Operands whose dims merge when row-major are left as they are (fusion reads them through
// whatever view they have). Regions of while/case are rewritten too.
#include <algorithm>
#include <map>
#include <numeric>

#include "backend/canonical_dots.hpp"
#include "passes/rewrite.hpp"
#include "tensor/dot.hpp"

namespace sheaf::fusion {

namespace {

using passes::Rewriter;
using passes::rewrite_with_regions;
using ir::Node;
using ir::Op;

// Whether `dims` (in this order) merge into one axis of a row-major value of shape `s`: each one
// after the first (size-1 dims aside) directly follows the previous, up to size-1 dims between.
bool merge_row_major(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t prev = -1;
  for (int64_t d : dims) {
    if (s[static_cast<size_t>(d)] == 1) continue;
    if (prev >= 0) {
      if (d < prev) return false;
      for (int64_t k = prev + 1; k < d; ++k)
        if (s[static_cast<size_t>(k)] != 1) return false;
    }
    prev = d;
  }
  return true;
}

// The transposes made so far of each operand (in the graph being built from a source graph):
// their dims and value.
using Transposes = std::map<std::pair<const ir::Graph*, int32_t>, std::vector<std::pair<std::vector<int64_t>, int32_t>>>;

// Operand `v` with its batch and contracting dims `batch`, `contract` (renumbered in place when
// it is transposed): v itself; or a transpose of v made for an earlier product in which this
// product's free and contracting dims merge too (attention's output, transposed to [b t h k] for
// the output projection "bhtk,hkd->btd", serves its weight gradient "bhtk,btd->hkd" as well: one
// value, which the Attention step writes in that layout); or its transpose to (batch.., free..,
// contract..) — (batch.., contract.., free..) when `contract_first`.
int32_t canonical_operand(Rewriter& r, Transposes& made, int32_t v, std::vector<int64_t>& batch, std::vector<int64_t>& contract,
                          bool contract_first, SrcLoc loc) {
  const Shape shape = r.out().type(v).shape;
  const std::vector<int64_t> free = free_dims(static_cast<int64_t>(shape.size()), batch, contract);
  if (merge_row_major(shape, free) && merge_row_major(shape, contract)) return v;
  std::vector<std::pair<std::vector<int64_t>, int32_t>>& earlier = made[{&r.src(), v}];
  for (const auto& [dims, t] : earlier) {
    std::vector<int64_t> at(dims.size());  // where each dim of v is in t
    for (size_t k = 0; k < dims.size(); ++k) at[static_cast<size_t>(dims[k])] = static_cast<int64_t>(k);
    auto moved = [&](const std::vector<int64_t>& ds) {
      std::vector<int64_t> m;
      for (int64_t d : ds) m.push_back(at[static_cast<size_t>(d)]);
      return m;
    };
    const Shape& ts = r.out().type(t).shape;
    if (merge_row_major(ts, moved(free)) && merge_row_major(ts, moved(contract))) {
      batch = moved(batch), contract = moved(contract);
      return t;
    }
  }
  std::vector<int64_t> perm = batch;
  const std::vector<int64_t>& first = contract_first ? contract : free;
  const std::vector<int64_t>& second = contract_first ? free : contract;
  perm.insert(perm.end(), first.begin(), first.end());
  perm.insert(perm.end(), second.begin(), second.end());
  std::iota(batch.begin(), batch.end(), 0);
  const auto at = static_cast<int64_t>(batch.size() + (contract_first ? 0 : free.size()));
  std::iota(contract.begin(), contract.end(), at);
  const int32_t t = r.emit(Op::Transpose, {v}, {.dims = perm}, loc);
  earlier.emplace_back(std::move(perm), t);
  return t;
}

}  // namespace

ir::Graph canonical_dots(const ir::Graph& g) {
  Transposes made;
  return rewrite_with_regions(g, [&](Rewriter& r, const Node& n) {
    if (n.op != Op::DotGeneral) return false;
    ir::Attrs a = n.attrs;
    DotDims& d = a.dot;
    const int32_t lhs = canonical_operand(r, made, r.map(n.in[0]), d.lhs_batch, d.lhs_contract, false, n.loc);
    const int32_t rhs = canonical_operand(r, made, r.map(n.in[1]), d.rhs_batch, d.rhs_contract, true, n.loc);
    if (lhs == r.map(n.in[0]) && rhs == r.map(n.in[1])) return false;
    r.map_results(n, r.emit(Op::DotGeneral, {lhs, rhs}, std::move(a), n.loc));
    return true;
  });
}

}  // namespace sheaf::fusion
