#pragma once
// Typed, range-checked reads of a checkpoint's trainer metadata. A checkpoint is a file, so its
// fields are untrusted: every field is checked for its JSON type (an integer is an integer,
// not a float, a bool or a string that looks like one) and its range before the trainer uses
// it, and a bad field is an error that names it:
//   [checkpoint] last.safetensors: checkpoint field 'epoch' must be a non-negative integer,
//   got "x"
// Values quoted from the file are escaped and cut short (io::json_excerpt).
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mantissa::train {

// Largest count (epoch, step, batch) a checkpoint may hold: 2^53, the largest integer every
// JSON reader keeps exactly, and far beyond any real run.
inline constexpr int64_t kMaxCheckpointCount = int64_t{1} << 53;

class CheckpointFields {
 public:
  // Reads the fields of `object` (which must outlive this reader). `source` names the file in
  // messages; `prefix` is prepended to field names ("lr_schedulers[0].").
  CheckpointFields(const nlohmann::json& object, std::string source, std::string prefix = "");

  bool has(std::string_view key) const;
  // The value of a present field, any type (throws naming the field when it is missing).
  const nlohmann::json& require(std::string_view key) const;

  // A JSON integer (not a float or bool) in [min, max].
  int64_t require_int(std::string_view key, int64_t min, int64_t max) const;
  // A finite JSON number (integer or float) in [min, max].
  double require_number(std::string_view key, double min, double max) const;
  bool require_bool(std::string_view key) const;
  std::string require_string(std::string_view key) const;
  const nlohmann::json& require_object(std::string_view key) const;
  const nlohmann::json& require_array(std::string_view key) const;
  // An object of name -> number; null stands for NaN (nlohmann writes NaN as null). Names must
  // be non-empty and free of control characters: they are printed later (progress bar, logs).
  std::map<std::string, double> require_metrics(std::string_view key) const;
  // Throws unless `name`, a key of the object held by `key`, is a metric name as
  // require_metrics accepts them.
  void check_metric_name(std::string_view key, const std::string& name) const;

  // A reader for the object held by `key` (prefix "key.") or by element `index` of the array
  // held by `key` (prefix "key[index].").
  CheckpointFields nested(std::string_view key) const;
  CheckpointFields element(std::string_view key, size_t index) const;

  // Throws "checkpoint field '<prefix><key>' must be <expected>, got <excerpt of value>".
  [[noreturn]] void fail_field(std::string_view key, std::string_view expected,
                               const nlohmann::json& value) const;

 private:
  std::string full_name(std::string_view key) const;

  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

// The fields every LR scheduler's state shares, where present: "last_epoch" an integer >= -1,
// "base_lrs" and "_last_lr" arrays of finite non-negative numbers. (The scheduler's own
// load_state_dict checks which fields it needs and how many.)
void check_scheduler_fields(const CheckpointFields& scheduler);

// The "callbacks" object: callback state key -> that callback's state object.
nlohmann::json read_callback_states(const CheckpointFields& meta);

}  // namespace mantissa::train
