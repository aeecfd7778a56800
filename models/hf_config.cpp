// config.json -> HfConfig. Every key of the file is claimed exactly once: read by a typed getter,
// checked against the only value mantissa implements, or listed as not changing the forward.
// What is left over is refused by name, so nothing that alters the math is ignored in silence.
#include "mantissa/models/hf_config.h"

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

constexpr const char* kWhere = "hf_config";
using nlohmann::json;

// Keys any architecture may carry that do not change the forward pass: bookkeeping, output
// switches, label maps, tokenizer hints and generation defaults (generate's options decide
// those).
const std::set<std::string>& harmless_keys() {
  static const std::set<std::string> keys = {
      "_name_or_path", "transformers_version", "use_cache", "initializer_range",
      "output_attentions", "output_hidden_states", "return_dict", "torchscript", "use_bfloat16",
      "tf_legacy_loss", "is_encoder_decoder", "is_decoder", "cross_attention_hidden_size",
      "chunk_size_feed_forward", "id2label", "label2id", "problem_type", "finetuning_task",
      "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params",
      "num_labels",
      // generation defaults (older files keep them in config.json)
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
      "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
      "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
      "suppress_tokens", "begin_suppress_tokens"};
  return keys;
}

// The file's object with a record of the keys a reader claimed.
class Fields {
 public:
  Fields(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  const std::string& source() const { return source_; }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  // Claims a key whose value (if any) needs no reading.
  void claim(const std::string& key) { claimed_.insert(key); }

  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    fail(kWhere, "{}: field '{}' {}", source_, key, what);
  }
  const json& raw(const std::string& key) {
    claim(key);
    return j_.at(key);
  }
  int64_t integer(const std::string& key, int64_t min, int64_t max) {
    claim(key);
    if (!has(key)) bad(key, "is missing");
    const json& v = j_.at(key);
    if (!v.is_number_integer()) bad(key, "must be an integer, got " + io::json_excerpt(v));
    const int64_t x = v.get<int64_t>();
    if (x < min || x > max) bad(key, fmt::format("must be in [{}, {}], got {}", min, max, x));
    return x;
  }
  std::optional<int64_t> optional_integer(const std::string& key, int64_t min, int64_t max) {
    claim(key);
    if (!has(key)) return std::nullopt;
    return integer(key, min, max);
  }
  double number(const std::string& key, double min, double max) {
    claim(key);
    if (!has(key)) bad(key, "is missing");
    return number_of(j_.at(key), key, min, max);
  }
  double number_or(const std::string& key, double fallback, double min, double max) {
    claim(key);
    return has(key) ? number(key, min, max) : fallback;
  }
  double number_of(const json& v, const std::string& key, double min, double max) const {
    if (!v.is_number()) bad(key, "must be a number, got " + io::json_excerpt(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || x > max)
      bad(key, fmt::format("must be in [{}, {}], got {}", min, max, x));
    return x;
  }
  bool boolean_or(const std::string& key, bool fallback) {
    claim(key);
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) bad(key, "must be true or false, got " + io::json_excerpt(v));
    return v.get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) {
    claim(key);
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_string()) bad(key, "must be a string, got " + io::json_excerpt(v));
    return v.get<std::string>();
  }
  // A key mantissa implements only at one value (or absent / null).
  void require_value(const std::string& key, const json& only, const std::string& why) {
    claim(key);
    if (!has(key) || j_.at(key) == only) return;
    bad(key, fmt::format("is {}; mantissa implements only {} ({})", io::json_excerpt(j_.at(key)),
                         only.dump(), why));
  }
  // Throws naming the first key nobody claimed.
  void refuse_unclaimed() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (claimed_.count(it.key()) || harmless_keys().count(it.key())) continue;
      fail(kWhere,
           "{}: field {} is not known to mantissa's loader; it may change the model's math, so "
           "the model is refused (docs/pretrained_models.md lists the fields read)",
           source_, quote_untrusted(it.key()));
    }
  }

 private:
  const json& j_;
  std::string source_;
  std::set<std::string> claimed_;
};

constexpr int64_t kMaxSize = int64_t{1} << 40;

