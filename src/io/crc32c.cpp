// io/crc32c.cpp — CRC-32C with slicing-by-8 tables built once at compile time: eight bytes per
// step, each table i giving the CRC contribution of a byte followed by i zero bytes.
#include "io/crc32c.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace sheaf {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (c & 1 ? kPoly : 0);
    t[0][b] = c;
  }
  for (size_t i = 1; i < 8; ++i)
    for (uint32_t b = 0; b < 256; ++b) t[i][b] = (t[i - 1][b] >> 8) ^ t[0][t[i - 1][b] & 0xFF];
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(std::endian::native == std::endian::little, "the 8-byte step reads little-endian words");

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~0u;
  for (; n >= 8; n -= 8, p += 8) {  // little-endian words: byte 0 meets the low bits of c
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
        kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^ kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

}  // namespace sheaf
