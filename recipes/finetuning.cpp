#include "mantissa/recipes/finetuning.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/nn/lora.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"

namespace mantissa::recipes {
namespace {

// The entries of `state` whose names start with `prefix`, with the prefix taken off.
nn::StateDict with_prefix_removed(const nn::StateDict& state, const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [name, t] : state) {
    if (name.rfind(prefix, 0) == 0) out.insert(name.substr(prefix.size()), t);
  }
  return out;
}

// The model's entries of a file: a Trainer checkpoint's "model.*" tensors, or a plain state
// dict (every tensor) when the file has no "model." entries. The image models sit in the
// classifier's "net" slot (mantissa/models/image_classifier.h), so a checkpoint of an mlp/cnn/vit
// run holds "model.net.*" while the model being prepared is the bare network: when every entry
// starts with "net." and no name of the model does, that prefix goes too.
nn::StateDict model_entries(const std::string& path, const nn::StateDict& own) {
  const io::SafetensorsFile file = io::load_safetensors(path);
  nn::StateDict all;
  for (const auto& [name, t] : file.tensors) all.insert(name, t);
  nn::StateDict model = with_prefix_removed(all, "model.");
  if (model.empty()) model = all;
  const auto starts_with_net = [](const std::string& name) { return name.rfind("net.", 0) == 0; };
  bool all_net = !model.empty(), own_net = false;
  for (const auto& [name, t] : model) all_net = all_net && starts_with_net(name);
  for (const auto& [name, t] : own) own_net = own_net || starts_with_net(name);
  return all_net && !own_net ? with_prefix_removed(model, "net.") : model;
}

// Whether `name` is an FP8 layer's scaling state ("h1.attn.in_proj.fp8_scale", ...): a
// checkpoint of a transformer-engine run holds it beside the weights.
bool is_fp8_scaling_state(const std::string& name) {
  const std::string_view leaf = std::string_view(name).substr(name.rfind('.') + 1);
  return leaf == fp8::kScaleBufferName || leaf == fp8::kAmaxHistoryBufferName;
}

// The entries of a checkpoint to load, less the FP8 scaling state the model does not hold: a
// transformer-engine run's checkpoint is the same model, and its weights start a run of any
// precision (the model is plain until the Trainer converts it; FP8 scales then start afresh).
nn::StateDict without_fp8_scaling_state(const nn::StateDict& state, const nn::StateDict& own) {
  nn::StateDict out;
  for (const auto& [name, t] : state) {
    if (!is_fp8_scaling_state(name) || own.contains(name)) out.insert(name, t);
  }
  return out;
}

// Up to 8 names of a list for a message, then how many more: a QLoRA checkpoint given to
// --init-from has some 90 names that do not fit, which made one line of 8 KB.
std::string first_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  if (names.size() <= kShown) return fmt::format("{}", fmt::join(names, ", "));
  return fmt::format("{}, ... and {} more", fmt::join(names.begin(), names.begin() + kShown, ", "),
                     names.size() - kShown);
}

