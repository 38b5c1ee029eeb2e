// builtins/shape.cpp — shape and structure builtins (SPEC §5.5): shape, ndim, reshape,
// dtype, transpose/tr, swapaxes, slice, roll, concat, stack, flip, tril, where, tensor-split,
// broadcast, append-and-roll. Each maps the language's conventions (negative axes and indices,
// options, lists as arrays, SPEC §2.3 dtypes) onto the layout primitives of tensor/layout.hpp.
// Structural operations keep the dtype: an i32 tensor stays i32. The shift of `roll` and the
// diagonal of `tril` may be runtime values (traced); sizes, bounds and axes are static.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

// The positional arguments of an option-taking call, as arguments of the same builtin.
CallArgs positional(const CallArgs& a, const Options& o) { return CallArgs{o.positional, a.site, a.name}; }

Value b_shape(Interp&, const CallArgs& a) {
  Tensor t = array_arg(a, 0);
  if (a.size() == 2) return Value::integer(t.dim(axis_of(a, a[1], t.rank())));
  return shape_value(t.shape());
}

Value b_ndim(Interp&, const CallArgs& a) { return Value::integer(array_arg(a, 0).rank()); }

// (dtype x) → :f32, :i32, …; host numbers as arrays: an int is :i32, a float :f32, a bool :bool.
Value b_dtype(Interp&, const CallArgs& a) {
  const Value& v = a[0];
  if (!v.is(Kind::Tensor) && !v.is_number() && !v.is(Kind::Bool)) type_error(a, 0, "a tensor or a number");
  return Value::keyword(dtype_name(array_arg(a, 0).dtype()));
}

// (reshape x shape) or (reshape x d1 d2 ...); one -1 is inferred from the element count.
// (reshape x) alone returns x.
Value b_reshape(Interp&, const CallArgs& a) {
  if (a.size() == 1) return a[0];
  Tensor x = array_arg(a, 0);
  std::vector<int64_t> dims;
  for (size_t i = 1; i < a.size(); ++i)
    for (int64_t d : int_list(a, a[i], i)) dims.push_back(d);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && infer < 0) infer = static_cast<int64_t>(i);
    else if (dims[i] < 0) throw SheafError(fmt::format("reshape: invalid shape {} (at most one -1, other sizes ≥ 0)", list_str(dims)), a.site);
    else known *= dims[i];
  }
  bool ok = infer < 0 ? known == x.numel() : known != 0 && x.numel() % known == 0;
  if (!ok)
    throw SheafError(fmt::format("reshape: cannot reshape {} ({} elements) into {}{}", type_str(x), x.numel(), list_str(dims),
                                 infer < 0 ? fmt::format(" ({} elements)", known) : ""),
                     a.site);
  if (infer >= 0) dims[static_cast<size_t>(infer)] = x.numel() / known;
  return Value::tensor(reshape(x, dims));
}

// (transpose x [perm]); without perm the axes are reversed.
Value b_transpose(Interp&, const CallArgs& a) {
  Tensor x = array_arg(a, 0);
  std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (a.size() == 2) {
    std::vector<int64_t> given = int_list(a, a[1], 1);
    perm = given;
    for (int64_t& p : perm) p = p < 0 ? p + x.rank() : p;
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    bool ok = sorted.size() == static_cast<size_t>(x.rank());
    for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
    if (!ok) throw SheafError(fmt::format("transpose: {} is not a permutation of the axes of {}", list_str(given), type_str(x)), a.site);
  }
  return Value::tensor(transpose(x, perm));
}

Value b_swapaxes(Interp&, const CallArgs& a) {
  Tensor x = array_arg(a, 0);
  std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(axis_of(a, a[1], x.rank()))], perm[static_cast<size_t>(axis_of(a, a[2], x.rank()))]);
  return Value::tensor(transpose(x, perm));
}

// Elements of the list, tuple or string x, rebuilt as the same kind of sequence.
Value same_kind(const Value& x, std::vector<Value> e) {
  if (x.is_list()) return Value::list(std::move(e), x.as_list().kind == ListKind::Tuple ? ListKind::Tuple : ListKind::Paren);
  std::string s;
  for (const Value& c : e) s += c.as_str();
  return Value::string(s);
}

