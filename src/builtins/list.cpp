// builtins/list.cpp — lists and sequences, higher-order functions over them (SPEC §5.10–5.11).
// A sequence is a list, a tuple, a tensor (rows along axis 0; scalars for 1-D) or a string.
#include <algorithm>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/tensor_args.hpp"
#include "eval/utf8.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"
#include "value/handle.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

std::vector<Value> elems(const CallArgs& a, size_t i) { return seq_elements(a[i], a.site, a.name); }
// Lists built at run time are (…) lists: printed as [a, b], and a call when a macro returns one.
Value list_of(std::vector<Value> items) { return Value::list(std::move(items)); }

int64_t seq_count(const CallArgs& a, size_t i) {
  const Value& v = a[i];
  if (v.is_list()) return static_cast<int64_t>(v.as_list().items.size());
  if (v.is(Kind::Dict)) return static_cast<int64_t>(v.as_dict().entries.size());
  if (v.is(Kind::Str)) return static_cast<int64_t>(code_point_count(v.as_str()));
  if (v.is(Kind::Tensor) && v.as_tensor().rank() > 0) return v.as_tensor().shape()[0];
  if (v.is_nil()) return 0;
  if (v.is(Kind::Handle)) return v.as<HandleObj>().length();
  throw SheafError(fmt::format("{}: {} has no length", a.name, v.is(Kind::Tensor) ? "a scalar tensor" : std::string("a ") + std::string(kind_name(v.kind()))), a.site);
}

Value nth_or_nil(const CallArgs& a, int64_t i) {
  if (a[0].is_nil()) return Value();
  if (a[0].is(Kind::Tensor) && a[0].as_tensor().rank() > 0) {  // one row, without splitting the rest
    int64_t n = a[0].as_tensor().dim(0);
    if (i < 0) i += n;
    return i < 0 || i >= n ? Value() : row_value(a[0].as_tensor(), i);
  }
  if (a[0].is(Kind::Str)) {  // one character, without splitting the whole string
    std::string_view s = a[0].as_str();
    if (i < 0) i += static_cast<int64_t>(code_point_count(s));
    size_t at = 0;
    for (int64_t k = 0; k < i && at < s.size(); ++k) at += code_point_at(s, at).size();
    return i < 0 || at >= s.size() ? Value() : Value::string(std::string(code_point_at(s, at)));
  }
  std::vector<Value> e = elems(a, 0);
  if (i < 0) i += static_cast<int64_t>(e.size());
  if (i < 0 || i >= static_cast<int64_t>(e.size())) return Value();
  return e[static_cast<size_t>(i)];
}

Value b_first(Interp&, const CallArgs& a) { return nth_or_nil(a, 0); }
Value b_second(Interp&, const CallArgs& a) { return nth_or_nil(a, 1); }
Value b_last(Interp&, const CallArgs& a) { return nth_or_nil(a, -1); }

Value b_rest(Interp&, const CallArgs& a) {
  if (a[0].is(Kind::Tensor) && a[0].as_tensor().rank() > 0) {
    const Tensor& t = a[0].as_tensor();
    return Value::tensor(slice_axis(t, 0, std::min<int64_t>(1, t.dim(0)), t.dim(0)));
  }
  std::vector<Value> e = elems(a, 0);
  if (!e.empty()) e.erase(e.begin());
  return list_of(std::move(e));
}

Value b_nth(Interp&, const CallArgs& a) {
  int64_t i = arg_int(a, 1);
  int64_t n = seq_count(a, 0);
  int64_t j = i < 0 ? i + n : i;
  if (j < 0 || j >= n) throw SheafError(fmt::format("nth: index {} out of range for length {}", i, n), a.site);
  return nth_or_nil(a, j);
}

Value b_count(Interp&, const CallArgs& a) { return Value::integer(seq_count(a, 0)); }

Value b_empty(Interp&, const CallArgs& a) {
  const Value& v = a[0];
  if (v.is(Kind::Tensor)) {
    for (int64_t d : v.as_tensor().shape())
      if (d == 0) return Value::boolean(true);
    return Value::boolean(false);
  }
  return Value::boolean(seq_count(a, 0) == 0);
}

Value b_cons(Interp&, const CallArgs& a) {
  std::vector<Value> e{a[0]};
  for (Value& x : elems(a, 1)) e.push_back(std::move(x));
  return list_of(std::move(e));
}

