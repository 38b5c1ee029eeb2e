// io/data_file.hpp — data files read lazily by handles (safetensors, npy, .bin): the file stays
// open while any handle over it is alive, and every read copies the bytes out with pread.
// Why not a memory map: a tensor viewing a map changes when the file is rewritten in place (it
// must never change), and touching a page of a file truncated under the map raises SIGBUS. With
// pread a tensor owns its bytes from the moment it is read, and a shorter file is a short read.
// After each read, the open file's size and modification time (fstat of the held descriptor) are
// compared with those seen at load — a write(2) before or during the read has changed them by then —
// so a file changed in place gives the error "'x.npy': the file changed on disk since it was
// loaded" instead of a mix of old and new bytes. A file replaced by
// rename (io "save" does that) or deleted keeps its old contents behind the descriptor, and the
// handle keeps reading them.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

namespace sheaf {

class DataFile {
 public:
  const std::string path;
  const size_t size;  // at load

  DataFile(std::string path, int fd, size_t size, timespec modified);
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  ~DataFile();

  // Errors with "'path': <what> (bytes a..b) lies beyond the end of the file" unless
  // [offset, offset + n) lies in the file.
  void check_range(size_t offset, size_t n, std::string_view what) const;
  // Bytes [offset, offset + n) copied to `dst`; errors as check_range, when the file changed on
  // disk since it was loaded, or when reading fails.
  void read(size_t offset, size_t n, void* dst, std::string_view what) const;
  std::string read(size_t offset, size_t n, std::string_view what) const;

 private:
  void check_unchanged() const;

  int fd_;
  timespec modified_;
};
using FilePtr = std::shared_ptr<const DataFile>;

// Opens a regular file for lazy reads; errors name the file ("'x.npy': No such file or directory").
FilePtr open_data_file(const std::string& path);

// Whole file as a string (text formats, IDX headers, index files).
std::string read_file(const std::string& path);

}  // namespace sheaf
