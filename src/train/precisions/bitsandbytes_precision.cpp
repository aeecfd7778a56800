// BitsandbytesPrecision: the weight format from the registry, Linear replacement at setup,
// quantize-while-building init scopes and the autocast step scope. The quantized layers it makes
// are quant's, one folder up.
#include "mantissa/train/precisions/bitsandbytes_precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>

#include "mantissa/amp/autocast.h"
#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/module_hooks.h"
#include "mantissa/nn/replace.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/linear8bit.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::train {
namespace {

bool is_adapter(const std::string& qualified_name) {
  const size_t dot = qualified_name.rfind('.');
  const std::string last =
      dot == std::string::npos ? qualified_name : qualified_name.substr(dot + 1);
  return last == "lora_A" || last == "lora_B";
}

// Every nn::Linear of root (root itself excluded) that is not ignored and not a LoRA adapter,
// replaced by plugin.quantize. `prefix` is root's own qualified name ("" for the model).
// `memo` carries the modules met across calls (the init scope's walks over the model's
// children), so a Linear two children share is quantized once and stays shared.
int quantize_linears(const BitsandbytesPrecision& plugin, nn::Module& root,
                     const std::string& prefix, nn::ReplaceMemo& memo) {
  auto qualified = [&](const std::string& name) {
    return prefix.empty() ? name : prefix + "." + name;
  };
  return nn::replace_modules(
      root,
      [&](const std::string& name, nn::Module& m) {
        return dynamic_cast<nn::Linear*>(&m) != nullptr && !is_adapter(name) &&
               !plugin.ignored(qualified(name), m);
      },
      [&](const std::string&, std::shared_ptr<nn::Module> old) {
        return plugin.quantize(static_cast<const nn::Linear&>(*old));
      },
      memo);
}

class AutocastScope : public PrecisionScope {
 public:
  AutocastScope(DeviceType device, DType dtype) : region_(device, dtype) {}

 private:
  amp::autocast region_;
};

// The init scope. The first module that registers a child is taken as the model's root (the
// root guess moves up when that module is itself registered into another). When the root
// registers a child, the root's earlier children are finished (the model's constructor has
// moved on), so their Linear layers are quantized right away and their float32 weights freed.
// The root's last children are left to convert_module.
class QuantizeWhileBuildingScope : public PrecisionScope {
 public:
  explicit QuantizeWhileBuildingScope(const BitsandbytesPrecision& plugin)
      : plugin_(plugin),
        guard_([this](nn::Module& parent, const std::string& name) { on_child(parent, name); }) {}

 private:
  void on_child(nn::Module& parent, const std::string& name) {
    // Slots, not named_children(): done_ counts slots, a shared module included.
    const auto& children = parent.child_slots();
    size_t index = 0;
    while (index < children.size() && children[index].first != name) ++index;
    if (root_ == nullptr || children[index].second.get() == root_) {
      root_ = &parent;
      done_ = 0;
    }
    if (&parent != root_) return;
    for (; done_ < index; ++done_) {
      const auto [child_name, child] = parent.child_slots()[done_];
      // A module met before (the root holds it in two slots, or an earlier child holds it too)
      // was quantized once; this slot gets the same quantized layer (or the container already
      // quantized in place), so it stays shared: a Linear two children share is quantized once,
      // into one shared layer, not twice into two unshared ones.
      if (const auto met = memo_.find(child)) {
        if (*met) parent.replace_child(child_name, *met);
        continue;
      }
      std::shared_ptr<nn::Module> replacement;
      if (auto* linear = dynamic_cast<nn::Linear*>(child.get())) {
        if (!is_adapter(child_name)) replacement = plugin_.quantize(*linear);
      } else {
        quantize_linears(plugin_, *child, child_name, memo_);
      }
      memo_.remember(child, replacement);
      if (replacement) parent.replace_child(child_name, std::move(replacement));
    }
  }

  const BitsandbytesPrecision& plugin_;
  nn::Module* root_ = nullptr;
  size_t done_ = 0;
  // Every module met so far, with its replacement; kept when the root guess moves up, since a
  // module of the old root may be shared with the new root's later children.
  nn::ReplaceMemo memo_;
  nn::ChildRegisteredHookGuard guard_;
};

}  // namespace

quant::WeightQuantization weight_quantization_of(const std::string& precision) {
  const PrecisionEntry* entry = find_precision(precision);
  if (entry != nullptr && entry->weights) return *entry->weights;
  std::vector<std::string> quantizing;
  for (const PrecisionEntry& e : precision_registry())
    if (e.weights) quantizing.push_back(e.name);
  fail("BitsandbytesPrecision", "unknown quantization mode '{}'; valid modes are: {}", precision,
       fmt::join(quantizing, ", "));
}

