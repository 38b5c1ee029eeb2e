// builtins/dict.cpp — dicts and keyed access (SPEC §4.4, §5.12).
// `get` also indexes lists, tuples and tensors along axis 0, with negative indices; an index
// tensor gathers rows (embedding lookup) and `(get x ... i)` indexes the last axis.
#include <algorithm>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/gather.hpp"
#include "value/handle.hpp"
#include "value/missing_key.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

// One lookup step: dict by key name, sequence by integer index. nullopt when missing.
std::optional<Value> lookup_step(const Value& coll, const Value& key, SrcLoc loc) {
  if (coll.is(Kind::Handle)) {
    Value v = coll.as<HandleObj>().read(key, loc);
    return v.is_nil() ? std::nullopt : std::optional<Value>(v);
  }
  if (coll.is(Kind::Dict)) {
    auto name = key_name(key);
    if (!name) return std::nullopt;
    const Value* v = coll.as_dict().find(*name);
    return v ? std::optional<Value>(*v) : std::nullopt;
  }
  if (coll.is(Kind::Tensor) && key.is(Kind::Tensor) && key.as_tensor().rank() > 0 && coll.as_tensor().rank() > 0)
    return Value::tensor(take_index(coll.as_tensor(), key.as_tensor(), 0, "get", loc));  // rows (embedding lookup)
  auto idx = number_of(key);
  if (!idx || *idx != static_cast<double>(static_cast<int64_t>(*idx))) return std::nullopt;
  int64_t i = static_cast<int64_t>(*idx);
  if (coll.is_list()) {
    int64_t n = static_cast<int64_t>(coll.as_list().items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return coll.as_list().items[static_cast<size_t>(i)];
  }
  if (coll.is(Kind::Tensor) && coll.as_tensor().rank() > 0) {
    int64_t n = coll.as_tensor().shape()[0];
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return row_value(coll.as_tensor(), i);
  }
  return std::nullopt;
}

bool is_ellipsis(const Value& v) {
  static const int id = symbols::intern("...");
  return v.is(Kind::Symbol) && v.symbol() == id;
}

// (get x ... i): index i (an integer or an index tensor) of the last axis; nil when out of range.
Value get_last_axis(const CallArgs& a) {
  if (a.size() != 3) throw SheafError("get: expected (get x ... i)", a.site);
  if (!a[0].is(Kind::Tensor) || a[0].as_tensor().rank() == 0) return Value();
  const Tensor& x = a[0].as_tensor();
  int64_t last = x.rank() - 1;
  if (a[2].is(Kind::Tensor) && a[2].as_tensor().rank() > 0) return Value::tensor(take_index(x, a[2].as_tensor(), last, "get", a.site));
  auto i = number_of(a[2]);
  if (!i || *i != static_cast<double>(static_cast<int64_t>(*i))) return Value();
  int64_t j = static_cast<int64_t>(*i);
  if (j < 0) j += x.dim(last);
  if (j < 0 || j >= x.dim(last)) return Value();
  return Value::tensor(take(x, Tensor::scalar(DType::I32, static_cast<double>(j)), last));
}

Value b_get(Interp&, const CallArgs& a) {
  if (is_ellipsis(a[1])) return get_last_axis(a);
  std::optional<Value> v = lookup_step(a[0], a[1], a.site);
  if (a.size() == 2) return v ? *v : missing_key_nil(a[0], a[1], a.site, "get");
  // (get coll k1 k2 ...): a key path when the value found is a collection.
  if (v && (v->is(Kind::Dict) || v->is_list() || v->is(Kind::Handle))) {
    Value cur = *v;
    for (size_t i = 2; i < a.size(); ++i) {
      auto next = lookup_step(cur, a[i], a.site);
      if (!next) return missing_key_nil(cur, a[i], a.site, "get");
      cur = *next;
    }
    return cur;
  }
  if (a.size() > 3) throw SheafError("get: expected (get coll key [default]) or a key path into nested collections", a.site);
  return v.value_or(a[2]);
}

Value b_get_in(Interp&, const CallArgs& a) {
  bool tensor_path = a[1].is(Kind::Tensor) && a[1].as_tensor().rank() == 1;  // unquoted [1 0]
  if (!a[1].is_list() && !tensor_path) type_error(a, 1, "a path vector");
  Value cur = a[0];
  for (const Value& k : seq_elements(a[1], a.site, a.name)) {
    auto next = lookup_step(cur, k, a.site);
    if (!next) return a.size() > 2 ? a[2] : missing_key_nil(cur, k, a.site, "get-in");
    cur = *next;
  }
  return cur;
}

std::string key_arg(const CallArgs& a, size_t i) {
  auto k = key_name(a[i]);
  if (!k) type_error(a, i, "a keyword or string key");
  return *k;
}

Value b_dict(Interp&, const CallArgs& a) {
  if (a.size() % 2 != 0) throw SheafError("dict: expected alternating keys and values", a.site);
  std::vector<std::pair<std::string, Value>> e;
  for (size_t i = 0; i < a.size(); i += 2) e.emplace_back(key_arg(a, i), a[i + 1]);
  return make_dict(std::move(e));
}

Value b_assoc(Interp&, const CallArgs& a) {
  if (a.size() % 2 != 1) throw SheafError("assoc: expected (assoc d k1 v1 ...)", a.site);
  if (!a[0].is(Kind::Dict) && !a[0].is_nil()) {
    if (a[0].is_list() && a.size() == 3) {  // (assoc list i v): functional replacement
      std::vector<Value> items = a[0].as_list().items;
      int64_t i = arg_int(a, 1), n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) throw SheafError(fmt::format("assoc: index {} out of range for a list of {}", arg_int(a, 1), n), a.site);
      items[static_cast<size_t>(i)] = a[2];
      return Value::list(std::move(items), a[0].as_list().kind == ListKind::Tuple ? ListKind::Tuple : ListKind::Paren);
    }
    type_error(a, 0, "a dict");
  }
  Value d = a[0].is_nil() ? make_dict({}) : a[0];
  for (size_t i = 1; i < a.size(); i += 2) d = dict_assoc(d, key_arg(a, i), a[i + 1]);
  return d;
}

