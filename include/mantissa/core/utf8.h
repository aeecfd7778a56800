#pragma once
// Checking that bytes read as text are UTF-8 text: the byte-level GPT's corpus (--text) and
// fine-tuning's data files say they take UTF-8, and a binary file read as text trains on
// garbage without a word. A NUL byte counts as not text too: UTF-8 allows it, but text files
// hold none, while binary files and UTF-16 text are full of them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mantissa {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are
// not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut off by
// the end of s).
size_t utf8_sequence_length(std::string_view s, size_t i);

// Where `text` stops being UTF-8 text: the offset of its first byte that begins no valid UTF-8
// sequence or is NUL, and the line it is on (1-based, counting '\n').
struct NotTextByte {
  size_t offset = 0;
  int64_t line = 1;
  unsigned char byte = 0;
};
std::optional<NotTextByte> first_non_text_byte(std::string_view text);

// "the byte at offset 1234 (line 5) is 0xff, which begins no UTF-8 character" (offsets count
// from 0) or "... is NUL (0x00), which text does not hold", for an error message.
std::string describe_non_text_byte(const NotTextByte& b);

}  // namespace mantissa
