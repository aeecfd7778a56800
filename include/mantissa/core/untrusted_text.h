#pragma once
// Quoting text that came from a file (tensor names, metadata, JSON fragments, file names read
// from a directory) in an error or warning message. Such text is written by whoever made the
// file: printed verbatim, it could carry terminal escape sequences (recolour or clear the
// screen, rewrite the title, hide the real error) or fill the terminal with megabytes. Every
// message that quotes file content goes through these helpers.
#include <cstddef>
#include <string>
#include <string_view>

namespace mantissa {

// Default cap on quoted bytes: enough for any real tensor or metadata name.
inline constexpr size_t kUntrustedQuoteMaxBytes = 80;

// `text` made safe to print: control characters (C0, DEL and the C1 range U+0080..U+009F)
// become \n, \r, \t or \xNN, bytes that are not valid UTF-8 become \xNN, and a backslash
// becomes \\ (so an escape in the output always means one in the input). Printable ASCII and
// valid UTF-8 pass unchanged. When `text` is longer than `max_bytes`, the first `max_bytes`
// bytes are kept (never cutting a character) and "... (N bytes)" says how long it was.
std::string escape_untrusted(std::string_view text, size_t max_bytes = kUntrustedQuoteMaxBytes);

// escape_untrusted between single quotes: 'name'.
std::string quote_untrusted(std::string_view text, size_t max_bytes = kUntrustedQuoteMaxBytes);

}  // namespace mantissa
