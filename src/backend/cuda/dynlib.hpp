// backend/cuda/dynlib.hpp — loading the CUDA libraries at run time (the binary links none of them):
// a library is the first of its names that dlopen finds, on the loader path and then (for the
// toolkit's libraries) in $CUDA_HOME/lib64, $CUDA_HOME/lib, /usr/local/cuda/lib64 and
// /usr/local/cuda/lib; its entry points are resolved by name into a struct of function pointers,
// once per process (load_once).
#pragma once
#include <dlfcn.h>
#include <fmt/format.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace sheaf::cuda {

// dlopen of the first of `names` (bare sonames, then, with `toolkit`, each of them in the toolkit's
// directories); null with `why` holding the first dlerror.
void* open_library(const std::vector<std::string>& names, bool toolkit, std::string& why);

// A library's entry points once loaded: ok, or why not.
template <typename Fns>
struct Loaded {
  Fns fns{};
  bool ok = false;
  std::string why;
  // The entry points, or null with `why` (if given) saying what is missing.
  const Fns* get(std::string* reason) const {
    if (!ok && reason) *reason = why;
    return ok ? &fns : nullptr;
  }
};

// Resolves the entry points of one library: need(name, field) for each; the first missing one
// leaves `why` = "it lacks <name>" and ok() false.
class Resolver {
 public:
  Resolver(void* lib, std::string& why) : lib_(lib), why_(why) {}
  template <typename F>
  void operator()(const char* name, F& fn) {
    if (!ok_) return;
    fn = reinterpret_cast<F>(dlsym(lib_, name));
    if (!fn) ok_ = false, why_ = fmt::format("it lacks {}", name);
  }
  // An entry point the library may lack: null then, and ok() unchanged.
  template <typename F>
  void optional(const char* name, F& fn) {
    fn = reinterpret_cast<F>(dlsym(lib_, name));
  }
  bool ok() const { return ok_; }

 private:
  void* lib_;
  std::string& why_;
  bool ok_ = true;
};

// need(#name, fns.name) for one entry point whose field is named by its symbol: the bind of
// load_once applies it to a library's entry-point list, e.g.
// SHEAF_CUDA_DRIVER_ENTRY_POINTS(SHEAF_CUDA_RESOLVE) with its struct named `fns`.
#define SHEAF_CUDA_RESOLVE(name) need(#name, fns.name);
#define SHEAF_CUDA_RESOLVE_OPTIONAL(name) need.optional(#name, fns.name);

// Loads a library once: opens `names`, then `bind(need, fns, why)` resolves the entry points with
// need(name, fns.field) and may check more (returning false with `why` set). Failures read
// "<not_found>: <dlerror>" or "<too_old>: it lacks <name>".
template <typename Fns>
Loaded<Fns>& load_once(Loaded<Fns>& l, std::once_flag& once, const std::vector<std::string>& names, bool toolkit,
                       const char* not_found, const char* too_old,
                       const std::function<bool(Resolver& need, Fns& fns, std::string& why)>& bind) {
  std::call_once(once, [&] {
    void* lib = open_library(names, toolkit, l.why);
    if (!lib) {
      l.why = fmt::format("{}: {}", not_found, l.why);
      return;
    }
    l.why.clear();
    Resolver need(lib, l.why);
    bool ok = bind(need, l.fns, l.why);
    if (!need.ok()) l.why = fmt::format("{}: {}", too_old, l.why);
    l.ok = ok && need.ok();
  });
  return l;
}

}  // namespace sheaf::cuda
