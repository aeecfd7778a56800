#include "mantissa/models/hf_generation_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::models {

namespace {

constexpr const char* kWhere = "hf_generation_config";
using nlohmann::json;

// Keys that do not change which tokens are chosen.
const std::set<std::string>& neutral_keys() {
  static const std::set<std::string> keys = {"_from_model_config",
                                             "transformers_version",
                                             "use_cache",
                                             "pad_token_id",
                                             "decoder_start_token_id",
                                             "output_attentions",
                                             "output_hidden_states",
                                             "output_scores",
                                             "output_logits",
                                             "return_dict_in_generate",
                                             "num_return_sequences",
                                             "cache_implementation",
                                             "min_length",
                                             "min_new_tokens"};
  return keys;
}

// Values at which a setting generate() lacks has no effect.
bool at_neutral_value(const std::string& key, const json& v) {
  if (v.is_null()) return true;
  if (key == "repetition_penalty" || key == "typical_p" || key == "length_penalty" ||
      key == "encoder_repetition_penalty")
    return v.is_number() && v.get<double>() == 1.0;
  if (key == "num_beams" || key == "num_beam_groups") return v.is_number() && v.get<double>() == 1;
  if (key == "no_repeat_ngram_size" || key == "min_p" || key == "epsilon_cutoff" ||
      key == "eta_cutoff" || key == "encoder_no_repeat_ngram_size" || key == "diversity_penalty")
    return v.is_number() && v.get<double>() == 0;
  if (key == "early_stopping" || key == "remove_invalid_values")
    return v.is_boolean() && !v.get<bool>();
  if (key == "bad_words_ids" || key == "suppress_tokens" || key == "begin_suppress_tokens" ||
      key == "forced_bos_token_id" || key == "forced_eos_token_id")
    return v.is_array() ? v.empty() : false;
  return false;
}

double number(const json& j, const std::string& key, const std::string& source, double min,
              double max) {
  const json& v = j.at(key);
  MANTISSA_CHECK(v.is_number(), kWhere, "{}: field '{}' must be a number, got {}", source, key,
                 io::json_excerpt(v));
  const double x = v.get<double>();
  MANTISSA_CHECK(std::isfinite(x) && x >= min && x <= max, kWhere,
                 "{}: field '{}' must be in [{}, {}], got {}", source, key, min, max, x);
  return x;
}

// A token id the model can produce: below config.json's vocab_size (unknown: 0, not checked).
void check_token_in_vocabulary(int64_t id, const char* key, const std::string& source,
                               const HfConfig& config) {
  MANTISSA_CHECK(config.vocab_size <= 0 || id < config.vocab_size, kWhere,
                 "{}: field '{}' holds token {}, past the vocabulary (config.json's vocab_size "
                 "{}): the model never produces it; correct the id",
                 source, key, id, config.vocab_size);
}

}  // namespace

HfGenerationDefaults parse_hf_generation_config(const std::string& text, const std::string& source,
                                                const HfConfig& config) {
  json j = io::parse_untrusted_json(text, kWhere, source);
  MANTISSA_CHECK(j.is_object(), kWhere, "{}: expected a JSON object", source);
  HfGenerationDefaults d;
  GenerateOptions& o = d.options;
  o.eos_token_ids = config.eos_token_ids;
  d.bos_token_id = config.bos_token_id;
  auto has = [&](const char* k) { return j.contains(k) && !j.at(k).is_null(); };
  bool sample = false;
  if (has("do_sample")) {
    MANTISSA_CHECK(j["do_sample"].is_boolean(), kWhere,
                   "{}: field 'do_sample' must be true or false", source);
    sample = j["do_sample"].get<bool>();
  }
  o.temperature = 0;
  if (sample) {
    o.temperature = has("temperature") ? number(j, "temperature", source, 0, 1e6) : 1.0;
    o.top_k = has("top_k") ? static_cast<int64_t>(number(j, "top_k", source, 0, 1e12)) : 50;
    o.top_p = has("top_p") ? number(j, "top_p", source, 1e-12, 1.0) : 1.0;
    for (const char* k : {"do_sample", "temperature", "top_k", "top_p"})
      if (has(k)) d.set_keys.insert(k);
  }
  if (has("max_new_tokens")) {
    o.max_new_tokens = static_cast<int64_t>(number(j, "max_new_tokens", source, 0, 1e12));
    d.set_keys.insert("max_new_tokens");
  }
  if (has("bos_token_id")) {
    const json& v = j["bos_token_id"];
    MANTISSA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, kWhere,
                   "{}: field 'bos_token_id' must be a token id, got {}", source,
                   io::json_excerpt(v));
    d.bos_token_id = v.get<int64_t>();
    check_token_in_vocabulary(*d.bos_token_id, "bos_token_id", source, config);
  }
  if (has("eos_token_id")) {
    d.set_keys.insert("eos_token_id");
    const json& v = j["eos_token_id"];
    const json list = v.is_array() ? v : json::array({v});
    o.eos_token_ids.clear();
    for (const json& e : list) {
      MANTISSA_CHECK(e.is_number_integer() && e.get<int64_t>() >= 0, kWhere,
                     "{}: field 'eos_token_id' must be a token id or a list of them, got {}",
                     source, io::json_excerpt(v));
      o.eos_token_ids.push_back(e.get<int64_t>());
      check_token_in_vocabulary(o.eos_token_ids.back(), "eos_token_id", source, config);
    }
  }
  static const std::set<std::string> read = {"do_sample",   "temperature",    "top_k",
                                             "top_p",       "max_new_tokens", "eos_token_id",
                                             "bos_token_id"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (read.count(k) || neutral_keys().count(k) || at_neutral_value(k, it.value())) continue;
    // Sampling settings are moot when decoding greedily.
    if (!sample && (k == "temperature" || k == "top_k" || k == "top_p")) continue;
    d.not_applied.push_back(escape_untrusted(k) + "=" + io::json_excerpt(it.value()));
  }
  return d;
}

HfGenerationDefaults load_hf_generation_defaults(const std::string& model_dir,
                                                 const HfConfig& config) {
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    HfGenerationDefaults d;
    d.options.temperature = 0;
    d.options.eos_token_ids = config.eos_token_ids;
    d.bos_token_id = config.bos_token_id;
    return d;
  }
  MANTISSA_CHECK(std::filesystem::is_regular_file(path, ec), kWhere, "{} is not a regular file",
                 quote_untrusted(path));
  const auto size = std::filesystem::file_size(path, ec);
  MANTISSA_CHECK(!ec && size <= (16u << 20), kWhere, "{}: too large for a generation config",
                 quote_untrusted(path));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_hf_generation_config(ss.str(), path, config);
}

}  // namespace mantissa::models
