// base/companion.hpp — the shared libraries built with Sheaf and loaded with dlopen only when a
// program needs them (libsheaf_mpi.so under an MPI launcher, libsheaf_tensorboard.so at the
// first TensorBoard record), so the binary itself needs only libc and libstdc++.
#pragma once
#include <string>

namespace sheaf {

// dlopen of `file` from $<env_var>, beside the binary (the build tree), then the install tree's
// lib/sheaf; the first that loads wins. nullptr when none does, with `tried` holding one
// "\n  <dlerror>" line per candidate.
void* open_companion(const std::string& file, const char* env_var, int flags, std::string& tried);

}  // namespace sheaf
