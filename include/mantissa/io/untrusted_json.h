#pragma once
// JSON that came from a file (a safetensors header, a checkpoint's trainer metadata): limits
// checked before parsing, and excerpts safe to put in a message.
//
// Nesting is limited because deep JSON is a denial-of-service: parsing 100,000 nested arrays
// is cheap, but anything that walks the result recursively (dump, the destructor of some
// nlohmann versions, a comparison) runs out of stack and kills the process. Real headers nest
// three levels deep, checkpoint metadata about six.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mantissa::io {

inline constexpr size_t kMaxJsonNesting = 64;

// The deepest nesting of arrays and objects in `text` (0 for a scalar), counting brackets
// outside strings; the scan stops as soon as the depth exceeds `stop_above` and returns
// stop_above + 1. Malformed text is not diagnosed here (the parser does that).
size_t json_nesting_depth(std::string_view text, size_t stop_above = kMaxJsonNesting);

// Throws mantissa::Error from `where` when `text` nests deeper than max_depth, naming `what`
// ("'model.safetensors': header") and the limit.
void check_json_nesting(std::string_view text, std::string_view where, std::string_view what,
                        size_t max_depth = kMaxJsonNesting);

// A JSON value for an error message: its dump, escaped and cut to about 80 bytes
// (escape_untrusted). Only call it on values from text that passed check_json_nesting.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace mantissa::io