HfArchitecture architecture_of(Fields& f) {
  // In HfArchitecture's order.
  static const std::vector<std::pair<std::string, std::string>> known = {
      {"LlamaForCausalLM", "llama"},
      {"Qwen2ForCausalLM", "qwen2"},
      {"GPT2LMHeadModel", "gpt2"},
      {"Qwen3ForCausalLM", "qwen3"},
      {"MistralForCausalLM", "mistral"}};
  const std::string model_type = f.string_or("model_type", "");
  std::string arch;
  if (f.has("architectures")) {
    const json& a = f.raw("architectures");
    if (!a.is_array() || a.size() != 1 || !a[0].is_string())
      f.bad("architectures", "must be a list of one architecture name, got " + io::json_excerpt(a));
    arch = a[0].get<std::string>();
  } else {
    f.claim("architectures");
    for (const auto& [name, type] : known)
      if (type == model_type) arch = name;
    if (arch.empty())
      fail(kWhere,
           "{}: no 'architectures' entry and model_type {} is not one mantissa loads (llama, "
           "qwen2, qwen3, mistral, gpt2)",
           f.source(), quote_untrusted(model_type));
  }
  for (size_t i = 0; i < known.size(); ++i) {
    if (known[i].first != arch) continue;
    if (!model_type.empty() && model_type != known[i].second)
      f.bad("model_type", fmt::format("is {} but architectures names {} (model_type '{}')",
                                      quote_untrusted(model_type), arch, known[i].second));
    return static_cast<HfArchitecture>(i);
  }
  fail(kWhere,
       "{}: architecture {} is not supported; mantissa loads LlamaForCausalLM, Qwen2ForCausalLM, "
       "Qwen3ForCausalLM, MistralForCausalLM and GPT2LMHeadModel",
       f.source(), quote_untrusted(arch));
}

std::optional<DType> dtype_of(Fields& f) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    const std::string s = f.string_or(key, "");
    if (s.empty()) continue;
    if (s == "float32") return kFloat32;
    if (s == "bfloat16") return kBFloat16;
    if (s == "float16") return kFloat16;
    f.bad(key, "is " + quote_untrusted(s) + "; expected float32, bfloat16 or float16");
  }
  return std::nullopt;
}

void read_token_ids(Fields& f, HfConfig& c) {
  c.bos_token_id = f.optional_integer("bos_token_id", 0, kMaxSize);
  c.pad_token_id = f.optional_integer("pad_token_id", 0, kMaxSize);
  f.claim("eos_token_id");
  if (!f.has("eos_token_id")) return;
  const json& v = f.raw("eos_token_id");
  const json list = v.is_array() ? v : json::array({v});
  for (const json& e : list) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      f.bad("eos_token_id", "must be a token id or a list of them, got " + io::json_excerpt(v));
    c.eos_token_ids.push_back(e.get<int64_t>());
  }
}

// The rope type, theta and factors from rope_parameters (transformers 5) or rope_theta +
// rope_scaling (earlier files). As in transformers 5, a rope_scaling that is neither null nor
// {} replaces rope_parameters whole (its rope_theta included: theta then comes from
// rope_scaling.rope_theta, else the top-level rope_theta, else 10000).
RopeConfig read_rope(Fields& f) {
  RopeConfig r;
  f.claim("rope_parameters");
  f.claim("rope_scaling");
  f.claim("rope_theta");
  const bool scaling_set = f.has("rope_scaling") && f.raw("rope_scaling") != json::object();
  const std::string key = scaling_set ? "rope_scaling" : "rope_parameters";
  r.theta = f.number_or("rope_theta", 10000.0, 1e-300, 1e300);
  if (!f.has(key)) return r;
  // Every refusal below names the key read and, when both are set, why it is that one.
  const std::string note =
      scaling_set && f.has("rope_parameters")
          ? " (rope_scaling replaces rope_parameters when both are set, as in transformers)"
          : "";
  auto bad = [&](const std::string& why) { f.bad(key, why + note); };
  const json& p = f.raw(key);
  if (!p.is_object()) bad("must be an object or null, got " + io::json_excerpt(p));
  std::set<std::string> used;
  auto get = [&](const std::string& k) -> const json* {
    used.insert(k);
    return p.contains(k) && !p.at(k).is_null() ? &p.at(k) : nullptr;
  };
  auto num = [&](const std::string& k, double min, double max) {
    const json* v = get(k);
    if (!v) bad("lacks '" + k + "'");
    return f.number_of(*v, key + "." + k, min, max);
  };
  if (const json* t = get("rope_theta"))
    r.theta = f.number_of(*t, key + ".rope_theta", 1e-300, 1e300);
  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (const json* t = get(k)) {
      if (!t->is_string()) bad(std::string(k) + " must be a string");
      type = t->get<std::string>();
      break;
    }
  }
  if (type == "default") {
    r.type = RopeConfig::Type::kDefault;
  } else if (type == "linear") {
    r.type = RopeConfig::Type::kLinear;
    r.factor = num("factor", 1e-300, 1e300);
  } else if (type == "llama3") {
    r.type = RopeConfig::Type::kLlama3;
    r.factor = num("factor", 1e-300, 1e300);
    r.low_freq_factor = num("low_freq_factor", 1e-300, 1e300);
    r.high_freq_factor = num("high_freq_factor", 1e-300, 1e300);
    if (r.high_freq_factor <= r.low_freq_factor)
      bad(fmt::format("high_freq_factor {} must exceed low_freq_factor {}", r.high_freq_factor,
                      r.low_freq_factor));
    const json* o = get("original_max_position_embeddings");
    if (!o || !o->is_number_integer() || o->get<int64_t>() < 1)
      bad("original_max_position_embeddings must be a positive integer");
    r.original_max_position_embeddings = o->get<int64_t>();
  } else {
    bad("has rope type " + quote_untrusted(type) +
        "; mantissa implements default, linear and llama3");
  }
  if (const json* prf = get("partial_rotary_factor")) {
    if (f.number_of(*prf, key + ".partial_rotary_factor", 0, 1e300) != 1.0)
      bad("has partial_rotary_factor " + io::json_excerpt(*prf) +
          "; mantissa implements only 1.0 (rotary embeddings over the whole head)");
  }
  for (auto it = p.begin(); it != p.end(); ++it)
    if (!used.count(it.key()))
      bad("has " + quote_untrusted(it.key()) + ", which the " + type +
          " rope type does not use; refused rather than ignored");
  return r;
}

