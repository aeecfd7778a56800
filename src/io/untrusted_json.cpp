#include "mantissa/io/untrusted_json.h"

#include <algorithm>
#include <set>

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

nlohmann::json parse_json_noting_duplicate_keys(std::string_view text,
                                                std::optional<JsonDuplicateKey>& duplicate) {
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string last_key;  // of an object: the key whose value is being parsed
  };
  std::vector<Frame> frames;
  using Event = nlohmann::json::parse_event_t;
  auto callback = [&](int /*depth*/, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        frames.push_back({event == Event::object_start, {}, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case Event::key: {
        if (frames.empty() || !frames.back().object) break;
        Frame& f = frames.back();
        f.last_key = parsed.get<std::string>();
        if (!f.keys.insert(f.last_key).second && !duplicate) {
          JsonDuplicateKey d;
          for (size_t i = 0; i + 1 < frames.size(); ++i)
            d.path.push_back(frames[i].object ? frames[i].last_key : std::string("[]"));
          d.key = f.last_key;
          duplicate = std::move(d);
        }
        break;
      }
      case Event::value:
        break;
    }
    return true;
  };
  return nlohmann::json::parse(text, callback);
}

std::string duplicate_key_message(std::string_view what, const JsonDuplicateKey& d) {
  std::string at = "the top level";
  if (!d.path.empty()) {
    std::string joined;
    for (const std::string& p : d.path) joined += (joined.empty() ? "" : ".") + p;
    at = "the object at " + quote_untrusted(joined);
  }
  return fmt::format(
      "{}: key {} appears twice in {} (a JSON object must not repeat a key: one reader takes the "
      "first value, another the last); the file is damaged",
      what, quote_untrusted(d.key), at);
}

nlohmann::json parse_json_refusing_duplicate_keys(std::string_view text, std::string_view where,
                                                  std::string_view what) {
  std::optional<JsonDuplicateKey> duplicate;
  nlohmann::json j = parse_json_noting_duplicate_keys(text, duplicate);
  if (duplicate) fail(where, "{}", duplicate_key_message(what, *duplicate));
  return j;
}

nlohmann::json parse_untrusted_json(std::string_view text, std::string_view where,
                                    std::string_view what) {
  check_json_nesting(text, where, what);
  try {
    return parse_json_refusing_duplicate_keys(text, where, what);
  } catch (const nlohmann::json::exception& e) {
    fail(where, "{}: not valid JSON ({})", what, escape_untrusted(e.what()));
  }
}

}  // namespace mantissa::io
