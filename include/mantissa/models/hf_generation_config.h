#pragma once
// A model directory's generation_config.json read into generate's options: the defaults
// transformers' generate() takes from it. Its end tokens matter most: chat models list several
// (Llama 3: <|end_of_text|>, <|eom_id|>, <|eot_id|>), and greedy output equals transformers'
// only when generation stops where it stops.
//
//   do_sample false or absent   -> temperature 0 (greedy)
//   do_sample true              -> temperature, top_k, top_p from the file, else transformers'
//                                  defaults 1.0, 50, 1.0
//   eos_token_id (int or list)  -> eos_token_ids (config.json's when the file has none)
//   bos_token_id                -> bos_token_id (config.json's when the file has none): the
//                                  token generate() starts from without a prompt
//   max_new_tokens              -> max_new_tokens (else GenerateOptions' default)
//
// An end or start token past config.json's vocab_size is an error naming the file: the model
// never generates it, so generation would never stop there.
//
// Settings generate() does not implement are not applied; they are listed, with their values,
// in `not_applied` for the caller to report: repetition_penalty != 1, num_beams > 1,
// no_repeat_ngram_size > 0, typical_p / min_p / epsilon_cutoff / eta_cutoff cuts,
// max_length (only max_new_tokens is read), and any other key.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mantissa/models/generate.h"
#include "mantissa/models/hf_config.h"

namespace mantissa::models {

struct HfGenerationDefaults {
  GenerateOptions options;
  std::vector<std::string> not_applied;  // "repetition_penalty=1.1", ...
  // The keys of the file `options` took ("do_sample", "temperature", "top_k", "top_p",
  // "max_new_tokens", "eos_token_id"; the sampling ones only when do_sample is true), for a
  // caller that sets options of its own to say which of the file's it did not use.
  std::set<std::string> set_keys;
  std::optional<int64_t> bos_token_id;
};

// Parses generation_config.json text (`source` names it in errors); `config` supplies the end
// tokens when the file has none. Throws mantissa::Error naming the source and field for a
// mistyped or out-of-range value.
HfGenerationDefaults parse_hf_generation_config(const std::string& json_text,
                                                const std::string& source, const HfConfig& config);

// <model_dir>/generation_config.json, or, when the directory has none, greedy decoding with
// config.json's end tokens.
HfGenerationDefaults load_hf_generation_defaults(const std::string& model_dir,
                                                 const HfConfig& config);

}  // namespace mantissa::models
