// tests/unit/crc32c_test.cpp — CRC-32C against published vectors: the check value of the
// Castagnoli polynomial ("123456789"), the iSCSI vectors of RFC 3720 appendix B.4, and
// TensorFlow's masked form (values from TensorBoard's own Python implementation).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/crc32c.hpp"

namespace sheaf {
namespace {

uint32_t crc_of(const std::vector<uint8_t>& bytes) { return crc32c(bytes.data(), bytes.size()); }

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32c, Rfc3720Vectors) {
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc_of(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc_of(ones), 0x62A8AB43u);
  EXPECT_EQ(crc_of(up), 0x46DD794Eu);
  EXPECT_EQ(crc_of(down), 0x113FDB5Cu);
  // An iSCSI SCSI Read (10) command PDU.
  std::vector<uint8_t> pdu = {0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                              0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(crc_of(pdu), 0xD9963A56u);
}

// Every length and alignment through the 8-byte step and the byte tail agrees with the one-byte form.
TEST(Crc32c, EightByteStepMatchesBytewise) {
  std::string s;
  for (int i = 0; i < 100; ++i) s += static_cast<char>(i * 37 + 11);
  for (size_t off = 0; off < 8; ++off)
    for (size_t n = 0; off + n <= s.size(); ++n) {
      uint32_t c = ~0u;
      for (size_t i = off; i < off + n; ++i) {
        c ^= static_cast<uint8_t>(s[i]);
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
      }
      ASSERT_EQ(crc32c(s.data() + off, n), ~c) << "offset " << off << " length " << n;
    }
}

TEST(Crc32c, MaskedAsTensorFlow) {
  EXPECT_EQ(masked_crc32c("123456789", 9), 0xC78AB0E5u);
  EXPECT_EQ(masked_crc32c("", 0), 0xA282EAD8u);
  const uint8_t length24[8] = {24, 0, 0, 0, 0, 0, 0, 0};  // a record header's length field
  EXPECT_EQ(masked_crc32c(length24, 8), 0x224B7FA3u);
}

}  // namespace
}  // namespace sheaf