// Qwen2's and Qwen3's sliding window: used only when use_sliding_window is true, which
// mantissa refuses; without it the window and the layer count it starts at are unused.
void refuse_qwen_sliding_window(Fields& f) {
  if (f.boolean_or("use_sliding_window", false))
    f.bad("use_sliding_window", "is true; mantissa implements only full attention");
  f.claim("sliding_window");
  f.claim("max_window_layers");
  if (f.has("layer_types")) {
    const json& lt = f.raw("layer_types");
    if (!lt.is_array()) f.bad("layer_types", "must be a list");
    for (const json& t : lt)
      if (t != "full_attention")
        f.bad("layer_types",
              "holds " + io::json_excerpt(t) + "; mantissa implements only full_attention layers");
  }
  f.claim("layer_types");
}

// The fields that differ between the Llama-like architectures: biases, Qwen3's per-head norms
// and Mistral's sliding window.
void read_llama_variant(Fields& f, HfConfig& c) {
  switch (c.architecture) {
    case HfArchitecture::kQwen2:
      c.qkv_bias = true;
      refuse_qwen_sliding_window(f);
      break;
    case HfArchitecture::kQwen3:
      c.qkv_bias = c.o_bias = f.boolean_or("attention_bias", false);
      c.qk_norm = true;
      refuse_qwen_sliding_window(f);
      break;
    case HfArchitecture::kMistral:
      c.sliding_window = f.optional_integer("sliding_window", 1, kMaxSize).value_or(0);
      break;
    default:
      c.qkv_bias = c.o_bias = f.boolean_or("attention_bias", false);
      c.mlp_bias = f.boolean_or("mlp_bias", false);
  }
}

void read_llama_like(Fields& f, HfConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxSize);
  c.hidden_size = f.integer("hidden_size", 1, kMaxSize);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxSize);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1, 1 << 20);
  c.num_attention_heads = f.integer("num_attention_heads", 1, 1 << 20);
  c.num_key_value_heads =
      f.optional_integer("num_key_value_heads", 1, 1 << 20).value_or(c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    f.bad("num_key_value_heads", fmt::format("{} must divide num_attention_heads {}",
                                             c.num_key_value_heads, c.num_attention_heads));
  const auto head_dim = f.optional_integer("head_dim", 2, 1 << 20);
  if (!head_dim && c.hidden_size % c.num_attention_heads != 0)
    f.bad("hidden_size", fmt::format("{} is not divisible by num_attention_heads {} and no "
                                     "head_dim is given",
                                     c.hidden_size, c.num_attention_heads));
  c.head_dim = head_dim.value_or(c.hidden_size / c.num_attention_heads);
  if (c.head_dim % 2 != 0)
    f.bad("head_dim", fmt::format("{} must be even for rotary embeddings", c.head_dim));
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kMaxSize);
  c.norm_eps = f.number("rms_norm_eps", 0, 1);
  c.rope = read_rope(f);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  const std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu")
    f.bad("hidden_act", "is " + quote_untrusted(act) + "; mantissa implements only silu");
  c.activation = "silu";
  c.attention_dropout = f.number_or("attention_dropout", 0.0, 0.0, 1.0 - 1e-12);
  // Splitting the projections into slices (pretraining_tp) changes only the summation order.
  f.claim("pretraining_tp");
  read_llama_variant(f, c);
}

