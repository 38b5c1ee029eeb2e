// runtime/disk_cache.hpp — the `__sheaf__/` compilation cache (SPEC §7.9).
//   __sheaf__/manifest.json            {"sheaf", "prng", "functions": {name: {"hash", "artifacts":
//                                       {key: {"file", "backend", "args", "digest", "bytes",
//                                       "checksum", "compiler"}}}}}
//   __sheaf__/<name>.<backend>.<key>.<ext>
// `key` is 16 hex digits of the specialization key (argument structure, dtypes, shapes, static
// scalars) with the backend, compile flags and ISA. An artifact is used only when the function's
// content hash, the digest of the code it was built from, its size and checksum, and (when a
// compiler is present) the compiler all match; otherwise find() says why, for a one-line notice,
// and the caller rebuilds. Artifacts and the manifest are written atomically (temp + rename);
// a manifest that does not parse is treated as empty.
#pragma once
#include <optional>
#include <string>

namespace sheaf {

struct ArtifactId {
  std::string function;  // "loss-vag"
  std::string key;       // 16 hex digits
  std::string backend;   // "cpu"
  std::string ext;       // "so"
  std::string hash;      // content hash of the function (32 hex digits)
  std::string digest;    // digest of the generated code
  std::string args;      // readable signature, "f32[4x2], f32[2x8]"
};

class DiskCache {
 public:
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  struct Found {
    std::string path;     // set when usable
    std::string problem;  // set when an entry exists but cannot be used ("is corrupt (...)", "is stale (...)")
  };
  // `compiler`: identity of the compiler at hand, or empty when there is none (then any compiler's
  // artifact is accepted).
  Found find(const ArtifactId& id, const std::string& compiler) const;

  // Moves the built file `built` into the cache under id's name and records it. Errors (a
  // read-only directory) are returned as text; the cache is then simply not updated.
  std::string store(const ArtifactId& id, const std::string& compiler, const std::string& built) const;

  std::string path_of(const ArtifactId& id) const;

 private:
  std::string dir_;
};

}  // namespace sheaf
