#include "mantissa/models/hf_loader.h"

#include <malloc.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <unordered_map>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/shape.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/models/hf_config.h"
#include "mantissa/models/hf_weights.h"
#include "mantissa/nn/init.h"
#include "mantissa/nn/linear.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "train/parameter_range.h"

namespace mantissa::models {

namespace {

constexpr const char* kWhere = "hf_loader";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Tensors of transformers' files that are not parameters of the model: GPT-2's causal-mask
// buffers (a lower-triangular constant and -1e4) and the rotary frequencies older Llama files
// stored (mantissa computes them from config.json).
bool is_known_non_parameter(HfArchitecture a, const std::string& name) {
  if (a == HfArchitecture::kGpt2)
    return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
  return ends_with(name, ".rotary_emb.inv_freq");
}

// Returns the heap pages freed so far to the OS. Quantizing a layer frees its float32 weight
// and the quantizer's scratch (much of it in worker threads' heaps), which glibc otherwise
// keeps: over a model those pages added about half the final size to the peak of a load.
void give_back_free_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

class Loader {
 public:
  Loader(const std::string& dir, const HfConfig& config, const HfLoadOptions& options)
      : dir_(dir), config_(config), options_(options), weights_(dir) {
    // GPT-2 files saved from GPT2Model (the hub's "gpt2") name the parameters without the
    // "transformer." prefix of GPT2LMHeadModel.
    bool prefixed = true;
    if (config.architecture == HfArchitecture::kGpt2) {
      prefixed = false;
      for (const std::string& n : weights_.names())
        if (starts_with(n, "transformer.")) prefixed = true;
    }
    for (const std::string& n : weights_.names()) {
      if (is_known_non_parameter(config.architecture, n)) continue;
      const std::string key = prefixed || n == "lm_head.weight" ? n : "transformer." + n;
      file_name_[key] = n;
    }
    if (!options.quantization.empty())
      plugin_ = std::make_unique<train::BitsandbytesPrecision>(options.quantization,
                                                               options.quant_compute_dtype);
  }

  // Checks that the files hold `key` in a supported dtype and with the model's shape `want`
  // ([out, in] for a GPT-2 Conv1D weight, stored [in, out]); returns its name in the files.
  // Called before the model allocates the tensor, so a config.json whose sizes the files
  // contradict is refused before it costs any memory.
  const std::string& check(const std::string& key, const Shape& want_in_model) const {
    const std::string& name = file_name(key);
    const io::MappedSafetensors& file = weights_.file_of(name);
    const io::SafetensorsTensorInfo& info = file.at(name);
    check_dtype(file, info);
    const bool conv1d = is_conv1d_weight(config_.architecture, key);
    const Shape want = conv1d && want_in_model.size() == 2
                           ? Shape{want_in_model[1], want_in_model[0]}
                           : want_in_model;
    MANTISSA_CHECK(info.shape == want, kWhere,
                   "'{}': tensor {} has shape {}, but config.json implies {}{}", file.path(),
                   quote_untrusted(name), shape_str(info.shape), shape_str(want),
                   conv1d ? " (GPT-2 Conv1D, stored [in, out])" : "");
    return name;
  }

  // Copies the file's tensor for model key `key` into dst (GPT-2 Conv1D weights transposed).
  // NaN or inf there is refused, naming the file and the tensor: a fine-tune's first step
  // blamed the learning rate, and generate printed the prompt alone.
  void copy(const std::string& key, Tensor& dst) {
    const std::string& name = check(key, dst.shape());
    const io::MappedSafetensors& file = weights_.file_of(name);
    NoGradGuard no_grad;
    if (is_conv1d_weight(config_.architecture, key))
      dst.copy_(file.read(name).t());
    else
      file.read_into(name, dst);
    if (const std::optional<double> bad = train::non_finite_value(dst))
      fail(kWhere,
           "'{}': tensor {} holds a non-finite value ({}): the file is damaged, or the run "
           "that wrote it had diverged; download or write the model again",
           file.path(), quote_untrusted(name), *bad);
    used_.insert(name);
  }

