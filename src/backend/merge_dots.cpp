// backend/merge_dots.cpp — products merged into fewer, wider ones, for backends that run products
// as library calls: the CPU's sgemm reaches a fraction of its rate on products 64 columns wide and
// reads the shared operand again for each; on a GPU each such product is a cuBLASLt launch that
// fills few of its tensor cores (attention heads written as modules: 36 products of 64 columns a
// layer, one once merged). Products of one float dtype (operands and result: f32, f16, bf16).
//   Shared operand: dot(X, W1) .. dot(X, Wk) with equal dims whose other operands differ only
//     along their first free dim become one dot(X, concat(W1 .. Wk)) and a slice of it per old
//     product (the q, k, v projections of attention heads written one by one, and their weight
//     gradients dot(X, dY1) .. dot(X, dYk)); the same with X on the right. When each product is
//     read only by the addition of its bias row bi (broadcast along its varying dim, maybe along
//     others too), the merged product adds broadcast(concat(b1 .. bk)) and the additions are its
//     slices (exact) — also through a transpose between product and addition, then transposed
//     slices (einsum projections "... t d, d h k -> ... h t k" with their biases [H 1 Hd]).
//   Sum of products: dot(A1, B1) + .. + dot(Ak, Bk), each product read only by the additions,
//     with equal dims and operands that differ only along their first contracting dims, becomes
//     dot(concat(A1 .. Ak), concat(B1 .. Bk)) (the input gradient of those projections); a sum too
//     long to pay as one merges in runs of consecutive products that do (all heads' input
//     gradients summed into one cotangent, as the reverse sweep gives a layer norm per head).
//   Row sums: when every operand that a sum of products concatenates is also summed over all the
//     dims its product does not contract (each head's bias gradient beside its input gradient; the
//     sum may read the operand before a transpose, as an einsum's bias gradient reads dq [B H T Hd]
//     where the product reads [B T H Hd]), those sums are slices of one sum of the concatenation
//     (exact: each column adds the same values in the same order).
//   Concatenations of casts from one dtype (bf16 casts of f32 weights) are casts of one
//     concatenation, so no cast is made per operand (exact); a concatenation's operand that is a
//     concatenation along the same axis is read as its operands, and adjacent slices of one value
//     are that value or one slice of it (no copy: merge_heads' re-merge of runs over one join).
// Operands concatenate along their first free (or contracted) dim, the outermost: one with
// several, an einsum's [D H Hd] weights, joins as [D 3H Hd], so that each old product's part of
// a row of the merged result is contiguous, as in a batch-written [D 3D] weight (its slices are
// views that merge into matrices: the three weights' gradients are read where the merged weight
// gradient lies, not copied out). A group's operands are concatenated in the order of their value
// ids, slices of one value in the order they lie in it (a sum's: of its operands on the side
// defined first), so that two groups
// over the same values share one concatenation (dX's and dW's dY1 .. dYk; dX's and the
// projection's W1 .. Wk, whose order dY1 .. dYk then follow; a shared-operand group over exactly
// the operands of a sum's part takes that part's order). A group of k products is merged only
// when each does at least k·kFlopsPerCopied flops (2·m·n·k) per element it copies into a
// concatenation, so that the copies cost far less than the products they widen (the threshold
// holds even for a concatenation that reads all k operands at each element; fusion copies each
// operand into its region once, so it is conservative) — and, for
// a shared operand, only products that do not read each other's results; a shared-operand group
// that does not pay as a whole still merges the products whose other operands a sum group
// concatenates anyway, over that concatenation (the per-head weight gradients dot(X, dY_h) over
// the dY_h their input gradient concatenates). The nodes are then
// reordered: a merged product runs as soon as all its operands are ready, and what read the old
// products waits for it. Sums of products add in another order (float reassociation); the
// rest is exact. Regions of while/case are merged too; the graph returned has no dead nodes (the
// casts and broadcasts that merged operands no longer read). Not part of optimize (passes.hpp).
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <utility>

#include "backend/merge_dots.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"
#include "tensor/dot.hpp"
#include "tensor/shape.hpp"

namespace sheaf::fusion {

namespace {

using passes::Readers;
using passes::Rewriter;
using ir::Graph;
using ir::Node;
using ir::Op;

constexpr double kFlopsPerCopied = 128;  // 2·(the other operand's free size): ≥ 64 rows or columns

// The bias that the addition `add` (node) puts on dot d's result, maybe through a transpose of it
// (node `transpose`; d + bias: a projection with its bias; transpose(d) + bias: an einsum's
// "... t d, d h k -> ... h t k" with its bias [H, 1, Hd]): `row`, broadcast along d's result
// dims `dims` (ascending, `along` among them; the row's size-1 dims that the broadcast widens
// dropped, to shape `shape`), `perm` the transpose's (empty: none). row −1: not such a bias.
struct AddedBias {
  int32_t add = -1, transpose = -1, row = -1;
  std::vector<int64_t> dims, perm;
  Shape shape;
};

// Products merged into one: parts[i] are dot nodes, in the order their operands concatenate.
// Shared operand: one part, `side` the operand they share (0 lhs, 1 rhs), and `adds`, when each
// product's only reader adds a bias along its varying dim (bias_of), those additions (in the same
// order).
// Sum: the additions of the tree (its root last), one merged product per part, the tree's
// other leaves (`rest`, values), and per part and operand side the reduce nodes that sum each of
// the part's operands on that side over its rows (`row_sums`; empty where not every operand has
// one).
struct Group {
  bool sum = false;
  int side = 0;
  std::vector<std::vector<int32_t>> parts;
  std::vector<int32_t> adds;
  std::vector<AddedBias> biases;  // shared operand: what each of `adds` adds
  std::vector<int32_t> rest;
  std::vector<std::array<std::vector<int32_t>, 2>> row_sums;

