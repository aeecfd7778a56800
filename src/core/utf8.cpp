#include "mantissa/core/utf8.h"

#include <fmt/format.h>

namespace mantissa {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  }
  return n;
}

std::optional<NotTextByte> first_non_text_byte(std::string_view text) {
  int64_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c != 0 && c < 0x80) {  // ASCII, the common case
      line += c == '\n';
      ++i;
      continue;
    }
    const size_t n = c == 0 ? 0 : utf8_sequence_length(text, i);
    if (n == 0) return NotTextByte{.offset = i, .line = line, .byte = c};
    i += n;
  }
  return std::nullopt;
}

std::string describe_non_text_byte(const NotTextByte& b) {
  if (b.byte == 0)
    return fmt::format("the byte at offset {} (line {}) is NUL (0x00), which text does not hold",
                       b.offset, b.line);
  return fmt::format("the byte at offset {} (line {}) is 0x{:02x}, which begins no UTF-8 character",
                     b.offset, b.line, b.byte);
}

}  // namespace mantissa
