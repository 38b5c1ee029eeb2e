// eval/modules.cpp — `use`: module search and load-once semantics (SPEC §4.6).
// Bundled modules are found first and cannot be shadowed; then $SHEAF_LIB (colon-separated),
// <dir of the executable>/../lib, the current directory, and the directory of the file that
// contains the `use`. A module is loaded once per program (by absolute path).
#include "eval/modules.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/interp.hpp"

namespace sheaf {
namespace fs = std::filesystem;

static std::vector<fs::path> search_path(const std::string& current_dir) {
  std::vector<fs::path> dirs;
  if (const char* lib = std::getenv("SHEAF_LIB")) {
    std::string s = lib;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs.emplace_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path() / ".." / "lib");
  dirs.push_back(fs::current_path(ec));
  if (!current_dir.empty()) dirs.emplace_back(current_dir);
  return dirs;
}

void Interp::use_module(const std::string& name, SrcLoc loc) {
  std::string saved_module = module_name, saved_dir = current_dir;
  auto restore = [&] {
    module_name = saved_module;
    current_dir = saved_dir;
  };
  if (auto src = bundled_module(name)) {
    std::string key = "<bundled>/" + name + ".shf";
    if (!loaded_paths_.insert(key).second) return;
    loaded_module_names_.push_back(name);
    module_name = name;
    try {
      run_text(*src, key, /*bundled=*/true);
    } catch (...) {
      restore();
      throw;
    }
    restore();
    return;
  }
  std::vector<fs::path> dirs = search_path(current_dir);
  std::string searched;
  for (const fs::path& d : dirs) {
    fs::path p = d / (name + ".shf");
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      searched += (searched.empty() ? "" : ", ") + d.string();
      continue;
    }
    std::string key = fs::weakly_canonical(p, ec).string();
    if (!loaded_paths_.insert(key).second) return;
    loaded_module_names_.push_back(name);
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    module_name = name;
    current_dir = p.parent_path().string();
    try {
      run_text(ss.str(), p.string());
    } catch (...) {
      restore();
      throw;
    }
    restore();
    return;
  }
  throw SheafError("module '" + name + "' not found (searched: " + searched + ")", loc);
}

}  // namespace sheaf
