// CRC-32: the published check value, incremental use, hex spelling.
#include "ckpt/Checksum.h"

#include <gtest/gtest.h>

#include <string>

using namespace autoshard::rt;

TEST(Checksum, MatchesTheCheckValueOfCrc32) {
  // The CRC-32 (ISO-HDLC) check value of "123456789".
  EXPECT_EQ(crc32Of("123456789"), 0xcbf43926u);
  EXPECT_EQ(crc32Of(""), 0u);
}

TEST(Checksum, ContinuesAcrossPieces) {
  std::string text = "sharded checkpoints, one piece at a time";
  uint32_t crc = 0;
  for (size_t i = 0; i < text.size(); i += 7)
    crc =
        crc32Update(crc, text.data() + i, std::min<size_t>(7, text.size() - i));
  EXPECT_EQ(crc, crc32Of(text));
}

TEST(Checksum, TheRuntimesOwnCrcEqualsZlibs) {
  // What a runtime built without zlib computes: the check value, and the
  // same CRC as the build's crc32Update on every length and in pieces.
  EXPECT_EQ(crc32Reference(0, "123456789", 9), 0xcbf43926u);
  std::string bytes;
  for (int i = 0; i < 4099; ++i)
    bytes.push_back(static_cast<char>((i * 131 + 7) % 256));
  for (size_t n : {0u, 1u, 63u, 64u, 4099u})
    EXPECT_EQ(crc32Reference(0, bytes.data(), n), crc32Update(0, bytes.data(), n))
        << n;
  uint32_t half = crc32Reference(0, bytes.data(), 2000);
  EXPECT_EQ(crc32Reference(half, bytes.data() + 2000, 2099),
            crc32Of(bytes));
}

TEST(Checksum, OneFlippedBitChangesIt) {
  std::string text(1000, 'a');
  uint32_t before = crc32Of(text);
  text[500] ^= 0x10;
  EXPECT_NE(crc32Of(text), before);
}

TEST(Checksum, SpellsAndParsesEightHexDigits) {
  EXPECT_EQ(formatCrc32(0xcbf43926u), "cbf43926");
  EXPECT_EQ(formatCrc32(0x1u), "00000001");
  uint32_t crc = 0;
  EXPECT_TRUE(parseCrc32("cbf43926", crc));
  EXPECT_EQ(crc, 0xcbf43926u);
  EXPECT_FALSE(parseCrc32("cbf4392", crc));
  EXPECT_FALSE(parseCrc32("cbf439260", crc));
  EXPECT_FALSE(parseCrc32("cbf4392g", crc));
}
