// first_non_text_byte: where bytes read as text stop being UTF-8 text (the offset and line the
// corpus and data-file errors name).
#include <gtest/gtest.h>

#include <string>

#include "mantissa/core/utf8.h"

namespace mantissa {
namespace {

using namespace std::string_literals;

TEST(Utf8, TextOfEveryLengthIsAccepted) {
  // 1-, 2-, 3- and 4-byte characters: a, é, €, 😀; and the highest code point U+10FFFF.
  EXPECT_FALSE(first_non_text_byte("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(first_non_text_byte(""));
}

TEST(Utf8, FirstBadByteGivesOffsetLineAndValue) {
  const auto b = first_non_text_byte("ab\ncd\n\xc3\xa9x\xff rest\xfe");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset, 9u);
  EXPECT_EQ(b->line, 3);
  EXPECT_EQ(b->byte, 0xff);
  EXPECT_EQ(describe_non_text_byte(*b),
            "the byte at offset 9 (line 3) is 0xff, which begins no UTF-8 character");
}

TEST(Utf8, MalformedSequencesAreRefusedAtTheirFirstByte) {
  struct Case {
    std::string bytes;
    size_t offset;
  };
  for (const Case& c : {
           Case{"x\x80", 1},             // a continuation byte alone
           Case{"x\xc0\xaf", 1},         // overlong '/'
           Case{"\xe0\x80\xaf", 0},      // overlong, three bytes
           Case{"ab\xed\xa0\x80", 2},    // a UTF-16 surrogate (U+D800)
           Case{"\xf4\x90\x80\x80", 0},  // above U+10FFFF
           Case{"ok\xe2\x82", 2},        // cut off by the end of the text
           Case{"\xc3(", 0},             // a lead byte without its continuation
       }) {
    const auto b = first_non_text_byte(c.bytes);
    ASSERT_TRUE(b) << "accepted: " << c.offset;
    EXPECT_EQ(b->offset, c.offset);
  }
}

TEST(Utf8, NulIsNotText) {
  // UTF-16LE "hi": valid UTF-8 byte by byte, but no text file holds NUL.
  const auto b = first_non_text_byte("h\0i\0"s);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset, 1u);
  EXPECT_EQ(b->byte, 0);
  EXPECT_EQ(describe_non_text_byte(*b),
            "the byte at offset 1 (line 1) is NUL (0x00), which text does not hold");
}

TEST(Utf8, SequenceLengthsMatchTheLeadByte) {
  const std::string s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  EXPECT_EQ(utf8_sequence_length(s, 0), 1u);
  EXPECT_EQ(utf8_sequence_length(s, 1), 2u);
  EXPECT_EQ(utf8_sequence_length(s, 3), 3u);
  EXPECT_EQ(utf8_sequence_length(s, 6), 4u);
  EXPECT_EQ(utf8_sequence_length(s, 2), 0u);  // a continuation byte
}

}  // namespace
}  // namespace mantissa
