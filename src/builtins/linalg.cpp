// builtins/linalg.cpp — matrix products (SPEC §5.1 `@`) and Einstein summation (§5.6 `einsum`).
// Both are composites over primitives: dot_general does the products, reduce sums out indices,
// transpose/reshape/broadcast arrange operands, so a tracer records the same calls.
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/dot.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/reduce.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

std::vector<int64_t> range_of(int64_t start, int64_t end) {
  std::vector<int64_t> r;
  for (int64_t i = start; i < end; ++i) r.push_back(i);
  return r;
}

// ---- @ ----------------------------------------------------------------------------------------

[[noreturn]] void cannot_multiply(const CallArgs& a, const Tensor& x, const Tensor& y, const std::string& why,
                                  std::string hint = {}) {
  throw SheafError(fmt::format("@: cannot multiply {} by {} ({})", type_str(x), type_str(y), why), a.site,
                   std::move(hint));
}

// NumPy matmul: x [..., m, k] (or [k]) times y [..., k, n] (or [k]); leading dims broadcast.
Tensor matmul(const CallArgs& a, const Tensor& x, const Tensor& y) {
  const int64_t rx = x.rank(), ry = y.rank();
  if (rx == 0 || ry == 0)
    throw SheafError(fmt::format("@: operands need at least one dimension, got {} and {} (use * to scale)",
                                 type_str(x), type_str(y)),
                     a.site);
  const int64_t kx = x.dim(rx - 1), ky = y.dim(ry == 1 ? 0 : ry - 2);
  if (kx != ky) {
    std::string hint;
    if (ry >= 2 && y.dim(ry - 1) == kx)
      hint = fmt::format("did you mean (@ a (transpose b))? the last axes of both have size {}", kx);
    cannot_multiply(a, x, y, fmt::format("inner dimensions {} and {} differ", kx, ky), hint);
  }
  if (ry == 1) return dot_general(x, y, {{}, {}, {rx - 1}, {0}});  // [..., m]
  if (rx == 1) return dot_general(y, x, {{}, {}, {ry - 2}, {0}});  // [..., n]

  const Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
  const auto batch = broadcast_shapes(bx, by);
  if (!batch)
    cannot_multiply(a, x, y, fmt::format("batch dimensions [{}] and [{}] do not broadcast", fmt::join(bx, ", "),
                                         fmt::join(by, ", ")));
  const int64_t m = x.dim(rx - 2), n = y.dim(ry - 1);
  Shape out_shape = *batch;
  out_shape.insert(out_shape.end(), {m, n});
  if (shape_numel(by) == 1) {  // one right matrix: the batch folds into the rows of one product
    Tensor r = dot_general(x, reshape(y, {kx, n}), {{}, {}, {rx - 1}, {0}});  // [bx..., m, n]
    return r.shape() == out_shape ? r : reshape(r, out_shape);
  }
  auto full = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape s = *batch;
    s.insert(s.end(), {rows, cols});
    return t.shape() == s ? t : broadcast_to(t, s);
  };
  const auto nb = static_cast<int64_t>(batch->size());
  const std::vector<int64_t> bdims = range_of(0, nb);
  return dot_general(full(x, m, kx), full(y, kx, n), {bdims, bdims, {nb + 1}, {nb}});
}

Value b_matmul(Interp&, const CallArgs& a) {
  std::vector<Tensor> xy = promote_all(a, {array_operand(a, 0), array_operand(a, 1)});
  return Value::tensor(matmul(a, xy[0], xy[1]));
}

// ---- einsum -----------------------------------------------------------------------------------
// Labels are letters (their character codes) and broadcast dims under `...` (kEllipsis + j,
// j counted over the widest `...`, right-aligned). Lowering, per NumPy semantics:
//   1. size-1 dims broadcast against the index's size elsewhere are reshaped away;
//   2. an index repeated within one operand takes the diagonal: dot_general with an identity;
//   3. an index in one operand only and not in the output is summed out (reduce);
//   4. operands are contracted left to right with dot_general: shared indices that are still
//      needed (output, later operands) are batch dims, the others are contracted;
//   5. the result is transposed to the output order and reshaped (restoring size-1 dims).

