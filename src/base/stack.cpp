// base/stack.cpp — per-thread stack floor, computed once from the thread's attributes.
#include "base/stack.hpp"

#include <pthread.h>

#include <cstddef>

namespace sheaf {

static const char* compute_floor() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
  void* addr = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  constexpr size_t kMargin = size_t{1} << 20;
  return size > 2 * kMargin ? static_cast<const char*>(addr) + kMargin : nullptr;
}

bool stack_exhausted() {
  thread_local const char* floor = compute_floor();
  const char* frame = static_cast<const char*>(__builtin_frame_address(0));
  return floor && frame < floor;  // the stack grows down
}

}  // namespace sheaf
