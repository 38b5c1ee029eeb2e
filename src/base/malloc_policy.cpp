// base/malloc_policy.cpp — glibc mallopt settings (see malloc_policy.hpp).
#include "base/malloc_policy.hpp"

#include <malloc.h>

namespace sheaf {

void keep_freed_memory() {
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
}

void set_process_malloc_policy() {
  mallopt(M_ARENA_MAX, 1);
  keep_freed_memory();
}

}  // namespace sheaf