std::string precision_of(const quant::WeightQuantization& weights) {
  for (const PrecisionEntry& e : precision_registry())
    if (e.weights == weights) return e.name;
  fail("BitsandbytesPrecision", "no precision stores weights as {}{}{}",
       weights.format == FormatId::kInt8Rowwise ? "int8" : "4-bit",
       weights.double_quant ? " with double quantization" : "",
       weights.trainable ? " (trainable)" : "");
}

BitsandbytesPrecision::BitsandbytesPrecision(const std::string& precision,
                                             std::optional<DType> dtype,
                                             std::vector<std::string> ignore_modules,
                                             DeviceType device_type)
    : weights_(weight_quantization_of(precision)),
      // Lightning's defaults: bf16 for the 4-bit precisions, fp16 (bitsandbytes' int8 inputs)
      // for the int8 ones.
      dtype_(dtype.value_or(weights_.format == FormatId::kInt8Rowwise ? kFloat16 : kBFloat16)),
      device_type_(device_type),
      ignore_modules_(std::move(ignore_modules)) {
  precision_ = precision_of(weights_);
  MANTISSA_CHECK(device_type_ == DeviceType::kCPU || weights_.format != FormatId::kInt8Rowwise,
                 "BitsandbytesPrecision",
                 "the int8 modes run on the CPU only (the LLM.int8 kernels have no CUDA version "
                 "yet); nf4, nf4-dq, fp4 and fp4-dq run on a GPU");
  MANTISSA_CHECK(dtype_ == kBFloat16 || dtype_ == kFloat16 || dtype_ == kFloat32,
                 "BitsandbytesPrecision",
                 "the compute dtype must be bfloat16, float16 or float32, got {}", dtype_.name());
}

bool BitsandbytesPrecision::ignored(const std::string& qualified_name, const nn::Module& m) const {
  if (kept_.count(&m) != 0) return true;
  // Lightning's test: a plain string prefix ("lm" also keeps "lm_head").
  for (const std::string& prefix : ignore_modules_) {
    if (qualified_name.compare(0, prefix.size(), prefix) == 0) {
      kept_.insert(&m);
      return true;
    }
  }
  return false;
}

