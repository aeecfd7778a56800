#include "mantissa/models/causal_lm.h"

#include "gpt2_layers.h"
#include "hf_rotary.h"
#include "llama_layers.h"
#include "mantissa/core/shape.h"
#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/dropout.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module_list.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/nn/rms_norm.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/linear.h"

namespace mantissa::models {

namespace {

constexpr const char* kWhere = "CausalLM";

// transformers' LlamaModel / GPT2Model: a container whose children CausalLM runs.
class Backbone : public nn::Module {
 public:
  explicit Backbone(std::string name) : nn::Module(std::move(name)) {}
  Tensor forward(const Tensor&) override {
    fail(kWhere, "the {} inside a CausalLM has no forward of its own; call the CausalLM", name());
  }
};

std::shared_ptr<nn::Embedding> make_embedding(const CausalLMOptions& o, int64_t rows, int64_t dim,
                                              double init_std) {
  return std::make_shared<nn::Embedding>(rows, dim, o.dtype, nullptr, init_std);
}

bool is_gpt2(const HfConfig& c) { return c.architecture == HfArchitecture::kGpt2; }

// transformers' name of a Llama-like model's decoder: "Qwen3ForCausalLM" -> "Qwen3Model".
std::string backbone_name(const HfConfig& c) {
  const std::string a = to_string(c.architecture);
  return a.substr(0, a.find("ForCausalLM")) + "Model";
}

void check_config(const HfConfig& c) {
  MANTISSA_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 &&
                     c.num_hidden_layers > 0 && c.num_attention_heads > 0 &&
                     c.num_key_value_heads > 0 && c.head_dim > 0 && c.max_position_embeddings > 0,
                 kWhere, "config sizes must be positive");
  MANTISSA_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, kWhere,
                 "num_key_value_heads {} must divide num_attention_heads {}", c.num_key_value_heads,
                 c.num_attention_heads);
  MANTISSA_CHECK(!is_gpt2(c) || c.head_dim * c.num_attention_heads == c.hidden_size, kWhere,
                 "GPT-2 needs head_dim * heads == hidden_size");
  MANTISSA_CHECK(c.head_dim % 2 == 0, kWhere, "head_dim {} must be even", c.head_dim);
}

}  // namespace

