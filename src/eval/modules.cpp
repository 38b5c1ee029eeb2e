// eval/modules.cpp — `use` and the autoloaded modules (SPEC §4.6, §4.7).
// `(use name)`: the bundled modules (nn, optim, macros, misc) are found first and cannot be
// shadowed; then name.shf in the directory of the file containing the `use`, in each directory
// of $SHEAF_LIB (colon-separated), and in <dir of the executable>/../lib. The current directory
// is searched only where it is that directory: the REPL and `-c` evaluate in it. A name holding
// a '/' or ending in ".shf" (`./model.shf`, `../lib/layers`, "x.shf") is a path, resolved against
// the directory of the including file (".shf" added when missing). A module is loaded once per
// program (by absolute path).
// nn and optim need no `use`: a name they define resolves on first reference, loading the
// module then. Their forms are evaluated over a module frame holding their own definitions, so
// their functions keep calling each other when a user definition shadows one of the names.
#include "eval/modules.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/interp.hpp"
#include "reader/reader.hpp"

namespace sheaf {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kAutoloaded[] = {"nn", "optim"};

bool is_path(const std::string& name) { return name.find('/') != std::string::npos || name.ends_with(".shf"); }

// The directories searched for a bare module name, in order.
std::vector<fs::path> search_path(const std::string& current_dir) {
  std::vector<fs::path> dirs;
  if (!current_dir.empty()) dirs.emplace_back(current_dir);
  if (const char* lib = std::getenv("SHEAF_LIB")) {
    std::string_view s = lib;
    for (size_t start = 0; start <= s.size();) {
      size_t end = std::min(s.find(':', start), s.size());
      if (end > start) dirs.emplace_back(std::string(s.substr(start, end - start)));
      start = end + 1;
    }
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path() / ".." / "lib");
  return dirs;
}

// The file `(use name)` names: a path against `current_dir`, or the first match on the search
// path. Empty when there is none; `searched` then says where it looked.
fs::path find_module(const std::string& name, const std::string& current_dir, std::string& searched) {
  std::error_code ec;
  if (is_path(name)) {
    fs::path p = name.ends_with(".shf") ? fs::path(name) : fs::path(name + ".shf");
    if (p.is_relative()) p = fs::path(current_dir.empty() ? fs::current_path(ec) : fs::path(current_dir)) / p;
    p = p.lexically_normal();
    searched = p.string();
    return fs::is_regular_file(p, ec) ? p : fs::path();
  }
  for (const fs::path& d : search_path(current_dir)) {
    fs::path p = d / (name + ".shf");
    if (fs::is_regular_file(p, ec)) return p;
    searched += (searched.empty() ? "" : ", ") + d.string();
  }
  return {};
}

}  // namespace

bool is_autoloaded_module(std::string_view name) {
  return std::find(std::begin(kAutoloaded), std::end(kAutoloaded), name) != std::end(kAutoloaded);
}

// Evaluates a module's text with module_name/current_dir set to the module's, restored after.
void Interp::load_module(const std::string& name, const std::string& text, const std::string& path, const std::string& dir,
                         bool bundled) {
  std::string saved_module = std::exchange(module_name, name);
  std::string saved_dir = current_dir;
  if (!dir.empty()) current_dir = dir;
  EnvPtr saved_env = std::exchange(module_env_, bundled && is_autoloaded_module(name) ? std::make_shared<Env>() : nullptr);
  if (module_env_) autoloaded_envs_.emplace_back(name, module_env_);
  loaded_module_names_.push_back(name);
  auto restore = [&] {
    module_name = std::move(saved_module);
    current_dir = std::move(saved_dir);
    module_env_ = std::move(saved_env);
  };
  try {
    run_text(text, path, bundled);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void Interp::use_module(const std::string& name, SrcLoc loc) {
  if (!is_path(name))
    if (auto src = bundled_module(name)) {
      std::string key = "<bundled>/" + name + ".shf";
      if (loaded_paths_.insert(key).second) load_module(name, std::string(*src), key, "", true);
      return;
    }
  std::string searched;
  fs::path p = find_module(name, current_dir, searched);
  if (p.empty()) {
    if (is_path(name)) throw SheafError("module '" + name + "' not found: no file " + searched, loc);
    throw SheafError("module '" + name + "' not found (searched: " + searched + ")", loc,
                     "a module in another directory is used by its path, e.g. (use ../lib/" + name + ")");
  }
  std::error_code ec;
  if (!loaded_paths_.insert(fs::weakly_canonical(p, ec).string()).second) return;
  std::ifstream in(p, std::ios::binary);
  if (!in) throw SheafError("module '" + name + "': cannot read " + p.string(), loc);
  std::stringstream ss;
  ss << in.rdbuf();
  load_module(p.stem().string(), ss.str(), p.string(), p.parent_path().string(), false);
}

const std::unordered_map<int, std::string>& Interp::autoload_index() const {
  if (autoload_names_.empty())
    for (std::string_view m : kAutoloaded)
      for (const Value& form : read_all(*bundled_module(m), 0)) {
        const auto& items = form.is_list() ? form.as_list().items : std::vector<Value>{};
        if (items.size() > 1 && items[0].is(Kind::Symbol) && items[1].is(Kind::Symbol) &&
            (items[0].as_str() == "defn" || items[0].as_str() == "def" || items[0].as_str() == "defmacro"))
          autoload_names_.emplace(items[1].symbol(), std::string(m));
      }
  return autoload_names_;
}

bool Interp::autoload(int id, SrcLoc loc) {
  const auto& index = autoload_index();
  auto it = index.find(id);
  if (it == index.end() || loaded_paths_.count("<bundled>/" + it->second + ".shf")) return false;
  use_module(it->second, loc);
  return true;
}

}  // namespace sheaf
