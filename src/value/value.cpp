// value/value.cpp — Value constructors, accessors, interning and structural equality.
#include "value/value.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace sheaf {

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::Nil: return "nil";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "string";
    case Kind::Keyword: return "keyword";
    case Kind::Symbol: return "symbol";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Fn: return "function";
    case Kind::Builtin: return "function";
    case Kind::Tensor: return "tensor";
    case Kind::Slice: return "slice";
    case Kind::Recur: return "recur";
    case Kind::Handle: return "handle";
  }
  return "?";
}

namespace symbols {
namespace {
struct Table {
  std::mutex m;
  std::unordered_map<std::string, int> ids;
  std::vector<const std::string*> names;
};
Table& table() {
  static Table t;
  return t;
}
}  // namespace
int intern(std::string_view name) {
  Table& t = table();
  std::lock_guard g(t.m);
  auto [it, fresh] = t.ids.try_emplace(std::string(name), static_cast<int>(t.names.size()));
  if (fresh) t.names.push_back(&it->first);
  return it->second;
}
const std::string& name(int id) {
  Table& t = table();
  std::lock_guard g(t.m);
  return *t.names.at(static_cast<size_t>(id));
}
}  // namespace symbols

// Destruction without recursion on the depth of the data. When a list or dict dies, each
// element that is the last reference to another list or dict is moved to the thread's pending
// list instead of dying inside this destructor; the outermost destructor on the thread drains
// that list in a loop (each drained container adds its own such elements). Depth costs heap,
// not stack. A shared element (use_count > 1) only loses a reference here.
struct Teardown {
  using Pending = std::vector<std::shared_ptr<Obj>>;
  static inline thread_local Pending* pending = nullptr;

  static void adopt(Value& v, Pending& out) noexcept {
    if ((v.kind_ != Kind::List && v.kind_ != Kind::Dict) || v.obj_.use_count() != 1) return;
    try {
      out.push_back(std::move(v.obj_));  // unchanged when the list cannot grow: v dies in place
    } catch (...) {
    }
  }

  // `elements(adopt_into)` hands the dying container's elements to adopt.
  template <typename F>
  static void release(F&& elements) noexcept {
    if (pending) {
      elements(*pending);
      return;
    }
    Pending local;
    pending = &local;
    elements(local);
    while (!local.empty()) {
      std::shared_ptr<Obj> next = std::move(local.back());
      local.pop_back();
      next.reset();  // its destructor appends its own container elements to `local`
    }
    pending = nullptr;
  }
};

ListObj::~ListObj() {
  Teardown::release([this](Teardown::Pending& out) {
    for (Value& v : items) Teardown::adopt(v, out);
  });
}

DictObj::~DictObj() {
  Teardown::release([this](Teardown::Pending& out) {
    for (auto& e : entries) Teardown::adopt(e.second, out);
  });
}

Value Value::string(std::string s) {
  return object(Kind::Str, std::make_shared<StrObj>(std::move(s)));
}
Value Value::keyword(std::string_view name) {
  return object(Kind::Keyword, std::make_shared<StrObj>(std::string(name)));
}
Value Value::symbol(std::string_view name, SrcLoc loc) { return symbol_id(symbols::intern(name), loc); }
Value Value::symbol_id(int id, SrcLoc loc) {
  return object(Kind::Symbol, std::make_shared<SymObj>(id, loc));
}
Value Value::list(std::vector<Value> items, ListKind k, SrcLoc loc) {
  auto o = std::make_shared<ListObj>();
  o->items = std::move(items);
  o->kind = k;
  o->loc = loc;
  return object(Kind::List, std::move(o));
}
Value Value::tensor(Tensor t) { return object(Kind::Tensor, std::make_shared<TensorObj>(std::move(t))); }
Value Value::slice(int64_t start, std::optional<int64_t> end) {
  auto o = std::make_shared<SliceObj>();
  o->start = start;
  o->end = end;
  return object(Kind::Slice, std::move(o));
}

bool Value::truthy() const {
  if (kind_ == Kind::Nil) return false;
  if (kind_ == Kind::Bool) return b_;
  if (kind_ == Kind::Tensor) {
    const Tensor& t = as_tensor();
    if (t.rank() == 0 && t.dtype() == DType::Bool) return t.get(0) != 0;
  }
  return true;
}

const std::string& Value::as_str() const {
  if (kind_ == Kind::Symbol) return symbols::name(symbol());
  return static_cast<const StrObj&>(*obj_).s;
}
int Value::symbol() const { return static_cast<const SymObj&>(*obj_).id; }
const ListObj& Value::as_list() const { return static_cast<const ListObj&>(*obj_); }
const DictObj& Value::as_dict() const { return static_cast<const DictObj&>(*obj_); }
const Tensor& Value::as_tensor() const { return static_cast<const TensorObj&>(*obj_).t; }
const SliceObj& Value::as_slice() const { return static_cast<const SliceObj&>(*obj_); }

SrcLoc Value::loc() const {
  if (kind_ == Kind::List) return as_list().loc;
  if (kind_ == Kind::Symbol) return static_cast<const SymObj&>(*obj_).loc;
  return {};
}

