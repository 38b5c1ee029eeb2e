// dist/collectives.cpp — all_reduce_sum on concrete tensors (pack, one MPI call per element type,
// unpack) and its recording while tracing.
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

// The operands of one element type, packed into one buffer and summed in place.
template <typename T>
struct Group {
  std::vector<size_t> members;
  std::vector<T> buffer;
};

}  // namespace

void check_agreement(const std::vector<Tensor>& xs, const char* what) {
  std::vector<uint64_t> all = all_gather(fingerprint(xs), what);
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[static_cast<size_t>(rank())])
      throw SheafError(fmt::format("{}: {} passed ({}) but rank {} passed different dtypes or shapes: every rank must pass the "
                                   "same tree",
                                   what, where(), types_of(xs), r));
}

std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& xs) {
  for (const Tensor& x : xs)
    if (x.dtype() == DType::Bool) throw SheafError(fmt::format("all-reduce: cannot sum a bool tensor ({})", type_str(x.dtype(), x.shape())));
  if (ir::active_recorder()) return ir::recorder().record(ir::Op::AllReduce, xs, {.reduce = Reduce::Sum});
  if (!distributed()) return xs;
  check_agreement(xs, "all-reduce");
  Group<float> f;  // f32, f16 and bf16 (in f32)
  Group<int32_t> i;
  Group<uint32_t> u;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    if (x.dtype() == DType::I32) {
      i.members.push_back(k);
      i.buffer.insert(i.buffer.end(), x.data<int32_t>(), x.data<int32_t>() + x.numel());
    } else if (x.dtype() == DType::U32) {
      u.members.push_back(k);
      u.buffer.insert(u.buffer.end(), x.data<uint32_t>(), x.data<uint32_t>() + x.numel());
    } else {
      Tensor w = x.dtype() == DType::F32 ? x : convert(x, DType::F32);
      f.members.push_back(k);
      f.buffer.insert(f.buffer.end(), w.data<float>(), w.data<float>() + w.numel());
    }
  }
  all_reduce_sum(f.buffer.data(), static_cast<int64_t>(f.buffer.size()), Elem::F32, "all-reduce");
  all_reduce_sum(i.buffer.data(), static_cast<int64_t>(i.buffer.size()), Elem::I32, "all-reduce");
  all_reduce_sum(u.buffer.data(), static_cast<int64_t>(u.buffer.size()), Elem::U32, "all-reduce");
  std::vector<Tensor> out(xs.size());
  auto unpack = [&](auto& group, DType stored) {
    size_t at = 0;
    for (size_t k : group.members) {
      const Tensor& x = xs[k];
      Tensor r = Tensor::empty(stored, x.shape());
      if (r.nbytes()) std::memcpy(r.mutable_bytes(), group.buffer.data() + at, r.nbytes());
      at += static_cast<size_t>(x.numel());
      out[k] = stored == x.dtype() ? r : convert(r, x.dtype());
    }
  };
  unpack(f, DType::F32);
  unpack(i, DType::I32);
  unpack(u, DType::U32);
  return out;
}

}  // namespace sheaf::dist
