#include "text/json_node.h"

#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::text::detail {

std::string json_kind(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    default:
      return "a number";
  }
}

std::string JsonNode::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void JsonNode::fail_message(const std::string& message) const {
  if (path_.empty()) ::mantissa::fail(kWhere, "{}: {}", quote_untrusted(file_, 200), message);
  ::mantissa::fail(kWhere, "{}: {}: {}", quote_untrusted(file_, 200), escape_untrusted(path_, 200),
                   message);
}

const JsonNode& JsonNode::expect_object() const {
  if (!value_->is_object()) fail("expected an object, found {}", json_kind(*value_));
  return *this;
}

const JsonNode& JsonNode::expect_array() const {
  if (!value_->is_array()) fail("expected an array, found {}", json_kind(*value_));
  return *this;
}

std::optional<JsonNode> JsonNode::find(std::string_view key) const {
  expect_object();
  auto it = value_->find(key);
  if (it == value_->end()) return std::nullopt;
  return JsonNode(*it, file_, child_path(key));
}

JsonNode JsonNode::at(std::string_view key) const {
  auto found = find(key);
  if (!found) fail("missing field '{}'", key);
  return *found;
}

JsonNode JsonNode::at(size_t index) const {
  expect_array();
  if (index >= value_->size())
    fail("index {} is past the end ({} elements)", index, value_->size());
  return JsonNode((*value_)[index], file_, fmt::format("{}[{}]", path_, index));
}

size_t JsonNode::size() const {
  if (!value_->is_array() && !value_->is_object())
    fail("expected an array or object, found {}", json_kind(*value_));
  return value_->size();
}

std::string JsonNode::string() const {
  if (!value_->is_string()) fail("expected a string, found {}", io::json_excerpt(*value_));
  return value_->get<std::string>();
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean()) fail("expected true or false, found {}", io::json_excerpt(*value_));
  return value_->get<bool>();
}

int64_t JsonNode::integer() const {
  if (value_->is_number_unsigned()) {
    const auto v = value_->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) fail("{} is too large", v);
    return static_cast<int64_t>(v);
  }
  if (!value_->is_number_integer())
    fail("expected a whole number, found {}", io::json_excerpt(*value_));
  return value_->get<int64_t>();
}

double JsonNode::number() const {
  if (!value_->is_number()) fail("expected a number, found {}", io::json_excerpt(*value_));
  return value_->get<double>();
}

std::string JsonNode::string_or(std::string_view key, std::string_view fallback) const {
  auto found = find(key);
  if (!found || found->is_null()) return std::string(fallback);
  return found->string();
}

bool JsonNode::boolean_or(std::string_view key, bool fallback) const {
  auto found = find(key);
  if (!found || found->is_null()) return fallback;
  return found->boolean();
}

}  // namespace mantissa::text::detail