// Python slice bounds: negative counts from the end, then clamped into [0, n].
std::pair<int64_t, int64_t> slice_bounds(const CallArgs& a, const Options& o, int64_t n) {
  auto bound = [&](size_t i, int64_t dflt) {
    if (i >= o.positional.size() || o.positional[i].is_nil()) return dflt;
    auto v = int_list(a, o.positional[i], i);
    if (v.size() != 1 || is_int_list(o.positional[i])) throw SheafError(fmt::format("{}: bounds must be integers", a.name), a.site);
    int64_t b = v[0] < 0 ? v[0] + n : v[0];
    return std::clamp<int64_t>(b, 0, n);
  };
  int64_t start = bound(1, 0), end = bound(2, n);
  return {start, std::max(start, end)};
}

// (slice x start [end] [:axis a]) on tensors, lists and strings.
Value b_slice(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  if (o.positional.size() < 2 || o.positional.size() > 3) throw SheafError("slice: expected (slice x start [end] [:axis a])", a.site);
  CallArgs p = positional(a, o);
  const Value& x = p[0];
  if (x.is_list() || x.is(Kind::Str)) {
    if (o.get("axis") && axis_of(a, *o.get("axis"), 1) != 0) throw SheafError("slice: lists and strings have only axis 0", a.site);
    std::vector<Value> e = seq_elements(x, a.site, a.name);
    auto [s, t] = slice_bounds(a, o, static_cast<int64_t>(e.size()));
    return same_kind(x, {e.begin() + s, e.begin() + t});
  }
  Tensor t = array_arg(p, 0);
  if (t.rank() == 0) throw SheafError(fmt::format("slice: cannot slice a scalar {}", type_str(t)), a.site);
  int64_t axis = o.get("axis") ? axis_of(a, *o.get("axis"), t.rank()) : 0;
  auto [s, e] = slice_bounds(a, o, t.dim(axis));
  return Value::tensor(slice_axis(t, axis, s, e));
}

// x rolled by `shift` along one axis: the last `shift` entries move to the front. A known shift
// joins two slices; a runtime one (traced) gathers x[(j − shift) mod n] along the axis.
Tensor roll_axis(const Tensor& x, const Tensor& shift, int64_t axis) {
  int64_t n = x.dim(axis);
  if (n == 0) return x;
  if (shift.is_symbolic()) {
    Tensor size = Tensor::scalar(DType::I32, static_cast<double>(n));
    Tensor idx = binary(Binary::Rem, binary(Binary::Sub, iota(DType::I32, {n}, 0), binary(Binary::Rem, shift, size)), size);
    return take(x, idx, axis);
  }
  int64_t s = static_cast<int64_t>(shift.get(0)) % n;
  s = (s + n) % n;
  if (s == 0) return x;
  return concatenate({slice_axis(x, axis, n - s, n), slice_axis(x, axis, 0, n - s)}, axis);
}

Value b_roll(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  if (o.positional.size() != 2) throw SheafError("roll: expected (roll x shift [:axis a])", a.site);
  CallArgs p = positional(a, o);
  Tensor x = array_arg(p, 0);
  Tensor shift = int_scalar(p, p[1], 1);
  if (!o.get("axis")) return Value::tensor(reshape(roll_axis(reshape(x, {x.numel()}), shift, 0), x.shape()));
  return Value::tensor(roll_axis(x, shift, axis_of(a, *o.get("axis"), x.rank())));
}

