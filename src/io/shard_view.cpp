// io/shard_view.cpp — row ranges of handles (see shard_view.hpp).
#include "io/shard_view.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.hpp"
#include "eval/interp.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

std::string ShardView::describe() const { return fmt::format("<handle rows {}:{} of {}>", begin_, end_, parent().describe()); }

int64_t ShardView::row(double i, SrcLoc loc) const {
  int64_t n = length();
  if (i != std::floor(i)) throw SheafError(fmt::format("handle: row index must be an integer, got {}", i), loc);
  double j = i < 0 ? i + static_cast<double>(n) : i;
  if (j < 0 || j >= static_cast<double>(n))
    throw SheafError(fmt::format("handle: row {} out of range for {} rows (rows {}:{} of the data)", static_cast<int64_t>(i), n, begin_, end_), loc);
  return begin_ + static_cast<int64_t>(j);
}

Value ShardView::read(const Value& key, SrcLoc loc) const {
  if (key.is(Kind::Slice)) {
    const SliceObj& sl = key.as_slice();
    int64_t n = length();
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
    int64_t b = clamp(sl.start), e = sl.end ? clamp(*sl.end) : n;
    return parent().read(Value::slice(begin_ + b, begin_ + std::max(b, e)), loc);
  }
  if (key.is_list() || (key.is(Kind::Tensor) && key.as_tensor().rank() == 1)) {
    std::vector<Value> rows;
    for (const Value& v : seq_elements(key, loc, "handle")) {
      auto n = number_of(v);
      if (!n) throw SheafError(fmt::format("handle: row indices must be integers, got {}", kind_name(v.kind())), loc);
      rows.push_back(Value::integer(row(*n, loc)));
    }
    return parent().read(Value::list(std::move(rows), ListKind::Bracket), loc);
  }
  auto n = number_of(key);
  if (!n)
    throw SheafError(fmt::format("handle: expected a row index, a slice like 100:200 or a list of rows, got {}", kind_name(key.kind())), loc);
  return parent().read(Value::integer(row(*n, loc)), loc);
}

Value ShardView::materialize(SrcLoc loc) const { return parent().read(Value::slice(begin_, end_), loc); }

}  // namespace sheaf
