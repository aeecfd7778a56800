#include "mantissa/core/untrusted_text.h"

#include <fmt/format.h>

#include <algorithm>

namespace mantissa {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are
// not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut off).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b0 = byte(0);
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

void append_hex(std::string& out, unsigned char c) { out += fmt::format("\\x{:02x}", c); }

}  // namespace

std::string escape_untrusted(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 2);
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80 ? 1 : utf8_sequence_length(text, i);
    if (i + std::max<size_t>(n, 1) > max_bytes) break;
    if (c < 0x80) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\\') {
        out += "\\\\";
      } else if (c < 0x20 || c == 0x7F) {
        append_hex(out, c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
    } else if (n == 0) {
      append_hex(out, c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      // U+0080..U+009F, the C1 controls: U+009B is a one-character CSI on some terminals.
      append_hex(out, c);
      append_hex(out, static_cast<unsigned char>(text[i + 1]));
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (i < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::string quote_untrusted(std::string_view text, size_t max_bytes) {
  return "'" + escape_untrusted(text, max_bytes) + "'";
}

}  // namespace mantissa