void load_init_from(nn::Module& model, const std::string& path) {
  const nn::StateDict own = model.state_dict();
  const nn::StateDict state =
      without_fp8_scaling_state(model.upgrade_legacy_keys(model_entries(path, own)), own);
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, t] : own) {
    if (!state.contains(name)) missing.push_back(name);
  }
  for (const auto& [name, t] : state) {
    if (!own.contains(name)) unexpected.push_back(escape_untrusted(name));  // from the file
  }
  if (!missing.empty() || !unexpected.empty()) {
    // --init-from takes plain weights; a fine-tuned or quantized checkpoint's extra tensors
    // (adapters, 4-bit codes) are the usual mismatch within one model.
    const bool adapted = std::any_of(unexpected.begin(), unexpected.end(), [](const auto& n) {
      return n.find("lora_") != std::string::npos || n.find("base_layer") != std::string::npos ||
             n.find(".absmax") != std::string::npos || n.find("SCB") != std::string::npos;
    });
    // Only the lists that have entries ("missing []" says nothing).
    std::vector<std::string> lists;
    if (!missing.empty()) lists.push_back(fmt::format("missing [{}]", first_names(missing)));
    if (!unexpected.empty())
      lists.push_back(fmt::format("unexpected [{}]", first_names(unexpected)));
    fail("--init-from", "{} {}: {}", path,
         adapted ? "holds LoRA adapters or quantized weights; --init-from starts from plain "
                   "weights (a checkpoint of a run in 32-true, bf16-mixed, ... without "
                   "--lora-rank; for the GPT also the --save-weights file of such a run: one "
                   "written by a quantized or --lora-rank run holds these tensors too, and "
                   "evaluates with mantissa eval)"
                 : "is a checkpoint of another model",
         fmt::join(lists, ", "));
  }
  for (const auto& [name, t] : state) {
    MANTISSA_CHECK(t.shape() == own.at(name).shape(), "--init-from",
                   "{}: '{}' has shape {} in the file but {} in the model (another model size?)",
                   path, name, shape_str(t.shape()), shape_str(own.at(name).shape()));
  }
  // As --resume and eval do: NaN or inf in the file would only surface as a NaN loss at the
  // first step, with advice about the learning rate that does not apply. (x * 0 sums to 0
  // exactly when every x is finite.)
  for (const auto& [name, t] : state) {
    if (!t.dtype().is_floating_point() || t.numel() == 0) continue;
    MANTISSA_CHECK(std::isfinite(sum(t.detach() * 0.0).item()), "--init-from",
                   "{}: parameter '{}' holds a non-finite value (NaN or inf): the file is "
                   "damaged, or the run that wrote it had diverged; use an earlier checkpoint",
                   path, name);
  }
  model.load_state_dict(state, /*strict=*/true);
}

}  // namespace

namespace {

// " (did you mean 'bf16'?)" for a dtype's other names (bfloat16, float16, half, float32) and
// near misses (BF16, fp-16), else "".
std::string quant_dtype_hint(const std::string& value) {
  static const std::vector<std::pair<std::string, std::string>> kOtherNames = {
      {"bfloat16", "bf16"}, {"float16", "fp16"}, {"half", "fp16"},
      {"float32", "fp32"},  {"float", "fp32"},   {"f32", "fp32"}};
  std::string lower = value;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string meant;
  for (const auto& [other, name] : kOtherNames)
    if (lower == other) meant = name;
  if (meant.empty()) meant = likely_meant(value, {"bf16", "fp16", "fp32"});
  return meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant);
}

}  // namespace

void check_no_precision_twice(const std::vector<std::string>& given,
                              const std::vector<std::string>& canonical, const char* command) {
  for (size_t i = 0; i < canonical.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (canonical[j] != canonical[i]) continue;
      if (given[j] == given[i]) fail(command, "precision '{}' is listed twice", given[i]);
      fail(command, "precision '{}' is listed twice: '{}' and '{}'", canonical[i], given[j],
           given[i]);
    }
  }
}

void check_quant_dtype(const QuantOptions& q, const char* where) {
  if (q.quant_dtype != "bf16" && q.quant_dtype != "fp16" && q.quant_dtype != "fp32")
    fail(where, "--quant-dtype must be bf16, fp16 or fp32, got '{}'{}", q.quant_dtype,
         quant_dtype_hint(q.quant_dtype));
}

std::shared_ptr<train::Precision> make_quant_plugin(const std::string& precision,
                                                    const QuantOptions& q) {
  if (!train::precision_traits(precision).quantized_weights) return nullptr;
  check_quant_dtype(q, "train");
  // The plugin's own option names: its compute dtype and the Linear layers it keeps.
  train::PrecisionOptions options;
  options.extra = {{"dtype", q.quant_dtype}, {"ignore_modules", q.quant_ignore}};
  return train::make_precision_unchecked(precision, std::move(options));
}

std::string quant_ignore_for_model(const std::string& names, const std::string& model) {
  if (model != "mlp" && model != "cnn" && model != "vit") return names;
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(names.find(',', start), names.size());
    std::string name = names.substr(start, end - start);
    if (name.rfind("net.", 0) == 0) name.erase(0, 4);
    out += name;
    if (end == names.size()) break;
    out += ',';
    start = end + 1;
  }
  return out;
}

