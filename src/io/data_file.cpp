// io/data_file.cpp — data files held open for pread (see data_file.hpp), and whole-file reads,
// with errors that name the file.
#include "io/data_file.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"

namespace sheaf {

namespace {

[[noreturn]] void sys_error(const std::string& path, int err) {
  throw SheafError(fmt::format("'{}': {}", path, std::strerror(err)));
}

// open(2), raising the soft limit on descriptors to the hard one when it is reached: every
// loaded shard holds one, and a glob may name more shards than the usual soft limit of 1024.
int open_raising_limit(const std::string& path) {
  // O_NONBLOCK: opening a named pipe must not wait for a writer (it is rejected below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  rlimit lim{};
  if (fd < 0 && errno == EMFILE && ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    else errno = EMFILE;
  }
  return fd;
}

// Opens a regular file for reading; returns the descriptor and its status.
std::pair<int, struct stat> open_regular(const std::string& path) {
  int fd = open_raising_limit(path);
  if (fd < 0) sys_error(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    sys_error(path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw SheafError(fmt::format("'{}': {}", path, S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file"));
  }
  return {fd, st};
}

// pread until `n` bytes are in; false when the file ends first.
bool pread_all(int fd, std::byte* dst, size_t n, size_t offset, const std::string& path) {
  while (n > 0) {
    ssize_t r = ::pread(fd, dst, std::min(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) sys_error(path, errno);
    if (r == 0) return false;
    dst += r;
    offset += static_cast<size_t>(r);
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

DataFile::DataFile(std::string p, int fd, size_t n, timespec modified)
    : path(std::move(p)), size(n), fd_(fd), modified_(modified) {}

DataFile::~DataFile() { ::close(fd_); }

void DataFile::check_range(size_t offset, size_t n, std::string_view what) const {
  if (offset > size || n > size - offset)
    throw SheafError(fmt::format("'{}': {} (bytes {}..{}) lies beyond the end of the file ({} bytes); the file is "
                                 "truncated or its header is corrupt",
                                 path, what, offset, offset + n, size));
}

void DataFile::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) sys_error(path, errno);
  if (static_cast<size_t>(st.st_size) == size && st.st_mtim.tv_sec == modified_.tv_sec && st.st_mtim.tv_nsec == modified_.tv_nsec)
    return;
  std::string how = static_cast<size_t>(st.st_size) == size ? fmt::format("rewritten in place, still {} bytes", size)
                                                            : fmt::format("{} bytes then, {} now", size, st.st_size);
  throw SheafError(fmt::format("'{}': the file changed on disk since it was loaded ({}); load it again to read the new "
                               "contents, or save new files under new names",
                               path, how));
}

void DataFile::read(size_t offset, size_t n, void* dst, std::string_view what) const {
  check_range(offset, n, what);
  if (n == 0) return;
  bool whole = pread_all(fd_, static_cast<std::byte*>(dst), n, offset, path);
  check_unchanged();  // after the read: a change before or during it shows in the mtime (or size)
  if (!whole) throw SheafError(fmt::format("'{}': {} could not be read: the file ended early", path, what));
}

std::string DataFile::read(size_t offset, size_t n, std::string_view what) const {
  check_range(offset, n, what);  // before allocating
  std::string s(n, '\0');
  read(offset, n, s.data(), what);
  return s;
}

FilePtr open_data_file(const std::string& path) {
  auto [fd, st] = open_regular(path);
  return std::make_shared<const DataFile>(path, fd, static_cast<size_t>(st.st_size), st.st_mtim);
}

std::string read_file(const std::string& path) {
  auto [fd, st] = open_regular(path);
  std::string s(static_cast<size_t>(st.st_size), '\0');
  bool whole = false;
  try {
    whole = pread_all(fd, reinterpret_cast<std::byte*>(s.data()), s.size(), 0, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (!whole) throw SheafError(fmt::format("'{}': the file got shorter while it was read", path));
  return s;
}

}  // namespace sheaf
