// ir/node_key.cpp — the byte key that identifies a node by op, attributes, operands and result
// types (CSE in passes/cse.cpp, graph equality, the reverse sweep's value numbering in
// autodiff/reverse.cpp), and NodeKeyMap, the table of such keys.
#include "ir/node_key.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <type_traits>

namespace sheaf::ir {

namespace {

// Appends fixed-width fields; vectors are length-prefixed (one byte under 255, else 255 and
// eight bytes: prefix-free), so the encoding is injective. Most of a node's eleven lists are
// empty: one byte each.
struct KeyWriter {
  std::string& s;
  template <typename T>
  void put(T x) {
    static_assert(std::is_trivially_copyable_v<T>);
    s.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  void put_size(size_t n) {
    if (n < 255) return put(static_cast<uint8_t>(n));
    put(uint8_t{255});
    put(n);
  }
  template <typename T>
  void put(std::span<const T> xs) {
    put_size(xs.size());
    s.append(reinterpret_cast<const char*>(xs.data()), xs.size_bytes());
  }
  void put(const std::vector<int64_t>& xs) { put(std::span<const int64_t>(xs)); }
  void put(const ir::Type& t) {
    put(t.dtype);
    put(t.shape);
  }
};

}  // namespace

std::string node_key(const Graph& g, const Node& n, std::span<const int32_t> in) {
  std::string key;
  write_node_key(key, g, n, in);
  return key;
}

void write_node_key(std::string& key, const Graph& g, const Node& n, std::span<const int32_t> in) {
  key.clear();
  KeyWriter k{key};
  const ir::Attrs& a = n.attrs;
  k.put(n.op);
  k.put(in);
  k.put(n.nout);
  for (int32_t v = n.out; v < n.out + n.nout; ++v) k.put(g.type(v));
  k.put(a.unary);
  k.put(a.binary);
  k.put(a.reduce);
  k.put(a.scatter);
  k.put(a.dtype);
  k.put(a.axis);
  k.put(a.k);
  k.put(a.index);
  k.put(a.descending);
  for (const auto* v : {&a.dims, &a.starts, &a.limits, &a.strides, &a.lo, &a.hi, &a.sizes}) k.put(*v);
  for (const auto* v : {&a.dot.lhs_batch, &a.dot.rhs_batch, &a.dot.lhs_contract, &a.dot.rhs_contract}) k.put(*v);
  k.put(std::bit_cast<uint64_t>(a.scalar));
  k.put_size(a.regions.size());  // regions by identity: two whiles merge only when they share their graphs
  for (const auto& r : a.regions) k.put(reinterpret_cast<uintptr_t>(r.get()));
  if (n.op == Op::Constant) {
    const Tensor& t = a.value;
    k.put(t.dtype());
    k.put(t.shape());
    if (t.nbytes() <= kConstantKeyBytes) {
      k.put(true);
      k.s.append(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
    } else {
      k.put(false);
      k.put(reinterpret_cast<uintptr_t>(t.bytes()));
    }
  }
}

const int32_t* NodeKeyMap::find(const Graph& g, const Node& n, std::span<const int32_t> in) {
  write_node_key(pending_, g, n, in);
  pending_hash_ = std::hash<std::string_view>{}(pending_);
  if (slots_.empty()) return nullptr;
  const Slot& s = slots_[probe(pending_hash_, pending_)];
  return s.value >= 0 ? &s.value : nullptr;
}

void NodeKeyMap::insert_pending(int32_t value) {
  if (2 * (used_ + 1) > slots_.size()) grow();  // load at most 1/2
  Slot& s = slots_[probe(pending_hash_, pending_)];
  s = Slot{pending_hash_, keys_.size(), pending_.size(), value};
  keys_ += pending_;
  ++used_;
}

size_t NodeKeyMap::probe(uint64_t hash, std::string_view key) const {
  const size_t mask = slots_.size() - 1;  // a power of two
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.value < 0 || (s.hash == hash && stored(s) == key)) return i;
  }
}

void NodeKeyMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
  for (const Slot& s : old)
    if (s.value >= 0) {
      size_t i = s.hash & (slots_.size() - 1);
      while (slots_[i].value >= 0) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
}

}  // namespace sheaf::ir