// Tensors joined along `axis` (rank ≥ 1, other dims equal), after dtype promotion.
Tensor join(const CallArgs& a, const std::vector<Value>& parts, const Value* axis_v) {
  std::vector<Operand> ops;
  for (const Value& p : parts) {
    auto op = as_operand(p);
    if (!op) throw SheafError(fmt::format("{}: cannot join a {} with tensors", a.name, kind_name(p.kind())), a.site);
    ops.push_back(*op);
  }
  std::vector<Tensor> ts = promote_all(a, ops);
  const Tensor& t0 = ts[0];
  for (const Tensor& t : ts)
    if (t.rank() == 0) throw SheafError(fmt::format("{}: cannot concatenate scalars (use stack)", a.name), a.site);
  int64_t axis = axis_v ? axis_of(a, *axis_v, t0.rank()) : 0;
  for (const Tensor& t : ts) {
    bool same = t.rank() == t0.rank();
    for (int64_t d = 0; same && d < t0.rank(); ++d) same = d == axis || t.dim(d) == t0.dim(d);
    if (!same)
      throw SheafError(fmt::format("{}: shapes {} and {} differ outside axis {}", a.name, type_str(t0), type_str(t), axis), a.site);
  }
  return concatenate(ts, axis);
}

bool all_of_kind(const std::vector<Value>& vs, Kind k) {
  return !vs.empty() && std::all_of(vs.begin(), vs.end(), [k](const Value& v) { return v.is(k); });
}

// (concat a b ... [:axis a]): lists → list, strings → string, tensors (or, with :axis, nested
// lists as arrays) → tensor. A single list of tensors is the list of operands.
Value b_concat(Interp& in, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  std::vector<Value> parts = o.positional;
  if (parts.size() == 1 && parts[0].is_list() && all_of_kind(parts[0].as_list().items, Kind::Tensor)) parts = parts[0].as_list().items;
  if (all_of_kind(parts, Kind::Str) && !o.get("axis")) {
    std::string s;
    for (const Value& p : parts) s += p.as_str();
    return Value::string(s);
  }
  bool tensors = o.get("axis") || std::any_of(parts.begin(), parts.end(), [](const Value& v) { return v.is(Kind::Tensor); });
  if (tensors && !parts.empty()) return Value::tensor(join(a, parts, o.get("axis")));
  std::vector<Value> out;
  for (const Value& p : parts) {
    if (!p.is_list() && !p.is_nil()) throw SheafError(fmt::format("concat: cannot concatenate a {} with lists", kind_name(p.kind())), a.site);
    for (const Value& x : seq_elements(p, a.site, a.name)) out.push_back(x);
    in.check_elements(static_cast<int64_t>(out.size()), a.site);
  }
  return Value::list(std::move(out));
}

// (stack xs [:axis a]): equal-shape tensors (or numbers) along a new axis.
Value b_stack(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  std::vector<Value> parts = o.positional;
  if (parts.size() == 1 && parts[0].is_list()) parts = parts[0].as_list().items;
  else if (parts.size() == 1 && parts[0].is(Kind::Tensor)) parts = seq_elements(parts[0], a.site, a.name);
  if (parts.empty()) throw SheafError("stack: nothing to stack", a.site);
  std::vector<Operand> ops;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto op = as_operand(parts[i]);
    if (!op) throw SheafError(fmt::format("stack: element {} is a {}, not a tensor", i, kind_name(parts[i].kind())), a.site);
    if (!ops.empty() && op->t.shape() != ops[0].t.shape())
      throw SheafError(fmt::format("stack: shapes differ: {} and {}", type_str(ops[0].t), type_str(op->t)), a.site);
    ops.push_back(*op);
  }
  std::vector<Tensor> ts = promote_all(a, ops);
  int64_t axis = o.get("axis") ? axis_of(a, *o.get("axis"), ts[0].rank() + 1) : 0;
  Shape unit = ts[0].shape();
  unit.insert(unit.begin() + axis, 1);
  for (Tensor& t : ts) t = reshape(t, unit);
  return Value::tensor(concatenate(ts, axis));
}

// (flip x [:axis a]): all axes by default (an int or a list); lists and strings are reversed.
Value b_flip(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  if (o.positional.size() != 1) throw SheafError("flip: expected (flip x [:axis a])", a.site);
  const Value& x = o.positional[0];
  if (x.is_list() || x.is(Kind::Str)) {
    std::vector<Value> e = seq_elements(x, a.site, a.name);
    std::reverse(e.begin(), e.end());
    return same_kind(x, std::move(e));
  }
  Tensor t = array_arg(positional(a, o), 0);
  std::vector<int64_t> axes(static_cast<size_t>(t.rank()));
  std::iota(axes.begin(), axes.end(), 0);
  if (const Value* av = o.get("axis")) {
    axes.clear();
    for (int64_t ax : int_list(a, *av, 1)) axes.push_back(axis_of(a, Value::integer(ax), t.rank()));
  }
  return Value::tensor(reverse(t, axes));
}

