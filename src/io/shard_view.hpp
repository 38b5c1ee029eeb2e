// io/shard_view.hpp — a contiguous range of the rows of a row-indexed handle (npy, .bin, IDX),
// itself a handle: `(shard h)` gives each rank of a data-parallel job its own rows this way
// (SPEC §10), read lazily from the parent like any handle (SPEC §7.3). Row indices, slices and
// index lists are relative to the range and checked against its length.
#pragma once
#include "value/handle.hpp"

namespace sheaf {

class ShardView : public HandleObj {
 public:
  // Rows [begin, end) of `parent` (0 ≤ begin ≤ end ≤ its length).
  ShardView(Value parent, int64_t begin, int64_t end) : parent_(std::move(parent)), begin_(begin), end_(end) {}

  std::string describe() const override;  // "<handle rows 0:30000 of <handle npy f32[60000x784]>>"
  int64_t length() const override { return end_ - begin_; }
  Value read(const Value& key, SrcLoc loc) const override;
  Value materialize(SrcLoc loc) const override;

 private:
  const HandleObj& parent() const { return parent_.as<HandleObj>(); }
  int64_t row(double i, SrcLoc loc) const;  // a relative index → the parent's row

  Value parent_;
  int64_t begin_, end_;
};

}  // namespace sheaf