constexpr int kEllipsis = 256;

struct Term {
  std::vector<int> labels;  // letters; -1 marks where `...` stands
  bool ellipsis = false;
};

struct Pattern {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

std::string label_name(int l) { return l >= kEllipsis ? "..." : std::string(1, static_cast<char>(l)); }

Term parse_term(const CallArgs& a, std::string_view s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isalpha(static_cast<unsigned char>(c))) {
      t.labels.push_back(c);
    } else if (s.substr(i, 3) == "...") {
      if (t.ellipsis) throw SheafError(fmt::format("einsum: '...' appears twice in the term \"{}\"", s), a.site);
      t.ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else {
      throw SheafError(fmt::format("einsum: unexpected character '{}' in the pattern (indices are letters)", c),
                       a.site);
    }
  }
  return t;
}

Pattern parse_pattern(const CallArgs& a, const std::string& text) {
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  Pattern p;
  size_t arrow = s.find("->");
  std::string lhs = s.substr(0, arrow);
  if (arrow != std::string::npos) {
    p.explicit_output = true;
    p.output = parse_term(a, s.substr(arrow + 2));
  }
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    p.inputs.push_back(parse_term(a, std::string_view(lhs).substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return p;
}

struct Labeled {
  Tensor t;
  std::vector<int> labels;  // one per axis
};

// Replaces the `...` marker of each term by broadcast labels; returns the widest `...`.
int64_t expand_ellipses(const CallArgs& a, const Pattern& p, const std::vector<Tensor>& ts,
                        std::vector<Labeled>& ops) {
  int64_t widest = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Term& t = p.inputs[i];
    const int64_t named = static_cast<int64_t>(t.labels.size()) - (t.ellipsis ? 1 : 0);
    if (ts[i].rank() < named || (!t.ellipsis && ts[i].rank() != named))
      throw SheafError(fmt::format("einsum: operand {} is {} but its term names {} dimensions", i + 1,
                                   type_str(ts[i]), named),
                       a.site);
    widest = std::max(widest, ts[i].rank() - named);
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    const Term& t = p.inputs[i];
    const int64_t width = ts[i].rank() - (static_cast<int64_t>(t.labels.size()) - (t.ellipsis ? 1 : 0));
    Labeled op{ts[i], {}};
    for (int l : t.labels) {
      if (l != -1) op.labels.push_back(l);
      else
        for (int64_t j = 0; j < width; ++j) op.labels.push_back(static_cast<int>(kEllipsis + widest - width + j));
    }
    ops.push_back(std::move(op));
  }
  return widest;
}

// The output labels: as written (with `...` expanded), or NumPy's implicit order — the broadcast
// dims, then the letters that occur exactly once, alphabetically.
std::vector<int> output_labels(const CallArgs& a, const Pattern& p, const std::vector<Labeled>& ops, int64_t widest) {
  std::map<int, int> count;
  for (const Labeled& op : ops)
    for (int l : op.labels) ++count[l];
  std::vector<int> out;
  if (!p.explicit_output) {
    for (int64_t j = 0; j < widest; ++j) out.push_back(static_cast<int>(kEllipsis + j));
    for (auto [l, n] : count)
      if (l < kEllipsis && n == 1) out.push_back(l);
    return out;
  }
  for (int l : p.output.labels) {
    if (l == -1) {
      for (int64_t j = 0; j < widest; ++j) out.push_back(static_cast<int>(kEllipsis + j));
      continue;
    }
    if (!count.count(l))
      throw SheafError(fmt::format("einsum: output index '{}' does not appear in the inputs", label_name(l)), a.site);
    if (std::count(p.output.labels.begin(), p.output.labels.end(), l) > 1)
      throw SheafError(fmt::format("einsum: output index '{}' appears more than once", label_name(l)), a.site);
    out.push_back(l);
  }
  if (widest > 0 && !p.output.ellipsis)
    throw SheafError("einsum: the inputs have dimensions under '...' but the output does not name them; add '...' "
                     "to the output",
                     a.site);
  return out;
}

// Every index's size; size-1 dims broadcast (NumPy) and are reshaped away where the index is larger.
std::map<int, int64_t> index_sizes(const CallArgs& a, std::vector<Labeled>& ops) {
  std::map<int, int64_t> size;
  std::map<int, size_t> first;  // operand that set the size, for messages
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t d = 0; d < ops[i].labels.size(); ++d) {
      const int l = ops[i].labels[d];
      const int64_t n = ops[i].t.dim(static_cast<int64_t>(d));
      for (size_t e = 0; e < d; ++e)
        if (ops[i].labels[e] == l && ops[i].t.dim(static_cast<int64_t>(e)) != n)
          throw SheafError(fmt::format("einsum: index '{}' repeats in {} with sizes {} and {}", label_name(l),
                                       type_str(ops[i].t), ops[i].t.dim(static_cast<int64_t>(e)), n),
                           a.site);
      auto it = size.find(l);
      if (it == size.end() || it->second == 1) {
        size[l] = n;
        first[l] = i;
      } else if (n != 1 && n != it->second) {
        throw SheafError(fmt::format("einsum: index '{}' has size {} in operand {} ({}) but {} in operand {} ({})",
                                     label_name(l), it->second, first[l] + 1, type_str(ops[first[l]].t), n, i + 1,
                                     type_str(ops[i].t)),
                         a.site);
      }
    }
  for (Labeled& op : ops) {
    Labeled kept{op.t, {}};
    Shape shape;
    for (size_t d = 0; d < op.labels.size(); ++d)
      if (op.t.dim(static_cast<int64_t>(d)) != 1 || size[op.labels[d]] == 1) {
        kept.labels.push_back(op.labels[d]);
        shape.push_back(op.t.dim(static_cast<int64_t>(d)));
      }
    if (kept.labels.size() != op.labels.size()) op = {reshape(op.t, shape), kept.labels};
  }
  return size;
}

