// backend/recycled_buffers.hpp — result buffers reused across calls of a compiled function (both
// backends). Per result position it keeps the buffers of the last few calls, most recent first,
// and hands one back once nothing else holds it (a training loop drops the previous step's
// parameters): the CPU saves the allocation and the page faults of fresh memory, a GPU gets the
// same buffer tables call after call (so their captures replay).
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

namespace sheaf {

template <class T>
class RecycledBuffers {
 public:
  RecycledBuffers(size_t positions, size_t generations) : kept_(positions), generations_(generations) {}

  // A buffer for result `position`: a kept one that only this holds, else make() — kept for later
  // calls when `keep` (at most `generations` per position).
  template <class Make>
  std::shared_ptr<T> take(size_t position, Make make, bool keep = true) {
    std::vector<std::shared_ptr<T>>& list = kept_[position];
    auto free = std::find_if(list.begin(), list.end(), [](const std::shared_ptr<T>& b) { return b.use_count() == 1; });
    if (free != list.end()) {
      std::rotate(list.begin(), free, free + 1);
      return list.front();
    }
    std::shared_ptr<T> fresh = make();
    if (keep) {
      list.insert(list.begin(), fresh);
      if (list.size() > generations_) list.pop_back();
    }
    return fresh;
  }

 private:
  std::vector<std::vector<std::shared_ptr<T>>> kept_;
  size_t generations_;
};

}  // namespace sheaf
