#include "mantissa/models/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/models/kv_cache.h"

namespace mantissa::models {

namespace {

constexpr const char* kWhere = "generate";

void check_options(const GenerateOptions& o) {
  MANTISSA_CHECK(o.max_new_tokens >= 0, kWhere, "max_new_tokens must be >= 0, got {}",
                 o.max_new_tokens);
  MANTISSA_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, kWhere,
                 "temperature must be finite and >= 0, got {}", o.temperature);
  MANTISSA_CHECK(o.top_p > 0 && o.top_p <= 1, kWhere, "top_p must be in (0, 1], got {}", o.top_p);
}

// Row `t` of the batch-1 logits (1, T, V) as floats.
std::vector<float> last_row(const Tensor& logits) {
  return logits.select(0, 0).select(0, logits.size(1) - 1).to_vector<float>();
}

}  // namespace

int64_t choose_next_token(const std::vector<float>& logits, const GenerateOptions& o,
                          Generator& gen) {
  MANTISSA_CHECK(!logits.empty(), kWhere, "no logits to choose from");
  if (o.temperature == 0)  // the first maximum, as torch.argmax
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
  const size_t V = logits.size();
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  size_t keep = o.top_k > 0 ? std::min<size_t>(static_cast<size_t>(o.top_k), V) : V;
  // Softmax of the scaled logits over the kept tokens, in double.
  std::vector<double> p(keep);
  const double m = logits[order[0]] / o.temperature;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp(logits[order[i]] / o.temperature - m);
  if (o.top_p < 1) {
    // Keep the most likely tokens until their mass reaches top_p (at least one).
    double mass = 0;
    size_t n = 0;
    while (n < keep && (n == 0 || mass < o.top_p * total)) mass += p[n++];
    keep = n;
    total = mass;
  }
  double u = gen.uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0) return order[i];
  }
  return order[keep - 1];
}

std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                              const GenerateOptions& o, const TokenCallback& on_token) {
  check_options(o);
  MANTISSA_CHECK(!prompt_ids.empty(), kWhere, "the prompt is empty");
  const int64_t V = model.config().vocab_size;
  for (int64_t id : prompt_ids)
    MANTISSA_CHECK(id >= 0 && id < V, kWhere, "prompt token {} is outside the vocabulary [0, {})",
                   id, V);
  if (model.config().architecture == HfArchitecture::kGpt2) {
    const int64_t total = static_cast<int64_t>(prompt_ids.size()) + o.max_new_tokens;
    MANTISSA_CHECK(total <= model.config().max_position_embeddings, kWhere,
                   "prompt ({} tokens) + max_new_tokens ({}) exceeds GPT-2's n_positions {}",
                   prompt_ids.size(), o.max_new_tokens, model.config().max_position_embeddings);
  }
  std::vector<int64_t> out;
  if (o.max_new_tokens == 0) return out;
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Generator gen(o.seed);
  const Device device = model.input_embedding_weight().device();
  KvCache cache;
  Tensor input = tensor(prompt_ids, {1, static_cast<int64_t>(prompt_ids.size())}).to(device);
  try {
    for (int64_t step = 0; step < o.max_new_tokens; ++step) {
      const int64_t next = choose_next_token(last_row(model.forward(input, cache)), o, gen);
      out.push_back(next);
      const bool eos =
          std::find(o.eos_token_ids.begin(), o.eos_token_ids.end(), next) != o.eos_token_ids.end();
      if (on_token && !on_token(next)) break;
      if (eos) break;
      input = tensor(std::vector<int64_t>{next}, {1, 1}).to(device);
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  return out;
}

}  // namespace mantissa::models