void validate_quant_options(const QuantOptions& q, const std::string& command) {
  MANTISSA_CHECK(q.lora_rank >= 0, command,
                 "--lora-rank must be a positive rank (or 0 for no adapters), got {}", q.lora_rank);
  // Far beyond any layer's side (and the size arithmetic of the adapters): a typo.
  constexpr int64_t kMaxLoraRank = int64_t{1} << 20;
  MANTISSA_CHECK(q.lora_rank <= kMaxLoraRank, command,
                 "--lora-rank {} is beyond any layer's size (at most {}); ranks of 4-64 are usual",
                 q.lora_rank, kMaxLoraRank);
  if (q.lora_rank > 0) {
    // Said here with the flags' names; nn::validate below repeats it for library callers.
    const double scaling = q.lora_alpha / static_cast<double>(q.lora_rank);
    MANTISSA_CHECK(
        std::isfinite(q.lora_alpha) && q.lora_alpha > 0 && scaling <= nn::kMaxLoraScaling, command,
        "--lora-alpha {} with --lora-rank {} scales the adapters by {:g} (alpha / "
        "rank); --lora-alpha must be finite, above 0 and at most {:g} x --lora-rank "
        "({:g} here): larger scalings make the loss explode, or overflow the "
        "optimizer's statistics so the adapters never train. Usual values scale by 0.5 "
        "to 64 (alpha 16 with rank 8: 2)",
        q.lora_alpha, q.lora_rank, scaling, nn::kMaxLoraScaling,
        nn::kMaxLoraScaling * static_cast<double>(q.lora_rank));
    MANTISSA_CHECK(q.lora_dropout >= 0 && q.lora_dropout < 1, command,
                   "--lora-dropout must be a probability in [0, 1) (0.05-0.1 are usual), got {}",
                   q.lora_dropout);
    nn::validate(
        nn::LoraOptions{.r = q.lora_rank, .alpha = q.lora_alpha, .dropout = q.lora_dropout});
  }
}

namespace {

// A rank above min(in, out) cannot raise an adapter's expressiveness (B A is then a full-rank
// update already) and costs more parameters than the weight itself: accepted, as peft does, but
// said, since it is usually a typo or a misunderstanding of what the rank is.
void warn_rank_beyond_layer_sides(nn::Module& model, const std::vector<std::string>& wrapped,
                                  int64_t rank) {
  std::vector<std::string> beyond;
  for (const std::string& name : wrapped) {
    const auto* lora = dynamic_cast<const nn::LoRALinear*>(&model.get_submodule(name));
    if (lora == nullptr) continue;
    const nn::LinearFeatures& f = lora->features();
    const int64_t side = std::min(f.in_features, f.out_features);
    if (rank > side)
      beyond.push_back(fmt::format("{} ({}x{})", name, f.out_features, f.in_features));
  }
  if (beyond.empty()) return;
  warn_once(fmt::format(
      "--lora-rank {} exceeds the smaller side of {} of the {} adapted layers: {}. A rank above "
      "min(in, out) adds parameters but no expressiveness; ranks of 4-64 are usual",
      rank, beyond.size(), wrapped.size(), fmt::join(beyond, ", ")));
}

}  // namespace

bool build_in_init_scope(const QuantOptions& q) { return q.init_from.empty(); }

