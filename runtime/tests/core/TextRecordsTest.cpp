// The line-record reader shared by the step manifest and a checkpoint's
// MANIFEST: lines and their numbers, fields, KEY=VALUE, numbers, shapes.
#include "io/TextRecords.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace autoshard::rt;

namespace {

std::vector<std::string> linesOf(std::string_view text,
                                 std::vector<int> *numbers = nullptr) {
  TextLines lines(text);
  std::vector<std::string> out;
  while (lines.next()) {
    out.emplace_back(lines.line());
    if (numbers)
      numbers->push_back(lines.number());
  }
  return out;
}

TEST(TextRecordsTest, LinesAreNumberedFromOneWithoutAnEmptyLastLine) {
  std::vector<int> numbers;
  EXPECT_EQ(linesOf("a b\n\nc\n", &numbers),
            (std::vector<std::string>{"a b", "", "c"}));
  EXPECT_EQ(numbers, (std::vector<int>{1, 2, 3}));
  // An unterminated last line still counts; CR stays for the caller.
  EXPECT_EQ(linesOf("a\r\nb"), (std::vector<std::string>{"a\r", "b"}));
  EXPECT_TRUE(linesOf("").empty());
  EXPECT_EQ(linesOf("\n"), (std::vector<std::string>{""}));

  TextLines lines("x\ny\n");
  while (lines.next()) {
  }
  EXPECT_EQ(lines.number(), 2) << "after the end: the last line's number";
}

TEST(TextRecordsTest, ErrorsNameTheTextAndTheLine) {
  EXPECT_EQ(lineError("manifest", 3, "bad grid").message(),
            "manifest line 3: bad grid");
  EXPECT_EQ(
      lineError("checkpoint manifest 'c/MANIFEST'", 0, "it is empty").message(),
      "checkpoint manifest 'c/MANIFEST': it is empty");
  EXPECT_EQ(quoted("a b"), "'a b'");
}

TEST(TextRecordsTest, FieldsSplitAtEachSingleSpace) {
  EXPECT_EQ(splitFields("arg 0 param"),
            (std::vector<std::string_view>{"arg", "0", "param"}));
  // Empty fields stay, for the caller to refuse or count.
  EXPECT_EQ(splitFields("a  b "),
            (std::vector<std::string_view>{"a", "", "b", ""}));
  EXPECT_EQ(splitFields(""), (std::vector<std::string_view>{""}));
}

TEST(TextRecordsTest, KeyValueFields) {
  auto kv = splitKeyValue("init=normal:0.5=x");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->first, "init");
  EXPECT_EQ(kv->second, "normal:0.5=x");
  EXPECT_FALSE(splitKeyValue("init"));
  EXPECT_FALSE(splitKeyValue("=1"));
  EXPECT_FALSE(splitKeyValue("init="));

  std::string_view value;
  EXPECT_TRUE(keyValue("crc32=0badf00d", "crc32", value));
  EXPECT_EQ(value, "0badf00d");
  EXPECT_TRUE(keyValue("bytes=", "bytes", value));
  EXPECT_EQ(value, "");
  EXPECT_FALSE(keyValue("bytes=1", "byte", value));
  EXPECT_FALSE(keyValue("bytes", "bytes", value));
  EXPECT_FALSE(keyValue("crc=1", "crc32", value));
}

TEST(TextRecordsTest, NumbersMustBeWholeAndFit) {
  int64_t i = 0;
  EXPECT_TRUE(parseInteger("-42", i));
  EXPECT_EQ(i, -42);
  EXPECT_FALSE(parseInteger("", i));
  EXPECT_FALSE(parseInteger("+1", i));
  EXPECT_FALSE(parseInteger("1 ", i));
  EXPECT_FALSE(parseInteger("9223372036854775808", i));
  uint64_t u = 0;
  EXPECT_TRUE(parseInteger("ffffffffffffffff", u, 16));
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_FALSE(parseInteger("-1", u));

  double d = 0;
  EXPECT_TRUE(parseFiniteDouble("0.25", d));
  EXPECT_EQ(d, 0.25);
  EXPECT_FALSE(parseFiniteDouble("inf", d));
  EXPECT_FALSE(parseFiniteDouble("1e999", d));
  EXPECT_FALSE(parseFiniteDouble("0.5x", d));
}

TEST(TextRecordsTest, ShapesHaveDimsOfAtLeastTheMinimumAndBoundedSize) {
  std::vector<int64_t> shape{7};
  EXPECT_TRUE(parseShape("scalar", shape, 1));
  EXPECT_TRUE(shape.empty());
  EXPECT_TRUE(parseShape("8x16", shape, 1));
  EXPECT_EQ(shape, (std::vector<int64_t>{8, 16}));
  EXPECT_FALSE(parseShape("8x0", shape, 1));
  EXPECT_TRUE(parseShape("8x0", shape, 0));
  EXPECT_FALSE(parseShape("", shape, 0));
  EXPECT_FALSE(parseShape("8x", shape, 0));
  EXPECT_FALSE(parseShape("x8", shape, 0));
  EXPECT_FALSE(parseShape("-1", shape, 0));
  // 2^56 elements fit; one more dim of 2 does not.
  EXPECT_TRUE(parseShape("268435456x268435456", shape, 1));
  EXPECT_FALSE(parseShape("268435456x268435456x2", shape, 1));
}

} // namespace
