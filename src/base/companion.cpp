// base/companion.cpp — finding and loading the companion libraries (see companion.hpp).
#include "base/companion.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace sheaf {

void* open_companion(const std::string& file, const char* env_var, int flags, std::string& tried) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv(env_var)) candidates.push_back(p);
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path() / file).string());
    candidates.push_back((exe.parent_path().parent_path() / "lib" / "sheaf" / file).string());
  }
  for (const std::string& path : candidates) {
    if (void* lib = dlopen(path.c_str(), flags)) return lib;
    const char* e = dlerror();
    tried += "\n  " + (e ? std::string(e) : path + ": cannot be loaded");
  }
  return nullptr;
}

}  // namespace sheaf
