#include "mantissa/io/untrusted_json.h"

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"

namespace mantissa::io {

size_t json_nesting_depth(std::string_view text, size_t stop_above) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > stop_above) return stop_above + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void check_json_nesting(std::string_view text, std::string_view where, std::string_view what,
                        size_t max_depth) {
  MANTISSA_CHECK(json_nesting_depth(text, max_depth) <= max_depth, where,
                 "{} nests arrays/objects more than {} levels deep; the file is corrupt or "
                 "hostile (no valid file nests that deep)",
                 what, max_depth);
}

std::string json_excerpt(const nlohmann::json& value) {
  // Replacement error handling: invalid UTF-8 in a string must not make dump() throw here.
  return escape_untrusted(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace mantissa::io
