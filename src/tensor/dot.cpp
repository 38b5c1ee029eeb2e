// tensor/dot.cpp — dot_general as a loop of matrix products over the batch dims.
// Each operand's free dims and its contracting dims are merged into one matrix axis each. When
// a group is adjacent and in order in memory the merge is a strided view (no copy, and gemm
// hands BLAS a transposed operand when the strides say so); otherwise the operand is
// transposed to [batch..., rows..., cols...] first.
#include "tensor/dot.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

#include "base/error.hpp"
#include "tensor/blas.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

// A group of dims merged into one axis: `size` elements `stride` apart.
struct Axis {
  int64_t size = 1, stride = 1;
};

// `dims` (outermost first) of a row-major tensor as one axis; nullopt when they are not adjacent
// and in order in memory. Size-1 dims never matter.
std::optional<Axis> merge(const Shape& shape, const std::vector<int64_t>& strides, const std::vector<int64_t>& dims) {
  Axis g;
  bool any = false;
  for (int64_t d : dims) {
    if (shape[d] == 1) continue;
    if (any && g.stride != strides[d] * shape[d]) return std::nullopt;
    g = {g.size * shape[d], strides[d]};
    any = true;
  }
  return g;
}

// An operand seen as a batch of matrices: element (b, r, c) at offset(b) + r·rows.stride + c·cols.stride.
struct Matrices {
  Tensor t;
  std::vector<int64_t> batch_strides;
  Axis rows, cols;
};

std::vector<int64_t> concat3(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             const std::vector<int64_t>& c) {
  std::vector<int64_t> r = a;
  r.insert(r.end(), b.begin(), b.end());
  r.insert(r.end(), c.begin(), c.end());
  return r;
}

std::vector<int64_t> iota_from(int64_t start, size_t n) {
  std::vector<int64_t> r(n);
  std::iota(r.begin(), r.end(), start);
  return r;
}

Matrices as_matrices(const Tensor& t, const std::vector<int64_t>& batch, const std::vector<int64_t>& rows,
                     const std::vector<int64_t>& cols) {
  const std::vector<int64_t> strides = strides_of(t.shape());
  auto r = merge(t.shape(), strides, rows), c = merge(t.shape(), strides, cols);
  if (r && c) {
    Matrices m{t, {}, *r, *c};
    for (int64_t d : batch) m.batch_strides.push_back(strides[d]);
    return m;
  }
  const auto nb = static_cast<int64_t>(batch.size()), nr = static_cast<int64_t>(rows.size());
  return as_matrices(transpose(t, concat3(batch, rows, cols)), iota_from(0, batch.size()), iota_from(nb, rows.size()),
                     iota_from(nb + nr, cols.size()));
}

// out[b] = lhs[b] · rhs[b] for every batch index b (row-major over `batch_shape`).
template <typename T>
void run_batches(const Matrices& l, const Matrices& r, const Shape& batch_shape, Tensor& out) {
  const int64_t m = l.rows.size, k = l.cols.size, n = r.cols.size;
  const T* lp = l.t.data<T>();
  const T* rp = r.t.data<T>();
  T* op = out.mutable_data<T>();
  const int64_t count = shape_numel(batch_shape);
  Odometer<2> batch(batch_shape.data(), batch_shape.size(), {l.batch_strides.data(), r.batch_strides.data()});
  for (int64_t b = 0; b < count; ++b) {
    gemm(MatView<const T>{lp + batch[0], m, k, l.rows.stride, l.cols.stride},
         MatView<const T>{rp + batch[1], k, n, r.rows.stride, r.cols.stride}, MatView<T>{op + b * m * n, m, n, n, 1});
    batch.next();
  }
}

