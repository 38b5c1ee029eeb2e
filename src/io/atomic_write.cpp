// io/atomic_write.cpp — temp file + fsync + rename writes.
#include "io/atomic_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"

namespace sheaf {

namespace fs = std::filesystem;

static void fail_errno(const std::string& path, std::string_view what, int err) {
  throw SheafError(fmt::format("'{}': {}: {}", path, what, std::strerror(err)));
}

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
  tmp_ = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> name(tmp_.begin(), tmp_.end());
  name.push_back('\0');
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) fail_errno(path_, "cannot create a temporary file", errno);
  tmp_ = name.data();
  if (::fchmod(fd_, 0644) != 0) {}  // best effort: mkostemp made it 0600
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
