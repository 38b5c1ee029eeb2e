// io/atomic_write.cpp — temp file + fsync + rename writes, and the removal of temporaries that
// killed processes left behind (see atomic_write.hpp).
#include "io/atomic_write.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/hash.hpp"

namespace sheaf {

namespace fs = std::filesystem;

static void fail_errno(const std::string& path, std::string_view what, int err) {
  throw SheafError(fmt::format("'{}': {}: {}", path, what, std::strerror(err)));
}

namespace {

constexpr std::string_view kTmp = ".tmp.";
constexpr size_t kSuffix = 16;  // hex digits after the pid: the host's 8, then 8 random ones

// 8 hex digits naming this machine, the first half of every temporary's suffix.
const std::string& host_tag() {
  static const std::string tag = [] {
    char name[HOST_NAME_MAX + 1] = {0};
    if (::gethostname(name, sizeof name - 1) != 0) name[0] = 0;
    return fmt::format("{:08x}", static_cast<uint32_t>(fnv1a64(name)));
  }();
  return tag;
}

bool all_of(std::string_view s, bool (*is)(char)) {
  for (char c : s)
    if (!is(c)) return false;
  return !s.empty();
}
bool digit(char c) { return c >= '0' && c <= '9'; }
bool hex(char c) { return digit(c) || (c >= 'a' && c <= 'f'); }

// The pid in a temporary's name ".<name>.tmp.<pid>.<host><random>" when the name has exactly that
// form and `host` is this machine; 0 otherwise.
pid_t owner_here(std::string_view name) {
  if (name.size() < 1 + 1 + kTmp.size() + 1 + 1 + kSuffix || name[0] != '.') return 0;
  std::string_view suffix = name.substr(name.size() - kSuffix), rest = name.substr(0, name.size() - kSuffix - 1);
  if (name[name.size() - kSuffix - 1] != '.' || !all_of(suffix, hex) || suffix.substr(0, 8) != host_tag()) return 0;
  size_t dot = rest.rfind(kTmp);
  if (dot == std::string_view::npos || dot < 2) return 0;
  std::string_view pid = rest.substr(dot + kTmp.size());
  if (!all_of(pid, digit) || pid.size() > 9 || pid[0] == '0') return 0;
  return static_cast<pid_t>(std::stoi(std::string(pid)));
}

// Removes the temporaries in `dir` left by processes of this machine that no longer exist (see
// atomic_write.hpp), the first time this process saves into `dir`; best effort.
void remove_stale_temporaries(const fs::path& dir) {
  static std::mutex mu;
  static std::set<std::string> scanned;
  const fs::path where = dir.empty() ? "." : dir;
  std::error_code ec;
  const fs::path key = fs::absolute(where, ec).lexically_normal();
  {
    std::lock_guard lock(mu);
    if (!scanned.insert(ec ? where.string() : key.string()).second) return;
  }
  DIR* d = ::opendir(where.c_str());
  if (!d) return;
  const int dfd = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    pid_t pid = owner_here(e->d_name);
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid())
      ::unlinkat(dfd, e->d_name, 0);
  }
  ::closedir(d);
}

// Creates the temporary for `target` in `dir`: ".<name>.tmp.<pid>.<host><random>", the name cut
// so that the whole fits NAME_MAX; returns its descriptor and path.
std::pair<int, std::string> create_temporary(const fs::path& dir, const std::string& name) {
  std::string tail = fmt::format("{}{}.{}", kTmp, ::getpid(), host_tag());
  std::string stem = name.substr(0, std::min(name.size(), size_t{NAME_MAX} - 1 - tail.size() - 8));
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    std::string path = (dir / fmt::format(".{}{}{:08x}", stem, tail, rd())).string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return {fd, path};
    if (errno != EEXIST || attempt == 100) return {-1, path};
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  fs::path target(path_);
  if (target.filename().empty()) throw SheafError(fmt::format("'{}': not a file name", path_));
  std::error_code ec;
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail_errno(path_, "cannot open", errno);
    in_place_ = true;
    return;
  }
  if (fs::is_symlink(target, ec)) {
    fs::path resolved = fs::weakly_canonical(target, ec);
    if (ec) throw SheafError(fmt::format("'{}': cannot follow the symbolic link: {}", path_, ec.message()));
    target = resolved;
  }
  target_ = target.string();
  fs::path dir = target.parent_path();
  if (!dir.empty()) {
    fs::create_directories(dir, ec);
    if (ec) throw SheafError(fmt::format("'{}': cannot create directory '{}': {}", path_, dir.string(), ec.message()));
  }
  if (fs::is_directory(target, ec)) throw SheafError(fmt::format("'{}': is a directory", path_));
  remove_stale_temporaries(dir);
  std::tie(fd_, tmp_) = create_temporary(dir, target.filename().string());
  if (fd_ < 0) fail_errno(path_, fmt::format("cannot create the temporary file '{}'", tmp_), errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!in_place_) ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t r = ::write(fd_, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail_errno(path_, "write failed", errno);
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void AtomicFile::commit() {
  if (in_place_) {
    int r = ::close(fd_);
    fd_ = -1;
    if (r != 0) fail_errno(path_, "close failed", errno);
    return;
  }
  if (::fsync(fd_) != 0) fail_errno(path_, "fsync failed", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    int err = errno;
    ::unlink(tmp_.c_str());
    fail_errno(path_, "close failed", err);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail_errno(path_, "rename failed", err);
  }
  std::string dir = fs::path(target_).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename itself durable; best effort
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace sheaf
