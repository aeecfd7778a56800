#pragma once
// `mantissa generate`: text from a Hugging Face model directory (and a peft adapter), token by
// token over a KV cache (models::generate), each piece of text handed on as its token is chosen
// (text::DecodeStream: bytes of a character split across tokens wait for the rest).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mantissa::recipes {

struct GenerateRunOptions {
  std::string model_dir;
  std::string adapter;  // a peft adapter directory, or ""
  std::string prompt;
  int64_t max_new_tokens = 64;
  double temperature = 0;  // 0: greedy (transformers' do_sample=False)
  int64_t top_k = 0;       // 0: no cut
  double top_p = 1;
  uint64_t seed = 0;
  // 32-true, bf16-true, or a bitsandbytes mode (nf4, nf4-dq, fp4, fp4-dq, int8): the weights
  // are quantized as they load.
  std::string precision = "32-true";
  int threads = 0;  // 0: all cores
};

struct GenerateResult {
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> new_ids;
  std::string text;    // the new tokens' text, special tokens skipped
  double seconds = 0;  // generation time (the prompt's forward included), loading excluded
};

// Loads the model, encodes the prompt (with the tokenizer's special tokens; an empty prompt is
// the BOS token, generation_config.json's bos_token_id else config.json's), generates and
// calls `on_text` with each new piece of text. Stops at max_new_tokens or an end token
// (generation_config.json's eos_token_id, else config.json's, else the tokenizer's); the file's
// other settings are not applied, and those that differ from the options are named in one
// warning. Throws mantissa::Error for a bad model directory, adapter, precision or option, for a
// prompt that is not UTF-8, and for an empty prompt when the model names no BOS token.
GenerateResult run_generate(const GenerateRunOptions& o,
                            const std::function<void(std::string_view)>& on_text = {});

}  // namespace mantissa::recipes