void read_gpt2(Fields& f, HfConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxSize);
  c.hidden_size = f.integer("n_embd", 1, kMaxSize);
  c.num_hidden_layers = f.integer("n_layer", 1, 1 << 20);
  c.num_attention_heads = f.integer("n_head", 1, 1 << 20);
  if (c.hidden_size % c.num_attention_heads != 0)
    f.bad("n_embd",
          fmt::format("{} is not divisible by n_head {}", c.hidden_size, c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.max_position_embeddings = f.integer("n_positions", 1, kMaxSize);
  f.claim("n_ctx");  // an older alias the model does not read
  c.intermediate_size = f.optional_integer("n_inner", 1, kMaxSize).value_or(4 * c.hidden_size);
  c.norm_eps = f.number_or("layer_norm_epsilon", 1e-5, 0, 1);
  const std::string act = f.string_or("activation_function", "gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.activation = "gelu_tanh";
  else if (act == "gelu")
    c.activation = "gelu";
  else
    f.bad("activation_function", "is " + quote_untrusted(act) +
                                     "; mantissa implements gelu_new, gelu_pytorch_tanh and gelu");
  c.attention_dropout = f.number_or("attn_pdrop", 0.1, 0.0, 1.0 - 1e-12);
  c.residual_dropout = f.number_or("resid_pdrop", 0.1, 0.0, 1.0 - 1e-12);
  c.embedding_dropout = f.number_or("embd_pdrop", 0.1, 0.0, 1.0 - 1e-12);
  c.scale_attn_weights = f.boolean_or("scale_attn_weights", true);
  c.scale_attn_by_inverse_layer_idx = f.boolean_or("scale_attn_by_inverse_layer_idx", false);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  f.require_value("reorder_and_upcast_attn", false,
                  "attention computed in the inputs' dtype with an fp32 softmax");
  f.require_value("add_cross_attention", false, "a decoder-only model");
  // The sequence-summary head belongs to GPT2DoubleHeadsModel, not to the LM head model.
  for (const char* k : {"summary_type", "summary_use_proj", "summary_activation",
                        "summary_proj_to_labels", "summary_first_dropout"})
    f.claim(k);
}

}  // namespace

std::string to_string(HfArchitecture a) {
  switch (a) {
    case HfArchitecture::kLlama:
      return "LlamaForCausalLM";
    case HfArchitecture::kQwen2:
      return "Qwen2ForCausalLM";
    case HfArchitecture::kGpt2:
      return "GPT2LMHeadModel";
    case HfArchitecture::kQwen3:
      return "Qwen3ForCausalLM";
    case HfArchitecture::kMistral:
      return "MistralForCausalLM";
  }
  return "?";
}

HfConfig parse_hf_config(const std::string& text, const std::string& source) {
  json j = io::parse_untrusted_json(text, kWhere, source);
  if (!j.is_object()) fail(kWhere, "{}: expected a JSON object", source);
  Fields f(j, source);
  HfConfig c;
  c.architecture = architecture_of(f);
  c.torch_dtype = dtype_of(f);
  read_token_ids(f, c);
  f.require_value("quantization_config", nullptr,
                  "pre-quantized checkpoints are not loaded; quantize at load time instead");
  f.require_value("auto_map", nullptr, "custom modelling code is not run");
  f.require_value("pruned_heads", json::object(), "every attention head present");
  if (c.architecture == HfArchitecture::kGpt2)
    read_gpt2(f, c);
  else
    read_llama_like(f, c);
  f.refuse_unclaimed();
  return c;
}

HfConfig load_hf_config(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  MANTISSA_CHECK(in.good(), kWhere, "cannot open {}: a model directory needs its config.json",
                 quote_untrusted(path));
  // A config is a few KB; a huge file is not one.
  in.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(in.tellg());
  MANTISSA_CHECK(size >= 0 && size <= 16 << 20, kWhere, "{}: {} bytes is too large for a config",
                 quote_untrusted(path), size);
  in.seekg(0);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_hf_config(ss.str(), path);
}

}  // namespace mantissa::models