// (tril x [k]): keeps entries on and below diagonal k of the last two axes, zeros above.
Value b_tril(Interp&, const CallArgs& a) {
  Tensor x = array_arg(a, 0);
  if (x.rank() < 2) throw SheafError(fmt::format("tril: needs at least 2 dimensions, got {}", type_str(x)), a.site);
  Tensor k = a.size() > 1 ? int_scalar(a, a[1], 1) : Tensor::scalar(DType::I32, 0);  // may be a runtime value
  Shape mat{x.dim(x.rank() - 2), x.dim(x.rank() - 1)};
  if (!x.is_symbolic() && !k.is_symbolic()) {  // known elements (a causal mask while tracing): row i keeps its first i + k + 1
    const int64_t rows = mat[0], cols = mat[1], diagonal = static_cast<int64_t>(k.get(0));
    const size_t es = dtype_size(x.dtype());
    Tensor out(x.dtype(), x.shape());  // zeros
    for (int64_t r = 0; r < x.numel() / std::max<int64_t>(1, cols); ++r) {
      const int64_t keep = std::clamp<int64_t>(r % rows + diagonal + 1, 0, cols);
      std::memcpy(out.mutable_bytes() + static_cast<size_t>(r * cols) * es, x.bytes() + static_cast<size_t>(r * cols) * es, static_cast<size_t>(keep) * es);
    }
    return Value::tensor(out);
  }
  // keep[i, j] = i + k >= j
  Tensor rows = binary(Binary::Add, iota(DType::I32, mat, 0), k);
  Tensor keep = binary(Binary::Ge, rows, iota(DType::I32, mat, 1));
  return Value::tensor(select(keep, x, Tensor::scalar(x.dtype(), 0)));
}

// (where cond a b): element-wise select with broadcasting; a and b promoted (SPEC §2.3).
Value b_where(Interp&, const CallArgs& a) {
  Tensor c = array_arg(a, 0);
  if (c.dtype() != DType::Bool) c = binary(Binary::Ne, c, Tensor::scalar(c.dtype(), 0));
  auto [x, y] = run_primitive(a, [&] { return promoted(array_operand(a, 1), array_operand(a, 2), a.name); });
  auto xy = broadcast_shapes(x.shape(), y.shape());
  if (!xy || !broadcast_shapes(c.shape(), *xy))
    throw SheafError(fmt::format("where: cannot broadcast condition {} with {} and {}", type_str(c), type_str(x), type_str(y)), a.site);
  return Value::tensor(select(c, x, y));
}

// (tensor-split x n [axis]) or (tensor-split x n :axis a) → list of n equal parts.
Value b_tensor_split(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  size_t given = o.positional.size() + (o.get("axis") ? 1 : 0);
  if (o.positional.size() < 2 || given > 3) throw SheafError("tensor-split: expected (tensor-split x n [axis]) or (tensor-split x n :axis a)", a.site);
  CallArgs p = positional(a, o);
  Tensor x = array_arg(p, 0);
  if (x.rank() == 0) throw SheafError(fmt::format("tensor-split: cannot split a scalar {}", type_str(x)), a.site);
  int64_t n = arg_int(p, 1);
  const Value* axis_value = o.get("axis") ? o.get("axis") : p.size() > 2 ? &p[2] : nullptr;
  int64_t axis = axis_value ? axis_of(a, *axis_value, x.rank()) : 0;
  int64_t size = x.dim(axis);
  if (n < 1 || size % n != 0)
    throw SheafError(fmt::format("tensor-split: axis {} of {} (size {}) is not divisible into {} equal parts", axis, type_str(x), size, n), a.site);
  std::vector<Value> parts;
  for (int64_t i = 0; i < n; ++i) parts.push_back(Value::tensor(slice_axis(x, axis, i * (size / n), (i + 1) * (size / n))));
  return Value::list(std::move(parts));
}

