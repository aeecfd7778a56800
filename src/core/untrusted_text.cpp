#include "mantissa/core/untrusted_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "mantissa/core/utf8.h"

namespace mantissa {
namespace {

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