void BitsandbytesPrecision::convert_module(nn::Module& module) {
  // One precision converts a model. Layers another precision made would be left as they are
  // (only nn::Linear is quantized), so the run would train a model that is not in this mode
  // while its checkpoints and metrics say it is: an nf4 model under "int8" would keep its 4-bit
  // layers, an FP8 model under "nf4" would mix FP8 and 4-bit layers. Checked before anything
  // changes. Layers in this plugin's own mode are fine: the Trainer converts again at setup
  // what the user (or the command line) already converted.
  std::vector<std::string> fp8_layers, other_mode;
  for (const auto& [q, m] : module.named_modules()) {
    if (dynamic_cast<const fp8::Fp8Module*>(m) != nullptr) fp8_layers.push_back(q);
    const std::optional<quant::WeightQuantization> w = quantized_layer_weights(*m);
    if (w && *w != weights_) other_mode.push_back(fmt::format("{} ({})", q, precision_of(*w)));
  }
  const auto listed = [](std::vector<std::string> names) {
    const size_t n = names.size();
    if (n > 8) {
      names.resize(8);
      names.push_back(fmt::format("... {} more", n - 8));
    }
    return fmt::format("{}", fmt::join(names, ", "));
  };
  MANTISSA_CHECK(fp8_layers.empty(), "BitsandbytesPrecision",
                 "the model ({}) holds FP8 layers, as the transformer-engine precision makes them "
                 "({}); precision '{}' quantizes nn::Linear layers and would leave those as they "
                 "are: quantize a model of nn::Linear layers (build it again, or load its weights "
                 "into a fresh one)",
                 module.name(), listed(fp8_layers), precision());
  MANTISSA_CHECK(other_mode.empty(), "BitsandbytesPrecision",
                 "the model ({}) is already quantized in another mode: {}; precision '{}' would "
                 "leave those layers as they are and train a model that is not '{}': quantize "
                 "the full-precision model once, in one mode (build it again, or load its float "
                 "weights into a fresh one)",
                 module.name(), listed(other_mode), precision(), precision());
  // An ignore_modules prefix that starts no layer's name is a typo, not a request: say so
  // instead of quietly quantizing the layer it meant. Checked at the first conversion only: a
  // later one sees the names under a parent (see ignored()).
  if (!converted_) {
    // Every name of a module held in two slots: the user may name a shared layer by either.
    std::vector<std::string> names, linears;
    for (const auto& [q, m] : module.named_modules(/*remove_duplicate=*/false)) {
      if (q.empty()) continue;
      names.push_back(q);
      if (dynamic_cast<nn::Linear*>(m) != nullptr || is_quantized_layer(*m)) linears.push_back(q);
    }
    // The suggestions: the Linear layers and the modules holding one (a ReLU is no candidate).
    std::vector<std::string> candidates;
    for (const std::string& q : names)
      if (std::any_of(linears.begin(), linears.end(), [&](const std::string& l) {
            return l == q || l.compare(0, q.size() + 1, q + ".") == 0;
          }))
        candidates.push_back(q);
    const auto starts_a_name = [&](const std::string& prefix) {
      return std::any_of(names.begin(), names.end(), [&](const std::string& q) {
        return q.compare(0, prefix.size(), prefix) == 0;
      });
    };
    for (const std::string& prefix : ignore_modules_) {
      if (starts_a_name(prefix)) continue;
      // A name copied from the model summary, which shows the model one level down ("net.2"
      // for the MLP's "2"), matched nothing and the error only listed "2, 0": say which part
      // to drop.
      std::string hint;
      for (size_t dot = prefix.find('.'); dot != std::string::npos && hint.empty();
           dot = prefix.find('.', dot + 1)) {
        const std::string inner = prefix.substr(dot + 1);
        if (!inner.empty() && starts_a_name(inner)) {
          hint = fmt::format(
              " (names are relative to the model, without the '{}' the summary "
              "shows before them: pass '{}')",
              prefix.substr(0, dot + 1), inner);
        }
      }
      fail("BitsandbytesPrecision",
           "ignore_modules (--quant-ignore) names '{}', but no layer of the model ({}) starts "
           "with it{}; closest names: {}",
           prefix, module.name(), hint,
           fmt::join(closest_names(prefix, candidates.empty() ? names : candidates, 5), ", "));
    }
  }
  const bool first = !converted_;
  // A shared layer is matched once, under its first name (replace_modules); one that
  // ignore_modules names under another of its names is kept too, as state_dict keys name it by
  // both: the check above accepted that name, so the layer must not be quantized.
  for (const nn::Module* m : nn::modules_with_a_name(module, [&](const std::string& q) {
         return !q.empty() && std::any_of(ignore_modules_.begin(), ignore_modules_.end(),
                                          [&](const std::string& prefix) {
                                            return q.compare(0, prefix.size(), prefix) == 0;
                                          });
       }))
    kept_.insert(m);
  nn::ReplaceMemo memo;
  quantize_linears(*this, module, "", memo);
  converted_ = true;
  std::vector<std::string> kept;
  int quantized = 0;
  for (const auto& [name, m] : module.named_modules()) {
    if (is_quantized_layer(*m)) ++quantized;
    if (dynamic_cast<nn::Linear*>(m) != nullptr && !is_adapter(name)) kept.push_back(name);
  }
  MANTISSA_CHECK(quantized > 0 || !kept.empty(), "BitsandbytesPrecision",
                 "precision '{}' quantizes Linear layers, but the model ({}) has none", precision(),
                 module.name());
  // Keeping every Linear quantizes nothing: the run would be a bf16-autocast run under a
  // quantized precision's name (its metrics said 0 bits per quantized weight), not what the
  // precision asks for.
  MANTISSA_CHECK(!first || quantized > 0, "BitsandbytesPrecision",
                 "ignore_modules (--quant-ignore {}) keeps every Linear layer of the model ({}: "
                 "{}) in full precision, so precision '{}' would quantize nothing; leave at least "
                 "one layer out of --quant-ignore, or choose a precision that does not quantize "
                 "(such as bf16-mixed)",
                 fmt::join(ignore_modules_, ","), module.name(), fmt::join(kept, ", "),
                 precision());
}

ScopePtr BitsandbytesPrecision::module_init_context() {
  // Names relative to the model are only known at setup, so ignored layers need the
  // full-precision model first (Lightning refuses ignore_modules here).
  if (!ignore_modules_.empty()) return nullptr;
  return std::make_unique<QuantizeWhileBuildingScope>(*this);
}

ScopePtr BitsandbytesPrecision::forward_context() {
  if (dtype_ == kFloat32) return nullptr;
  return std::make_unique<AutocastScope>(device_type_, dtype_);
}

nlohmann::json BitsandbytesPrecision::state_dict() const {
  // Nothing changes during training; recorded so a checkpoint says how it was quantized.
  return {{"mode", precision_}, {"dtype", dtype_.name()}, {"ignore_modules", ignore_modules_}};
}

