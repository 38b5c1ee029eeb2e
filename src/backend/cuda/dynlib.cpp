// backend/cuda/dynlib.cpp — dlopen of the CUDA libraries (see dynlib.hpp).
#include "backend/cuda/dynlib.hpp"

#include <cstdlib>

namespace sheaf::cuda {

void* open_library(const std::vector<std::string>& names, bool toolkit, std::string& why) {
  std::vector<std::string> paths = names;
  if (toolkit) {
    std::vector<std::string> dirs;
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs = {std::string(home) + "/lib64", std::string(home) + "/lib"};
    dirs.insert(dirs.end(), {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"});
    for (const std::string& dir : dirs)
      for (const std::string& n : names) paths.push_back(dir + "/" + n);
  }
  for (const std::string& p : paths) {
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    if (why.empty()) why = e ? e : p + ": cannot be loaded";
  }
  return nullptr;
}

}  // namespace sheaf::cuda
