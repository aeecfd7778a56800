#include "mantissa/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/init.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/matmul.h"

namespace mantissa::models {

GPT::GPT(const GPTConfig& c, Generator* dropout_gen) : Module("GPT"), config_(c) {
  MANTISSA_CHECK(c.vocab > 0 && c.context > 0 && c.layers > 0 && c.width > 0 && c.heads > 0, "GPT",
                 "sizes must be positive (vocab {}, context {}, layers {}, width {}, heads {})",
                 c.vocab, c.context, c.layers, c.width, c.heads);
  MANTISSA_CHECK(c.width % c.heads == 0, "GPT", "width {} must be divisible by heads {}", c.width,
                 c.heads);
  register_module("wte", std::make_shared<nn::Embedding>(c.vocab, c.width, c.dtype, nullptr, 0.02));
  register_module("wpe",
                  std::make_shared<nn::Embedding>(c.context, c.width, c.dtype, nullptr, 0.02));
  register_module("drop", std::make_shared<nn::Dropout>(c.dropout, dropout_gen));
  const double resid_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    auto b = std::make_shared<nn::TransformerBlock>(
        nn::TransformerBlockOptions{.embed_dim = c.width,
                                    .num_heads = c.heads,
                                    .mlp_ratio = 4.0,
                                    .dropout = c.dropout,
                                    .causal = true,
                                    .gelu_approximate = "tanh",
                                    .dtype = c.dtype,
                                    .gen = dropout_gen,
                                    .in_proj_linear = true});
    nn::init::normal_(b->attn()->input_projection_weight(), 0.0, 0.02);
    nn::init::normal_(b->attn()->out_proj()->weight, 0.0, resid_std);
    nn::init::normal_(b->mlp()->fc1()->weight, 0.0, 0.02);
    nn::init::zeros_(b->mlp()->fc1()->bias);
    nn::init::normal_(b->mlp()->fc2()->weight, 0.0, resid_std);
    nn::init::zeros_(b->mlp()->fc2()->bias);
    register_module(block_name(i), b);
  }
  register_module("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.width}, 1e-5, true,
                                                          true, c.dtype));
  if (!c.tie_embeddings) {
    lm_head = register_parameter("lm_head", empty({c.vocab, c.width}, c.dtype));
    nn::init::normal_(lm_head, 0.0, 0.02);
  }
}

std::shared_ptr<nn::TransformerBlock> GPT::block(int64_t i) const {
  MANTISSA_CHECK(i >= 0 && i < config_.layers, "GPT", "block {} is out of range for {} layers", i,
                 config_.layers);
  return child_as<nn::TransformerBlock>(block_name(i));
}

const Tensor& GPT::positions_on(const Device& device) {
  // Kept rather than copied to a GPU per step: that copy would cost a transfer each forward,
  // and a CUDA graph cannot capture it (mantissa/core/cuda_graph.h).
  if (!positions_.defined() || positions_.device() != device)
    positions_ = arange(static_cast<double>(config_.context)).to(device);
  return positions_;
}

Tensor GPT::forward(const Tensor& tokens) {
  MANTISSA_CHECK(tokens.dim() == 2 && (tokens.dtype() == kInt64 || tokens.dtype() == kInt32), "GPT",
                 "expected int64 tokens of shape (batch, time), got {} {}", tokens.dtype().name(),
                 shape_str(tokens.shape()));
  const int64_t T = tokens.size(1);
  MANTISSA_CHECK(T >= 1 && T <= config_.context, "GPT",
                 "sequence length {} must be in [1, context = {}]", T, config_.context);
  Tensor x = add(child("wte")->forward(tokens),
                 child("wpe")->forward(positions_on(tokens.device()).narrow(0, 0, T)));  // +(T,W)
  x = child("drop")->forward(x);
  for (int64_t i = 0; i < config_.layers; ++i) {
    nn::Module& block = *child(block_name(i));
    x = config_.activation_checkpointing ? nn::checkpoint(block, x) : block.forward(x);
  }
  x = child("ln_f")->forward(x);
  const Tensor head = lm_head.defined() ? lm_head : wte()->weight;
  return matmul(x, head.t());
}

bool GPT::kv_cacheable() const {
  for (int64_t i = 0; i < config_.layers; ++i) {
    auto b = std::dynamic_pointer_cast<nn::TransformerBlock>(child(block_name(i)));
    if (!b || !b->causal() || !std::dynamic_pointer_cast<nn::MultiheadAttention>(b->child("attn")))
      return false;
  }
  return true;
}

