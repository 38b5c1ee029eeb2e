// io/mmap.cpp — read-only (copy-on-write) memory maps and whole-file reads, with errors that
// name the file.
#include "io/mmap.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"

namespace sheaf {

namespace {

[[noreturn]] void sys_error(const std::string& path, int err) {
  throw SheafError(fmt::format("'{}': {}", path, std::strerror(err)));
}

// Opens a regular file for reading; returns the descriptor and its size.
std::pair<int, size_t> open_regular(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  return {fd, static_cast<size_t>(st.st_size)};
}

}  // namespace

MappedFile::~MappedFile() {
  if (base) ::munmap(base, size);
}

const std::byte* MappedFile::at(size_t offset, size_t n, std::string_view what) const {
  if (offset > size || n > size - offset)
    throw SheafError(fmt::format("'{}': {} (bytes {}..{}) lies beyond the end of the file ({} bytes); the file is "
                                 "truncated or its header is corrupt",
                                 path, what, offset, offset + n, size));
  return base + offset;
}

MapPtr map_file(const std::string& path) {
  auto [fd, size] = open_regular(path);
  auto m = std::make_shared<MappedFile>();
  m->path = path;
  m->size = size;
  if (size > 0) {
    // Private + writable: writes (never intended) would copy pages instead of touching the file.
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) sys_error(path, err);
    m->base = static_cast<std::byte*>(p);
  } else {
    ::close(fd);
  }
  return m;
}

std::string read_file(const std::string& path) {
  auto [fd, size] = open_regular(path);
  std::string s(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t r = ::read(fd, s.data() + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : EIO;
      ::close(fd);
      sys_error(path, err);
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return s;
}

}  // namespace sheaf