  std::vector<int32_t> nodes() const {
    std::vector<int32_t> r = adds;
    for (const AddedBias& b : biases)
      if (b.transpose >= 0) r.push_back(b.transpose);
    for (const auto& p : parts) r.insert(r.end(), p.begin(), p.end());
    for (const auto& sides : row_sums)
      for (const auto& sums : sides) r.insert(r.end(), sums.begin(), sums.end());
    return r;
  }
};

// A product whose operands and result have one float dtype.
bool is_float_dot(const Graph& g, const Node& n) {
  const DType t = g.type(n.out).dtype;
  return n.op == Op::DotGeneral && is_float(t) && g.type(n.in[0]).dtype == t && g.type(n.in[1]).dtype == t;
}

bool is_float_add(const Graph& g, const Node& n) {
  return n.op == Op::Binary && n.attrs.binary == Binary::Add && is_float(g.type(n.out).dtype);
}

// The dims of operand `side` of dot n that are neither batch nor contracting.
std::vector<int64_t> free_of(const Graph& g, const Node& n, int side) {
  const DotDims& d = n.attrs.dot;
  return free_dims(static_cast<int64_t>(g.type(n.in[static_cast<size_t>(side)]).shape.size()), side ? d.rhs_batch : d.lhs_batch,
                   side ? d.rhs_contract : d.lhs_contract);
}

// The dim along which merged products concatenate operand `side` of dot n: a shared operand's
// other side along its first free dim (-1: it has none), a sum's operands along their first
// contracting dims — the outermost, so that each product's part of a row is contiguous (the file
// comment).
int64_t joined_free_dim(const Graph& g, const Node& n, int side) {
  const std::vector<int64_t> f = free_of(g, n, side);
  return f.empty() ? -1 : f.front();
}
int64_t joined_contract_dim(const Node& n, int side) { return (side ? n.attrs.dot.rhs_contract : n.attrs.dot.lhs_contract).front(); }

// Multiply-adds ×2 of dot n per element of its operand `side`.
double flops_per_element(const Graph& g, const Node& n, int side) {
  int64_t k = 1;
  for (int64_t d : n.attrs.dot.lhs_contract) k *= g.type(n.in[0]).shape[static_cast<size_t>(d)];
  const double flops = 2.0 * static_cast<double>(shape_numel(g.type(n.out).shape)) * static_cast<double>(k);
  return flops / static_cast<double>(std::max<int64_t>(1, shape_numel(g.type(n.in[static_cast<size_t>(side)]).shape)));
}

// The dims of operand `side` of dot n that it does not contract: the rows that a row sum of the
// operand adds up, keeping the contracted dims (its columns: a bias gradient beside an input
// gradient, [tokens, features] → [features], or [B, T, H, Hd] → [H, Hd] under an einsum's).
std::vector<int64_t> row_dims(const Graph& g, const Node& n, int side) {
  const std::vector<int64_t>& contract = side ? n.attrs.dot.rhs_contract : n.attrs.dot.lhs_contract;
  std::vector<int64_t> rows;
  for (int64_t d = 0; d < static_cast<int64_t>(g.type(n.in[static_cast<size_t>(side)]).shape.size()); ++d)
    if (std::find(contract.begin(), contract.end(), d) == contract.end()) rows.push_back(d);
  return rows;
}

// Whether node x sums value v over `rows`, or v = transpose(u) and x sums u over those dims
// (mapped to u's) keeping the others in v's order (a bias gradient summed from an attention
// gradient that merge_dots' operand reads transposed): either way x's result is v's row sum.
bool sums_rows(const Graph& g, const Node& x, int32_t v, const std::vector<int64_t>& rows) {
  if (x.op != Op::Reduce || x.attrs.reduce != Reduce::Sum) return false;
  if (x.in[0] == v) return x.attrs.dims == rows;
  const Node& t = g.producer(v);
  if (t.op != Op::Transpose || x.in[0] != t.in[0]) return false;
  std::vector<int64_t> summed, kept;
  for (int64_t d = 0; d < static_cast<int64_t>(t.attrs.dims.size()); ++d)
    (std::binary_search(rows.begin(), rows.end(), d) ? summed : kept).push_back(t.attrs.dims[static_cast<size_t>(d)]);
  std::sort(summed.begin(), summed.end());
  return x.attrs.dims == summed && std::is_sorted(kept.begin(), kept.end());
}

// Per operand of `part` on `side` (concatenated along its first contracting dim), an unclaimed
// sum of it over its rows (row_dims, sums_rows); none unless each has one.
std::vector<int32_t> row_sums_of(const Graph& g, const Readers& rd, const std::vector<bool>& claimed, const std::vector<int32_t>& part,
                                 int side) {
  std::vector<int32_t> sums;
  for (int32_t d : part) {
    const Node& n = g.nodes[static_cast<size_t>(d)];
    const int32_t v = n.in[static_cast<size_t>(side)];
    const std::vector<int64_t> rows = row_dims(g, n, side);
    const Node& t = g.producer(v);
    std::vector<int32_t> readers = rd.nodes[static_cast<size_t>(v)];
    if (t.op == Op::Transpose) readers.insert(readers.end(), rd.nodes[static_cast<size_t>(t.in[0])].begin(), rd.nodes[static_cast<size_t>(t.in[0])].end());
    const auto it = std::find_if(readers.begin(), readers.end(), [&](int32_t r) {
      return sums_rows(g, g.nodes[static_cast<size_t>(r)], v, rows) && !claimed[static_cast<size_t>(r)] &&
             std::find(sums.begin(), sums.end(), r) == sums.end();
    });
    if (it == readers.end()) return {};
    sums.push_back(*it);
  }
  return sums;
}

// Whether concatenating operand `side` of the products `dots` pays (the file comment).
bool pays(const Graph& g, const std::vector<int32_t>& dots, int side) {
  const double need = kFlopsPerCopied * static_cast<double>(dots.size());
  return std::all_of(dots.begin(), dots.end(), [&](int32_t d) { return flops_per_element(g, g.nodes[static_cast<size_t>(d)], side) >= need; });
}

// `dots` (in concatenation order) cut into runs of k consecutive products, k the largest for which
// every run of two or more pays on both sides; those runs (a sum of 12 per-head products, 4 of
// whose 3 pay, merges as 4 sums of 3). None when no k ≥ 2 pays.
std::vector<std::vector<int32_t>> paying_runs(const Graph& g, const std::vector<int32_t>& dots) {
  for (size_t k = dots.size(); k >= 2; --k) {
    std::vector<std::vector<int32_t>> runs;
    for (size_t i = 0; i < dots.size(); i += k)
      if (dots.size() - i >= 2) runs.emplace_back(dots.begin() + static_cast<ptrdiff_t>(i), dots.begin() + static_cast<ptrdiff_t>(std::min(i + k, dots.size())));
    if (std::all_of(runs.begin(), runs.end(), [&](const std::vector<int32_t>& r) { return pays(g, r, 0) && pays(g, r, 1); })) return runs;
  }
  return {};
}

// What products must share to merge: the kind, dims and dtypes, and the operand shapes with the
// concatenated axes left out (`axis[side]` < 0: that operand is not concatenated; `shared`: its value).
std::vector<int64_t> merge_key(const Graph& g, const Node& n, int kind, const int64_t axis[2], int32_t shared) {
  std::vector<int64_t> k{kind, shared};
  const DotDims& d = n.attrs.dot;
  for (const auto* v : {&d.lhs_batch, &d.rhs_batch, &d.lhs_contract, &d.rhs_contract}) {
    k.push_back(static_cast<int64_t>(v->size()));
    k.insert(k.end(), v->begin(), v->end());
  }
  for (int side = 0; side < 2; ++side) {
    const Shape& s = g.type(n.in[static_cast<size_t>(side)]).shape;
    k.push_back(static_cast<int64_t>(s.size()));
    for (size_t i = 0; i < s.size(); ++i) k.push_back(static_cast<int64_t>(i) == axis[side] ? -1 : s[i]);
  }
  return k;
}

// Where operand v is in the order of a merged group's concatenation: its value id, or for a slice,
// its source's id and its starts — slices of one value in the order they lie in it, so that their
// concatenation is a slice of it (merge_heads' re-merge of runs over one join).
std::pair<int32_t, std::vector<int64_t>> operand_place(const Graph& g, int32_t v) {
  const Node& p = g.producer(v);
  return p.op == Op::Slice ? std::pair(p.in[0], p.attrs.starts) : std::pair(v, std::vector<int64_t>{});
}

// Sums of products: every tree of float additions whose inner additions are read only by the
// tree, its products (read only by the tree) grouped by merge_key along the first contracting dims.
void find_sums(const Graph& g, const Readers& rd, std::vector<bool>& claimed, std::vector<Group>& out) {
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& root = g.nodes[i];
    if (!is_float_add(g, root) || claimed[i]) continue;
    Group grp;
    grp.sum = true;
    std::map<std::vector<int64_t>, std::vector<int32_t>> by_key;
    std::vector<std::pair<int32_t, int32_t>> stack{{static_cast<int32_t>(i), -1}};  // (node, -1) or (-1, leaf value)
    std::vector<int32_t> leaves;
    while (!stack.empty()) {
      auto [node, value] = stack.back();
      stack.pop_back();
      if (node >= 0) {
        grp.adds.push_back(node);
        const Node& a = g.nodes[static_cast<size_t>(node)];
        for (auto it = a.in.rbegin(); it != a.in.rend(); ++it) {
          const int32_t p = g.def[static_cast<size_t>(*it)];
          if (rd.sole(*it) == node && is_float_add(g, g.nodes[static_cast<size_t>(p)])) stack.push_back({p, -1});
          else stack.push_back({-1, *it});
        }
        continue;
      }
      const int32_t p = g.def[static_cast<size_t>(value)];
      const Node& n = g.nodes[static_cast<size_t>(p)];
      const int32_t reader = rd.sole(value);
      if (is_float_dot(g, n) && reader >= 0 && !claimed[static_cast<size_t>(p)] && !n.attrs.dot.lhs_contract.empty() &&
          flops_per_element(g, n, 0) >= kFlopsPerCopied && flops_per_element(g, n, 1) >= kFlopsPerCopied) {
        const int64_t axis[2] = {joined_contract_dim(n, 0), joined_contract_dim(n, 1)};
        by_key[merge_key(g, n, 0, axis, -1)].push_back(p);
      }
      leaves.push_back(value);
    }
    for (auto& keyed : by_key) {
      std::vector<int32_t>& dots = keyed.second;
      // In the order of the operands on the side defined first (the weights of an input gradient):
      // the order a shared-operand group over them concatenates them in. Slices of one value
      // come in the order they lie in it (place).
      auto place = [&](int32_t v) { return operand_place(g, v); };
      auto first_defined = [&](int side) {
        auto m = place(g.nodes[static_cast<size_t>(dots[0])].in[static_cast<size_t>(side)]);
        for (int32_t d : dots) m = std::min(m, place(g.nodes[static_cast<size_t>(d)].in[static_cast<size_t>(side)]));
        return m;
      };
      const size_t by = first_defined(1) < first_defined(0) ? 1 : 0;
      std::sort(dots.begin(), dots.end(), [&](int32_t a, int32_t b) {
        const std::vector<int32_t> &x = g.nodes[static_cast<size_t>(a)].in, &y = g.nodes[static_cast<size_t>(b)].in;
        return std::pair(place(x[by]), place(x[1 - by])) < std::pair(place(y[by]), place(y[1 - by]));
      });
      for (std::vector<int32_t>& part : paying_runs(g, dots)) grp.parts.push_back(std::move(part));
    }
    std::reverse(grp.adds.begin(), grp.adds.end());  // the root last
    for (int32_t a : grp.adds) claimed[static_cast<size_t>(a)] = true;  // inner additions are no roots
    if (grp.parts.empty()) continue;
    std::vector<bool> merged(g.nodes.size(), false);
    for (const auto& part : grp.parts)
      for (int32_t d : part) claimed[static_cast<size_t>(d)] = merged[static_cast<size_t>(d)] = true;
    for (int32_t v : leaves)
      if (!merged[static_cast<size_t>(g.def[static_cast<size_t>(v)])]) grp.rest.push_back(v);
    for (const auto& part : grp.parts) {
      grp.row_sums.push_back({row_sums_of(g, rd, claimed, part, 0), row_sums_of(g, rd, claimed, part, 1)});
      for (const auto& sums : grp.row_sums.back())
        for (int32_t r : sums) claimed[static_cast<size_t>(r)] = true;
    }
    out.push_back(std::move(grp));
  }
}

// `dots` (sorted by node index) less those that read, through any path, the result of an earlier one.
std::vector<int32_t> independent(const Graph& g, const std::vector<int32_t>& dots) {
  std::vector<char> tainted(g.types.size(), 0);
  std::vector<int32_t> keep;
  size_t next = 0;
  for (auto i = static_cast<size_t>(dots.front()); i <= static_cast<size_t>(dots.back()); ++i) {
    const Node& n = g.nodes[i];
    bool reads = std::any_of(n.in.begin(), n.in.end(), [&](int32_t v) { return tainted[static_cast<size_t>(v)] != 0; });
    bool member = next < dots.size() && static_cast<size_t>(dots[next]) == i;
    if (member) {
      ++next;
      if (!reads) keep.push_back(static_cast<int32_t>(i));
    }
    if (reads || member)
      for (int32_t r = 0; r < n.nout; ++r) tainted[static_cast<size_t>(n.out + r)] = 1;
  }
  return keep;
}

// The operands `side` of sum part `part` concatenate along `axis` (its first contracting dim there).
std::vector<int32_t> sum_operands(const Graph& g, const std::vector<int32_t>& part, int side, int64_t& axis) {
  axis = joined_contract_dim(g.nodes[static_cast<size_t>(part[0])], side);
  std::vector<int32_t> r;
  for (int32_t p : part) r.push_back(g.nodes[static_cast<size_t>(p)].in[static_cast<size_t>(side)]);
  return r;
}

// The operands that the parts of the sum groups among `groups` concatenate along `axis`, a list
// per part and side.
std::vector<std::vector<int32_t>> sum_operands_along(const Graph& g, const std::vector<Group>& groups, int64_t axis) {
  std::vector<std::vector<int32_t>> lists;
  for (const Group& s : groups)
    for (const auto& part : s.parts)
      for (int side = 0; s.sum && side < 2; ++side) {
        int64_t sum_axis = 0;
        std::vector<int32_t> operands = sum_operands(g, part, side, sum_axis);
        if (sum_axis == axis) lists.push_back(std::move(operands));
      }
  return lists;
}

// The products of `dots` whose operand `vary` is each of `operands`, in their order, one each;
// none unless every operand has its own.
std::vector<int32_t> products_over(const Graph& g, const std::vector<int32_t>& operands, const std::vector<int32_t>& dots, int vary) {
  std::vector<int32_t> found;
  for (int32_t v : operands) {
    auto it = std::find_if(dots.begin(), dots.end(), [&](int32_t d) { return g.nodes[static_cast<size_t>(d)].in[static_cast<size_t>(vary)] == v; });
    if (it == dots.end() || std::find(found.begin(), found.end(), *it) != found.end()) return {};
    found.push_back(*it);
  }
  return found;
}

// Splits off `dots` (products sharing operand 1 - vary, the others concatenated along `axis`) the
// groups whose other operands a sum group concatenates already, along the same axis: that copy is
// made anyway, so they merge whatever their number (the weight gradients dot(X, dY1) .. of per-head
// projections over the concatenation their input gradient reads). Each such group takes the sum
// part's operand order, so that both read one concatenation; `dots` keeps the rest.
void split_shared_by_sums(const Graph& g, const std::vector<Group>& sums, int side, int64_t axis, std::vector<int32_t>& dots,
                          std::vector<Group>& out) {
  for (const std::vector<int32_t>& operands : sum_operands_along(g, sums, axis)) {
    std::vector<int32_t> group = products_over(g, operands, dots, 1 - side);
    if (group.empty()) continue;
    for (int32_t d : group) std::erase(dots, d);
    out.push_back(Group{.sum = false, .side = side, .parts = {std::move(group)}});
  }
}

// `dots` (products whose operands `vary` are concatenated along `axis`) in the order of a sum part
// that concatenates exactly those operands along that axis, if one does: both then read one
// concatenation (dX's and dW's of projections whose weights order the sum: q, k, v by their
// einsum weights' ids, v first, while the gradients dq, dk, dv come in the other order).
void in_sum_order(const Graph& g, const std::vector<Group>& sums, int vary, int64_t axis, std::vector<int32_t>& dots) {
  for (const std::vector<int32_t>& operands : sum_operands_along(g, sums, axis))
    if (operands.size() == dots.size())
      if (std::vector<int32_t> ordered = products_over(g, operands, dots, vary); !ordered.empty()) {
        dots = std::move(ordered);
        return;
      }
}

// The dim of dot n's result along which its operand `vary` is concatenated (its first free dim).
size_t varying_dim(const Graph& g, const Node& n, int vary) {
  return n.attrs.dot.lhs_batch.size() + (vary == 1 ? free_of(g, n, 0).size() : 0);
}

// The bias that dot d's only reader adds (AddedBias), or none.
AddedBias bias_of(const Graph& g, const Readers& rd, const Node& d, size_t along) {
  AddedBias b;
  int32_t x = d.out, reader = rd.sole(x);
  if (reader >= 0 && g.nodes[static_cast<size_t>(reader)].op == Op::Transpose) {
    const Node& t = g.nodes[static_cast<size_t>(reader)];
    b.transpose = reader, b.perm = t.attrs.dims, x = t.out;
    reader = rd.sole(x);
  }
  if (reader < 0) return {};
  b.add = reader;
  const Node& a = g.nodes[static_cast<size_t>(b.add)];
  if (!is_float_add(g, a) || g.type(a.out) != g.type(x) || (a.in[0] == x) == (a.in[1] == x)) return {};
  const Node& bc = g.producer(a.in[a.in[0] == x ? 1 : 0]);
  if (bc.op != Op::BroadcastInDim) return {};
  const Shape& row = g.type(bc.in[0]).shape;
  for (size_t j = 0; j < row.size(); ++j) {
    const int64_t at = bc.attrs.dims[j];
    if (row[j] == 1 && g.type(x).shape[static_cast<size_t>(at)] != 1) continue;  // widened: constant along it
    const int64_t dim = b.perm.empty() ? at : b.perm[static_cast<size_t>(at)];
    if (!b.dims.empty() && dim <= b.dims.back()) return {};
    b.dims.push_back(dim);
    b.shape.push_back(row[j]);
  }
  if (std::find(b.dims.begin(), b.dims.end(), static_cast<int64_t>(along)) == b.dims.end()) return {};
  b.row = bc.in[0];
  return b;
}

// The bias additions of a shared-operand group's products (Group::adds and biases), in their
// order, when every product is read only by one (bias_of; all alike) that no sum group has taken:
// its bias then joins the merged product (one addition of the concatenated rows, whose slices the
// readers read, instead of one per product). Else none.
void bias_adds(const Graph& g, const Readers& rd, const std::vector<Group>& sums, int vary, Group& grp) {
  for (int32_t d : grp.parts[0]) {
    const Node& n = g.nodes[static_cast<size_t>(d)];
    const AddedBias b = bias_of(g, rd, n, varying_dim(g, n, vary));
    if (b.row < 0 || (!grp.biases.empty() && (b.dims != grp.biases[0].dims || b.perm != grp.biases[0].perm)) ||
        std::any_of(sums.begin(), sums.end(), [&](const Group& s) { return std::find(s.adds.begin(), s.adds.end(), b.add) != s.adds.end(); }))
      break;
    grp.adds.push_back(b.add);
    grp.biases.push_back(b);
  }
  if (grp.adds.size() == grp.parts[0].size()) return;
  grp.adds.clear(), grp.biases.clear();
}

// Products sharing an operand (lhs first, then rhs among the rest), the other operand concatenated
// along its first free dim.
void find_shared(const Graph& g, const Readers& rd, std::vector<bool>& claimed, std::vector<Group>& out) {
  const std::vector<Group> sums = out;
  for (int side = 0; side < 2; ++side) {
    const int vary = 1 - side;
    std::map<std::vector<int64_t>, std::vector<int32_t>> by_key;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (!is_float_dot(g, n) || claimed[i] || flops_per_element(g, n, vary) < kFlopsPerCopied) continue;
      int64_t axis[2] = {-1, -1};
      axis[vary] = joined_free_dim(g, n, vary);
      if (axis[vary] < 0) continue;
      by_key[merge_key(g, n, 1 + side, axis, n.in[static_cast<size_t>(side)])].push_back(static_cast<int32_t>(i));
    }
    for (auto& [key, dots] : by_key) {
      if (dots.size() < 2) continue;
      std::vector<int32_t> keep = independent(g, dots);
      if (keep.size() < 2) continue;
      const size_t first = out.size();
      const int64_t axis = joined_free_dim(g, g.nodes[static_cast<size_t>(keep[0])], vary);  // the group's, as merge_key says
      if (!pays(g, keep, vary)) split_shared_by_sums(g, sums, side, axis, keep, out);
      if (keep.size() >= 2 && pays(g, keep, vary)) {
        std::sort(keep.begin(), keep.end(), [&](int32_t a, int32_t b) {
          return operand_place(g, g.nodes[static_cast<size_t>(a)].in[static_cast<size_t>(vary)]) <
                 operand_place(g, g.nodes[static_cast<size_t>(b)].in[static_cast<size_t>(vary)]);
        });
        in_sum_order(g, sums, vary, axis, keep);
        out.push_back(Group{.sum = false, .side = side, .parts = {keep}});
        bias_adds(g, rd, sums, vary, out.back());
      }
      for (size_t k = first; k < out.size(); ++k)
        for (int32_t d : out[k].parts[0]) claimed[static_cast<size_t>(d)] = true;
    }
  }
}


