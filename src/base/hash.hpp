// base/hash.hpp — FNV-1a 64, the non-cryptographic hash of the caches' keys (content hashes of
// functions, digests of generated code, cubin cache names). Anyone can recompute it: it names and
// matches things, it proves nothing (artifacts are trusted by their HMAC, io/artifact_trust.hpp).
#pragma once
#include <cstdint>
#include <string_view>

namespace sheaf {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

// FNV-1a 64 of `bytes`, continuing from `h` (another basis gives an independent second hash).
inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace sheaf