void check(const Tensor& lhs, const Tensor& rhs, const DotDims& dims) {
  auto where = [&] { return fmt::format("{} and {}", type_str(lhs), type_str(rhs)); };
  if (lhs.dtype() != rhs.dtype()) throw SheafError(fmt::format("dot_general: operands {} differ in dtype", where()));
  if (dims.lhs_batch.size() != dims.rhs_batch.size() || dims.lhs_contract.size() != dims.rhs_contract.size())
    throw SheafError(fmt::format("dot_general: unpaired batch or contracting dims for {}", where()));
  auto check_operand = [&](const Tensor& t, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
    auto count = [&](int64_t d) {
      return std::count(batch.begin(), batch.end(), d) + std::count(contract.begin(), contract.end(), d);
    };
    for (const auto* dims : {&batch, &contract})
      for (int64_t d : *dims)
        if (d < 0 || d >= t.rank() || count(d) > 1)
          throw SheafError(fmt::format("dot_general: dimension {} is out of range or repeated for {}", d, type_str(t)));
  };
  check_operand(lhs, dims.lhs_batch, dims.lhs_contract);
  check_operand(rhs, dims.rhs_batch, dims.rhs_contract);
  for (size_t i = 0; i < dims.lhs_batch.size(); ++i)
    if (lhs.dim(dims.lhs_batch[i]) != rhs.dim(dims.rhs_batch[i]))
      throw SheafError(fmt::format("dot_general: batch dimensions {} and {} of {} differ", dims.lhs_batch[i],
                                   dims.rhs_batch[i], where()));
  for (size_t i = 0; i < dims.lhs_contract.size(); ++i)
    if (lhs.dim(dims.lhs_contract[i]) != rhs.dim(dims.rhs_contract[i]))
      throw SheafError(fmt::format("dot_general: contracting dimensions {} and {} of {} differ", dims.lhs_contract[i],
                                   dims.rhs_contract[i], where()));
}

}  // namespace

std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
  std::vector<int64_t> r;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() && std::find(contract.begin(), contract.end(), d) == contract.end())
      r.push_back(d);
  return r;
}

Tensor dot_general(const Tensor& lhs, const Tensor& rhs, const DotDims& dims) {
  check(lhs, rhs, dims);
  if (lhs.is_symbolic() || rhs.is_symbolic()) return ir::record1(ir::Op::DotGeneral, {lhs, rhs}, {.dot = dims});
  const DType dt = lhs.dtype();
  if (dt == DType::F16 || dt == DType::BF16)
    return convert(dot_general(convert(lhs, DType::F32), convert(rhs, DType::F32), dims), dt);
  if (dt == DType::Bool)  // OR of ANDs: count the true products, then nonzero → true
    return convert(dot_general(convert(lhs, DType::U32), convert(rhs, DType::U32), dims), DType::Bool);

  const std::vector<int64_t> lfree = free_dims(lhs.rank(), dims.lhs_batch, dims.lhs_contract);
  const std::vector<int64_t> rfree = free_dims(rhs.rank(), dims.rhs_batch, dims.rhs_contract);
  Shape batch_shape, out_shape;
  for (int64_t d : dims.lhs_batch) batch_shape.push_back(lhs.dim(d));
  out_shape = batch_shape;
  for (int64_t d : lfree) out_shape.push_back(lhs.dim(d));
  for (int64_t d : rfree) out_shape.push_back(rhs.dim(d));
  int64_t k = 1;
  for (int64_t d : dims.lhs_contract) k *= lhs.dim(d);
  if (shape_numel(out_shape) == 0 || k == 0) return Tensor(dt, out_shape);  // zeros

  // Contracting pairs in lhs memory order, so that lhs's contracting dims merge when they can.
  std::vector<size_t> order(dims.lhs_contract.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return dims.lhs_contract[a] < dims.lhs_contract[b]; });
  std::vector<int64_t> lc, rc;
  for (size_t i : order) {
    lc.push_back(dims.lhs_contract[i]);
    rc.push_back(dims.rhs_contract[i]);
  }

  const Matrices l = as_matrices(lhs, dims.lhs_batch, lfree, lc);  // [batch] m×k
  const Matrices r = as_matrices(rhs, dims.rhs_batch, rc, rfree);  // [batch] k×n
  Tensor out = Tensor::empty(dt, out_shape);
  if (dt == DType::F32) run_batches<float>(l, r, batch_shape, out);
  else run_batches<uint32_t>(l, r, batch_shape, out);  // i32 and u32: the same bits modulo 2^32
  return out;
}

}  // namespace sheaf
