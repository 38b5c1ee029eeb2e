// io/disk_cache.hpp — the `__sheaf__/` compilation cache (SPEC §7.9).
//   __sheaf__/manifest.json            {"sheaf", "prng", "functions": {name: {"hash", "artifacts":
//                                       {key: {"file", "backend", "args", "digest", "bytes",
//                                       "compiler", "mac"}}}}}
//   __sheaf__/<name>.<backend>.<key>.<ext>
// `key` is 16 hex digits of the specialization key (argument structure, dtypes, shapes, static
// scalars) with the backend, compile flags and ISA. An artifact is used only when the function's
// content hash, the digest of the code it was built from, its size, and (when a compiler is
// present) the compiler match — else it is stale — and when it passes the trust checks of
// io/artifact_trust.hpp: the folder and the file are this user's and writable by no one else,
// the file is a regular file, and "mac" is the HMAC-SHA-256 of its bytes under this user's key.
// find() returns the verified bytes (read once; the caller loads exactly those) or says why not,
// for a one-line notice. Artifacts and the manifest are written atomically (temp + rename), only
// into a folder that passes the checks; a manifest that does not parse is treated as empty.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace sheaf {

struct ArtifactId {
  std::string function;  // "loss-vag"
  std::string key;       // 16 hex digits
  std::string backend;   // "cpu"
  std::string ext;       // "so"
  std::string hash;      // content hash of the function (32 hex digits)
  std::string code;      // its code_hash: equal while only the constants it reads changed
  std::string digest;    // digest of the generated code
  std::string args;      // readable signature, "f32[4x2], f32[2x8]"
};

// A cached artifact that is not trusted while no compiler can rebuild it: the program stops
// (the message says why, the hint how to trust the folder).
struct UntrustedArtifact : SheafError {
  using SheafError::SheafError;
};

class DiskCache {
 public:
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  enum class Trouble {
    None,          // usable, or no entry at all
    Stale,         // rebuilt: changed function, code or compiler; missing, truncated or resized
    Untrusted,     // rebuilt, or `sheaf trust`: not signed with this user's key, not this user's file, not a regular file
    UnsafeFolder,  // the folder is not this user's or others may write it: nothing is loaded or stored there
  };
  struct Found {
    std::string bytes;    // the artifact's verified bytes, when usable
    std::string problem;  // why an entry cannot be used ("__sheaf__/f.cpu.<key>.so is stale (...)")
    Trouble trouble = Trouble::None;
  };
  // `compiler`: identity of the compiler at hand, or empty when there is none (then any compiler's
  // artifact is accepted).
  Found find(const ArtifactId& id, const std::string& compiler) const;

  // Moves the built file `built` into the cache under id's name, signed with this user's key, and
  // records it. Errors (a read-only or unsafe folder, no key) are returned as text; the cache is
  // then simply not updated.
  std::string store(const ArtifactId& id, const std::string& compiler, const std::string& built) const;

  // `sheaf trust`: every artifact the manifest lists, each signed with this user's key unless it
  // fails the file checks (then `problem` says why and it is left alone); the manifest is
  // rewritten. Throws SheafError when the folder or the manifest cannot be used.
  struct Listed {
    std::string function, backend, compiler, file;
    uint64_t bytes = 0;
    bool was_trusted = false;  // it carried this user's MAC already
    std::string problem;       // non-empty: refused, not signed
  };
  std::vector<Listed> sign_all() const;

  std::string path_of(const ArtifactId& id) const;

 private:
  std::string dir_;
};

}  // namespace sheaf
