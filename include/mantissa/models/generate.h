#pragma once
// Text generation with a CausalLM: incremental decoding over a KV cache (mantissa/models/
// kv_cache.h). The prompt runs once; each new token then costs one position's forward.
//
//   GenerateOptions o{.max_new_tokens = 64, .temperature = 0.7, .top_p = 0.9, .seed = 1};
//   o.eos_token_ids = model->config().eos_token_ids;
//   auto ids = models::generate(*model, prompt, o, [&](int64_t t) { print(t); return true; });
//
// Greedy decoding (temperature 0) picks the first largest logit at each step, as transformers'
// generate(do_sample=False). Sampling applies, in transformers' order, temperature, top-k and
// top-p (nucleus: the smallest set of most likely tokens whose probabilities reach top_p) and
// draws from a Generator seeded with `seed`. Runs without gradients and in eval mode (the
// model's mode is restored after); the caller's autocast or precision context applies.
#include <cstdint>
#include <functional>
#include <vector>

#include "mantissa/models/causal_lm.h"

namespace mantissa::models {

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // <= 0: no top-k cut
  double top_p = 1.0;        // in (0, 1]; 1: no nucleus cut
  uint64_t seed = 0;         // of the sampling generator
  // Generation stops after producing one of these (it is part of the result).
  std::vector<int64_t> eos_token_ids;
};

// Called with each new token as it is chosen; returning false stops generation after it.
using TokenCallback = std::function<bool(int64_t token)>;

// The tokens generated after `prompt_ids` (not including the prompt): at most max_new_tokens,
// fewer when an end token or the callback stops it. Throws for an empty prompt, token ids
// outside the vocabulary, bad options, or (GPT-2) a length beyond n_positions.
std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                              const GenerateOptions& options, const TokenCallback& on_token = {});

// The next token from one row of logits under `options` (greedy or sampled with `gen`):
// generate's choice at each step, exposed for tests and for callers with their own loop.
int64_t choose_next_token(const std::vector<float>& logits, const GenerateOptions& options,
                          Generator& gen);

}  // namespace mantissa::models
