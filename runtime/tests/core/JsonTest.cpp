// The JSON reader (values, number conversions, errors that say where) and
// the writer (escaping, layouts, what the reader reads back).
#include "io/Json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

using namespace autoshard::rt;

namespace {

Json parsed(std::string_view text) {
  Expected<Json> value = parseJson(text);
  EXPECT_TRUE(value.ok()) << text << ": " << value.message();
  return value.ok() ? *value : Json();
}

std::string errorOf(std::string_view text, int maxDepth = kJsonMaxDepth) {
  Expected<Json> value = parseJson(text, maxDepth);
  EXPECT_FALSE(value.ok()) << text << " parsed";
  return value.ok() ? std::string() : value.message();
}

TEST(JsonTest, ObjectsKeepTheirMembersInOrder) {
  Json v = parsed(R"( {"b": 1, "a": "x", "b": 2, "c": {}} )");
  ASSERT_TRUE(v.isObject());
  ASSERT_EQ(v.members.size(), 4u);
  EXPECT_EQ(v.members[0].first, "b");
  EXPECT_EQ(v.members[1].first, "a");
  EXPECT_EQ(v.members[2].first, "b");
  EXPECT_EQ(v.members[3].first, "c");
  // A repeated key is the caller's business; get finds the first.
  ASSERT_NE(v.get("b"), nullptr);
  EXPECT_EQ(v.get("b")->text, "1");
  ASSERT_NE(v.get("a"), nullptr);
  EXPECT_TRUE(v.get("a")->isString());
  EXPECT_EQ(v.get("a")->text, "x");
  ASSERT_NE(v.get("c"), nullptr);
  EXPECT_TRUE(v.get("c")->isObject());
  EXPECT_TRUE(v.get("c")->members.empty());
  EXPECT_EQ(v.get("missing"), nullptr);
  // get is for objects only: an array or string has no members.
  EXPECT_EQ(parsed(R"(["b"])").get("b"), nullptr);
  EXPECT_EQ(parsed(R"("b")").get("b"), nullptr);
}

TEST(JsonTest, ArraysNest) {
  Json v = parsed("[1, [], [true, [null]], \"s\"]");
  ASSERT_TRUE(v.isArray());
  ASSERT_EQ(v.items.size(), 4u);
  EXPECT_TRUE(v.items[0].isNumber());
  EXPECT_TRUE(v.items[1].isArray());
  EXPECT_TRUE(v.items[1].items.empty());
  ASSERT_EQ(v.items[2].items.size(), 2u);
  EXPECT_TRUE(v.items[2].items[0].isBool());
  ASSERT_EQ(v.items[2].items[1].items.size(), 1u);
  EXPECT_TRUE(v.items[2].items[1].items[0].isNull());
  EXPECT_EQ(v.items[3].text, "s");
  EXPECT_TRUE(parsed(" [ ] ").items.empty());
}

TEST(JsonTest, StringsUnescape) {
  EXPECT_EQ(parsed(R"("a\"b\\c\/d\be\ff\ng\rh\ti")").text,
            "a\"b\\c/d\be\ff\ng\rh\ti");
  // \u: one, two and three UTF-8 bytes, and a surrogate pair for four.
  EXPECT_EQ(parsed(R"("\u0041\u00e9\u20AC")").text, "A\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(parsed(R"("\ud83d\ude00")").text, "\xf0\x9f\x98\x80");
  EXPECT_EQ(parsed(R"("\u0000")").text, std::string(1, '\0'));
  // Raw UTF-8 passes through unchanged.
  EXPECT_EQ(parsed("\"\xc3\xa9t\xc3\xa9\"").text, "\xc3\xa9t\xc3\xa9");
  // Keys unescape the same way.
  EXPECT_NE(parsed(R"({"w\u002eweight": 1})").get("w.weight"), nullptr);
}

TEST(JsonTest, NumbersKeepTheirSpelling) {
  Json v = parsed("[0, -0, 12, -3.25, 1.50e+10, 2E-3, 9007199254740993]");
  ASSERT_EQ(v.items.size(), 7u);
  const char *spellings[] = {
      "0", "-0", "12", "-3.25", "1.50e+10", "2E-3", "9007199254740993"};
  for (size_t i = 0; i < v.items.size(); ++i) {
    EXPECT_TRUE(v.items[i].isNumber());
    EXPECT_EQ(v.items[i].text, spellings[i]);
  }
  EXPECT_EQ(v.items[3].toDouble(), -3.25);
  EXPECT_EQ(v.items[4].toDouble(), 1.5e10);
  EXPECT_EQ(v.items[5].toDouble(), 2e-3);
  EXPECT_EQ(v.items[2].toInt64(), 12);
  EXPECT_EQ(v.items[1].toInt64(), 0);
}

TEST(JsonTest, IntegersConvertExactly) {
  // 2^53 + 1: a double would round it to 2^53.
  Json big = parsed("9007199254740993");
  EXPECT_EQ(big.toInt64(), int64_t(9007199254740993));
  EXPECT_EQ(big.toUint64(), uint64_t(9007199254740993));
  EXPECT_EQ(big.toDouble(), 9007199254740992.0);

  EXPECT_EQ(parsed("-42").toInt64(), -42);
  EXPECT_EQ(parsed("9223372036854775807").toInt64(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parsed("-9223372036854775808").toInt64(),
            std::numeric_limits<int64_t>::min());
  // Past int64 but within uint64 (a safetensors offset may be).
  Json past = parsed("9223372036854775808");
  EXPECT_EQ(past.toInt64(), std::nullopt);
  EXPECT_EQ(past.toUint64(), uint64_t(1) << 63);
  EXPECT_EQ(parsed("18446744073709551615").toUint64(),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(parsed("18446744073709551616").toUint64(), std::nullopt);
  EXPECT_EQ(parsed("-1").toUint64(), std::nullopt);
  EXPECT_EQ(parsed("-0").toUint64(), 0u);

  // Only integer spellings are integers, even when the value is whole.
  for (const char *text : {"1.0", "1e3", "2E0", "0.5"}) {
    EXPECT_EQ(parsed(text).toInt64(), std::nullopt) << text;
    EXPECT_EQ(parsed(text).toUint64(), std::nullopt) << text;
  }
  EXPECT_EQ(parsed("1e999").toDouble(), std::nullopt);
  // Nothing but a number converts.
  for (const char *text : {"\"12\"", "true", "null", "[1]"}) {
    EXPECT_EQ(parsed(text).toDouble(), std::nullopt) << text;
    EXPECT_EQ(parsed(text).toInt64(), std::nullopt) << text;
  }
}

TEST(JsonTest, Literals) {
  Json v = parsed("[true,false,null]");
  ASSERT_EQ(v.items.size(), 3u);
  EXPECT_TRUE(v.items[0].isBool());
  EXPECT_TRUE(v.items[0].boolean);
  EXPECT_TRUE(v.items[1].isBool());
  EXPECT_FALSE(v.items[1].boolean);
  EXPECT_TRUE(v.items[2].isNull());
  EXPECT_EQ(errorOf("tru"), "at byte 0: expected a value, found 't'");
  EXPECT_EQ(errorOf("[nul]"), "at byte 1: expected a value, found 'n'");
  EXPECT_EQ(errorOf("True"), "at byte 0: expected a value, found 'T'");
}

TEST(JsonTest, StringErrorsSayWhere) {
  EXPECT_EQ(errorOf(R"({"a": "abc)"),
            "at byte 10: unterminated string (it opens at byte 6)");
  EXPECT_EQ(errorOf(R"("ab\)"),
            "at byte 4: unterminated string (it opens at byte 0)");
  EXPECT_EQ(errorOf(R"(["a\qb"])"), "at byte 3: bad escape '\\q' in a string");
  EXPECT_EQ(errorOf(R"("ab\u12g4")"),
            "at byte 3: bad \\u escape: it needs four hex digits");
  EXPECT_EQ(errorOf(R"("\u12")"),
            "at byte 1: bad \\u escape: it needs four hex digits");
  EXPECT_EQ(errorOf(R"("x\ude00")"), "at byte 2: bad \\u escape: a low "
                                     "surrogate with no high surrogate before "
                                     "it");
  EXPECT_EQ(errorOf(R"("\ud83dx")"),
            "at byte 1: bad \\u escape: a high "
            "surrogate with no low surrogate after it");
  EXPECT_EQ(errorOf(R"("\ud83d\u0041")"),
            "at byte 1: bad \\u escape: a high surrogate with no low "
            "surrogate after it");
  EXPECT_EQ(errorOf("\"a\nb\""),
            "at byte 2: unescaped control character byte 0x0a in a string");
}

TEST(JsonTest, StructureErrorsSayWhere) {
  EXPECT_EQ(errorOf(""), "at byte 0: unexpected end, expected a value");
  EXPECT_EQ(errorOf("  "), "at byte 2: unexpected end, expected a value");
  EXPECT_EQ(errorOf(R"({"a":)"), "at byte 5: unexpected end, expected a value");
  EXPECT_EQ(errorOf(R"({"a":1} x)"), "at byte 8: unexpected text after the "
                                     "JSON value, starting with 'x'");
  EXPECT_EQ(errorOf("1 2"), "at byte 2: unexpected text after the JSON "
                            "value, starting with '2'");
  EXPECT_EQ(errorOf("[1,]"), "at byte 3: expected a value, found ']'");
  EXPECT_EQ(errorOf("[1 2]"), "at byte 3: expected ',' or ']', found '2'");
  EXPECT_EQ(errorOf("[1"), "at byte 2: unexpected end, expected ',' or ']'");
  EXPECT_EQ(errorOf(R"({"a" 1})"), "at byte 5: expected ':', found '1'");
  EXPECT_EQ(errorOf(R"({"a":1,})"),
            "at byte 7: expected a member name (a string), found '}'");
  EXPECT_EQ(errorOf("{1:2}"),
            "at byte 1: expected a member name (a string), found '1'");
  EXPECT_EQ(errorOf(R"({"a":1 "b":2})"),
            "at byte 7: expected ',' or '}', found '\"'");
  EXPECT_EQ(errorOf("[\x01]"), "at byte 1: expected a value, found byte 0x01");
}

TEST(JsonTest, NumberErrorsSayWhere) {
  EXPECT_EQ(errorOf("[01]"), "at byte 2: a number has a leading zero");
  EXPECT_EQ(errorOf("-"), "at byte 1: unexpected end, expected a digit");
  EXPECT_EQ(errorOf("-x"), "at byte 1: expected a digit, found 'x'");
  EXPECT_EQ(errorOf("1."),
            "at byte 2: unexpected end, expected a digit after the decimal "
            "point");
  EXPECT_EQ(errorOf("[1e+]"),
            "at byte 4: expected a digit in the exponent, found ']'");
  EXPECT_EQ(errorOf("+1"), "at byte 0: expected a value, found '+'");
  EXPECT_EQ(errorOf(".5"), "at byte 0: expected a value, found '.'");
}

TEST(JsonTest, NestingIsBounded) {
  auto nested = [](int depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  EXPECT_TRUE(parseJson(nested(kJsonMaxDepth)).ok());
  EXPECT_EQ(errorOf(nested(kJsonMaxDepth + 1)),
            "at byte 32: nesting is too deep (more than 32 levels of arrays "
            "and objects)");
  // Objects count as arrays do, and a hostile depth fails without recursing
  // into it.
  std::string objects;
  for (int i = 0; i < 100000; ++i)
    objects += "{\"a\":";
  EXPECT_EQ(errorOf(objects).rfind("at byte 160: nesting is too deep", 0), 0u);
  EXPECT_TRUE(parseJson("[[1]]", 2).ok());
  EXPECT_EQ(errorOf("[[[1]]]", 2),
            "at byte 2: nesting is too deep (more than 2 levels of arrays "
            "and objects)");
}

TEST(JsonWriterTest, StringsAreEscaped) {
  EXPECT_EQ(jsonString("a\"b\\c\n\x01\t\x1f/\xc3\xa9"),
            "\"a\\\"b\\\\c\\n\\u0001\\t\\u001f/\xc3\xa9\"");
  // Whatever the bytes, the reader gets them back.
  std::string all;
  for (int c = 1; c < 128; ++c)
    all += static_cast<char>(c);
  EXPECT_EQ(parsed(jsonString(all)).text, all);
}

/// {"a": 1, "b": [true, null, "x"], "c": {}, "d": []} in `layout`.
std::string sample(JsonWriter::Layout layout) {
  JsonWriter json(layout);
  json.beginObject();
  json.key("a").integer(1);
  json.key("b").beginArray().boolean(true).null().string("x").end();
  json.key("c").beginObject().end();
  json.key("d").beginArray().end();
  return json.end().take();
}

TEST(JsonWriterTest, LayoutsSpaceAndBreakAsNamed) {
  EXPECT_EQ(sample(JsonWriter::Layout::Compact),
            R"({"a":1,"b":[true,null,"x"],"c":{},"d":[]})");
  EXPECT_EQ(sample(JsonWriter::Layout::Spaced),
            R"({"a": 1, "b": [true, null, "x"], "c": {}, "d": []})");
  EXPECT_EQ(sample(JsonWriter::Layout::Lines), "{\n"
                                               "  \"a\": 1,\n"
                                               "  \"b\": [\n"
                                               "    true,\n"
                                               "    null,\n"
                                               "    \"x\"\n"
                                               "  ],\n"
                                               "  \"c\": {},\n"
                                               "  \"d\": []\n"
                                               "}");
  for (auto layout : {JsonWriter::Layout::Compact, JsonWriter::Layout::Spaced,
                      JsonWriter::Layout::Lines}) {
    Json v = parsed(sample(layout));
    ASSERT_EQ(v.members.size(), 4u);
    EXPECT_EQ(v.get("b")->items[2].text, "x");
  }
}

TEST(JsonWriterTest, NestedLayoutsIndentUnderTheEnclosingLines) {
  // The shape of --stats-json: records one a line, each record on one line,
  // and Lines inside Spaced inside Lines indented by the outer Lines only.
  JsonWriter json(JsonWriter::Layout::Lines);
  json.beginObject();
  json.key("ops").beginObject();
  json.key("matmul").beginObject(JsonWriter::Layout::Spaced);
  json.key("calls").integer(2).key("ms").number(1.5, "%.6g");
  json.key("sizes").beginArray(JsonWriter::Layout::Lines).integer(7).end();
  json.end().end();
  json.key("n").integer(int64_t(-9000000000));
  EXPECT_EQ(json.end().take(), "{\n"
                               "  \"ops\": {\n"
                               "    \"matmul\": {\"calls\": 2, \"ms\": 1.5, "
                               "\"sizes\": [\n"
                               "      7\n"
                               "    ]}\n"
                               "  },\n"
                               "  \"n\": -9000000000\n"
                               "}");
}

TEST(JsonWriterTest, NumbersFollowTheirFormatAndNonFiniteOnesAreNull) {
  JsonWriter json(JsonWriter::Layout::Compact);
  json.beginArray();
  json.number(0.1).number(2.0 / 3, "%.3f").number(NAN).number(-INFINITY);
  json.integer(uint64_t(18446744073709551615u)).integer(int8_t(-3));
  EXPECT_EQ(json.end().take(), "[0.1,0.667,null,null,18446744073709551615,-3]");
}

TEST(JsonWriterTest, RawTextStandsForValuesAsGiven) {
  // A rank's trace events, written by one writer, join another's array.
  JsonWriter events;
  std::string joined = events.beginObject().key("ts").raw("1.500").end().take();
  joined += ",\n" + events.beginObject().key("ts").raw("2.000").end().take();
  JsonWriter file(JsonWriter::Layout::Spaced, /*indentWidth=*/0);
  file.beginObject().key("traceEvents").beginArray(JsonWriter::Layout::Lines);
  file.raw(joined).raw(R"({"ts": 3})").end().end();
  EXPECT_EQ(file.text(), "{\"traceEvents\": [\n"
                         "{\"ts\": 1.500},\n"
                         "{\"ts\": 2.000},\n"
                         "{\"ts\": 3}\n"
                         "]}");
  EXPECT_EQ(parsed(file.text()).get("traceEvents")->items.size(), 3u);
}

TEST(JsonWriterTest, TakeStartsAfresh) {
  JsonWriter json;
  EXPECT_EQ(json.string("a").take(), "\"a\"");
  EXPECT_EQ(json.text(), "");
  EXPECT_EQ(json.beginArray().integer(1).end().take(), "[1]");
}

} // namespace