void BitsandbytesPrecision::load_state_dict(const nlohmann::json& state) {
  if (state.contains("mode")) {
    MANTISSA_CHECK(state.at("mode").get<std::string>() == precision_, "BitsandbytesPrecision",
                   "the checkpoint was trained with precision '{}', not '{}'; resume with "
                   "--precision {}",
                   state.at("mode").get<std::string>(), precision_,
                   state.at("mode").get<std::string>());
  }
}

std::shared_ptr<nn::Module> BitsandbytesPrecision::quantize(const nn::Linear& linear) const {
  if (weights_.format != FormatId::kInt8Rowwise) {
    return quant::Linear4bit::from_linear(
        linear, quant::Linear4bitOptions{.format = weights_.format,
                                         .double_quant = weights_.double_quant,
                                         .compute_dtype = dtype_,
                                         .blocksize = 64});
  }
  // Lightning's wrappers: LLM.int8 with the outlier threshold 6.0 (bnb's default is 0).
  return quant::Linear8bitLt::from_linear(
      linear, quant::Linear8bitOptions{.mode = weights_.trainable ? quant::Int8Mode::kTraining
                                                                  : quant::Int8Mode::kInference,
                                       .threshold = 6.0f,
                                       .compute_dtype = dtype_});
}

std::optional<quant::WeightQuantization> quantized_layer_weights(const nn::Module& m) {
  if (const auto* q = dynamic_cast<const quant::Linear4bit*>(&m))
    return quant::WeightQuantization{.format = q->options().format,
                                     .double_quant = q->options().double_quant};
  if (const auto* q = dynamic_cast<const quant::Linear8bitLt*>(&m))
    return quant::WeightQuantization{.format = FormatId::kInt8Rowwise,
                                     .trainable = q->options().mode == quant::Int8Mode::kTraining};
  return std::nullopt;
}

std::vector<std::string> describe_quantized_layers(const nn::Module& root, size_t limit) {
  std::vector<std::string> out;
  size_t count = 0;
  for (const auto& [q, m] : root.named_modules()) {
    const std::optional<quant::WeightQuantization> w = quantized_layer_weights(*m);
    if (!w) continue;
    if (count++ < limit) out.push_back(fmt::format("{} ({})", q, precision_of(*w)));
  }
  if (count > limit) out.push_back(fmt::format("... {} more", count - limit));
  return out;
}

bool BitsandbytesPrecision::is_quantized_layer(const nn::Module& m) {
  return dynamic_cast<const quant::Linear4bit*>(&m) != nullptr ||
         dynamic_cast<const quant::Linear8bitLt*>(&m) != nullptr;
}

QuantizedStats BitsandbytesPrecision::quantized_stats(const nn::Module& root) {
  QuantizedStats s;
  for (const auto& [name, m] : const_cast<nn::Module&>(root).named_modules()) {
    if (const auto* q = dynamic_cast<const quant::Linear4bit*>(m)) {
      ++s.layers;
      s.weight_numel += q->weight_numel();
      s.buffer_weight_numel += q->weight_numel();
      s.stored_bytes += q->weight_stored_bytes();
    } else if (const auto* q8 = dynamic_cast<const quant::Linear8bitLt*>(m)) {
      ++s.layers;
      s.weight_numel += q8->weight_numel();
      if (q8->options().mode != quant::Int8Mode::kTraining)
        s.buffer_weight_numel += q8->weight_numel();
      s.stored_bytes += q8->weight_stored_bytes();
    }
  }
  return s;
}

std::unique_ptr<Precision> make_bitsandbytes_precision(const std::string& precision) {
  return std::make_unique<BitsandbytesPrecision>(precision);
}

std::unique_ptr<Precision> make_bitsandbytes_precision(const PrecisionOptions& options) {
  check_precision_options(options, {"dtype", "ignore_modules"});
  std::optional<DType> dtype;
  if (auto it = options.extra.find("dtype"); it != options.extra.end()) {
    const std::string& d = it->second;
    MANTISSA_CHECK(d == "bf16" || d == "fp16" || d == "fp32", "BitsandbytesPrecision",
                   "dtype must be bf16, fp16 or fp32, got '{}'", d);
    dtype = d == "bf16" ? kBFloat16 : d == "fp16" ? kFloat16 : kFloat32;
  }
  std::vector<std::string> ignore;
  if (auto it = options.extra.find("ignore_modules"); it != options.extra.end()) {
    size_t start = 0;
    const std::string& list = it->second;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      if (comma > start) ignore.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return std::make_unique<BitsandbytesPrecision>(
      options.precision, dtype, std::move(ignore),
      options.accelerator == "gpu" ? DeviceType::kCUDA : DeviceType::kCPU);
}

}  // namespace mantissa::train