// op with every repeated index collapsed to its diagonal: x[.., i, .., i, ..] → y[i, ..].
void take_diagonals(Labeled& op) {
  for (int64_t p = 0; p < static_cast<int64_t>(op.labels.size()); ++p) {
    const auto q = std::find(op.labels.begin() + p + 1, op.labels.end(), op.labels[p]) - op.labels.begin();
    if (q == static_cast<int64_t>(op.labels.size())) continue;
    const int64_t n = op.t.dim(p);  // == dim(q), checked by index_sizes
    const Tensor eye =
        convert(binary(Binary::Eq, iota(DType::I32, {n, n}, 0), iota(DType::I32, {n, n}, 1)), op.t.dtype());
    std::vector<int> labels{op.labels[p]};
    for (int64_t d = 0; d < static_cast<int64_t>(op.labels.size()); ++d)
      if (d != p && d != q) labels.push_back(op.labels[d]);
    op = {dot_general(op.t, eye, {{p}, {0}, {q}, {1}}), labels};  // Σ_j x[.., i, .., j, ..]·δ(i, j)
    p = -1;  // positions moved: look again from the start
  }
}

bool contains(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

// Sums out the indices of op that `needed` does not list.
void sum_unneeded(Labeled& op, const std::vector<int>& needed) {
  std::vector<int64_t> axes;
  std::vector<int> kept;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (contains(needed, op.labels[d])) kept.push_back(op.labels[d]);
    else axes.push_back(static_cast<int64_t>(d));
  }
  if (!axes.empty()) op = {reduce(Reduce::Sum, op.t, axes), kept};
}

