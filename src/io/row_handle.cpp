// io/row_handle.cpp — row reads over (sharded) npy and .bin arrays.
#include "io/row_handle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"
#include "tensor/shape.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

RowHandle::RowHandle(std::string kind, Elem elem, Shape row_shape, std::vector<RowShard> shards)
    : kind_(std::move(kind)), elem_(elem), row_shape_(std::move(row_shape)), shards_(std::move(shards)) {
  row_bytes_ = static_cast<size_t>(shape_numel(row_shape_)) * elem_size(elem_);
  out_row_ = static_cast<size_t>(shape_numel(row_shape_)) * dtype_size(elem_dtype(elem_));
  for (const RowShard& s : shards_) {
    names_.push_back(fmt::format("'{}'", s.file->path));
    starts_.push_back(total_);
    total_ += s.rows;
  }
}

std::string RowHandle::describe() const {
  Shape full{total_};
  full.insert(full.end(), row_shape_.begin(), row_shape_.end());
  return fmt::format("<handle {} {}>", kind_, type_str(elem_dtype(elem_), full));
}

void RowHandle::read_rows(int64_t begin, int64_t end, std::byte* dst, SrcLoc loc) const {
  // The shard holding `begin`: the last one starting at or before it.
  size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  const int64_t row_numel = shape_numel(row_shape_);
  for (int64_t r = begin; r < end; ++s) {  // the piece of each shard in turn
    const RowShard& sh = shards_[s];
    int64_t local = r - starts_[s], n = std::min(end - r, sh.rows - local);
    if (n <= 0) continue;
    try {
      read_elements(elem_, n * row_numel, *sh.file, sh.offset + static_cast<size_t>(local) * row_bytes_,
                    dst + static_cast<size_t>(r - begin) * out_row_, names_[s]);
    } catch (SheafError& e) {  // the file changed on disk, or an element does not convert: at the reading form
      if (!e.loc.valid()) e.loc = loc;
      throw;
    }
    r += n;
  }
}

Tensor RowHandle::rows(int64_t begin, int64_t end, SrcLoc loc) const {
  Shape shape{end - begin};
  shape.insert(shape.end(), row_shape_.begin(), row_shape_.end());
  Tensor out = Tensor::empty(elem_dtype(elem_), shape);
  if (begin < end && out_row_) read_rows(begin, end, out.mutable_bytes(), loc);
  return out;
}

int64_t RowHandle::row_index(double i, SrcLoc loc) const {
  if (i != std::floor(i)) throw SheafError(fmt::format("{} handle: row index must be an integer, got {}", kind_, i), loc);
  double j = i < 0 ? i + static_cast<double>(total_) : i;
  if (j < 0 || j >= static_cast<double>(total_))
    throw SheafError(fmt::format("{} handle: row {} out of range for {} rows", kind_, static_cast<int64_t>(i), total_), loc);
  return static_cast<int64_t>(j);
}

Value RowHandle::gather(const std::vector<Value>& idx, SrcLoc loc) const {
  std::vector<int64_t> rows_at;
  rows_at.reserve(idx.size());
  for (const Value& v : idx) {
    auto n = number_of(v);
    if (!n) throw SheafError(fmt::format("{} handle: row indices must be integers, got {}", kind_, kind_name(v.kind())), loc);
    rows_at.push_back(row_index(*n, loc));
  }
  Shape shape{static_cast<int64_t>(rows_at.size())};
  shape.insert(shape.end(), row_shape_.begin(), row_shape_.end());
  Tensor out = Tensor::empty(elem_dtype(elem_), shape);
  if (!out_row_) return Value::tensor(out);
  for (size_t k = 0, run = 1; k < rows_at.size(); k += run) {  // a run of consecutive rows is one read
    for (run = 1; k + run < rows_at.size() && rows_at[k + run] == rows_at[k] + static_cast<int64_t>(run);) ++run;
    read_rows(rows_at[k], rows_at[k] + static_cast<int64_t>(run), out.mutable_bytes() + k * out_row_, loc);
  }
  return Value::tensor(out);
}

Value RowHandle::read(const Value& key, SrcLoc loc) const {
  if (key.is(Kind::Slice)) {
    const SliceObj& sl = key.as_slice();
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + total_ : i, int64_t{0}, total_); };
    int64_t b = clamp(sl.start), e = sl.end ? clamp(*sl.end) : total_;
    return Value::tensor(rows(b, std::max(b, e), loc));
  }
  if (key.is_list()) return gather(key.as_list().items, loc);
  if (key.is(Kind::Tensor) && key.as_tensor().rank() == 1) return gather(row_values(key.as_tensor()), loc);
  auto n = number_of(key);
  if (!n)
    throw SheafError(fmt::format("{} handle: expected a row index, a slice like 100:200 or a list of rows, got {}", kind_,
                                 kind_name(key.kind())),
                     loc);
  int64_t i = row_index(*n, loc);
  Tensor row = rows(i, i + 1, loc).reshaped(row_shape_);
  return row.rank() == 0 ? scalar_value(row) : Value::tensor(row);
}

Value RowHandle::materialize(SrcLoc loc) const { return Value::tensor(rows(0, total_, loc)); }

std::shared_ptr<RowHandle> RowHandle::subrange(int64_t begin, int64_t end) const {
  std::vector<RowShard> part;
  for (size_t s = 0; s < shards_.size(); ++s) {
    int64_t lo = std::max(begin, starts_[s]), hi = std::min(end, starts_[s] + shards_[s].rows);
    if (lo >= hi) continue;
    RowShard piece = shards_[s];
    piece.offset += static_cast<size_t>(lo - starts_[s]) * row_bytes_;
    piece.rows = hi - lo;
    part.push_back(piece);
  }
  return std::make_shared<RowHandle>(kind_, elem_, row_shape_, std::move(part));
}

}  // namespace sheaf
