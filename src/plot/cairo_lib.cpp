// plot/cairo_lib.cpp — loading libcairo.so.2 and its functions (see cairo_lib.hpp).
#include "plot/cairo_lib.hpp"

#include <dlfcn.h>

#include <string>

#include <fmt/format.h>

#include "base/error.hpp"

namespace sheaf {
namespace {

struct Loaded {
  Cairo fns;
  std::string error;  // why cairo cannot be used
};

Loaded load() {
  Loaded l;
  void* h = dlopen("libcairo.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.error = fmt::format("sheaf plot draws with cairo, which could not be loaded ({}); install it, e.g. apt-get "
                          "install libcairo2",
                          e ? e : "libcairo.so.2");
    return l;
  }
  std::string missing;
#define SHEAF_CAIRO_LOAD(name)                                     \
  l.fns.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name)); \
  if (!l.fns.name && missing.empty()) missing = #name;
  SHEAF_CAIRO_FUNCTIONS(SHEAF_CAIRO_LOAD)
#undef SHEAF_CAIRO_LOAD
  if (!missing.empty()) l.error = fmt::format("libcairo.so.2 lacks {}: sheaf plot needs cairo 1.12 or later", missing);
  return l;
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// cairo keeps fontconfig's configuration and font caches for the life of the process, which
// LeakSanitizer reports at exit: they are not Sheaf's leaks.
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\nleak:libcairo.so\n"; }
#endif

const Cairo& cairo() {
  static const Loaded lib = load();
  if (!lib.error.empty()) throw SheafError(lib.error);
  return lib.fns;
}

}  // namespace sheaf
