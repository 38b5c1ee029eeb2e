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
  fs::path dir = target.parent_path();
  std::error_code ec;
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
    ::unlink(tmp_.c_str());
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
  if (::fsync(fd_) != 0) fail_errno(path_, "fsync failed", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    int err = errno;
    ::unlink(tmp_.c_str());
    fail_errno(path_, "close failed", err);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail_errno(path_, "rename failed", err);
  }
  std::string dir = fs::path(path_).parent_path().string();
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
