// dist/collectives.cpp — all_reduce_sum on concrete tensors (pack, one MPI call per element type,
// unpack) and its recording while tracing; broadcast_from (pack, one MPI call, unpack).
#include "dist/collectives.hpp"

#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"
#include "dist/comm.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf::dist {
namespace {

std::string types_of(const std::vector<Tensor>& xs) {
  std::string s;
  for (const Tensor& x : xs) s += (s.empty() ? "" : ", ") + type_str(x.dtype(), x.shape());
  return s;
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
  Step step(fmt::format("all-reduce of ({})", types_of(xs)));
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
  Step step(fmt::format("broadcast-tree from rank {} of ({})", root, types_of(xs)));
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