Value b_append(Interp&, const CallArgs& a) {
  if (a[0].is(Kind::Tensor) && a[0].as_tensor().rank() > 0) {
    const Tensor& t = a[0].as_tensor();
    Shape row(t.shape().begin() + 1, t.shape().end());
    Tensor x;
    bool host_number = a[1].is_number() || (a[1].is(Kind::Tensor) && a[1].as_tensor().weak());  // weak: traced
    if (host_number && row.empty()) x = convert(as_operand(a[1])->t, t.dtype());
    else if (a[1].is(Kind::Tensor)) x = a[1].as_tensor();
    else type_error(a, 1, "a row of the tensor");
    if (x.shape() != row || x.dtype() != t.dtype())
      throw SheafError(fmt::format("append: row {}[{}] does not match tensor {}[{}]", dtype_name(x.dtype()), fmt::join(x.shape(), "x"),
                                   dtype_name(t.dtype()), fmt::join(t.shape(), "x")),
                       a.site);
    Shape one = row;
    one.insert(one.begin(), 1);
    return Value::tensor(concatenate({t, reshape(x, one)}, 0));
  }
  std::vector<Value> e = elems(a, 0);
  e.push_back(a[1]);
  return list_of(std::move(e));
}

Value b_list(Interp&, const CallArgs& a) { return list_of({a.args.begin(), a.args.end()}); }

Value b_chars(Interp&, const CallArgs& a) {
  arg_string(a, 0);
  return list_of(seq_elements(Value::string(a[0].as_str()), a.site, a.name));
}

Value b_index_of(Interp&, const CallArgs& a) {
  if (a[0].is(Kind::Str)) {  // a character of the string, found without splitting it
    std::string_view s = a[0].as_str();
    if (!a[1].is(Kind::Str) || code_point_count(a[1].as_str()) != 1) return Value::integer(-1);
    size_t at = s.find(a[1].as_str());
    return Value::integer(at == std::string_view::npos ? -1 : static_cast<int64_t>(code_point_count(s.substr(0, at))));
  }
  std::vector<Value> e = elems(a, 0);
  for (size_t i = 0; i < e.size(); ++i)
    if (equal(e[i], a[1]) && e[i].kind() == a[1].kind()) return Value::integer(static_cast<int64_t>(i));
  for (size_t i = 0; i < e.size(); ++i)
    if (equal(e[i], a[1])) return Value::integer(static_cast<int64_t>(i));
  return Value::integer(-1);
}

// Natural order for sort: numbers by value, strings/keywords by code point.
bool natural_less(const Value& x, const Value& y, SrcLoc site) {
  auto nx = number_of(x), ny = number_of(y);
  if (nx && ny) return *nx < *ny;
  bool sx = x.is(Kind::Str) || x.is(Kind::Keyword) || x.is(Kind::Symbol);
  bool sy = y.is(Kind::Str) || y.is(Kind::Keyword) || y.is(Kind::Symbol);
  if (sx && sy) return x.as_str() < y.as_str();
  if (x.is_list() && y.is_list()) {
    const auto &a = x.as_list().items, &b = y.as_list().items;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (natural_less(a[i], b[i], site)) return true;
      if (natural_less(b[i], a[i], site)) return false;
    }
    return a.size() < b.size();
  }
  throw SheafError(fmt::format("sort: cannot compare {} with {}", kind_name(x.kind()), kind_name(y.kind())), site);
}

// Tensors sort along :axis (default last), ascending or with :reverse descending.
Value sort_tensor(const CallArgs& a, const Options& o) {
  const Tensor& t = o.positional[0].as_tensor();
  if (o.get("key")) throw SheafError("sort: :key applies to lists only", a.site);
  if (t.rank() == 0) throw SheafError(fmt::format("sort: cannot sort a scalar {}", type_str(t)), a.site);
  int64_t axis = o.get("axis") ? axis_of(a, *o.get("axis"), t.rank()) : t.rank() - 1;
  return Value::tensor(sort(t, axis, o.flag("reverse")).values);
}

