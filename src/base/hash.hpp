// base/hash.hpp — FNV-1a 64, the non-cryptographic hash of the caches' keys (content hashes of
// functions, digests of generated code, cubin cache names). Anyone can recompute it: it names and
// matches things, it proves nothing (artifacts are trusted by their HMAC, io/artifact_trust.hpp).
#pragma once
#include <cstdint>
#include <initializer_list>
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

// FNV-1a 64 of several strings, each followed by a NUL so that the parts stay apart ("ab", "c"
// and "a", "bc" differ): a cache name keyed by several things.
inline uint64_t fnv1a64_parts(std::initializer_list<std::string_view> parts) {
  uint64_t h = kFnvOffset;
  for (std::string_view part : parts) h = fnv1a64(std::string_view("\0", 1), fnv1a64(part, h));
  return h;
}

}  // namespace sheaf
