#pragma once
// A value of a tokenizer file with the path that leads to it, so every refusal names the file
// and the field ("'tok/tokenizer.json': pre_tokenizer.pretokenizers[1].type: ...").
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"

namespace mantissa::text::detail {

inline constexpr std::string_view kWhere = "tokenizer";

class JsonNode {
 public:
  JsonNode(const nlohmann::json& value, std::string file, std::string path)
      : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }  // "" for the top level

  bool is_null() const { return value_->is_null(); }
  bool is_object() const { return value_->is_object(); }
  bool is_array() const { return value_->is_array(); }
  bool is_string() const { return value_->is_string(); }

  // A member of this object: required (refused when absent) or optional (nullopt when absent).
  JsonNode at(std::string_view key) const;
  std::optional<JsonNode> find(std::string_view key) const;
  // An element of this array.
  JsonNode at(size_t index) const;
  size_t size() const;  // of an array or object; refused otherwise

  std::string string() const;
  bool boolean() const;
  int64_t integer() const;  // a whole number that fits int64
  double number() const;

  // Optional members with their defaults: absent or null gives the default.
  std::string string_or(std::string_view key, std::string_view fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;

  // Checks this is an object / array, else refused naming what it is instead.
  const JsonNode& expect_object() const;
  const JsonNode& expect_array() const;

  // mantissa::Error: "'FILE': PATH: message".
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    fail_message(fmt::format(f, std::forward<Args>(args)...));
  }
  [[noreturn]] void fail_message(const std::string& message) const;

  // "PATH.key" / "PATH[i]".
  std::string child_path(std::string_view key) const;

 private:
  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
};

// The JSON type of a value in words ("a string", "an array").
std::string json_kind(const nlohmann::json& value);

}  // namespace mantissa::text::detail