Tensor GPT::forward(const Tensor& tokens, KvCache& cache) {
  MANTISSA_CHECK(tokens.dim() == 2 && (tokens.dtype() == kInt64 || tokens.dtype() == kInt32), "GPT",
                 "expected int64 tokens of shape (batch, time), got {} {}", tokens.dtype().name(),
                 shape_str(tokens.shape()));
  MANTISSA_CHECK(kv_cacheable(), "GPT",
                 "a KV cache needs causal TransformerBlocks with MultiheadAttention in every block "
                 "slot");
  const int64_t start = cache.length(), T = tokens.size(1);
  MANTISSA_CHECK(T >= 1 && start + T <= config_.context, "GPT",
                 "cached positions {} + new {} must be in [1, context = {}]", start, T,
                 config_.context);
  if (start == 0) {
    cache.keys.assign(static_cast<size_t>(config_.layers), nn::KvBuffer(config_.context));
    cache.values.assign(static_cast<size_t>(config_.layers), nn::KvBuffer(config_.context));
  }
  MANTISSA_CHECK(static_cast<int64_t>(cache.keys.size()) == config_.layers &&
                     cache.values.size() == cache.keys.size(),
                 "GPT", "the KV cache holds {} layers, the model {}", cache.keys.size(),
                 config_.layers);
  NoGradGuard no_grad;
  Tensor x = add(child("wte")->forward(tokens),
                 child("wpe")->forward(positions_on(tokens.device()).narrow(0, start, T)));
  x = child("drop")->forward(x);
  for (int64_t i = 0; i < config_.layers; ++i) {
    const auto l = static_cast<size_t>(i);
    x = child_as<nn::TransformerBlock>(block_name(i))
            ->forward_cached(x, cache.keys[l], cache.values[l]);
  }
  x = child("ln_f")->forward(x);
  const Tensor head = lm_head.defined() ? lm_head : wte()->weight;
  return matmul(x, head.t());
}

Tensor GPT::loss(const Tensor& logits, const Tensor& targets, Reduction reduction) {
  const int64_t V = logits.size(logits.dim() - 1);
  // Low-precision logits are widened to fp32 for the loss (as autocast runs cross_entropy);
  // 64-true's stay float64: narrowing them made the reference precision's losses fp32 values.
  const Tensor flat = logits.reshape({-1, V});
  return cross_entropy(flat.dtype() == kFloat64 ? flat : flat.to(kFloat32), targets.reshape({-1}),
                       {.reduction = reduction});
}

std::string GPT::sample(const std::string& prompt, int64_t max_new_tokens, double temperature,
                        int64_t top_k, Generator* gen, const std::function<bool()>& stop) {
  MANTISSA_CHECK(max_new_tokens >= 0, "GPT::sample", "max_new_tokens must be >= 0, got {}",
                 max_new_tokens);
  MANTISSA_CHECK(std::isfinite(temperature) && temperature >= 0, "GPT::sample",
                 "temperature must be finite and >= 0, got {}", temperature);
  MANTISSA_CHECK(config_.vocab <= 256, "GPT::sample", "sample() decodes bytes; vocab is {}",
                 config_.vocab);
  NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  Generator& g = gen ? *gen : default_generator();
  // An empty prompt starts from a newline (a natural document boundary in most text).
  std::string text = prompt.empty() ? std::string("\n") : prompt;
  const size_t skip = prompt.empty() ? 1 : 0;
  std::vector<double> p(static_cast<size_t>(config_.vocab));
  std::vector<int64_t> order(p.size());
  const auto context = static_cast<size_t>(config_.context);
  const bool cached = kv_cacheable();
  KvCache cache;  // holds text[0, cache.length()) while the text fits the context
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    if (stop && stop()) break;
    const bool incremental = cached && text.size() <= context;
    if (!incremental) cache.clear();
    // Incremental: the bytes after the cached ones (the prompt, then one); else the window.
    const size_t first = incremental ? static_cast<size_t>(cache.length())
                                     : text.size() - std::min(text.size(), context);
    const size_t n = text.size() - first;
    std::vector<int64_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = static_cast<unsigned char>(text[first + i]);
    // The prompt goes where the weights are (a GPU after Trainer(accelerator="gpu")).
    const Tensor input = tensor(ids, {1, static_cast<int64_t>(n)}).to(wte()->weight.device());
    Tensor logits = incremental ? forward(input, cache) : forward(input);
    std::vector<double> l =
        logits.select(1, static_cast<int64_t>(n) - 1).select(0, 0).to_vector<double>();
    std::iota(order.begin(), order.end(), 0);
    // Stable: ties keep the lower byte first, so greedy picks the first maximum (argmax).
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
    int64_t next = order[0];
    if (temperature > 0) {
      const size_t k =
          top_k > 0 ? std::min<size_t>(static_cast<size_t>(top_k), l.size()) : l.size();
      const double m = l[order[0]];
      double s = 0;
      for (size_t i = 0; i < k; ++i) s += (p[i] = std::exp((l[order[i]] - m) / temperature));
      double u = g.uniform() * s;
      next = order[k - 1];
      for (size_t i = 0; i < k; ++i) {
        u -= p[i];
        if (u < 0) {
          next = order[i];
          break;
        }
      }
    }
    text.push_back(static_cast<char>(static_cast<unsigned char>(next)));
  }
  train(was_training);
  return text.substr(skip);
}

}  // namespace mantissa::models
