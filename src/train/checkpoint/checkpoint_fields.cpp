#include "train/checkpoint/checkpoint_fields.h"

#include <cmath>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::train {
namespace {

constexpr const char* kWhere = "checkpoint";

std::string int_range_text(int64_t min, int64_t max) {
  if (min == 0 && max >= kMaxCheckpointCount) return "a non-negative integer";
  if (min == max) return fmt::format("the integer {}", min);
  return fmt::format("an integer in [{}, {}]", min, max);
}

}  // namespace

CheckpointFields::CheckpointFields(const nlohmann::json& object, std::string source,
                                   std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!object_.is_object()) {
    fail(kWhere, "{}: checkpoint field '{}' must be a JSON object, got {}", source_,
         prefix_.empty() ? std::string("metadata") : prefix_.substr(0, prefix_.size() - 1),
         io::json_excerpt(object_));
  }
}

std::string CheckpointFields::full_name(std::string_view key) const {
  return escape_untrusted(prefix_ + std::string(key));
}

void CheckpointFields::fail_field(std::string_view key, std::string_view expected,
                                  const nlohmann::json& value) const {
  fail(kWhere, "{}: checkpoint field '{}' must be {}, got {}", source_, full_name(key), expected,
       io::json_excerpt(value));
}

bool CheckpointFields::has(std::string_view key) const { return object_.contains(key); }

const nlohmann::json& CheckpointFields::require(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end()) {
    fail(kWhere,
         "{}: checkpoint field '{}' is missing (the file is damaged or was not written "
         "by mantissa)",
         source_, full_name(key));
  }
  return *it;
}

int64_t CheckpointFields::require_int(std::string_view key, int64_t min, int64_t max) const {
  const nlohmann::json& v = require(key);
  // is_number_integer is false for floats and bools; an unsigned above int64 is out of range.
  const bool too_large = v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(max)
                                                : v.is_number_integer() && v.get<int64_t>() > max;
  // "a non-negative integer" names no upper bound, so a count past it says what is wrong
  // ("must be a non-negative integer, got 4611686018427387904" read as a contradiction).
  if (too_large && min == 0 && max >= kMaxCheckpointCount) {
    fail(kWhere, "{}: checkpoint field '{}' is too large: it must be at most {}{}, got {}", source_,
         full_name(key), max,
         max == kMaxCheckpointCount
             ? " (2^53, the largest count a checkpoint holds: the largest integer every JSON "
               "reader keeps exactly)"
             : "",
         io::json_excerpt(v));
  }
  if (too_large || !v.is_number_integer()) fail_field(key, int_range_text(min, max), v);
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) fail_field(key, int_range_text(min, max), v);
  return x;
}

double CheckpointFields::require_number(std::string_view key, double min, double max) const {
  const nlohmann::json& v = require(key);
  const std::string expected = fmt::format("a finite number in [{}, {}]", min, max);
  if (!v.is_number()) fail_field(key, expected, v);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < min || x > max) fail_field(key, expected, v);
  return x;
}

bool CheckpointFields::require_bool(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_boolean()) fail_field(key, "true or false", v);
  return v.get<bool>();
}

std::string CheckpointFields::require_string(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_string()) fail_field(key, "a string", v);
  return v.get<std::string>();
}

const nlohmann::json& CheckpointFields::require_object(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_object()) fail_field(key, "a JSON object", v);
  return v;
}

const nlohmann::json& CheckpointFields::require_array(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_array()) fail_field(key, "a JSON array", v);
  return v;
}

std::map<std::string, double> CheckpointFields::require_metrics(std::string_view key) const {
  const nlohmann::json& metrics = require_object(key);
  std::map<std::string, double> out;
  for (auto it = metrics.begin(); it != metrics.end(); ++it) {
    const std::string& name = it.key();
    check_metric_name(key, name);
    const nlohmann::json& v = it.value();
    if (v.is_null()) {
      out[name] = std::nan("");
    } else if (v.is_number()) {
      out[name] = v.get<double>();
    } else {
      fail_field(std::string(key) + "." + name, "a number (or null for NaN)", v);
    }
  }
  return out;
}

void CheckpointFields::check_metric_name(std::string_view key, const std::string& name) const {
  if (name.empty() || escape_untrusted(name, name.size()) != name) {
    fail(kWhere,
         "{}: checkpoint field '{}' has the metric name {}; names must be non-empty and free "
         "of control characters",
         source_, full_name(key), quote_untrusted(name));
  }
}

CheckpointFields CheckpointFields::nested(std::string_view key) const {
  return CheckpointFields(require_object(key), source_, prefix_ + std::string(key) + ".");
}

CheckpointFields CheckpointFields::element(std::string_view key, size_t index) const {
  const nlohmann::json& array = require_array(key);
  const std::string name = fmt::format("{}[{}]", key, index);
  if (index >= array.size()) {
    fail(kWhere, "{}: checkpoint field '{}' is missing (the array has {} elements)", source_,
         full_name(name), array.size());
  }
  if (!array[index].is_object()) fail_field(name, "a JSON object", array[index]);
  return CheckpointFields(array[index], source_, prefix_ + name + ".");
}

void check_scheduler_fields(const CheckpointFields& scheduler) {
  if (scheduler.has("last_epoch")) scheduler.require_int("last_epoch", -1, kMaxCheckpointCount);
  for (const char* key : {"base_lrs", "_last_lr"}) {
    if (!scheduler.has(key)) continue;
    const nlohmann::json& lrs = scheduler.require_array(key);
    for (size_t i = 0; i < lrs.size(); ++i) {
      if (!lrs[i].is_number() || !std::isfinite(lrs[i].get<double>()) || lrs[i].get<double>() < 0)
        scheduler.fail_field(fmt::format("{}[{}]", key, i), "a finite non-negative number", lrs[i]);
    }
  }
}

nlohmann::json read_callback_states(const CheckpointFields& meta) {
  const nlohmann::json& states = meta.require_object("callbacks");
  const CheckpointFields fields = meta.nested("callbacks");
  for (auto it = states.begin(); it != states.end(); ++it) {
    if (!it.value().is_object()) fields.fail_field(it.key(), "a JSON object", it.value());
  }
  return states;
}

}  // namespace mantissa::train
