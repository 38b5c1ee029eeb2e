// dist/collectives.cpp — all_reduce_sum on concrete tensors (pack, one MPI call per element type,
// unpack) and its recording while tracing; broadcast_from (pack, one MPI call, unpack).
#include "dist/collectives.hpp"

#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"
#include "dist/comm.hpp"
#include "ir/recorder.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/shape.hpp"

namespace sheaf::dist {
namespace {

std::string types_of(const std::vector<Tensor>& xs) {
  std::string s;
  for (const Tensor& x : xs) s += (s.empty() ? "" : ", ") + type_str(x.dtype(), x.shape());
  return s;
}

// FNV-1a over the dtypes and shapes: equal on every rank when the operands agree.
uint64_t fingerprint(const std::vector<Tensor>& xs) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](int64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ static_cast<uint64_t>(v & 0xff)) * 0x100000001b3ull;
  };
  mix(static_cast<int64_t>(xs.size()));
  for (const Tensor& x : xs) {
    mix(static_cast<int64_t>(x.dtype()));
    mix(x.rank());
    for (int64_t d : x.shape()) mix(d);
  }
  return h;
}

// Throws SheafError (naming `what`, this rank's operand types and a rank that disagrees) unless
// every rank passes the same dtypes and shapes. A collective of its own (one 8-byte allgather).
void check_agreement(const std::vector<Tensor>& xs, const char* what) {
  std::vector<uint64_t> all = all_gather(fingerprint(xs), what);
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[static_cast<size_t>(rank())])
      throw SheafError(fmt::format("{}: {} passed ({}) but rank {} passed different dtypes or shapes: every rank must pass the "
                                   "same tree",
                                   what, where(), types_of(xs), r));
}

// The operands of one element type T (stored as `dtype`), packed into one buffer, summed in
// place, and unpacked into results of the operands' own dtypes.
template <typename T>
struct Group {
  DType dtype;
  Elem elem;
  std::vector<size_t> members;
  std::vector<T> buffer;

  void add(size_t k, const Tensor& x) {  // x has dtype `dtype`
    members.push_back(k);
    buffer.insert(buffer.end(), x.data<T>(), x.data<T>() + x.numel());
  }
  void sum_and_unpack(const std::vector<Tensor>& xs, std::vector<Tensor>& out) {
    all_reduce_sum(buffer.data(), static_cast<int64_t>(buffer.size()), elem, "all-reduce");
    size_t at = 0;
    for (size_t k : members) {
      Tensor r = Tensor::empty(dtype, xs[k].shape());
      if (r.nbytes()) std::memcpy(r.mutable_bytes(), buffer.data() + at, r.nbytes());
      at += static_cast<size_t>(r.numel());
      out[k] = dtype == xs[k].dtype() ? r : convert(r, xs[k].dtype());
    }
  }
};

}  // namespace

std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& xs) {
  for (const Tensor& x : xs)
    if (x.dtype() == DType::Bool) throw SheafError(fmt::format("all-reduce: cannot sum a bool tensor ({})", type_str(x.dtype(), x.shape())));
  if (ir::active_recorder()) return ir::recorder().record(ir::Op::AllReduce, xs, {.reduce = Reduce::Sum});
  if (!distributed()) return xs;
  check_agreement(xs, "all-reduce");
  Group<float> f{DType::F32, Elem::F32};  // f32, f16 and bf16 (in f32)
  Group<int32_t> i{DType::I32, Elem::I32};
  Group<uint32_t> u{DType::U32, Elem::U32};
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    if (x.dtype() == DType::I32) i.add(k, x);
    else if (x.dtype() == DType::U32) u.add(k, x);
    else f.add(k, x.dtype() == DType::F32 ? x : convert(x, DType::F32));
  }
  std::vector<Tensor> out(xs.size());
  f.sum_and_unpack(xs, out);
  i.sum_and_unpack(xs, out);
  u.sum_and_unpack(xs, out);
  return out;
}

std::vector<Tensor> broadcast_from(const std::vector<Tensor>& xs, int root) {
  if (!distributed()) return xs;
  check_agreement(xs, "broadcast-tree");
  size_t bytes = 0;
  for (const Tensor& x : xs) bytes += x.nbytes();
  std::vector<std::byte> buffer(bytes);
  size_t at = 0;
  for (const Tensor& x : xs) {
    if (x.nbytes()) std::memcpy(buffer.data() + at, x.bytes(), x.nbytes());
    at += x.nbytes();
  }
  broadcast(buffer.data(), static_cast<int64_t>(bytes), root, "broadcast-tree");
  std::vector<Tensor> out;
  at = 0;
  for (const Tensor& x : xs) {
    Tensor r = Tensor::empty(x.dtype(), x.shape());
    if (r.nbytes()) std::memcpy(r.mutable_bytes(), buffer.data() + at, r.nbytes());
    at += r.nbytes();
    out.push_back(r);
  }
  return out;
}

}  // namespace sheaf::dist
