// io/row_handle.hpp — a handle over arrays stored row-major in files (npy, raw .bin), possibly
// sharded: the shards form one virtual array concatenated along axis 0 (SPEC §7.3). A row is
// located by binary search over cumulative row counts; each read copies its rows out of the files
// (io/data_file.hpp: one pread per run of consecutive rows in a shard) into a new tensor, which
// never changes afterwards.
#pragma once
#include <string>
#include <vector>

#include "io/elements.hpp"
#include "value/handle.hpp"

namespace sheaf {

struct RowShard {
  FilePtr file;
  size_t offset = 0;  // first byte of row 0, already checked to lie in the file with all rows
  int64_t rows = 0;
};

class RowHandle : public HandleObj {
 public:
  // kind: "npy" or "bin"; row_shape: the shape of one row ([] for 1-D data).
  RowHandle(std::string kind, Elem elem, Shape row_shape, std::vector<RowShard> shards);

  std::string describe() const override;  // "<handle npy f32[60000x784]>"
  int64_t length() const override { return total_; }
  // An int or rank-0 tensor (negative counts from the end), a slice A:B (clamped like Python),
  // or a list / 1-D tensor of row indices (gathered). Rows of 1-D data are scalars.
  Value read(const Value& key, SrcLoc loc) const override;
  Value materialize(SrcLoc loc) const override;
  // Rows [begin, end) (0 ≤ begin ≤ end ≤ length()) as a handle of their own over the same maps:
  // `(shard h)` gives each rank of a data-parallel job its rows this way, read lazily.
  std::shared_ptr<RowHandle> subrange(int64_t begin, int64_t end) const;

 private:
  Tensor rows(int64_t begin, int64_t end, SrcLoc loc) const;  // [end - begin, ...row_shape]
  // Rows [begin, end) decoded into `dst` (out_row_ bytes a row), shard by shard; errors without
  // a location get `loc`.
  void read_rows(int64_t begin, int64_t end, std::byte* dst, SrcLoc loc) const;
  int64_t row_index(double i, SrcLoc loc) const;  // normalised, checked
  Value gather(const std::vector<Value>& idx, SrcLoc loc) const;

  std::string kind_;
  Elem elem_;
  Shape row_shape_;
  size_t row_bytes_ = 0;  // in the file
  size_t out_row_ = 0;    // in a tensor of elem_dtype(elem_)
  std::vector<RowShard> shards_;
  std::vector<int64_t> starts_;  // starts_[s] = first global row of shard s
  std::vector<std::string> names_;  // "'path'" of shard s, for messages
  int64_t total_ = 0;
};

}  // namespace sheaf
