// io/crc32c.hpp — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI
// (RFC 3720) and by TensorBoard's record framing, which stores it "masked". No Debian package
// ships it, hence this small table-driven version (io/crc32c.cpp; ~1 GB/s, ample for event files).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sheaf {

// crc32c("123456789") = 0xE3069283; crc32c("") = 0.
uint32_t crc32c(const void* data, size_t n);
inline uint32_t crc32c(std::string_view s) { return crc32c(s.data(), s.size()); }

// TensorFlow's masking of a stored CRC: rotate right by 15 bits and add 0xA282EAD8.
inline uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

}  // namespace sheaf