Value b_sort(Interp& in, const CallArgs& a) {
  Options o = parse_options(a, {"reverse", "key", "axis"});
  if (o.positional.size() != 1) throw SheafError("sort: expected (sort s [:reverse] [:key f])", a.site);
  if (o.positional[0].is(Kind::Tensor)) return sort_tensor(a, o);
  if (o.get("axis")) throw SheafError("sort: :axis applies to tensors only", a.site);
  std::vector<Value> e = seq_elements(o.positional[0], a.site, a.name);
  std::vector<Value> keys = e;
  if (const Value* kf = o.get("key")) {
    if (!kf->is_callable()) throw SheafError("sort: :key must be a function", a.site);
    for (size_t i = 0; i < e.size(); ++i) keys[i] = in.call(*kf, std::span<const Value>(&e[i], 1), a.site);
  }
  std::vector<size_t> idx(e.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  bool rev = o.flag("reverse");
  std::stable_sort(idx.begin(), idx.end(), [&](size_t i, size_t j) {
    return rev ? natural_less(keys[j], keys[i], a.site) : natural_less(keys[i], keys[j], a.site);
  });
  std::vector<Value> out;
  for (size_t i : idx) out.push_back(e[i]);
  return list_of(std::move(out));
}

Value b_map(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  std::vector<std::vector<Value>> seqs;
  size_t n = SIZE_MAX;
  for (size_t i = 1; i < a.size(); ++i) {
    seqs.push_back(elems(a, i));
    n = std::min(n, seqs.back().size());
  }
  std::vector<Value> out;
  out.reserve(n);
  std::vector<Value> args(seqs.size());
  for (size_t j = 0; j < n; ++j) {
    for (size_t s = 0; s < seqs.size(); ++s) args[s] = seqs[s][j];
    out.push_back(in.call(f, args, a.site));
  }
  return list_of(std::move(out));
}

Value b_filter(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  std::vector<Value> out;
  for (Value& x : elems(a, 1))
    if (in.call(f, std::span<const Value>(&x, 1), a.site).truthy()) out.push_back(std::move(x));
  return list_of(std::move(out));
}

Value b_find(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  for (Value& x : elems(a, 1))
    if (in.call(f, std::span<const Value>(&x, 1), a.site).truthy()) return x;
  return Value();
}

Value b_reduce(Interp& in, const CallArgs& a) {
  std::vector<Value> e = elems(a, a.size() - 1);
  return left_fold(in, arg_callable(a, 0), e, a.size() == 3 ? &a[1] : nullptr, a, "sequence");
}

Value b_apply(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  std::vector<Value> args(a.args.begin() + 1, a.args.end() - 1);
  for (Value& x : elems(a, a.size() - 1)) args.push_back(std::move(x));
  return in.call(f, args, a.site);
}

Value b_range(Interp& in, const CallArgs& a) {
  int64_t start = 0, stop, step = 1;
  if (a.size() == 1) {
    stop = arg_int(a, 0);
  } else {
    start = arg_int(a, 0);
    stop = arg_int(a, 1);
    if (a.size() == 3) step = arg_int(a, 2);
  }
  if (step == 0) throw SheafError(fmt::format("{}: step must not be zero", a.name), a.site);
  __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;  // exact for any i64 bounds
  __int128 stride = step > 0 ? step : -__int128{step};
  int64_t n = span > 0 ? static_cast<int64_t>((span + stride - 1) / stride) : 0;
  in.check_elements(n, a.site);
  Tensor t(DType::I32, {n});
  for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>(start + __int128{i} * step));
  return Value::tensor(std::move(t));
}

const BuiltinDef kList[] = {
    {"first", "(first s)", "First element of a list, tuple, tensor (row) or string; nil when empty.", b_first, 1, 1},
    {"second", "(second s)", "Second element; nil when absent.", b_second, 1, 1},
    {"last", "(last s)", "Last element; nil when empty.", b_last, 1, 1},
    {"rest", "(rest s)", "All but the first element (empty → empty list).", b_rest, 1, 1},
    {"cons", "(cons x s)", "Prepend x to a sequence.", b_cons, 2, 2},
    {"append", "(append s x)", "Add x at the end (list → list; tensor → tensor along axis 0).", b_append, 2, 2},
    {"nth", "(nth seq i)", "Element i (negative counts from the end); out of range is an error.", b_nth, 2, 2},
    {"count", "(count x)", "Number of elements (axis 0 for tensors; characters for strings).", b_count, 1, 1},
    {"len", "(len x)", "Alias of count.", b_count, 1, 1},
    {"empty?", "(empty? s)", "True when s has no elements.", b_empty, 1, 1},
    {"sort", "(sort s [:reverse] [:key f] [:axis a])", "Stable sort in natural order or by a key function.", b_sort, 1, -1},
    {"index-of", "(index-of s v)", "First index of v, or -1.", b_index_of, 2, 2},
    {"chars", "(chars str)", "List of one-character strings.", b_chars, 1, 1},
    {"map", "(map f seq ...)", "Apply f to each element (rows of a tensor); returns a list.", b_map, 2, -1},
    {"filter", "(filter pred seq)", "Elements where pred is truthy.", b_filter, 2, 2},
    {"find", "(find pred seq)", "First element where pred is truthy, or nil.", b_find, 2, 2},
    {"reduce", "(reduce f init seq) / (reduce f seq)", "Left fold; over a tensor it iterates rows.", b_reduce, 2, 3},
    {"apply", "(apply f [x ...] seq)", "Call f with the fixed args followed by the elements of seq.", b_apply, 2, -1},
    {"range", "(range [start] stop [step])", "1-D i32 tensor of the half-open sequence.", b_range, 1, 3},
    {"arange", "(arange [start] stop [step])", "Alias of range.", b_range, 1, 3},
    {"list", "(list a ...)", "Deprecated: list of the evaluated arguments (prefer '[...]).", b_list, 0, -1},
};

}  // namespace

std::span<const BuiltinDef> list_builtins() { return kList; }

}  // namespace sheaf