Value b_broadcast(Interp&, const CallArgs& a) {
  Tensor x = array_arg(a, 0);
  Shape s = arg_shape(a, 1);
  auto b = broadcast_shapes(x.shape(), s);
  if (!b || *b != s) throw SheafError(fmt::format("broadcast: cannot broadcast {} to {}", type_str(x), list_str(s)), a.site);
  return Value::tensor(broadcast_to(x, s));
}

// (append-and-roll buf v): buf[1:] followed by v — a row (broadcast to the row shape) or a
// block of one row.
Value b_append_and_roll(Interp&, const CallArgs& a) {
  Operand buf = array_operand(a, 0);
  if (buf.t.rank() == 0 || buf.t.dim(0) == 0)
    throw SheafError(fmt::format("append-and-roll: buffer {} has no rows", type_str(buf.t)), a.site);
  buf.weak = false;
  auto [b, v] = run_primitive(a, [&] { return promoted(buf, array_operand(a, 1), a.name); });
  Shape row(b.shape().begin() + 1, b.shape().end()), one = b.shape();
  one[0] = 1;
  auto fits = broadcast_shapes(v.shape(), row);
  if (v.shape() != one && (!fits || *fits != row))
    throw SheafError(fmt::format("append-and-roll: value {} does not match the rows of {}", type_str(v), type_str(b)), a.site);
  Tensor block = v.shape() == one ? v : reshape(broadcast_to(v, row), one);
  return Value::tensor(concatenate({slice_axis(b, 0, 1, b.dim(0)), block}, 0));
}

const BuiltinDef kShape[] = {
    {"shape", "(shape x [axis])", "Shape as a list of ints ([] for scalars); with an axis, that size.", b_shape, 1, 2},
    {"ndim", "(ndim x)", "Number of dimensions (0 for scalars).", b_ndim, 1, 1},
    {"dtype", "(dtype x)", "The dtype as a keyword (:f32 :f16 :bf16 :i32 :u32 :bool); an int is :i32, a float :f32.", b_dtype, 1, 1},
    {"reshape", "(reshape x shape) / (reshape x d1 d2 ...)", "Same elements, new shape; one -1 is inferred; (reshape x) is x.", b_reshape, 1, -1},
    {"transpose", "(transpose x [perm])", "Permute axes; without perm, reverse them.", b_transpose, 1, 2},
    {"tr", "(tr x [perm])", "Alias of transpose.", b_transpose, 1, 2},
    {"swapaxes", "(swapaxes x a b)", "Exchange two axes.", b_swapaxes, 3, 3},
    {"slice", "(slice x start [end] [:axis a])", "Half-open slice along an axis (default 0); also lists and strings.", b_slice, 2, -1},
    {"roll", "(roll x shift [:axis a])", "Circular shift; without axis the flattened tensor is rolled.", b_roll, 2, -1},
    {"concat", "(concat a b ... [:axis a])", "Lists → list, strings → string, tensors → tensor along an axis (default 0).", b_concat, 0, -1},
    {"stack", "(stack xs [:axis a])", "Stack a list of equal-shape tensors along a new axis (default 0).", b_stack, 1, -1},
    {"flip", "(flip x [:axis a])", "Reverse along an axis (default all); lists are reversed.", b_flip, 1, -1},
    {"tril", "(tril x [k])", "Lower triangle (on and below diagonal k), zeros above.", b_tril, 1, 2},
    {"where", "(where cond a b)", "Element-wise select with broadcasting.", b_where, 3, 3},
    {"tensor-split", "(tensor-split x n [axis])", "Split into n equal parts along axis (positional or :axis, default 0): a list of tensors.", b_tensor_split, 2, -1},
    {"broadcast", "(broadcast x shape)", "Broadcast to a shape (NumPy rules).", b_broadcast, 2, 2},
    {"append-and-roll", "(append-and-roll buf v)", "Drop the first row of buf and append v: a sliding window.", b_append_and_roll, 2, 2},
};

}  // namespace

std::span<const BuiltinDef> shape_builtins() { return kShape; }

}  // namespace sheaf
