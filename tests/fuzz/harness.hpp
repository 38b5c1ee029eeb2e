// tests/fuzz/harness.hpp — what the libFuzzer targets (tests/fuzz/fuzz_<name>.cpp) share: the
// rule that a SheafError is the only acceptable failure, and a private scratch directory for
// readers that take a path (made once per process with mkdtemp, mode 0700, removed at exit).
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "value/handle.hpp"
#include "value/value.hpp"

namespace sheaf::fuzz {

// Runs f on one input. A SheafError is the expected outcome of bad input; any other exception
// is a bug and aborts, which libFuzzer reports with the reproducer.
template <typename F>
void expect_sheaf_errors_only(F&& f) {
  try {
    f();
  } catch (const SheafError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "non-SheafError exception: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "non-SheafError exception of unknown type\n");
    std::abort();
  }
}

// In /dev/shm when there is one: a file is written for every input, and a disk under load makes
// that several times slower than the reader it feeds.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::string tmpl = (base / "sheaf-fuzz-files.XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string removed = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(removed, ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

// Writes bytes to `path` (replacing it) and returns the path as a string.
inline std::string write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::abort();
  }
  return path.string();
}

// Reads every byte of every tensor in a loaded value (nested lists and dicts, handles
// materialized), so that a reader that let a view reach past its file is caught; returns a
// checksum that keeps the reads from being optimised away.
inline uint64_t touch(const Value& v, int depth = 0) {
  if (depth > 2000) return 0;
  uint64_t sum = 0;
  switch (v.kind()) {
    case Kind::Tensor: {
      const Tensor& t = v.as_tensor();
      const std::byte* p = t.nbytes() ? t.bytes() : nullptr;
      for (size_t i = 0; i < t.nbytes(); ++i) sum += static_cast<uint8_t>(p[i]);
      return sum;
    }
    case Kind::List:
      for (const Value& x : v.as_list().items) sum += touch(x, depth + 1);
      return sum;
    case Kind::Dict:
      for (const auto& [k, x] : v.as_dict().entries) sum += k.size() + touch(x, depth + 1);
      return sum;
    case Kind::Handle: return touch(v.as<HandleObj>().materialize({}), depth + 1);
    default: return 1;
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace sheaf::fuzz