void prepare_model_for_finetuning(nn::Module& model, train::Precision* plugin,
                                  const QuantOptions& q, TrainMetrics& m, bool training) {
  validate_quant_options(q, training ? "train" : "eval");
  if (!q.init_from.empty()) load_init_from(model, q.init_from);
  auto* bnb = dynamic_cast<train::BitsandbytesPrecision*>(plugin);
  if (bnb != nullptr) bnb->convert_module(model);
  if (q.lora_rank > 0) {
    std::vector<std::string> wrapped;
    try {
      wrapped = nn::apply_lora(model, {.r = q.lora_rank,
                                       .alpha = q.lora_alpha,
                                       .dropout = q.lora_dropout,
                                       .target_modules = q.lora_targets});
    } catch (const Error& e) {
      // A huge rank fails in the allocator, whose message knows nothing of the flag.
      if (std::string_view(e.what()).starts_with("[allocator]")) {
        fail("--lora-rank",
             "--lora-rank {} asks for adapters larger than this machine can hold "
             "(rank x (in + out) values per adapted layer): {}. Ranks of 4-64 are "
             "usual",
             q.lora_rank, e.what());
      }
      throw;
    } catch (const std::bad_alloc&) {
      fail("--lora-rank",
           "--lora-rank {} asks for adapters larger than this machine can hold (rank x (in + "
           "out) values per adapted layer): out of memory. Ranks of 4-64 are usual",
           q.lora_rank);
    }
    if (training) warn_rank_beyond_layer_sides(model, wrapped, q.lora_rank);
    // The QLoRA recipe: adapters and biases train; the wrapped (and quantized) weights do not.
    // Layers that are neither Linear nor quantized (norms, embeddings, GPT's fused qkv) keep
    // training, as the recipe asks ("only adapters, biases and non-quantized layers").
    for (const auto& [name, p] : model.named_parameters()) {
      if (name.find("base_layer.weight") != std::string::npos) Tensor(p).requires_grad_(false);
    }
  }
  m.trainable_parameters = nn::trainable_parameter_count(model);
  m.total_parameters = model.parameter_count();
  // The quantized weights are frozen (as in bitsandbytes): without adapters only biases and the
  // layers left unquantized learn, which is rarely what was meant.
  if (training && bnb != nullptr && q.lora_rank == 0 &&
      !train::precision_traits(bnb->precision()).trains_base_weights()) {
    warn_once(fmt::format(
        "precision '{}' freezes the quantized Linear weights; without adapters (--lora-rank 0, the "
        "default) only the "
        "biases and unquantized layers train ({} trainable parameters). Add --lora-rank 8 for "
        "QLoRA fine-tuning, or use int8-training to train the weights themselves",
        bnb->precision(), nn::trainable_parameter_count(model)));
  }
  if (bnb != nullptr) {
    const train::QuantizedStats s = train::BitsandbytesPrecision::quantized_stats(model);
    // Frozen quantized weights are buffers, not parameters; int8-training's weights stay
    // parameters (re-quantized each forward) and are counted already.
    *m.total_parameters += s.buffer_weight_numel;
    m.quantized_bits_per_parameter = s.bits_per_parameter();
  }
}

void check_quant_ignore_names(const std::vector<std::string>& precisions, const QuantOptions& q,
                              const std::function<std::shared_ptr<nn::Module>()>& make_model) {
  if (q.quant_ignore.empty()) return;
  const auto quantized = std::find_if(
      precisions.begin(), precisions.end(),
      [](const std::string& p) { return train::precision_traits(p).quantized_weights; });
  if (quantized == precisions.end()) return;
  const std::shared_ptr<nn::Module> model = make_model();
  make_quant_plugin(*quantized, q)->convert_module(*model);
}

void warn_if_adapting_random_weights(const std::string& precision, const QuantOptions& q,
                                     bool resuming, const std::string& model) {
  if (q.lora_rank <= 0 || !q.init_from.empty() || resuming) return;
  // The GPT warned alone, and not for int8-training, whose weights LoRA freezes too: an mlp run
  // of nf4 + --lora-rank 8 ended near chance accuracy without a word.
  const std::string name = train::normalize_precision(precision);
  warn_once(fmt::format(
      "precision '{}' with --lora-rank {} but no --init-from: the frozen {}base weights are the "
      "{}'s random initialisation, so the adapters train on top of random weights; pass "
      "--init-from with a trained {}'s checkpoint (such as the last.safetensors of a 32-true "
      "run's --checkpoint-dir) to fine-tune it",
      name, q.lora_rank, train::precision_traits(name).quantized_weights ? "quantized " : "", model,
      model));
}

}  // namespace mantissa::recipes
