#include "text/byte_level.h"

#include "text/utf8.h"

namespace mantissa::text::detail {

namespace {

bool stands_for_itself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<std::string, 256> chars;
  std::array<int, 512> byte_of;  // code point (all below 512) -> byte, -1 for none
  Tables() {
    byte_of.fill(-1);
    unsigned next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const unsigned cp = stands_for_itself(b) ? b : next++;
      chars[b] = utf8_encode(static_cast<char32_t>(cp));
      byte_of[cp] = static_cast<int>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_char(unsigned char b) { return tables().chars[b]; }

std::string bytes_to_chars(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (const char c : text) out += tables().chars[static_cast<unsigned char>(c)];
  return out;
}

std::optional<unsigned char> char_to_byte(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  const int b = tables().byte_of[cp];
  if (b < 0) return std::nullopt;
  return static_cast<unsigned char>(b);
}

}  // namespace mantissa::text::detail