CausalLM::CausalLM(const HfConfig& c, const CausalLMOptions& options)
    : nn::Module("CausalLM"), config_(c), options_(options) {
  check_config(c);
  const DType dtype = options.dtype;
  LinearFactory make = options.make_linear;
  if (!make)
    make = [dtype](const std::string&, int64_t in, int64_t out, bool bias) {
      return std::make_shared<nn::Linear>(in, out, bias, dtype);
    };
  Generator* gen = options.dropout_gen;
  if (is_gpt2(c)) {
    auto t = register_module("transformer", std::make_shared<Backbone>("GPT2Model"));
    t->register_module("wte", make_embedding(options, c.vocab_size, c.hidden_size, 0.02));
    t->register_module("wpe",
                       make_embedding(options, c.max_position_embeddings, c.hidden_size, 0.02));
    t->register_module("drop", std::make_shared<nn::Dropout>(c.embedding_dropout, gen));
    auto h = t->register_module("h", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      h->push_back(std::make_shared<GPT2Block>(c, i, layer_path(i), make, dtype, gen));
    t->register_module("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.hidden_size},
                                                               c.norm_eps, true, true, dtype));
  } else {
    auto m = register_module("model", std::make_shared<Backbone>(backbone_name(c)));
    m->register_module("embed_tokens", make_embedding(options, c.vocab_size, c.hidden_size, 1.0));
    auto rotary = std::make_shared<RotaryTable>(c.rope, c.head_dim);
    auto layers = m->register_module("layers", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      layers->push_back(
          std::make_shared<LlamaDecoderLayer>(c, layer_path(i), make, rotary, dtype, gen));
    m->register_module("norm", std::make_shared<nn::RMSNorm>(c.hidden_size, c.norm_eps, dtype));
  }
  if (!c.tie_word_embeddings)
    register_module("lm_head", make("lm_head", c.hidden_size, c.vocab_size, false));
  // The factory is for construction only (the loader's refers to state that ends with the load).
  options_.make_linear = nullptr;
}

std::string CausalLM::layer_path(int64_t i) const {
  return (is_gpt2(config_) ? "transformer.h." : "model.layers.") + std::to_string(i);
}

nn::Module& CausalLM::decoder_layers() const {
  return is_gpt2(config_) ? *child("transformer")->child("h") : *child("model")->child("layers");
}

Tensor CausalLM::input_embedding_weight() const {
  const auto emb = is_gpt2(config_) ? child("transformer")->child_as<nn::Embedding>("wte")
                                    : child("model")->child_as<nn::Embedding>("embed_tokens");
  return emb->weight;
}

void CausalLM::check_tokens(const Tensor& tokens) const {
  MANTISSA_CHECK(tokens.dim() == 2 && tokens.dtype() == kInt64, kWhere,
                 "expected int64 tokens of shape (batch, time), got {} {}", tokens.dtype().name(),
                 shape_str(tokens.shape()));
  MANTISSA_CHECK(tokens.size(1) >= 1, kWhere, "the sequence is empty");
}

Tensor CausalLM::embed(const Tensor& tokens, int64_t offset) {
  const int64_t T = tokens.size(1);
  if (!is_gpt2(config_)) return child("model")->child("embed_tokens")->forward(tokens);
  auto t = child("transformer");
  MANTISSA_CHECK(offset + T <= config_.max_position_embeddings, kWhere,
                 "position {} exceeds GPT-2's n_positions {} (its learned position table)",
                 offset + T - 1, config_.max_position_embeddings);
  const Tensor pos =
      arange(static_cast<double>(offset), static_cast<double>(offset + T)).to(tokens.device());
  return t->child("drop")->forward(
      add(t->child("wte")->forward(tokens), t->child("wpe")->forward(pos)));
}

Tensor CausalLM::head(const Tensor& hidden) {
  const Tensor x = is_gpt2(config_) ? child("transformer")->child("ln_f")->forward(hidden)
                                    : child("model")->child("norm")->forward(hidden);
  // linear (x W^T) takes the embedding as it is stored, so autocast casts the parameter itself
  // rather than a transposed view that it would first copy whole, once per decoded token.
  if (config_.tie_word_embeddings) return linear(x, input_embedding_weight());
  return child("lm_head")->forward(x);
}

Tensor CausalLM::forward(const Tensor& tokens) {
  check_tokens(tokens);
  Tensor x = embed(tokens, 0);
  for (const auto& [name, layer] : decoder_layers().child_slots())
    x = options_.activation_checkpointing && is_training() ? nn::checkpoint(*layer, x)
                                                           : layer->forward(x);
  return head(x);
}

Tensor CausalLM::forward(const Tensor& tokens, KvCache& cache) {
  check_tokens(tokens);
  const int64_t L = config_.num_hidden_layers;
  if (cache.keys.empty() && cache.values.empty()) {
    cache.keys.resize(static_cast<size_t>(L));
    cache.values.resize(static_cast<size_t>(L));
  }
  MANTISSA_CHECK(static_cast<int64_t>(cache.keys.size()) == L &&
                     static_cast<int64_t>(cache.values.size()) == L,
                 kWhere, "the cache holds {} layers, the model has {}", cache.keys.size(), L);
  const int64_t offset = cache.length();
  MANTISSA_CHECK(offset == 0 || cache.keys.front().view().size(0) == tokens.size(0), kWhere,
                 "the cache holds batch {}, the tokens batch {}",
                 offset ? cache.keys.front().view().size(0) : 0, tokens.size(0));
  Tensor x = embed(tokens, offset);
  size_t i = 0;
  for (const auto& [name, layer] : decoder_layers().child_slots()) {
    auto* decoder = dynamic_cast<DecoderLayer*>(layer.get());
    MANTISSA_CHECK(decoder != nullptr, kWhere,
                   "decoder layer {} was replaced by a {}; cached decoding needs the model's own "
                   "layer type",
                   name, layer->name());
    x = decoder->step(x, LayerStep{offset, &cache.keys[i], &cache.values[i]});
    ++i;
  }
  return head(x);
}

}  // namespace mantissa::models
