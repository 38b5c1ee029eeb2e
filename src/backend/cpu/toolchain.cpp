// backend/cpu/toolchain.cpp — compiler discovery, compilation with posix_spawn, dlopen.
#include "backend/cpu/toolchain.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/render.hpp"
#include "base/error.hpp"

extern char** environ;

namespace sheaf::cpu {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return fs::exists(name) ? std::optional(name) : std::nullopt;
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return std::nullopt;
}

// Runs argv with stdout and stderr into `log`; returns the exit status (-1: not started).
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string scratch_name(const std::string& suffix) {
  static int counter = 0;
  return (fs::temp_directory_path() / fmt::format("sheaf-{}-{}{}", getpid(), ++counter, suffix)).string();
}

std::optional<Toolchain> discover() {
  std::vector<std::string> names;
  if (const char* cxx = std::getenv("SHEAF_CXX"); cxx && *cxx) names.push_back(cxx);
  else names = {"c++", "g++", "clang++"};
  for (const std::string& n : names) {
    auto path = on_path(n);
    if (!path) continue;
    std::string log = scratch_name(".version");
    int rc = run({*path, "--version"}, log);
    std::string out = read_text(log);
    fs::remove(log);
    if (rc != 0) continue;
    return Toolchain{*path, out.substr(0, out.find('\n'))};
  }
  return std::nullopt;
}

}  // namespace

const std::optional<Toolchain>& toolchain() {
  static const std::optional<Toolchain> tc = discover();
  return tc;
}

const std::string& compile_flags() {
  static const std::string flags = [] {
    const char* env = std::getenv("SHEAF_CXXFLAGS");
    return std::string(env && *env ? env : kCompileFlags);
  }();
  return flags;
}

const std::string& isa_fingerprint() {
  static const std::string fp = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(f, line) && (model.empty() || flags.empty())) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
    }
    return digest_of(model + "\n" + flags + "\n" + compile_flags() + " " + kLinkFlags);
  }();
  return fp;
}

void compile_shared_object(const Toolchain& tc, const std::string& source, const std::string& out) {
  std::string src = scratch_name(".cpp"), log = scratch_name(".log");
  {
    std::ofstream f(src);
    f << source;
    if (!f) throw SheafError(fmt::format("cannot write the generated source {}", src));
  }
  std::vector<std::string> argv{tc.compiler};
  std::stringstream flags(compile_flags());
  for (std::string f; flags >> f;) argv.push_back(f);
  argv.insert(argv.end(), {"-o", out, src, kLinkFlags});
  int rc = run(argv, log);
  std::string diagnostics = read_text(log);
  fs::remove(log);
  if (rc != 0) {
    std::error_code ec;
    fs::remove(out, ec);
    throw SheafError(fmt::format("{} failed on generated code (kept in {}):\n{}", tc.compiler, src, diagnostics.substr(0, 2000)));
  }
  fs::remove(src);
}

Loaded load_shared_object(const std::string& path, const std::string& digest) {
  Loaded l;
  l.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.handle) {
    const char* e = dlerror();
    l.problem = fmt::format("cannot be loaded ({})", e ? e : "unknown error");
    return l;
  }
  auto* abi = static_cast<const int*>(dlsym(l.handle, "sheaf_abi"));
  auto* dig = static_cast<const char*>(dlsym(l.handle, "sheaf_digest"));
  void* entry = dlsym(l.handle, "sheaf_entry");
  if (!abi || !dig || !entry) l.problem = "lacks the sheaf entry points";
  else if (*abi != kAbiVersion) l.problem = fmt::format("was built for ABI {} (this sheaf uses {})", *abi, kAbiVersion);
  else if (std::string_view(dig) != digest) l.problem = "was built from different code";
  if (!l.problem.empty()) {
    dlclose(l.handle);
    l.handle = nullptr;
    return l;
  }
  l.entry = reinterpret_cast<void (*)(const void*, void**)>(entry);
  return l;
}

}  // namespace sheaf::cpu
