// The safetensors format: the exact head params files and checkpoint shards
// are written with, read back by the checking parser.
#include "io/Safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

using namespace autoshard::rt;

namespace {

/// The JSON header of `head`, after checking its length prefix.
std::string headerOf(const SafetensorsHead &head) {
  EXPECT_GE(head.bytes.size(), 8u);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(static_cast<unsigned char>(head.bytes[i])) << (8 * i);
  EXPECT_EQ(length, head.bytes.size() - 8);
  EXPECT_EQ(head.bytes.size() % 8, 0u) << "the data section is 8-aligned";
  return head.bytes.substr(8);
}

TEST(SafetensorsHeadTest, HeaderIsCompactJsonPaddedWithSpaces) {
  float w[6] = {};
  uint16_t e[2] = {};
  Expected<SafetensorsHead> head = safetensorsHead(
      {{"fc.w", ASRT_DTYPE_F32, {2, 3}, w}, {"e\"1", ASRT_DTYPE_BF16, {2}, e}},
      {{"step", "7"}, {"format", "x"}});
  ASSERT_TRUE(head.ok()) << head.message();
  // The bytes files already on disk hold: a different spelling would
  // change every params file and checkpoint shard the runtime writes.
  EXPECT_EQ(headerOf(*head),
            R"({"__metadata__":{"format":"x","step":"7"},)"
            R"("fc.w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
            R"("e\"1":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]}})");
  EXPECT_EQ(head->tensorBytes, (std::vector<uint64_t>{24, 4}));

  Expected<SafetensorsHead> bare =
      safetensorsHead({{"s", ASRT_DTYPE_I32, {}, w}});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(headerOf(*bare),
            R"({"s":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})"
            "   ")
      << "no __metadata__ without metadata";
}

TEST(SafetensorsHeadTest, WrittenFilesParseBack) {
  float w[3] = {1, 2, 3};
  int32_t c = 9;
  Expected<SafetensorsHead> head = safetensorsHead(
      {{"w", ASRT_DTYPE_F32, {3}, w}, {"c", ASRT_DTYPE_I32, {}, &c}},
      {{"k", "v"}});
  ASSERT_TRUE(head.ok());
  std::string file = head->bytes +
                     std::string(reinterpret_cast<char *>(w), 12) +
                     std::string(reinterpret_cast<char *>(&c), 4);
  Expected<SafetensorsFile> read = parseSafetensors(file, "t.safetensors");
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->metadata.at("k"), "v");
  EXPECT_EQ(read->tensors.at("w").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(read->tensors.at("c").dtype, "I32");
  EXPECT_EQ(std::memcmp(read->bytes("w"), w, 12), 0);
  EXPECT_EQ(std::memcmp(read->bytes("c"), &c, 4), 0);

  Expected<SafetensorsFile> cut =
      parseSafetensors(file.substr(0, file.size() - 1), "t.safetensors");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.message(), "'t.safetensors' is not a valid safetensors file: "
                           "the tensors cover 16 bytes but the data section "
                           "has 15");
}

TEST(SafetensorsHeadTest, RefusesWhatNoReaderCouldTellApart) {
  float w = 0;
  EXPECT_EQ(safetensorsHead({{"a", ASRT_DTYPE_F32, {1}, &w},
                             {"a", ASRT_DTYPE_F32, {1}, &w}})
                .message(),
            "tensor name 'a' appears twice or is reserved");
  EXPECT_EQ(
      safetensorsHead({{"__metadata__", ASRT_DTYPE_F32, {1}, &w}}).message(),
      "tensor name '__metadata__' appears twice or is reserved");
  EXPECT_EQ(
      safetensorsHead({{"b", static_cast<asrt_dtype>(99), {1}, &w}}).message(),
      "tensor 'b' has no valid dtype");
}

} // namespace
