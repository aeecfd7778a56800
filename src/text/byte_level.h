#pragma once
// GPT-2's byte-level alphabet: every byte stands for a printable character, so that byte-level
// BPE works on text. Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes, in increasing order, for U+0100, U+0101, ... ("Ġ" is the
// space, U+0120).
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mantissa::text::detail {

// The UTF-8 text of the character byte b stands for.
const std::string& byte_to_char(unsigned char b);

// `text` with each byte replaced by its character.
std::string bytes_to_chars(std::string_view text);

// The byte a code point stands for; nullopt when it stands for none.
std::optional<unsigned char> char_to_byte(char32_t cp);

}  // namespace mantissa::text::detail