Value b_dissoc(Interp&, const CallArgs& a) {
  if (!a[0].is(Kind::Dict)) type_error(a, 0, "a dict");
  std::vector<std::string> drop;
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i].is_list())
      for (const Value& k : a[i].as_list().items) drop.push_back(key_name(k).value_or(""));
    else
      drop.push_back(key_arg(a, i));
  }
  std::vector<std::pair<std::string, Value>> kept;
  for (const auto& e : a[0].as_dict().entries)
    if (std::find(drop.begin(), drop.end(), e.first) == drop.end()) kept.push_back(e);
  return make_dict(std::move(kept));
}

Value b_merge(Interp&, const CallArgs& a) {
  std::vector<std::pair<std::string, Value>> all;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_nil()) continue;
    if (!a[i].is(Kind::Dict)) type_error(a, i, "a dict");
    for (const auto& e : a[i].as_dict().entries) all.push_back(e);
  }
  return make_dict(std::move(all));
}

Value b_keys(Interp&, const CallArgs& a) {
  if (a[0].is(Kind::Handle)) {
    std::vector<Value> ks;
    for (const std::string& k : a[0].as<HandleObj>().keys()) ks.push_back(Value::string(k));
    return Value::list(std::move(ks));
  }
  if (!a[0].is(Kind::Dict)) type_error(a, 0, "a dict");
  std::vector<Value> ks;
  for (const auto& e : a[0].as_dict().entries) ks.push_back(Value::string(e.first));
  return Value::list(std::move(ks));
}

Value b_vals(Interp&, const CallArgs& a) {
  if (!a[0].is(Kind::Dict)) type_error(a, 0, "a dict");
  std::vector<Value> vs;
  for (const auto& e : a[0].as_dict().entries) vs.push_back(e.second);
  return Value::list(std::move(vs));
}

const BuiltinDef kDict[] = {
    {"dict", "(dict k1 v1 ...)", "Dict from alternating keys and values ({} is preferred).", b_dict, 0, -1},
    {"get", "(get coll key [default]) / (get coll k1 k2 ...)",
     "Dict lookup by key, or list/tuple/tensor index along axis 0 (negative from the end); missing gives default or nil.",
     b_get, 2, -1},
    {"get-in", "(get-in coll path [default])", "Nested lookup along a path vector.", b_get_in, 2, 3},
    {"assoc", "(assoc d k1 v1 ...)", "New dict with keys added or replaced.", b_assoc, 3, -1},
    {"dissoc", "(dissoc d [:k1 :k2 ...])", "New dict without the listed keys.", b_dissoc, 1, -1},
    {"merge", "(merge d1 d2 ...)", "Merge dicts; the right-most value wins.", b_merge, 0, -1},
    {"keys", "(keys d)", "Key names as strings, in order.", b_keys, 1, 1},
    {"vals", "(vals d)", "Values in key order.", b_vals, 1, 1},
};

}  // namespace

std::span<const BuiltinDef> dict_builtins() { return kDict; }

}  // namespace sheaf
