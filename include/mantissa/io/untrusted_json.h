#pragma once
// JSON that came from a file (a safetensors header, a checkpoint's trainer metadata): limits
// checked before parsing, and excerpts safe to put in a message.
//
// Nesting is limited because deep JSON is a denial-of-service: parsing 100,000 nested arrays
// is cheap, but anything that walks the result recursively (dump, the destructor of some
// nlohmann versions, a comparison) runs out of stack and kills the process. Real headers nest
// three levels deep, checkpoint metadata about six.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The first key an object of parsed text repeats: the keys leading to that object (empty for
// the outermost one; "[]" for an array on the way) and the key.
struct JsonDuplicateKey {
  std::vector<std::string> path;
  std::string key;
};

// nlohmann::json::parse, noting the first repeated key of any object in `duplicate` (the
// parser keeps the last value of a repeated key in silence). Throws the parser's exceptions.
nlohmann::json parse_json_noting_duplicate_keys(std::string_view text,
                                                std::optional<JsonDuplicateKey>& duplicate);

// "WHAT: key 'K' appears twice in the object at 'a.b' (...); the file is damaged", names from
// the file escaped.
std::string duplicate_key_message(std::string_view what, const JsonDuplicateKey& d);

// Parses JSON text of a file: its header (read_safetensors_header, load_safetensors)
// or a metadata value that holds JSON (a checkpoint's trainer metadata). An object that repeats
// a key is refused: nlohmann::json keeps the last of them in silence, and another reader may
// keep the first, so the file means two things (docs/checkpoints.md, "Validation"). Throws
// mantissa::Error from `where`: "WHAT: key 'K' appears twice in the object at 'PATH'; the file is
// damaged" (PATH: the keys leading to the object, "the top level" for the outermost one; names
// from the file, escaped). Text that is not JSON throws the parser's nlohmann::json::exception,
// which the caller words. Check the nesting first (check_json_nesting).
nlohmann::json parse_json_refusing_duplicate_keys(std::string_view text, std::string_view where,
                                                  std::string_view what);

// The whole check of a small JSON file read from a user (config.json, an index, an adapter
// config): check_json_nesting, then parse_json_refusing_duplicate_keys, and text that is not
// JSON throws mantissa::Error from `where`: "WHAT: not valid JSON (the parser's words)".
// `what` names the file as the message should show it (quoted by the caller).
nlohmann::json parse_untrusted_json(std::string_view text, std::string_view where,
                                    std::string_view what);

}  // namespace mantissa::io
