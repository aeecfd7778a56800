#include "text/utf8.h"

namespace mantissa::text::detail {

namespace {

// The valid range of the second byte after lead byte `b0` (RFC 3629 / Unicode table 3-7);
// continuation bytes after the second are always 0x80..0xBF.
struct SecondByteRange {
  unsigned char lo, hi;
};

int expected_length(unsigned char b0, SecondByteRange& second) {
  second = {0x80, 0xBF};
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return 2;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (b0 == 0xE0) second = {0xA0, 0xBF};
    if (b0 == 0xED) second = {0x80, 0x9F};  // no surrogates
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (b0 == 0xF0) second = {0x90, 0xBF};
    if (b0 == 0xF4) second = {0x80, 0x8F};  // at most U+10FFFF
    return 4;
  }
  return 0;
}

// How many bytes from pos form a valid prefix of a sequence (at least the lead byte when it
// is a valid lead), and whether the whole sequence is there.
size_t valid_prefix(std::string_view text, size_t pos, bool& complete) {
  SecondByteRange second;
  const auto b0 = static_cast<unsigned char>(text[pos]);
  const int len = expected_length(b0, second);
  complete = false;
  if (len == 0) return 0;
  size_t i = 1;
  for (; i < static_cast<size_t>(len); ++i) {
    if (pos + i >= text.size()) return i;
    const auto b = static_cast<unsigned char>(text[pos + i]);
    const unsigned char lo = i == 1 ? second.lo : 0x80, hi = i == 1 ? second.hi : 0xBF;
    if (b < lo || b > hi) return i;
  }
  complete = true;
  return i;
}

}  // namespace

size_t utf8_sequence_length(std::string_view text, size_t pos) {
  bool complete = false;
  const size_t n = valid_prefix(text, pos, complete);
  return complete ? n : 0;
}

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = utf8_sequence_length(text, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    bool complete = false;
    const size_t n = valid_prefix(bytes, pos, complete);
    if (complete) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacementChar);
      pos += n == 0 ? 1 : n;
    }
  }
  return out;
}

char32_t utf8_code_point(std::string_view text, size_t pos, size_t len) {
  const auto b = [&](size_t i) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[pos + i]));
  };
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

std::string utf8_encode(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

size_t utf8_char_count(std::string_view text) {
  size_t n = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

}  // namespace mantissa::text::detail
