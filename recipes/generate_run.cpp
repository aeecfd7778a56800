// `mantissa generate`: a model directory's text, printed as it is generated.
#include "mantissa/recipes/generate_run.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/utf8.h"
#include "mantissa/core/warning.h"
#include "mantissa/models/generate.h"
#include "mantissa/models/hf_generation_config.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/models/peft_adapter.h"
#include "mantissa/recipes/command_precision.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/model_footprint.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/text/tokenizer.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {
namespace {

constexpr const char* kWhere = "generate";

// 32-true, bf16-true and the precisions that store weights as codes (quantized at load):
// generation runs no optimizer step, so the mixed and FP8 training precisions do not apply.
std::vector<std::string> generate_precisions() {
  std::vector<std::string> names;
  for (const std::string& p : train::supported_precisions())
    if (p == "32-true" || p == "bf16-true" || train::precision_traits(p).stores_codes)
      names.push_back(p);
  return names;
}

models::HfLoadOptions load_options(const std::string& precision, bool tied) {
  models::HfLoadOptions load;
  if (precision == "32-true") return load;
  if (precision == "bf16-true") {
    load.dtype = kBFloat16;
    return load;
  }
  load.quantization = precision;
  if (tied) load.quant_ignore.clear();  // no lm_head module to keep
  return load;
}

// --prompt as the tokenizer takes it: UTF-8 text, said in the flag's terms before the model loads
// (the tokenizer's own error named no flag).
void check_prompt_text(const std::string& prompt) {
  const std::optional<NotTextByte> bad = first_non_text_byte(prompt);
  MANTISSA_CHECK(!bad, kWhere, "--prompt is not UTF-8 text: {}; give the text to continue in UTF-8",
                 bad ? describe_non_text_byte(*bad) : "");
}

// The prompt's tokens; an empty prompt starts from the BOS token, as transformers' generate()
// without input_ids does.
std::vector<int64_t> prompt_tokens(const std::string& prompt, const text::Tokenizer& tokenizer,
                                   const models::HfGenerationDefaults& file,
                                   const std::string& model_dir) {
  if (prompt.empty()) {
    MANTISSA_CHECK(file.bos_token_id.has_value(), kWhere,
                   "--prompt is empty and the model names no BOS token to start from "
                   "(bos_token_id in {}/config.json or generation_config.json): give the text to "
                   "continue",
                   escape_untrusted(model_dir));
    return {*file.bos_token_id};
  }
  std::vector<int64_t> ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
  MANTISSA_CHECK(!ids.empty(), kWhere, "--prompt encodes to no token; give the text to continue");
  return ids;
}

// The settings of generation_config.json this run does not use, in one warning: generate takes
// the file's end tokens (and BOS) only, its flags decide sampling and length, and not_applied
// lists what generation does not implement. Each used setting that differs names the flag that
// sets it; a model whose file samples was otherwise decoded greedily without a word.
void warn_unused_generation_settings(const models::HfGenerationDefaults& file,
                                     const models::GenerateOptions& run,
                                     const std::string& model_dir) {
  const models::GenerateOptions& f = file.options;
  const auto set = [&](const char* key) { return file.set_keys.contains(key); };
  std::vector<std::string> unused;
  if (f.temperature > 0 && run.temperature != f.temperature) {
    unused.push_back(fmt::format(
        "do_sample=true{} (--temperature {})",
        set("temperature") ? fmt::format(", temperature={}", f.temperature) : "", f.temperature));
  }
  if (set("top_k") && run.top_k != f.top_k)
    unused.push_back(fmt::format("top_k={} (--top-k {})", f.top_k, f.top_k));
  if (set("top_p") && run.top_p != f.top_p)
    unused.push_back(fmt::format("top_p={} (--top-p {})", f.top_p, f.top_p));
  if (set("max_new_tokens") && run.max_new_tokens != f.max_new_tokens) {
    unused.push_back(
        fmt::format("max_new_tokens={} (--max-new-tokens {})", f.max_new_tokens, f.max_new_tokens));
  }
  if (unused.empty() && file.not_applied.empty()) return;
  std::string text =
      fmt::format("'{}/generation_config.json': generate takes only its end and start tokens",
                  escape_untrusted(model_dir));
  if (!unused.empty()) {
    text +=
        fmt::format("; not applied: {}: give those flags to apply them", fmt::join(unused, ", "));
  }
  if (!file.not_applied.empty()) {
    text += fmt::format("; not implemented, so not applied either: {}",
                        fmt::join(file.not_applied, ", "));
  }
  warn(text);
}

}  // namespace

