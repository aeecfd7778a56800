#pragma once
// UTF-8 helpers of the tokenizer: the byte length of a character, validity, and the lossy
// decoding `tokenizers` applies when ids end up as text (String::from_utf8_lossy).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mantissa::text::detail {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at text[pos], or 0 when the bytes there are not one
// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t utf8_sequence_length(std::string_view text, size_t pos);

// The offset of the first byte that does not start a valid sequence; nullopt when all valid.
std::optional<size_t> first_invalid_utf8(std::string_view text);

// `bytes` with every invalid part replaced by U+FFFD: one replacement per maximal prefix of a
// valid sequence, else per byte (the Unicode "substitution of maximal subparts" rule, which
// Rust's from_utf8_lossy follows).
std::string utf8_lossy(std::string_view bytes);

// The code point of the valid sequence of `len` bytes at text[pos].
char32_t utf8_code_point(std::string_view text, size_t pos, size_t len);

// The UTF-8 encoding of a code point.
std::string utf8_encode(char32_t cp);

// The number of characters of valid UTF-8 text.
size_t utf8_char_count(std::string_view text);

}  // namespace mantissa::text::detail