Graph merge_graph(const Graph& g, std::map<const Graph*, std::shared_ptr<const Graph>>& done);

class Emitter {
 public:
  Emitter(const Graph& g, std::map<const Graph*, std::shared_ptr<const Graph>>& done) : g_(g), r_(g), done_(done) {}

  void node(const Node& n) {
    if (n.attrs.regions.empty()) {
      r_.copy(n);
      return;
    }
    ir::Attrs a = n.attrs;
    for (std::shared_ptr<const Graph>& region : a.regions) {
      auto [it, fresh] = done_.try_emplace(region.get());
      if (fresh) it->second = std::make_shared<const Graph>(merge_graph(*region, done_));
      region = it->second;
    }
    std::vector<ir::Type> types(g_.types.begin() + n.out, g_.types.begin() + n.out + n.nout);
    r_.map_results(n, r_.add(n.op, r_.map(n.in), std::move(a), std::move(types), n.loc));
  }

  void group(const Group& grp) {
    if (!grp.sum) {
      shared(grp);
      return;
    }
    const Node& root = g_.nodes[static_cast<size_t>(grp.adds.back())];
    std::vector<int32_t> terms;
    for (size_t p = 0; p < grp.parts.size(); ++p) {
      const std::vector<int32_t>& part = grp.parts[p];
      const Node& n0 = g_.nodes[static_cast<size_t>(part[0])];
      const int32_t lhs = concat(part, 0, joined_contract_dim(n0, 0), n0.loc);
      const int32_t rhs = concat(part, 1, joined_contract_dim(n0, 1), n0.loc);
      terms.push_back(r_.emit(Op::DotGeneral, {lhs, rhs}, {.dot = n0.attrs.dot}, n0.loc));
      row_sums(grp.row_sums[p][0], n0, 0, lhs);
      row_sums(grp.row_sums[p][1], n0, 1, rhs);
    }
    for (int32_t v : grp.rest) terms.push_back(r_.map(v));
    int32_t total = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) total = r_.add(Op::Binary, {total, terms[i]}, root.attrs, {g_.type(root.out)}, root.loc);
    r_.map_results(root, total);
  }

  Graph finish() { return r_.finish(); }

 private:
  const Graph& g_;
  Rewriter r_;
  std::map<const Graph*, std::shared_ptr<const Graph>>& done_;
  std::map<std::pair<std::vector<int32_t>, int64_t>, int32_t> concats_;  // (new operands, axis) → concatenation

  // The reduce nodes `sums` (Group::row_sums), each over the rows of one operand `side` of
  // product n0's part, as slices of one sum of their concatenation `cat` over its rows.
  void row_sums(const std::vector<int32_t>& sums, const Node& n0, int side, int32_t cat) {
    if (sums.empty()) return;
    const int64_t axis = joined_contract_dim(n0, side);
    const Node& r0 = g_.nodes[static_cast<size_t>(sums[0])];
    const std::vector<int64_t> rows = row_dims(g_, n0, side);
    const int32_t total = r_.emit(Op::Reduce, {cat}, {.reduce = Reduce::Sum, .dims = rows}, r0.loc);
    const auto dim = static_cast<size_t>(axis - std::count_if(rows.begin(), rows.end(), [&](int64_t d) { return d < axis; }));
    std::vector<int64_t> widths;
    for (int32_t r : sums) widths.push_back(g_.type(g_.nodes[static_cast<size_t>(r)].out).shape[dim]);
    map_to_slices(sums, widths, total, dim);
  }

  // Each of the nodes `old` (of g_) replaced by its slice of `whole` along `dim`, consecutive,
  // widths[i] wide (transposed by `perm`, when given).
  void map_to_slices(const std::vector<int32_t>& old, const std::vector<int64_t>& widths, int32_t whole, size_t dim,
                     const std::vector<int64_t>& perm = {}) {
    const Shape shape = r_.out().type(whole).shape;  // a copy: each emit below may grow the types it lives in
    int64_t at = 0;
    for (size_t i = 0; i < old.size(); ++i) {
      const Node& n = g_.nodes[static_cast<size_t>(old[i])];
      ir::Attrs a{.starts = std::vector<int64_t>(shape.size(), 0), .limits = shape, .strides = std::vector<int64_t>(shape.size(), 1)};
      a.starts[dim] = at;
      a.limits[dim] = at += widths[i];
      const int32_t slice = r_.emit(Op::Slice, {whole}, std::move(a), n.loc);
      r_.map_results(n, perm.empty() ? slice : r_.emit(Op::Transpose, {slice}, {.dims = perm}, n.loc));
    }
  }

  // Operand `side` of the dots, concatenated along `axis` (one node for equal operands and axis).
  int32_t concat(const std::vector<int32_t>& dots, int side, int64_t axis, SrcLoc loc) {
    std::vector<int32_t> in;
    for (int32_t d : dots) in.push_back(r_.map(g_.nodes[static_cast<size_t>(d)].in[static_cast<size_t>(side)]));
    auto [it, fresh] = concats_.try_emplace({in, axis}, -1);
    if (fresh) it->second = concat_values(in, axis, loc);
    return it->second;
  }

  // Values of the new graph concatenated along `axis`. A value that is itself a concatenation
  // along `axis` is read as its operands (merge_heads' re-merge of products merged in runs joins
  // the runs' concatenations). Values that are all conversions from one dtype (a mixed-precision
  // model's bf16 casts of its f32 weights and biases, maybe reshaped: [D, D] weights as [D, H, Hd])
  // are concatenated before one conversion: the per-value casts, which each concatenation of them
  // would read from memory, are not made. Values
  // that are adjacent slices of one value along `axis` are one slice of it, or that value (no copy).
  int32_t concat_values(const std::vector<int32_t>& values, int64_t axis, SrcLoc loc) {
    std::vector<int32_t> in;
    for (int32_t v : values) {
      const Node& c = r_.out().producer(v);
      if (c.op == Op::Concatenate && c.attrs.axis == axis) in.insert(in.end(), c.in.begin(), c.in.end());
      else in.push_back(v);
    }
    if (const std::optional<int32_t> whole = adjacent_slices(in, axis, loc)) return *whole;
    std::vector<int32_t> from;  // v = convert(x), or reshape(convert(x)) = convert(reshape(x)): x
    for (int32_t v : in) {
      int32_t c = v;
      if (r_.out().producer(c).op == Op::Reshape) c = r_.out().producer(c).in[0];
      if (r_.out().producer(c).op != Op::Convert) break;
      const int32_t x = r_.out().producer(c).in[0];
      if (!from.empty() && r_.out().type(from[0]).dtype != r_.out().type(x).dtype) break;
      from.push_back(x);
    }
    if (from.size() != in.size()) return r_.emit(Op::Concatenate, in, {.axis = axis}, loc);
    for (size_t i = 0; i < in.size(); ++i) {  // x reshaped as v was
      const ir::Type t{r_.out().type(from[i]).dtype, r_.out().type(in[i]).shape};
      if (r_.out().type(from[i]).shape != t.shape) from[i] = r_.add(Op::Reshape, {from[i]}, {}, {t}, loc);
    }
    const DType to = r_.out().type(in[0]).dtype;
    return r_.emit(Op::Convert, {concat_values(from, axis, loc)}, {.dtype = to}, loc);
  }

  // Values that are unit-stride slices of one value X, equal but along `axis`, where each starts
  // where the one before ends: X, or its slice over their span.
  std::optional<int32_t> adjacent_slices(const std::vector<int32_t>& in, int64_t axis, SrcLoc loc) {
    const auto a = static_cast<size_t>(axis);
    const Node& s0 = r_.out().producer(in[0]);
    if (s0.op != Op::Slice) return std::nullopt;
    int64_t end = s0.attrs.starts[a];
    for (int32_t v : in) {
      const Node& s = r_.out().producer(v);
      if (s.op != Op::Slice || s.in[0] != s0.in[0] || s.attrs.starts[a] != end ||
          std::any_of(s.attrs.strides.begin(), s.attrs.strides.end(), [](int64_t x) { return x != 1; }))
        return std::nullopt;
      for (size_t d = 0; d < s.attrs.starts.size(); ++d)
        if (d != a && (s.attrs.starts[d] != s0.attrs.starts[d] || s.attrs.limits[d] != s0.attrs.limits[d])) return std::nullopt;
      end = s.attrs.limits[a];
    }
    ir::Attrs span = s0.attrs;
    span.limits[a] = end;
    if (span.starts == std::vector<int64_t>(span.starts.size(), 0) && span.limits == r_.out().type(s0.in[0]).shape) return s0.in[0];
    return r_.emit(Op::Slice, {s0.in[0]}, std::move(span), loc);
  }

  // One product over the shared operand and the others concatenated, plus the concatenated bias
  // rows when the group has `adds`; each old product, or its bias addition, a slice of it (through
  // the bias's transpose, when it has one).
  void shared(const Group& grp) {
    const std::vector<int32_t>& dots = grp.parts[0];
    const Node& n0 = g_.nodes[static_cast<size_t>(dots[0])];
    const int vary = 1 - grp.side;
    const int64_t axis = joined_free_dim(g_, n0, vary);
    const int32_t cat = concat(dots, vary, axis, n0.loc);
    const int32_t x = r_.map(n0.in[static_cast<size_t>(grp.side)]);
    int32_t merged = r_.emit(Op::DotGeneral, grp.side == 0 ? std::vector{x, cat} : std::vector{cat, x}, {.dot = n0.attrs.dot}, n0.loc);
    const size_t dim = varying_dim(g_, n0, vary);
    std::vector<int64_t> perm;
    if (!grp.adds.empty()) {
      const AddedBias& b0 = grp.biases[0];
      const Node& a0 = g_.nodes[static_cast<size_t>(grp.adds[0])];
      std::vector<int32_t> rows;
      for (const AddedBias& b : grp.biases) {
        int32_t row = r_.map(b.row);
        if (r_.out().type(row).shape == b.shape) {
          rows.push_back(row);
          continue;
        }
        if (r_.out().producer(row).op == Op::Reshape) row = r_.out().producer(row).in[0];
        const DType t = r_.out().type(row).dtype;
        rows.push_back(r_.add(Op::Reshape, {row}, {}, {{t, b.shape}}, a0.loc));
      }
      const auto along = std::find(b0.dims.begin(), b0.dims.end(), static_cast<int64_t>(dim)) - b0.dims.begin();
      const int32_t row = concat_values(rows, along, a0.loc);
      const int32_t spread = r_.add(Op::BroadcastInDim, {row}, {.dims = b0.dims}, {r_.out().type(merged)}, a0.loc);
      merged = r_.emit(Op::Binary, {merged, spread}, a0.attrs, a0.loc);
      perm = b0.perm;
    }
    std::vector<int64_t> widths;
    for (int32_t d : dots) widths.push_back(g_.type(g_.nodes[static_cast<size_t>(d)].in[static_cast<size_t>(vary)]).shape[static_cast<size_t>(axis)]);
    map_to_slices(grp.adds.empty() ? dots : grp.adds, widths, merged, dim, perm);
  }
};

