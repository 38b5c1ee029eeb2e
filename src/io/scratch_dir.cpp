// io/scratch_dir.cpp — the private mkdtemp directory, exclusive file creation, and its removal at
// exit and on fatal signals (see scratch_dir.hpp).
#include "io/scratch_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"

namespace sheaf {
namespace {

// Read by the signal handler: the directory's path and the process that made it, set once
// before the handlers are installed.
char g_dir[PATH_MAX];
pid_t g_owner = 0;
std::atomic<bool> g_made{false};

// Unlinks every entry of g_dir (it holds only files) and then g_dir: open, getdents64, unlinkat,
// rmdir and close are async-signal-safe.
void remove_now() noexcept {
  if (!g_made.load() || getpid() != g_owner) return;
  int fd = ::open(g_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (ssize_t n; (n = ::getdents64(fd, buf, sizeof buf)) > 0;)
      for (ssize_t at = 0; at < n;) {
        auto* e = reinterpret_cast<struct dirent64*>(buf + at);
        at += e->d_reclen;
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ::unlinkat(fd, e->d_name, 0);
      }
    ::close(fd);
  }
  ::rmdir(g_dir);
}

extern "C" void on_fatal_signal(int sig) {
  int saved = errno;
  remove_now();
  errno = saved;
  ::raise(sig);  // SA_RESETHAND restored the default action: delivered when the handler returns
}

void install_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // someone else's (REPL, Python)
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

std::string make_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/sheaf-XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
  if (pattern.size() >= sizeof g_dir) throw SheafError(fmt::format("TMPDIR is too long for a scratch directory: {}", tmp));
  if (!::mkdtemp(pattern.data()))  // mode 0700
    throw SheafError(fmt::format("cannot create a private scratch directory {}: {}", pattern, std::strerror(errno)));
  std::memcpy(g_dir, pattern.c_str(), pattern.size() + 1);
  g_owner = getpid();
  g_made.store(true);
  std::atexit(remove_now);
  install_handlers();
  return pattern;
}

}  // namespace

const std::string& scratch_dir() {
  static const std::string dir = make_dir();
  return dir;
}

std::string scratch_path(std::string_view suffix) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}/{}{}", scratch_dir(), ++counter, suffix);
}

void write_new_file(const std::string& path, std::string_view bytes, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw SheafError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  for (size_t done = 0; done < bytes.size();) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int err = errno;
      ::close(fd);
      throw SheafError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) throw SheafError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

void remove_scratch_dir_now() noexcept { remove_now(); }

}  // namespace sheaf
