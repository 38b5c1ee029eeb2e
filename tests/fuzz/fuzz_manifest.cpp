// tests/fuzz/fuzz_manifest.cpp — libFuzzer target for the `__sheaf__/manifest.json` reader
// (io/disk_cache.cpp, SPEC §7.9). Each input is written as the manifest of a private cache
// folder that holds one artifact, f.cpu.0123456789abcdef.so, and goes through every path that
// reads a manifest: find() for that artifact (with and without a compiler's identity, so the
// staleness, size and MAC checks are reached when the input matches), store() of a rebuild (which
// rewrites the manifest and removes the files of a changed function's old entries) and
// sign_all() (`sheaf trust`). Bad input must give a problem string, an error string or a
// SheafError; any other exception, a crash, a sanitizer report or a hang is a bug. The user's key
// lives in the same private folder (XDG_CACHE_HOME), never in the real ~/.cache.
#include <stdlib.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.hpp"
#include "io/disk_cache.hpp"

namespace {

struct Folder {
  std::string cache, built;
};

const std::string kArtifact = "\x7f" "ELF fuzz artifact";  // 18 bytes

// The private folder (mkdtemp in $TMPDIR), made once: root/__sheaf__/ and root/built.so.
const Folder& folder() {
  static const Folder f = [] {
    const char* tmp = getenv("TMPDIR");  // /dev/shm makes the manifest's fsyncs cheap
    std::string root = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/sheaf-fuzz-manifest-XXXXXX";
    if (!mkdtemp(root.data())) std::abort();
    setenv("XDG_CACHE_HOME", root.c_str(), 1);
    static std::string made = root;
    std::atexit([] { std::filesystem::remove_all(made); });
    Folder f{root + "/__sheaf__", root + "/built.so"};
    mkdir(f.cache.c_str(), 0755);
    std::ofstream(f.built, std::ios::binary) << kArtifact;
    return f;
  }();
  return f;
}

void put(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Folder& f = folder();
  const sheaf::ArtifactId id{"f", "0123456789abcdef", "cpu", "so", std::string(32, '0'), "00000000000000aa", "f32[3]"};
  sheaf::DiskCache cache(f.cache);
  put(f.cache + "/manifest.json", data, size);
  std::ofstream(cache.path_of(id), std::ios::binary | std::ios::trunc) << kArtifact;
  try {
    cache.find(id, "");
    cache.find(id, "g++ 12");
    try {
      cache.sign_all();
    } catch (const sheaf::SheafError&) {
      // Expected: a manifest that is not one.
    }
    put(f.cache + "/manifest.json", data, size);
    if (std::string err = cache.store(id, "g++ 12", f.built); !err.empty()) {
      std::fprintf(stderr, "store failed on a manifest it must replace: %s\n", err.c_str());
      std::abort();
    }
    if (cache.find(id, "g++ 12").bytes != kArtifact) {
      std::fprintf(stderr, "the artifact just stored is not found\n");
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
