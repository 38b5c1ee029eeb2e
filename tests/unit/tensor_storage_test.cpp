// tests/unit/tensor_storage_test.cpp — host storage of tensors (tensor/tensor.cpp): a large tensor
// of zeros (Tensor(dtype, shape), the `zeros` builtin, tree-map-zeros — an optimizer's state) is
// made without touching its memory, reads as zeros and writes like any other.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "tensor/tensor.hpp"

namespace sheaf {
namespace {

// Resident memory of this process, bytes (/proc/self/statm's second field, in pages).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

TEST(TensorStorage, LargeZerosTouchNoMemoryUntilWritten) {
  if (!std::ifstream("/proc/self/statm")) GTEST_SKIP() << "no /proc/self/statm";
  constexpr int64_t n = int64_t{64} << 20;  // 256 MiB of f32
  const int64_t before = resident_bytes();
  Tensor t(DType::F32, {n});
  EXPECT_LT(resident_bytes() - before, int64_t{32} << 20) << "a tensor of zeros was written when it was made";
  for (int64_t i : {int64_t{0}, n / 3, n - 1}) EXPECT_EQ(t.get(i), 0.0) << i;
  t.set(n / 2, 2.5);
  EXPECT_EQ(t.get(n / 2), 2.5);
  EXPECT_EQ(t.get(n / 2 + 1), 0.0);
  Tensor small(DType::I32, {3, 5});  // below the mapped size: zeroed in place
  for (int64_t i = 0; i < small.numel(); ++i) EXPECT_EQ(small.get(i), 0.0);
}

}  // namespace
}  // namespace sheaf
