// eval/constant_calls.cpp — results of builtins on known arguments, kept while tracing (see
// constant_calls.hpp).
#include "eval/constant_calls.hpp"

#include <atomic>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "value/value.hpp"

namespace sheaf {

namespace {

constexpr size_t kMinBytes = size_t{64} << 10;
constexpr size_t kBudget = size_t{256} << 20;
constexpr size_t kMaxItems = 64;  // list elements in a key, at most
constexpr size_t kMaxContentBytes = 256;  // tensors up to this size are keyed by their bytes, larger ones by identity

struct Kept {
  Value result;
  std::vector<Value> args;  // pins the bytes the key names by address
};

struct Memo {
  std::unordered_map<std::string, Kept> kept;
  size_t bytes = 0;
};
thread_local Memo g_memo;
std::atomic<size_t> g_reused{0};

template <typename T>
void put(std::string& key, const T& x) {
  key.append(reinterpret_cast<const char*>(&x), sizeof x);
}

void put_text(std::string& key, const std::string& s) {
  put(key, s.size());
  key += s;
}

// Appends `v` to `key`; false when it is not a known argument. `items` counts list elements.
bool put_value(std::string& key, const Value& v, size_t& items) {
  key += static_cast<char>(v.kind());
  switch (v.kind()) {
    case Kind::Nil: return true;
    case Kind::Bool: put(key, v.as_bool()); return true;
    case Kind::Int: put(key, v.as_int()); return true;
    case Kind::Float: put(key, v.as_float()); return true;
    case Kind::Str:
    case Kind::Keyword: put_text(key, v.as_str()); return true;
    case Kind::List: {
      const ListObj& l = v.as_list();
      key += static_cast<char>(l.kind);
      put(key, l.items.size());
      for (const Value& x : l.items)
        if (++items > kMaxItems || !put_value(key, x, items)) return false;
      return true;
    }
    case Kind::Tensor: {
      const Tensor& t = v.as_tensor();
      if (t.is_symbolic()) return false;
      put(key, t.dtype());
      put(key, t.shape().size());
      for (int64_t d : t.shape()) put(key, d);
      if (!t.device() && t.nbytes() <= kMaxContentBytes) {  // a shape, a scalar: by value
        key.append(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
        return true;
      }
      put(key, t.device() ? static_cast<const void*>(t.device().get()) : static_cast<const void*>(t.bytes()));
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::optional<std::string> constant_call_key(const BuiltinDef& d, std::span<const Value> args) {
  if (d.effectful) return std::nullopt;
  std::string key;
  put(key, &d);
  size_t items = 0;
  for (const Value& a : args)
    if (!put_value(key, a, items)) return std::nullopt;
  return key;
}

const Value* find_constant_call(const std::string& key) {
  auto it = g_memo.kept.find(key);
  if (it == g_memo.kept.end()) return nullptr;
  ++g_reused;
  return &it->second.result;
}

void keep_constant_call(std::string key, const Value& result, std::span<const Value> args) {
  if (!result.is(Kind::Tensor)) return;
  const Tensor& t = result.as_tensor();
  if (t.is_symbolic() || t.nbytes() < kMinBytes) return;
  size_t bytes = t.nbytes();  // with the tensors the entry keeps alive
  for (const Value& a : args)
    if (a.is(Kind::Tensor)) bytes += a.as_tensor().nbytes();
  if (g_memo.bytes + bytes > kBudget) return;
  if (g_memo.kept.try_emplace(std::move(key), Kept{result, {args.begin(), args.end()}}).second) g_memo.bytes += bytes;
}

void clear_constant_calls() { g_memo = Memo{}; }

size_t constant_calls_reused() { return g_reused; }

}  // namespace sheaf