Graph merge_graph(const Graph& g, std::map<const Graph*, std::shared_ptr<const Graph>>& done) {
  std::vector<Group> groups;
  {
    const Readers rd(g);
    std::vector<bool> claimed(g.nodes.size(), false);
    find_sums(g, rd, claimed, groups);
    find_shared(g, rd, claimed, groups);
  }
  std::optional<std::vector<int32_t>> order;
  size_t stuck = 0;
  auto units = [&] {
    std::vector<std::vector<int32_t>> nodes;
    for (const Group& grp : groups) nodes.push_back(grp.nodes());
    return nodes;
  };
  while (!(order = unit_order(g, units(), stuck))) groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(stuck));
  Emitter e(g, done);
  for (int32_t u : *order) {
    if (u < 0) e.group(groups[static_cast<size_t>(-1 - u)]);
    else e.node(g.nodes[static_cast<size_t>(u)]);
  }
  return e.finish();
}

}  // namespace

std::optional<std::vector<int32_t>> unit_order(const Graph& g, const std::vector<std::vector<int32_t>>& groups, size_t& stuck) {
  const size_t n = g.nodes.size();
  std::vector<int32_t> unit_of(n);
  for (size_t i = 0; i < n; ++i) unit_of[i] = static_cast<int32_t>(groups.size() + i);
  std::vector<int32_t> first(groups.size() + n);
  for (size_t i = 0; i < n; ++i) first[groups.size() + i] = static_cast<int32_t>(i);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    first[gi] = static_cast<int32_t>(n);
    for (int32_t node : groups[gi]) {
      unit_of[static_cast<size_t>(node)] = static_cast<int32_t>(gi);
      first[gi] = std::min(first[gi], node);
    }
  }
  std::vector<std::vector<int32_t>> next(first.size());
  std::vector<int32_t> waiting(first.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    if (node.op == Op::Parameter) continue;
    for (int32_t v : node.in) {
      const int32_t from = unit_of[static_cast<size_t>(g.def[static_cast<size_t>(v)])], to = unit_of[i];
      if (from == to || g.producer(v).op == Op::Parameter) continue;
      next[static_cast<size_t>(from)].push_back(to);
      ++waiting[static_cast<size_t>(to)];
    }
  }
  using Entry = std::pair<int32_t, int32_t>;  // (first node, unit)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  std::vector<char> live(first.size(), 0);
  for (size_t i = 0; i < n; ++i)
    if (g.nodes[i].op != Op::Parameter) live[static_cast<size_t>(unit_of[i])] = 1;
  size_t count = 0;
  for (size_t u = 0; u < first.size(); ++u)
    if (live[u]) {
      ++count;
      if (waiting[u] == 0) ready.push({first[u], static_cast<int32_t>(u)});
    }
  std::vector<int32_t> order;
  while (!ready.empty()) {
    const int32_t u = ready.top().second;
    ready.pop();
    order.push_back(u < static_cast<int32_t>(groups.size()) ? -1 - u : u - static_cast<int32_t>(groups.size()));
    for (int32_t t : next[static_cast<size_t>(u)])
      if (--waiting[static_cast<size_t>(t)] == 0) ready.push({first[static_cast<size_t>(t)], t});
  }
  if (order.size() == count) return order;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (waiting[gi] > 0) {
      stuck = gi;
      break;
    }
  return std::nullopt;
}

ir::Graph merge_dots(const ir::Graph& g) {
  std::map<const Graph*, std::shared_ptr<const Graph>> done;
  return passes::eliminate_dead_code(merge_graph(g, done));
}

}  // namespace sheaf::fusion