  // The embedding tables, checked before the model is built (they are its largest tensors).
  void check_embeddings() const {
    const HfConfig& c = config_;
    if (c.architecture == HfArchitecture::kGpt2) {
      check("transformer.wte.weight", {c.vocab_size, c.hidden_size});
      check("transformer.wpe.weight", {c.max_position_embeddings, c.hidden_size});
    } else {
      check("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
    }
    if (!c.tie_word_embeddings) check("lm_head.weight", {c.vocab_size, c.hidden_size});
  }

  // A projection read from the files: an nn::Linear holding the file's values, or (quantized
  // loads) the plugin's quantized layer made from a float32 one.
  std::shared_ptr<nn::Module> make_linear(const std::string& path, int64_t in, int64_t out,
                                          bool bias) {
    const bool quantize = plugin_ && !ignored(path);
    check(path + ".weight", {out, in});
    if (bias) check(path + ".bias", {out});
    // Made under load_hf_model's SkipRandomInit: the layer holds its own storage, unset, until
    // the file's values replace it.
    auto linear = std::make_shared<nn::Linear>(in, out, bias, quantize ? kFloat32 : options_.dtype);
    copy(path + ".weight", linear->weight);
    if (bias) copy(path + ".bias", linear->bias);
    supplied_.insert(path + ".weight");
    if (bias) supplied_.insert(path + ".bias");
    if (!quantize) return linear;
    linear_paths_.push_back(path + ".");
    auto quantized = plugin_->quantize(*linear);
    linear.reset();
    give_back_free_heap();
    return quantized;
  }

  // Fills the parameters the factory did not make, then checks that every file tensor was used.
  void fill_rest(CausalLM& model) {
    const nn::StateDict state = model.state_dict();
    for (const auto& [key, tensor] : state) {
      bool made = supplied_.count(key) > 0;
      for (const std::string& p : linear_paths_) made = made || starts_with(key, p);
      if (made) continue;
      Tensor t = tensor;
      copy(key, t);
    }
    if (config_.tie_word_embeddings && file_name_.count("lm_head.weight")) check_tied_head();
    for (const auto& [key, name] : file_name_)
      MANTISSA_CHECK(used_.count(name), kWhere,
                     "'{}': unexpected tensor {}: a {} with this config.json has no such parameter",
                     weights_.file_of(name).path(), quote_untrusted(name),
                     to_string(config_.architecture));
  }

 private:
  const std::string& file_name(const std::string& key) const {
    const auto it = file_name_.find(key);
    if (it == file_name_.end()) {
      std::string files;
      for (const std::string& p : weights_.paths())
        files += (files.empty() ? "'" : ", '") + p + "'";
      fail(kWhere, "{}: missing tensor '{}', which config.json's {} needs", files, key,
           to_string(config_.architecture));
    }
    return it->second;
  }

  static void check_dtype(const io::MappedSafetensors& file,
                          const io::SafetensorsTensorInfo& info) {
    MANTISSA_CHECK(info.dtype == kFloat32 || info.dtype == kFloat16 || info.dtype == kBFloat16,
                   kWhere,
                   "'{}': tensor {} has dtype {}; pretrained weights must be F32, F16 or BF16",
                   file.path(), quote_untrusted(info.name), io::safetensors_dtype_name(info.dtype));
  }

  bool ignored(const std::string& path) const {
    for (const std::string& p : options_.quant_ignore)
      if (!p.empty() && starts_with(path, p)) return true;
    return false;
  }

  // A tied model's file may still hold lm_head.weight; it must then be the embedding.
  void check_tied_head() {
    const std::string emb = config_.architecture == HfArchitecture::kGpt2
                                ? "transformer.wte.weight"
                                : "model.embed_tokens.weight";
    const std::string& head = file_name("lm_head.weight");
    const std::string& table = file_name(emb);
    const io::MappedSafetensors& hf = weights_.file_of(head);
    bool same;
    if (&hf == &weights_.file_of(table)) {
      same = hf.same_bytes(head, table);
    } else {
      const Tensor a = hf.read(head), b = weights_.file_of(table).read(table);
      same = a.dtype() == b.dtype() && a.shape() == b.shape() &&
             std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
    }
    MANTISSA_CHECK(same, kWhere,
                   "'{}': tie_word_embeddings is true in config.json but lm_head.weight differs "
                   "from {}",
                   hf.path(), emb);
    used_.insert(head);
  }

  std::string dir_;
  HfConfig config_;
  HfLoadOptions options_;
  HfWeights weights_;
  std::unordered_map<std::string, std::string> file_name_;  // model key -> file tensor name
  std::set<std::string> used_;                              // file tensor names copied
  std::vector<std::string> linear_paths_;                   // "path." of each quantized layer
  std::set<std::string> supplied_;  // model keys read while the model was built
  std::unique_ptr<train::BitsandbytesPrecision> plugin_;
};

}  // namespace

bool is_conv1d_weight(HfArchitecture a, const std::string& key) {
  if (a != HfArchitecture::kGpt2) return false;
  for (const char* s :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (ends_with(key, s)) return true;
  return false;
}

std::shared_ptr<CausalLM> load_hf_model(const std::string& model_dir,
                                        const HfLoadOptions& options) {
  MANTISSA_CHECK(
      options.dtype == kFloat32 || options.dtype == kBFloat16 || options.dtype == kFloat16, kWhere,
      "the parameters' dtype must be float32, bfloat16 or float16, got {}", options.dtype.name());
  const HfConfig config = load_hf_config(model_dir);
  Loader loader(model_dir, config, options);
  loader.check_embeddings();
  CausalLMOptions model_options;
  model_options.dtype = options.dtype;
  model_options.activation_checkpointing = options.activation_checkpointing;
  model_options.dropout_gen = options.dropout_gen;
  model_options.make_linear = [&loader](const std::string& path, int64_t in, int64_t out,
                                        bool bias) {
    return loader.make_linear(path, in, out, bias);
  };
  std::shared_ptr<CausalLM> model;
  {
    // Every parameter is read from the files (fill_rest refuses a model they leave a tensor
    // of), so drawing initial values first would be wasted: it was two thirds of a load.
    nn::init::SkipRandomInit skip;
    model = std::make_shared<CausalLM>(config, model_options);
  }
  loader.fill_rest(*model);
  model->eval();
  return model;
}

nn::StateDict hf_state_dict(const CausalLM& model) {
  nn::StateDict out;
  for (const auto& [key, t] : model.state_dict()) {
    const bool transpose =
        is_conv1d_weight(model.config().architecture, key) && t.dim() == 2 && t.is_floating_point();
    out.insert(key, transpose ? t.t().contiguous() : t);
  }
  return out;
}

void save_hf_weights(const CausalLM& model, const std::string& dir) {
  io::NamedTensors tensors;
  for (const auto& [key, t] : hf_state_dict(model)) tensors.emplace_back(key, t);
  io::save_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), tensors,
                       {{"format", "pt"}});
}

}  // namespace mantissa::models