GenerateResult run_generate(const GenerateRunOptions& o,
                            const std::function<void(std::string_view)>& on_text) {
  MANTISSA_CHECK(!o.model_dir.empty(), kWhere, "--model-dir is required");
  check_prompt_text(o.prompt);
  MANTISSA_CHECK(o.max_new_tokens >= 1, kWhere, "--max-new-tokens must be at least 1, got {}",
                 o.max_new_tokens);
  MANTISSA_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, kWhere,
                 "--temperature must be 0 (greedy) or positive, got {}", o.temperature);
  MANTISSA_CHECK(o.top_p > 0 && o.top_p <= 1, kWhere, "--top-p must be in (0, 1], got {}", o.top_p);
  MANTISSA_CHECK(o.top_k >= 0, kWhere, "--top-k must not be negative, got {}", o.top_k);
  // Greedy decoding takes the most likely token, so a cut of the candidates would change nothing:
  // a --top-k or --top-p given without a temperature means the user wanted sampling (transformers
  // warns that do_sample=False ignores them; refused here, so the run does what was asked).
  if (o.temperature == 0) {
    std::string cut;
    if (o.top_k > 0) cut = fmt::format("--top-k {}", o.top_k);
    if (o.top_p < 1) cut += fmt::format("{}--top-p {}", cut.empty() ? "" : " and ", o.top_p);
    const bool both = o.top_k > 0 && o.top_p < 1;
    MANTISSA_CHECK(cut.empty(), kWhere,
                   "{} {} only when sampling, and --temperature 0 (the default) decodes greedily; "
                   "give --temperature T > 0 to sample, or leave {} out",
                   cut, both ? "apply" : "applies", both ? "them" : "it");
  }
  const std::string precision = command_precision(o.precision, generate_precisions(), kWhere);
  apply_thread_count(o.threads);
  const text::Tokenizer tokenizer = text::Tokenizer::from_directory(o.model_dir);
  const models::HfConfig config = models::load_hf_config(o.model_dir);
  MANTISSA_CHECK(tokenizer.vocab_size() <= config.vocab_size, kWhere,
                 "{}/tokenizer.json holds {} tokens but {}/config.json gives "
                 "vocab_size {}",
                 escape_untrusted(o.model_dir), tokenizer.vocab_size(),
                 escape_untrusted(o.model_dir), config.vocab_size);
  // generation_config.json: the end tokens transformers' generate() stops at (else config.json's)
  // and the BOS an empty prompt starts from; its other settings differing from the flags' are
  // named in a warning before the model loads.
  const models::HfGenerationDefaults file_defaults =
      models::load_hf_generation_defaults(o.model_dir, config);
  models::GenerateOptions g{.max_new_tokens = o.max_new_tokens,
                            .temperature = o.temperature,
                            .top_k = o.top_k,
                            .top_p = o.top_p,
                            .seed = o.seed};
  g.eos_token_ids = file_defaults.options.eos_token_ids;
  warn_unused_generation_settings(file_defaults, g, o.model_dir);
  const models::HfLoadOptions load = load_options(precision, config.tie_word_embeddings);
  // A config.json whose sizes no machine holds is refused with the figures before anything is
  // allocated.
  check_model_fits({.parameters = hf_parameter_count(config),
                    .bits = parameter_bits(precision, load.dtype, "", false, /*training=*/false),
                    .precision = precision},
                   memory_bound("", /*host_memory=*/true),
                   fmt::format("'{}/config.json'", escape_untrusted(o.model_dir)));
  const std::shared_ptr<models::CausalLM> model = models::load_hf_model(o.model_dir, load);
  if (!o.adapter.empty()) models::load_peft_adapter(*model, o.adapter);

  GenerateResult result;
  result.prompt_ids = prompt_tokens(o.prompt, tokenizer, file_defaults, o.model_dir);
  // GPT-2 learns one position embedding per position up to n_positions: said in the flags'
  // terms, with the most that fits, before anything is generated.
  if (config.architecture == models::HfArchitecture::kGpt2 && config.max_position_embeddings > 0) {
    const auto prompt_tokens = static_cast<int64_t>(result.prompt_ids.size());
    const int64_t positions = config.max_position_embeddings;
    MANTISSA_CHECK(prompt_tokens < positions, kWhere,
                   "--prompt encodes to {} tokens, which fill the model's n_positions {} "
                   "(config.json: GPT-2 has a learned position for each of those only) and "
                   "leave none to generate; give a shorter --prompt",
                   prompt_tokens, positions);
    MANTISSA_CHECK(prompt_tokens + o.max_new_tokens <= positions, kWhere,
                   "--max-new-tokens {} after the prompt's {} tokens needs {} positions, more "
                   "than the model's n_positions {} (config.json: GPT-2 has a learned position "
                   "for each of those only); give --max-new-tokens {} or less",
                   o.max_new_tokens, prompt_tokens, prompt_tokens + o.max_new_tokens, positions,
                   positions - prompt_tokens);
  }
  // Rotary positions (Llama, Qwen2) run on past max_position_embeddings: warned, as finetune's
  // --block-size past it is.
  const auto last_position = static_cast<int64_t>(result.prompt_ids.size()) + o.max_new_tokens;
  if (config.architecture != models::HfArchitecture::kGpt2 && config.max_position_embeddings > 0 &&
      last_position > config.max_position_embeddings) {
    warn(fmt::format(
        "--max-new-tokens {} after the prompt's {} tokens may reach {} positions, more than the "
        "model's max_position_embeddings {} (config.json): it runs (rotary positions), but the "
        "model was not trained on positions that far",
        o.max_new_tokens, result.prompt_ids.size(), last_position, config.max_position_embeddings));
  }
  if (g.eos_token_ids.empty() && tokenizer.eos_id()) g.eos_token_ids.push_back(*tokenizer.eos_id());
  text::DecodeStream stream(tokenizer, /*skip_special_tokens=*/true);
  const auto start = std::chrono::steady_clock::now();
  result.new_ids = models::generate(*model, result.prompt_ids, g, [&](int64_t token) {
    // A token beyond the tokenizer's (an embedding padded past it) has no
    // text.
    if (token < tokenizer.vocab_size()) {
      const std::string piece = stream.step(token);
      result.text += piece;
      if (on_text && !piece.empty()) on_text(piece);
    }
    return true;
  });
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mantissa::recipes
