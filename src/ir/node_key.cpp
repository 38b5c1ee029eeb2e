// ir/node_key.cpp — the byte key that identifies a node by op, attributes, operands and result
// types (CSE in passes/cse.cpp, the reverse sweep's value numbering in autodiff/reverse.cpp).
#include "ir/node_key.hpp"

#include <bit>
#include <cstdint>
#include <type_traits>

namespace sheaf::ir {

namespace {

// Appends fixed-width fields; vectors are length-prefixed, so the encoding is injective.
struct KeyWriter {
  std::string s;
  template <typename T>
  void put(T x) {
    static_assert(std::is_trivially_copyable_v<T>);
    s.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  template <typename T>
  void put(std::span<const T> xs) {
    put(xs.size());
    for (const T& x : xs) put(x);
  }
  void put(const std::vector<int64_t>& xs) { put(std::span<const int64_t>(xs)); }
  void put(const ir::Type& t) {
    put(t.dtype);
    put(t.shape);
  }
};

}  // namespace

std::string node_key(const Graph& g, const Node& n, std::span<const int32_t> in) {
  KeyWriter k;
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
  k.put(a.regions.size());  // regions by identity: two whiles merge only when they share their graphs
  for (const auto& r : a.regions) k.put(reinterpret_cast<uintptr_t>(r.get()));
  if (n.op == Op::Constant) {
    const Tensor& t = a.value;
    k.put(ir::Type{t.dtype(), t.shape()});
    if (t.nbytes() <= kConstantKeyBytes) {
      k.put(true);
      k.s.append(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
    } else {
      k.put(false);
      k.put(reinterpret_cast<uintptr_t>(t.bytes()));
    }
  }
  return k.s;
}

}  // namespace sheaf::ir