const Value* DictObj::find(std::string_view key) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), key,
                             [](const auto& e, std::string_view k) { return e.first < k; });
  return it != entries.end() && it->first == key ? &it->second : nullptr;
}

Value make_dict(std::vector<std::pair<std::string, Value>> entries) {
  auto o = std::make_shared<DictObj>();
  auto out_of_order = [](const auto& a, const auto& b) { return !(a.first < b.first); };
  if (std::adjacent_find(entries.begin(), entries.end(), out_of_order) == entries.end()) {  // sorted, unique
    o->entries = std::move(entries);
    return Value::object(Kind::Dict, std::move(o));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& e : entries) {
    if (!o->entries.empty() && o->entries.back().first == e.first)
      o->entries.back().second = std::move(e.second);
    else
      o->entries.push_back(std::move(e));
  }
  return Value::object(Kind::Dict, std::move(o));
}

Value dict_assoc(const Value& d, std::string key, Value v) {
  auto o = std::make_shared<DictObj>();
  if (d.is(Kind::Dict)) o->entries = d.as_dict().entries;
  auto it = std::lower_bound(o->entries.begin(), o->entries.end(), key,
                             [](const auto& e, const std::string& k) { return e.first < k; });
  if (it != o->entries.end() && it->first == key)
    it->second = std::move(v);
  else
    o->entries.insert(it, {std::move(key), std::move(v)});
  return Value::object(Kind::Dict, std::move(o));
}

std::optional<std::string> key_name(const Value& v) {
  if (v.is(Kind::Keyword) || v.is(Kind::Str) || v.is(Kind::Symbol)) return v.as_str();
  return std::nullopt;
}

static bool tensor_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.get(i) != b.get(i)) return false;
  return true;
}

// Equality of everything but the elements of two lists or dicts, which `equal` compares next.
enum class Shallow { Differ, Same, SameIfElements };
static Shallow shallow_equal(const Value& a, const Value& b) {
  auto same = [](bool e) { return e ? Shallow::Same : Shallow::Differ; };
  if (a.is_number() && b.is_number()) {
    if (a.is(Kind::Int) && b.is(Kind::Int)) return same(a.as_int() == b.as_int());
    return same(a.as_double() == b.as_double());
  }
  if (a.is(Kind::Tensor) && b.is(Kind::Tensor)) return same(tensor_equal(a.as_tensor(), b.as_tensor()));
  // A rank-0 tensor and a host scalar are interchangeable (SPEC §2.1).
  if (a.is(Kind::Tensor) && b.is_number()) return same(a.as_tensor().rank() == 0 && a.as_tensor().get(0) == b.as_double());
  if (b.is(Kind::Tensor) && a.is_number()) return shallow_equal(b, a);
  if (a.kind() != b.kind()) return Shallow::Differ;
  switch (a.kind()) {
    case Kind::Nil: return Shallow::Same;
    case Kind::Bool: return same(a.as_bool() == b.as_bool());
    case Kind::Str:
    case Kind::Keyword: return same(a.as_str() == b.as_str());
    case Kind::Symbol: return same(a.symbol() == b.symbol());
    case Kind::List:
      return a.as_list().items.size() == b.as_list().items.size() ? Shallow::SameIfElements : Shallow::Differ;
    case Kind::Dict: {
      const auto &x = a.as_dict().entries, &y = b.as_dict().entries;
      if (x.size() != y.size()) return Shallow::Differ;
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i].first != y[i].first) return Shallow::Differ;
      return Shallow::SameIfElements;
    }
    case Kind::Slice: return same(a.as_slice().start == b.as_slice().start && a.as_slice().end == b.as_slice().end);
    default: return same(a.raw() == b.raw());
  }
}

// Pairs still to compare live on an explicit stack: nesting depth costs heap, not stack (and
// two values without elements cost no allocation).
bool equal(const Value& a, const Value& b) {
  using Pairs = std::vector<std::pair<const Value*, const Value*>>;
  auto push_elements = [](const Value& x, const Value& y, Pairs& todo) {
    if (x.is_list()) {
      const auto &xs = x.as_list().items, &ys = y.as_list().items;
      for (size_t i = xs.size(); i-- > 0;) todo.emplace_back(&xs[i], &ys[i]);
    } else {
      const auto &xs = x.as_dict().entries, &ys = y.as_dict().entries;
      for (size_t i = xs.size(); i-- > 0;) todo.emplace_back(&xs[i].second, &ys[i].second);
    }
  };
  Shallow top = shallow_equal(a, b);
  if (top != Shallow::SameIfElements) return top == Shallow::Same;
  Pairs todo;
  push_elements(a, b, todo);
  while (!todo.empty()) {
    auto [x, y] = todo.back();
    todo.pop_back();
    Shallow s = shallow_equal(*x, *y);
    if (s == Shallow::Differ) return false;
    if (s == Shallow::SameIfElements) push_elements(*x, *y, todo);
  }
  return true;
}

}  // namespace sheaf
