// io/mmap.hpp — read-only memory maps of data files (safetensors, npy, .bin).
// A map is shared by every tensor that views it (Tensor::wrap with an aliasing pointer), so the
// file stays mapped while any tensor read from it is alive. Pages are mapped copy-on-write:
// a stray write to a viewed tensor can never reach the file. Every access to the bytes goes
// through `at`, which checks the range against the file size first.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace sheaf {

struct MappedFile {
  std::string path;
  std::byte* base = nullptr;  // nullptr for an empty file
  size_t size = 0;

  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Bytes [offset, offset + n), or an error "'path': <what> lies beyond the end of the file".
  const std::byte* at(size_t offset, size_t n, std::string_view what) const;
};
using MapPtr = std::shared_ptr<const MappedFile>;

// Maps a regular file; errors name the file ("'x.npy': No such file or directory").
MapPtr map_file(const std::string& path);

// Whole file as a string (text formats, IDX headers, index files).
std::string read_file(const std::string& path);

}  // namespace sheaf