// acc · op over their shared indices: batch where still needed, contracted otherwise.
Labeled contract(const Labeled& acc, const Labeled& op, const std::vector<int>& needed) {
  DotDims dims;
  std::vector<int> batch, lfree, rfree;
  for (size_t d = 0; d < acc.labels.size(); ++d) {
    const int l = acc.labels[d];
    auto e = std::find(op.labels.begin(), op.labels.end(), l);
    if (e == op.labels.end()) {
      lfree.push_back(l);
      continue;
    }
    const auto de = static_cast<int64_t>(e - op.labels.begin());
    if (contains(needed, l)) {
      dims.lhs_batch.push_back(static_cast<int64_t>(d));
      dims.rhs_batch.push_back(de);
      batch.push_back(l);
    } else {
      dims.lhs_contract.push_back(static_cast<int64_t>(d));
      dims.rhs_contract.push_back(de);
    }
  }
  for (int l : op.labels)
    if (!contains(acc.labels, l)) rfree.push_back(l);
  batch.insert(batch.end(), lfree.begin(), lfree.end());
  batch.insert(batch.end(), rfree.begin(), rfree.end());
  return {dot_general(acc.t, op.t, dims), batch};
}

Value b_einsum(Interp&, const CallArgs& a) {
  const Pattern p = parse_pattern(a, arg_string(a, 0));
  if (p.inputs.size() != a.size() - 1)
    throw SheafError(fmt::format("einsum: the pattern names {} operand{} but {} {} given", p.inputs.size(),
                                 p.inputs.size() == 1 ? "" : "s", a.size() - 1, a.size() == 2 ? "was" : "were"),
                     a.site);
  std::vector<Operand> args;
  for (size_t i = 1; i < a.size(); ++i) args.push_back(array_operand(a, i));
  std::vector<Labeled> ops;
  const int64_t widest = expand_ellipses(a, p, promote_all(a, args), ops);
  const std::vector<int> out = output_labels(a, p, ops, widest);
  const std::map<int, int64_t> size = index_sizes(a, ops);

  // Indices needed after operand i: the output's and those of later operands.
  auto needed_after = [&](size_t i) {
    std::vector<int> n = out;
    for (size_t j = i + 1; j < ops.size(); ++j) n.insert(n.end(), ops[j].labels.begin(), ops[j].labels.end());
    return n;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    take_diagonals(ops[i]);
    std::vector<int> needed = needed_after(i);
    for (size_t j = 0; j < i; ++j) needed.insert(needed.end(), ops[j].labels.begin(), ops[j].labels.end());
    sum_unneeded(ops[i], needed);
  }
  Labeled acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) acc = contract(acc, ops[i], needed_after(i));

  std::vector<int64_t> perm;
  Shape out_shape;
  for (int l : out) {
    out_shape.push_back(size.at(l));
    auto d = std::find(acc.labels.begin(), acc.labels.end(), l);
    if (d != acc.labels.end()) perm.push_back(d - acc.labels.begin());
  }
  Tensor r = acc.t;
  if (perm != range_of(0, r.rank())) r = transpose(r, perm);
  return Value::tensor(r.shape() == out_shape ? r : reshape(r, out_shape));
}

const BuiltinDef kLinalg[] = {
    {"@", "(@ a b)",
     "Matrix product: 1-D·1-D dot, 2-D×2-D matmul, vector–matrix, batched over broadcast leading dims.", b_matmul,
     2, 2},
    {"einsum", "(einsum \"pattern\" x1 x2 ...)",
     "Einstein summation: \"ij,jk->ik\"; spaces allowed, ... broadcasts leading dims, implicit output without ->.",
     b_einsum, 2, -1},
};

}  // namespace

std::span<const BuiltinDef> linalg_builtins() { return kLinalg; }

}  // namespace sheaf
