// escape_untrusted / quote_untrusted: what a crafted file can put into an error message.
#include <gtest/gtest.h>

#include <string>

#include "mantissa/core/untrusted_text.h"

namespace mantissa {
namespace {

TEST(UntrustedText, PrintableAsciiAndUtf8PassUnchanged) {
  EXPECT_EQ(escape_untrusted("model.net.0.weight"), "model.net.0.weight");
  EXPECT_EQ(escape_untrusted("poids_\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "poids_\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(quote_untrusted("w"), "'w'");
  EXPECT_EQ(escape_untrusted(""), "");
}

TEST(UntrustedText, ControlCharactersAreEscaped) {
  // ESC [ 3 1 m: "switch to red" on an ANSI terminal.
  const std::string red = "\x1b[31mred";
  EXPECT_EQ(escape_untrusted(red), "\\x1b[31mred");
  EXPECT_EQ(escape_untrusted("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(escape_untrusted(std::string("nul\0bel\a", 8)), "nul\\x00bel\\x07");
  EXPECT_EQ(escape_untrusted("del\x7f"), "del\\x7f");
  // A backslash is doubled, so "\x1b" in the output always means an escaped byte.
  EXPECT_EQ(escape_untrusted("a\\x1b"), "a\\\\x1b");
  // U+009B (C1 CSI, UTF-8 C2 9B) acts like ESC [ on some terminals.
  EXPECT_EQ(escape_untrusted("\xc2\x9b"
                             "31m"),
            "\\xc2\\x9b31m");
  for (int c = 0; c < 0x20; ++c) {
    const std::string out = escape_untrusted(std::string(1, static_cast<char>(c)));
    for (char o : out) EXPECT_GE(static_cast<unsigned char>(o), 0x20) << "byte " << c;
  }
}

TEST(UntrustedText, InvalidUtf8BytesAreEscaped) {
  EXPECT_EQ(escape_untrusted("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(escape_untrusted("\xc3"), "\\xc3");                    // cut-off sequence
  EXPECT_EQ(escape_untrusted("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(escape_untrusted("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(escape_untrusted("\x80x"), "\\x80x");                  // a stray continuation byte
}

TEST(UntrustedText, LongTextIsCutWithItsLength) {
  const std::string long_name(1000, 'a');
  EXPECT_EQ(escape_untrusted(long_name), std::string(80, 'a') + "... (1000 bytes)");
  EXPECT_EQ(escape_untrusted(long_name, 3), "aaa... (1000 bytes)");
  EXPECT_EQ(escape_untrusted(std::string(80, 'b')), std::string(80, 'b'));
  // Never cut inside a character: the 2-byte "\xc3\xa9" at bytes 79..80 is left out whole.
  const std::string accent = std::string(79, 'a') + "\xc3\xa9";
  EXPECT_EQ(escape_untrusted(accent), std::string(79, 'a') + "... (81 bytes)");
  // The output stays bounded however hostile the input: at most 4 output bytes per input byte.
  const std::string escapes(100000, '\x1b');
  EXPECT_LT(escape_untrusted(escapes).size(), 4 * 80 + 30);
}

}  // namespace
}  // namespace mantissa
