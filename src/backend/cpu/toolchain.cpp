// backend/cpu/toolchain.cpp — compiler discovery, compilation with posix_spawn in the private
// scratch directory (io/scratch_dir.hpp), dlopen.
#include "backend/cpu/toolchain.hpp"

#include <cpuid.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/render.hpp"
#include "base/error.hpp"
#include "io/scratch_dir.hpp"

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

// This process's environment with TMPDIR set to the private scratch directory: the compiler's own
// temporary files go there too, and are removed with it.
std::vector<std::string> compiler_environment() {
  std::vector<std::string> env{"TMPDIR=" + scratch_dir()};
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("TMPDIR=", 0) != 0) env.emplace_back(*e);
  return env;
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Starts argv with stdout and stderr into `log`; -1 when it cannot be started.
pid_t start(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args = pointers(argv);
  const std::vector<std::string> env = compiler_environment();
  std::vector<char*> envp = pointers(env);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// The exit status of a started process (-1: not started or killed).
int finish(pid_t pid) {
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int run(const std::vector<std::string>& argv, const std::string& log) { return finish(start(argv, log)); }

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::optional<Toolchain> discover() {
  std::vector<std::string> names;
  if (const char* cxx = std::getenv("SHEAF_CXX"); cxx && *cxx) names.push_back(cxx);
  else names = {"c++", "g++", "clang++"};
  for (const std::string& n : names) {
    auto path = on_path(n);
    if (!path) continue;
    std::string log = scratch_path(".version");
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

namespace {

// F16C is CPUID leaf 1, ECX bit 29; read directly because clang's
// __builtin_cpu_supports does not know the name "f16c".
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

}  // namespace

std::string isa_flags() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    return "-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512cd -mprefer-vector-width=512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
    return "-mavx2 -mfma -mf16c";
  return "";
}

const std::string& compile_flags() {
  static const std::string flags = [] {
    const char* env = std::getenv("SHEAF_CXXFLAGS");
    if (env && *env) return std::string(env);
    const std::string isa = isa_flags();
    return isa.empty() ? std::string(kCompileFlags) : std::string(kCompileFlags) + " " + isa;
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
  std::string src = scratch_path(".cpp");
  write_new_file(src, source);
  std::vector<std::string> cmd{tc.compiler};
  std::stringstream flags(compile_flags());
  for (std::string f; flags >> f;) cmd.push_back(f);
  // A large unit compiles as its three parts in parallel (render.hpp: SHEAF_PART), then links.
  const bool split = source.size() > kSplitBytes;
  std::vector<std::string> objects, logs;
  std::vector<pid_t> pids;
  for (int part = 0; part < (split ? 3 : 1); ++part) {
    std::vector<std::string> argv = cmd;
    logs.push_back(scratch_path(".log"));
    if (split) {
      objects.push_back(scratch_path(".o"));
      if (part == 2) argv.push_back("-O0");  // the entries: calls (the last -O wins)
      argv.insert(argv.end(), {"-c", fmt::format("-DSHEAF_PART={}", part), "-o", objects.back(), src});
    } else {
      argv.insert(argv.end(), {"-o", out, src, kLinkFlags});
    }
    pids.push_back(start(argv, logs.back()));
  }
  int rc = 0;
  for (pid_t p : pids) rc = std::max(rc, finish(p) == 0 ? 0 : 1);
  if (split && rc == 0) {
    std::vector<std::string> argv = cmd;
    argv.insert(argv.end(), {"-o", out});
    argv.insert(argv.end(), objects.begin(), objects.end());
    argv.push_back(kLinkFlags);
    logs.push_back(scratch_path(".log"));
    rc = run(argv, logs.back()) == 0 ? 0 : 1;
  }
  std::string diagnostics;
  for (const std::string& l : logs) {
    diagnostics += read_text(l);
    fs::remove(l);
  }
  for (const std::string& o : objects) {
    std::error_code ec;
    fs::remove(o, ec);
  }
  fs::remove(src);
  if (rc != 0) {
    std::error_code ec;
    fs::remove(out, ec);
    throw SheafError(fmt::format("{} failed on generated code (SHEAF_DUMP_CPP=DIR keeps it):\n{}", tc.compiler, diagnostics.substr(0, 2000)));
  }
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
  l.loop_tasks = static_cast<void* const*>(dlsym(l.handle, "sheaf_loop_tasks"));
  return l;
}

Loaded load_verified_bytes(std::string_view bytes, const std::string& digest) {
  const std::string path = scratch_path(".so");
  write_new_file(path, bytes, 0700);
  Loaded l = load_shared_object(path, digest);
  std::error_code ec;
  fs::remove(path, ec);  // the mapping keeps the file's inode (and so its identity for dlopen) while loaded
  return l;
}

}  // namespace sheaf::cpu
