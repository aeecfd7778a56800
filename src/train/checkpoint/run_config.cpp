#include "mantissa/train/checkpoint/run_config.h"

#include <cmath>

#include "mantissa/core/error.h"

namespace mantissa::train {
namespace {

constexpr const char* kWhere = "checkpoint";

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) fail(kWhere, "{}: metadata field 'run.{}' is missing", source, key);
  return *it;
}

int64_t integer(const nlohmann::json& j, const char* key, int64_t min, const std::string& source) {
  const nlohmann::json& v = member(j, key, source);
  MANTISSA_CHECK(v.is_number_integer(), kWhere,
                 "{}: metadata field 'run.{}' must be an integer, got a {}", source, key,
                 v.type_name());
  // A large unsigned value does not fit int64 and reads as negative: refused with the rest.
  const int64_t x = v.get<int64_t>();
  MANTISSA_CHECK(x >= min && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX), kWhere,
                 "{}: metadata field 'run.{}' must be at least {}, got {}", source, key, min,
                 v.dump());
  return x;
}

uint64_t unsigned_integer(const nlohmann::json& v, const std::string& key,
                          const std::string& source) {
  MANTISSA_CHECK(v.is_number_unsigned(), kWhere,
                 "{}: metadata field 'run.{}' must be an integer >= 0, got {}", source, key,
                 v.dump());
  return v.get<uint64_t>();
}

bool boolean(const nlohmann::json& j, const char* key, const std::string& source) {
  const nlohmann::json& v = member(j, key, source);
  MANTISSA_CHECK(v.is_boolean(), kWhere,
                 "{}: metadata field 'run.{}' must be true or false, got {}", source, key,
                 v.dump());
  return v.get<bool>();
}

}  // namespace

nlohmann::json run_config_to_json(const RunConfig& c) {
  nlohmann::json j;
  j["dataset_size"] = c.dataset_size;
  j["batch_size"] = c.batch_size;
  j["shuffle"] = c.shuffle;
  j["loader_seed"] = c.loader_seed;
  j["drop_last"] = c.drop_last;
  j["num_training_batches"] = c.num_training_batches;
  j["seed"] = c.seed ? nlohmann::json(*c.seed) : nlohmann::json(nullptr);
  j["configured_lrs"] = c.configured_lrs;
  j["configured_group_options"] = c.configured_group_options;
  return j;
}

RunConfig run_config_from_json(const nlohmann::json& j, const std::string& source) {
  MANTISSA_CHECK(j.is_object(), kWhere, "{}: metadata field 'run' must be a JSON object, got {}",
                 source, j.type_name());
  RunConfig c;
  c.dataset_size = integer(j, "dataset_size", 0, source);
  c.batch_size = integer(j, "batch_size", 1, source);
  c.shuffle = boolean(j, "shuffle", source);
  c.loader_seed = unsigned_integer(member(j, "loader_seed", source), "loader_seed", source);
  c.drop_last = boolean(j, "drop_last", source);
  c.num_training_batches = integer(j, "num_training_batches", 0, source);
  const nlohmann::json& seed = member(j, "seed", source);
  if (!seed.is_null()) c.seed = unsigned_integer(seed, "seed", source);
  const nlohmann::json& lrs = member(j, "configured_lrs", source);
  MANTISSA_CHECK(lrs.is_array(), kWhere,
                 "{}: metadata field 'run.configured_lrs' must be an array of numbers, got {}",
                 source, lrs.type_name());
  for (size_t i = 0; i < lrs.size(); ++i) {
    MANTISSA_CHECK(
        lrs[i].is_number() && std::isfinite(lrs[i].get<double>()) && lrs[i].get<double>() >= 0,
        kWhere,
        "{}: metadata field 'run.configured_lrs[{}]' must be a finite number >= 0, "
        "got {}",
        source, i, lrs[i].dump());
    c.configured_lrs.push_back(lrs[i].get<double>());
  }
  // Only compared with the new run's, never applied: an object per group is all it must be.
  if (const auto groups = j.find("configured_group_options"); groups != j.end()) {
    MANTISSA_CHECK(groups->is_array(), kWhere,
                   "{}: metadata field 'run.configured_group_options' must be an array of "
                   "objects, got {}",
                   source, groups->type_name());
    for (size_t i = 0; i < groups->size(); ++i) {
      MANTISSA_CHECK((*groups)[i].is_object(), kWhere,
                     "{}: metadata field 'run.configured_group_options[{}]' must be an object, "
                     "got {}",
                     source, i, (*groups)[i].type_name());
      c.configured_group_options.push_back((*groups)[i]);
    }
  }
  return c;
}

}  // namespace mantissa::train
