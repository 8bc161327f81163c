//===- LongLineDiagnosticsTest.cpp - excerpts of long source lines -------===//

#include "../../tools/common/LongLineDiagnostics.h"

#include <gtest/gtest.h>

using namespace autoshard::tools;

namespace {

TEST(LongLineDiagnostics, LineOfCountsFromOne) {
  llvm::StringRef text = "first\nsecond\r\nthird";
  EXPECT_EQ(lineOf(text, 1), llvm::StringRef("first"));
  EXPECT_EQ(lineOf(text, 2), llvm::StringRef("second"));
  EXPECT_EQ(lineOf(text, 3), llvm::StringRef("third"));
  EXPECT_EQ(lineOf(text, 4), std::nullopt);
  EXPECT_EQ(lineOf(text, 0), std::nullopt);
}

TEST(LongLineDiagnostics, ShortLinesShowWhole) {
  Excerpt e = excerptLine("abcdef", 3, 6);
  EXPECT_EQ(e.text, "abcdef");
  EXPECT_EQ(e.caret, "  ^");
}

TEST(LongLineDiagnostics, ExcerptStartsAThirdBeforeTheColumn) {
  std::string line;
  for (int i = 0; i < 1000; ++i)
    line += char('a' + i % 26);
  // Column 501 is line[500]; 30 characters before it, 90 in all.
  Excerpt e = excerptLine(line, 501, 90);
  EXPECT_EQ(e.text, "..." + line.substr(470, 90) + "...");
  EXPECT_EQ(e.caret, std::string(3 + 30, ' ') + "^");
  EXPECT_EQ(e.text[e.caret.size() - 1], line[500]);
}

TEST(LongLineDiagnostics, ExcerptStaysInsideTheLine) {
  std::string line(300, 'x');
  line[0] = 'A';
  line[299] = 'Z';
  // At the start: nothing elided before.
  Excerpt start = excerptLine(line, 1, 100);
  EXPECT_EQ(start.text, line.substr(0, 100) + "...");
  EXPECT_EQ(start.caret, "^");
  // At the end: the last 100 characters, the caret under the last one.
  Excerpt end = excerptLine(line, 300, 100);
  EXPECT_EQ(end.text, "..." + line.substr(200));
  EXPECT_EQ(end.caret, std::string(3 + 99, ' ') + "^");
  // A column past the end points just after it.
  Excerpt past = excerptLine(line, 400, 100);
  EXPECT_EQ(past.caret, std::string(3 + 100, ' ') + "^");
}

} // namespace
