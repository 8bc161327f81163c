// Safetensors writing, reading, and the reader's validation.
#include "driver/Safetensors.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>

using namespace autoshard::rt;

namespace {

class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    path = ::testing::TempDir() + "st_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".safetensors";
  }
  void TearDown() override { std::remove(path.c_str()); }

  /// Writes an 8-byte length, `header`, then `data`.
  void writeRaw(const std::string &header, const std::string &data) {
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char *>(&n), 8);
    out << header << data;
  }
  std::string errorOf() {
    Expected<SafetensorsFile> f = readSafetensors(path);
    EXPECT_FALSE(f.ok());
    return f.ok() ? std::string() : f.message();
  }

  std::string path;
};

TEST_F(SafetensorsTest, RoundTrip) {
  float w[6] = {1, 2, 3, 4, 5, 6};
  uint16_t h[3] = {0x3f80, 0x4000, 0x4040};
  float s = 0.5f;
  ASSERT_TRUE(writeSafetensors(path,
                               {{"fc1.weight", ASRT_DTYPE_F32, {2, 3}, w},
                                {"emb", ASRT_DTYPE_BF16, {3}, h},
                                {"scale", ASRT_DTYPE_F32, {}, &s}},
                               {{"format", "pt"}})
                  .ok());

  // The raw layout: little-endian length, header padded to 8 bytes.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t length;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
  std::string header = bytes.substr(8, length);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\"},"
                         "\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                         "\"data_offsets\":[0,24]},",
                         0),
            0u)
      << header;
  EXPECT_EQ(bytes.size(), 8 + length + 24 + 6 + 4);

  Expected<SafetensorsFile> f = readSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ(f->tensors.size(), 3u);
  EXPECT_EQ(f->metadata.at("format"), "pt");
  const SafetensorsEntry &e = f->tensors.at("fc1.weight");
  EXPECT_EQ(e.dtype, "F32");
  EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(f->bytes("fc1.weight"), w, 24), 0);
  EXPECT_EQ(f->tensors.at("emb").dtype, "BF16");
  EXPECT_EQ(std::memcmp(f->bytes("emb"), h, 6), 0);
  EXPECT_TRUE(f->tensors.at("scale").shape.empty());
  EXPECT_EQ(std::memcmp(f->bytes("scale"), &s, 4), 0);
}

TEST_F(SafetensorsTest, WriterRejectsDuplicateNames) {
  float x = 0;
  Status s = writeSafetensors(
      path, {{"a", ASRT_DTYPE_F32, {}, &x}, {"a", ASRT_DTYPE_F32, {}, &x}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'a' appears twice"), std::string::npos);
  EXPECT_FALSE(writeSafetensors("/nonexistent/dir/x.safetensors", {}).ok());
}

TEST_F(SafetensorsTest, ReaderDiagnostics) {
  EXPECT_NE(errorOf().find("cannot open"), std::string::npos);
  {
    Expected<SafetensorsFile> dir = readSafetensors(".");
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.status().message(),
              "'.' is a directory; expected a safetensors file");
  }
  {
    // --load-params of a FIFO: refused, not waited on.
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    Expected<SafetensorsFile> fifo = readSafetensors(path);
    ASSERT_FALSE(fifo.ok());
    EXPECT_EQ(fifo.status().message(),
              "'" + path + "' is a FIFO; expected a safetensors file");
    std::remove(path.c_str());
  }

  writeRaw("{}", "");
  EXPECT_TRUE(readSafetensors(path).ok());

  { std::ofstream(path, std::ios::binary) << "abc"; }
  EXPECT_NE(errorOf().find("fewer than the 8-byte header length"),
            std::string::npos);

  {
    std::ofstream out(path, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char *>(&n), 8);
    out << "{}";
  }
  EXPECT_NE(errorOf().find("header length 1000 exceeds"), std::string::npos);

  writeRaw("[1,2]", "");
  EXPECT_NE(errorOf().find("the header is not a JSON object"),
            std::string::npos);
  writeRaw("{\"a\":", "");
  EXPECT_NE(errorOf().find("bad JSON header"), std::string::npos);
  writeRaw("{\"a\":{\"dtype\":\"F99\",\"shape\":[],\"data_offsets\":[0,4]}}",
           "xxxx");
  EXPECT_NE(errorOf().find("unknown dtype"), std::string::npos);
  writeRaw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
           "xxxx");
  EXPECT_NE(errorOf().find("'a' spans 4 bytes but its F32 shape needs 8"),
            std::string::npos);
  writeRaw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           "xxxxxxxx");
  EXPECT_NE(errorOf().find("leave a gap or overlap"), std::string::npos);
  writeRaw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           "xxxxxxxx");
  EXPECT_NE(errorOf().find("cover 4 bytes but the data section has 8"),
            std::string::npos);
  writeRaw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "");
  EXPECT_NE(errorOf().find("needs dtype, shape and data_offsets"),
            std::string::npos);
  writeRaw("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}",
           "");
  EXPECT_NE(errorOf().find("holds something other than a dimension"),
            std::string::npos);
  writeRaw(std::string(40, '[') + std::string(40, ']'), "");
  EXPECT_NE(errorOf().find("nesting is too deep"), std::string::npos);
}

} // namespace
