#include "mantissa/train/precisions/transformer_engine_precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_set>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/layer_norm.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/fp8/nvfp4_scaling.h"
#include "mantissa/fp8/state_check.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/nn/replace.h"
#include "mantissa/ops/attention.h"
#include "mantissa/train/precision_support.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"

namespace mantissa::train {
namespace {

// Depth-first walk over (qualified name, module), root excluded; a module held in two slots
// once, under its first name (named_modules), so a shared FP8 layer has one entry in the
// plugin's fp8_meta state.
void walk(nn::Module& m, const std::string& prefix,
          const std::function<void(const std::string&, nn::Module&)>& fn) {
  for (const auto& [name, child] : m.named_modules()) {
    if (name.empty()) continue;
    fn(prefix.empty() ? name : prefix + "." + name, *child);
  }
}

// A LoRALinear's adapter (its child lora_A or lora_B), by its qualified name.
bool is_lora_adapter(const std::string& qualified_name) {
  const size_t dot = qualified_name.rfind('.');
  const std::string last =
      dot == std::string::npos ? qualified_name : qualified_name.substr(dot + 1);
  return last == "lora_A" || last == "lora_B";
}

// Whether convert_module gives `m` (named q) an FP8 twin where fp8_exclude keeps nothing out: a
// Linear, or a LayerNorm over one dimension with a weight (Lightning uses normalized_shape[0]).
// Not the LoRA adapters (lora_A, lora_B of a LoRALinear), as the bitsandbytes plugin leaves
// them: rank-r products are a sliver of a layer's work, so FP8 would save nothing there and cost
// the small trained part precision, and each would carry an amax history.
bool has_fp8_twin(const std::string& q, nn::Module& m) {
  if (dynamic_cast<nn::Linear*>(&m) != nullptr) return !is_lora_adapter(q);
  auto* ln = dynamic_cast<nn::LayerNorm*>(&m);
  return ln != nullptr && ln->weight.defined() && ln->normalized_shape().size() == 1;
}

bool is_fp8_layer(nn::Module& m) {
  return dynamic_cast<fp8::Fp8Module*>(&m) != nullptr ||
         dynamic_cast<fp8::LayerNorm*>(&m) != nullptr;
}

// Default dtype and fp8 autocast for one step, undone in reverse order. Attention on a GPU takes
// the composed form inside it (ComposedGpuAttentionScope, mantissa/ops/attention.h).
class Fp8StepScope : public PrecisionScope {
 public:
  Fp8StepScope(DType dtype, const fp8::Recipe& recipe)
      : dtype_scope_(default_dtype_scope(dtype)), autocast_(true, recipe) {}

 private:
  ScopePtr dtype_scope_;
  fp8::Fp8Autocast autocast_;
  ComposedGpuAttentionScope composed_attention_;
};

std::vector<float> to_floats(const Tensor& t) { return t.contiguous().to_vector<float>(); }

// One layer's entry of the plugin's "fp8_meta", as [slots] scales and a [rows, slots]
// row-major history, refused naming the layer when malformed or holding a value no run writes.
struct MetaValues {
  std::vector<float> scale;
  std::vector<float> history;
};

MetaValues read_meta_entry(const nlohmann::json& meta, const std::string& layer, int64_t slots,
                           int64_t rows) {
  const std::string where = fmt::format("fp8_meta of layer '{}'", escape_untrusted(layer));
  MANTISSA_CHECK(meta.contains(layer), "TransformerEnginePrecision",
                 "the checkpoint has no FP8 state for layer '{}'", layer);
  const nlohmann::json& e = meta.at(layer);
  MANTISSA_CHECK(e.is_object() && e.contains("scale") && e.contains("amax_history") &&
                     e.at("scale").is_array() && e.at("amax_history").is_array(),
                 "TransformerEnginePrecision",
                 "{} must be an object with the arrays 'scale' and 'amax_history'", where);
  const nlohmann::json& scale = e.at("scale");
  const nlohmann::json& hist = e.at("amax_history");
  const bool rows_fit = std::all_of(hist.begin(), hist.end(), [&](const nlohmann::json& r) {
    return r.is_array() && static_cast<int64_t>(r.size()) == slots;
  });
  MANTISSA_CHECK(static_cast<int64_t>(scale.size()) == slots &&
                     static_cast<int64_t>(hist.size()) == rows && rows_fit,
                 "TransformerEnginePrecision",
                 "{} must hold {} scales and {} history rows of {}; it holds {} and {}", where,
                 slots, rows, slots, scale.size(), hist.size());
  // JSON has no inf: a non-finite float is written as null. In the history that is +inf (an
  // inf tensor's amax; NaN is refused where it is recorded); a scale is never non-finite.
  auto number = [&](const nlohmann::json& v, const char* field, bool null_is_inf) -> float {
    if (v.is_null() && null_is_inf) return std::numeric_limits<float>::infinity();
    MANTISSA_CHECK(v.is_number(), "TransformerEnginePrecision", "{}: '{}' holds {}, not a number",
                   where, field, escape_untrusted(v.dump()));
    return v.get<float>();
  };
  MetaValues out;
  for (const auto& v : scale) out.scale.push_back(number(v, "scale", false));
  for (const auto& r : hist)
    for (const auto& v : r) out.history.push_back(number(v, "amax_history", true));
  fp8::check_scales(fmt::format("the scale of the {}", where), out.scale);
  fp8::check_amax_history(fmt::format("the amax_history of the {}", where), out.history, slots);
  return out;
}

int64_t parse_int(const std::string& key, const std::string& value) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MANTISSA_CHECK(used == value.size() && !value.empty(), "TransformerEnginePrecision",
                 "{} must be an integer, got '{}'", key, value);
  return v;
}

}  // namespace

TransformerEngineOptions transformer_engine_options_from(
    const std::map<std::string, std::string>& settings, const std::set<std::string>& given) {
  TransformerEngineOptions o;
  for (const auto& [key, value] : settings) {
    if (key == "fp8_recipe") {
      o.recipe.kind = fp8::recipe_kind_from_string(value);
    } else if (key == "fp8_power_2_scales") {
      MANTISSA_CHECK(value == "true" || value == "false", "TransformerEnginePrecision",
                     "fp8_power_2_scales must be 'true' or 'false', got '{}'",
                     escape_untrusted(value));
      o.recipe.use_power_2_scales = value == "true";
    } else if (key == "fp8_fp32_scales") {
      MANTISSA_CHECK(value == "true" || value == "false", "TransformerEnginePrecision",
                     "fp8_fp32_scales must be 'true' or 'false', got '{}'",
                     escape_untrusted(value));
      o.recipe.use_fp32_scales = value == "true";
    } else if (key == "fp8_disable_rht" || key == "fp8_disable_stochastic_rounding" ||
               key == "fp8_disable_2d_quantization") {
      MANTISSA_CHECK(value == "true" || value == "false", "TransformerEnginePrecision",
                     "{} must be 'true' or 'false', got '{}'", key, escape_untrusted(value));
      bool& field = key == "fp8_disable_rht" ? o.recipe.disable_rht
                    : key == "fp8_disable_stochastic_rounding"
                        ? o.recipe.disable_stochastic_rounding
                        : o.recipe.disable_2d_quantization;
      field = value == "true";
    } else if (key == "fp8_enable_rht" || key == "fp8_enable_stochastic_rounding") {
      MANTISSA_CHECK(value == "true" || value == "false", "TransformerEnginePrecision",
                     "{} must be 'true' or 'false', got '{}'", key, escape_untrusted(value));
      (key == "fp8_enable_rht" ? o.recipe.enable_rht : o.recipe.enable_stochastic_rounding) =
          value == "true";
    } else if (key == "fp8_format") {
      o.recipe.fp8_format = fp8::format_from_string(value);
    } else if (key == "fp8_amax_history_len") {
      o.recipe.amax_history_len = parse_int(key, value);
    } else if (key == "fp8_amax_compute_algo") {
      o.recipe.amax_compute_algo = fp8::amax_compute_algo_from_string(value);
    } else if (key == "fp8_margin") {
      o.recipe.margin = static_cast<int>(parse_int(key, value));
    } else if (key == "fp8_exclude") {
      // Comma-separated module names, spaces around each ignored ("h0, h1"). An empty list or
      // item ("", "net.0,") names no module: refused, as --optim-bits-32 refuses it, rather
      // than dropped while the user believes a layer stays out of FP8.
      size_t start = 0;
      while (true) {
        const size_t comma = value.find(',', start);
        std::string name =
            value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t first = name.find_first_not_of(" \t");
        name = first == std::string::npos
                   ? std::string()
                   : name.substr(first, name.find_last_not_of(" \t") - first + 1);
        MANTISSA_CHECK(!name.empty(), "TransformerEnginePrecision",
                       "fp8_exclude '{}' has an empty module name; give comma-separated module "
                       "names as the model summary shows them, such as net.0,h0",
                       escape_untrusted(value));
        o.exclude.push_back(name);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      fail("TransformerEnginePrecision",
           "unknown option '{}'; valid options are: fp8_recipe, fp8_format, "
           "fp8_amax_history_len, fp8_amax_compute_algo, fp8_margin, fp8_power_2_scales, "
           "fp8_fp32_scales, fp8_disable_rht, fp8_disable_stochastic_rounding, "
           "fp8_disable_2d_quantization, fp8_enable_rht, fp8_enable_stochastic_rounding, "
           "fp8_exclude",
           key);
    }
  }
  // The recipe's field behind each given key a recipe may not read.
  std::set<std::string> given_fields;
  for (const char* key :
       {"fp8_format", "fp8_margin", "fp8_amax_history_len", "fp8_amax_compute_algo"}) {
    if (given.contains(key))
      given_fields.insert(std::string(key) == "fp8_format" ? key : key + 4);  // "margin", ...
  }
  o.recipe.validate(given_fields);
  return o;
}

std::unique_ptr<Precision> make_transformer_engine_precision(const PrecisionOptions& options) {
  TransformerEngineOptions o = transformer_engine_options_from(options.extra);
  if (const PrecisionEntry* entry = find_precision(options.precision))
    o.emulation_warning = emulation_warning(*entry, options.accelerator, this_machine());
  return std::make_unique<TransformerEnginePrecision>(options.precision, std::move(o));
}

nlohmann::json fp8_stats_json(const Fp8Stats& stats) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [layer, roles] : stats) {
    for (const auto& [role, s] : roles) {
      j[layer][role] = {{"scale", s.scale},
                        {"amax", s.amax},
                        {"peak", s.peak},
                        {"saturated_fraction", s.saturated_fraction},
                        {"flushed_fraction", s.flushed_fraction},
                        {"casts", s.casts}};
    }
  }
  return j;
}

bool holds_fp8_layers(nn::Module& module) {
  bool found = is_fp8_layer(module);
  walk(module, "", [&](const std::string&, nn::Module& m) { found = found || is_fp8_layer(m); });
  return found;
}

std::vector<std::string> Fp8ExcludeMatch::candidates(const std::string& wanted) const {
  std::vector<std::string> ends;
  for (const std::string& q : names)
    if (ends.size() < 5 && q.size() > wanted.size() && q.ends_with(wanted) &&
        q[q.size() - wanted.size() - 1] == '.')
      ends.push_back(q);
  return ends.empty() ? closest_names(wanted, names, 5) : ends;
}

Fp8ExcludeMatch match_fp8_exclude(nn::Module& module, const std::vector<std::string>& exclude) {
  Fp8ExcludeMatch match;
  const auto modules = module.named_modules(/*remove_duplicate=*/false);
  for (const auto& [q, m] : modules)
    if (!q.empty()) match.names.push_back(q);  // the root has no name to exclude
  for (const std::string& e : exclude) {
    if (std::find(match.names.begin(), match.names.end(), e) == match.names.end()) {
      match.unmatched.push_back(e);
      continue;
    }
    const bool holds_fp8 = std::any_of(modules.begin(), modules.end(), [&](const auto& named) {
      const std::string& q = named.first;
      const bool inside = q == e || (q.size() > e.size() && q.starts_with(e) && q[e.size()] == '.');
      return inside && has_fp8_twin(q, *named.second);
    });
    if (!holds_fp8) match.idle.push_back(e);
  }
  return match;
}

void check_fp8_exclude(nn::Module& module, const std::vector<std::string>& exclude) {
  // A name to keep out that names no layer is a typo, not a request: say so (as
  // --optim-bits-32 does) instead of quietly converting the layer it meant.
  const Fp8ExcludeMatch match = match_fp8_exclude(module, exclude);
  if (!match.unmatched.empty()) {
    const std::string& e = match.unmatched.front();
    fail("TransformerEnginePrecision",
         "fp8_exclude names '{}', but the model ({}) has no such layer; closest names: {}", e,
         module.name(), fmt::join(match.candidates(e), ", "));
  }
  MANTISSA_CHECK(match.idle.empty(), "TransformerEnginePrecision",
                 "fp8_exclude names '{}', which holds no layer that runs in FP8 (only Linear "
                 "layers and LayerNorms do, LoRA adapters aside): leave it out",
                 match.idle.empty() ? std::string() : match.idle.front());
}

TransformerEnginePrecision::TransformerEnginePrecision(const std::string& precision,
                                                       TransformerEngineOptions options)
    : precision_(precision), options_(std::move(options)) {
  MANTISSA_CHECK(precision == "transformer-engine" || precision == "transformer-engine-float16",
                 "TransformerEnginePrecision",
                 "precision must be 'transformer-engine' (bfloat16 weights) or "
                 "'transformer-engine-float16' (float16 weights), got '{}'",
                 precision);
  options_.recipe.validate();
  dtype_ = precision == "transformer-engine" ? kBFloat16 : kFloat16;
}

void TransformerEnginePrecision::convert_module(nn::Module& module) {
  // Checked before anything is replaced, so a refused call leaves the model as it was and a
  // retry with the corrected names converts it.
  if (options_.replace_layers) check_fp8_exclude(module, options_.exclude);
  // One precision converts a model: the 4-/8-bit layers BitsandbytesPrecision made are no
  // nn::Linear, so they would be left as they are, beside FP8 layers, and the run would train a
  // mix under the name transformer-engine.
  const std::vector<std::string> quantized = describe_quantized_layers(module);
  MANTISSA_CHECK(quantized.empty(), "TransformerEnginePrecision",
                 "the model ({}) holds layers quantized by BitsandbytesPrecision ({}); the FP8 "
                 "precision replaces nn::Linear layers and would leave those as they are: train "
                 "the full-precision model in FP8 (build it again, or load its float weights "
                 "into a fresh one), or keep the quantized model under its own precision",
                 module.name(), fmt::join(quantized, ", "));
  module_ = &module;
  // The stochastic rounding of nvfp4 (and of mxfp4 where enabled) draws from a stream seeded by
  // the run's seed (not advancing the default generator, so the data order stays that of the
  // other precisions).
  if (options_.recipe.uses_sr_stream())
    fp8::nvfp4_sr_stream() = {default_generator().initial_seed(), 0};
  if (options_.replace_layers && holds_fp8_layers(module)) {
    // As Lightning: a model built with FP8 layers is left alone.
    fmt::print(stderr,
               "mantissa: TransformerEnginePrecision: the model already holds FP8 layers; "
               "no layers are replaced\n");
  } else if (options_.replace_layers) {
    const int64_t len = options_.recipe.history_rows();
    const auto& skip = options_.exclude;
    // replace_modules matches a shared layer once, under its first name; one that fp8_exclude
    // names (or is inside a module it names) under another of its names is kept too.
    const std::unordered_set<const nn::Module*> excluded =
        nn::modules_with_a_name(module, [&](const std::string& q) {
          return std::any_of(skip.begin(), skip.end(), [&](const std::string& e) {
            return q == e || (q.size() > e.size() && q.starts_with(e) && q[e.size()] == '.');
          });
        });
    const nn::ModuleMatch linear = nn::match_type<nn::Linear>(skip);
    replaced_ += nn::replace_modules(
        module,
        [&](const std::string& q, nn::Module& m) {
          return excluded.count(&m) == 0 && linear(q, m) && has_fp8_twin(q, m);
        },
        [&](const std::string&, std::shared_ptr<nn::Module> old) -> std::shared_ptr<nn::Module> {
          return fp8::Linear::from_linear(static_cast<const nn::Linear&>(*old), len);
        });
    replaced_ += nn::replace_modules(
        module,
        [&](const std::string& q, nn::Module& m) {
          return excluded.count(&m) == 0 && nn::match_type<nn::LayerNorm>(skip)(q, m) &&
                 has_fp8_twin(q, m);
        },
        [&](const std::string&, std::shared_ptr<nn::Module> old) -> std::shared_ptr<nn::Module> {
          return fp8::LayerNorm::from_layer_norm(static_cast<const nn::LayerNorm&>(*old));
        });
  }
  // No Linear left to run in FP8 (all excluded, or none in the model): the run is bf16 (or
  // fp16) without FP8, which the precision's name would not tell, and no FP8 is emulated.
  bool any_fp8_linear = false;
  walk(module, "", [&](const std::string&, nn::Module& m) {
    any_fp8_linear = any_fp8_linear || dynamic_cast<fp8::Fp8Module*>(&m) != nullptr;
  });
  if (any_fp8_linear && !options_.emulation_warning.empty()) warn_once(options_.emulation_warning);
  if (!any_fp8_linear && options_.replace_layers) {
    warn(fmt::format(
        "TransformerEnginePrecision: no layer of {} runs in FP8 ({}): it trains in {} "
        "without FP8 products",
        module.name(),
        options_.exclude.empty() ? "it has no Linear layer"
                                 : fmt::format("fp8_exclude keeps out every Linear layer: {}",
                                               fmt::join(options_.exclude, ",")),
        dtype_.name()));
  }
  // Layers built with another history length follow the recipe (truncated or zero-padded).
  fp8_forwards_at_setup_.clear();
  walk(module, "", [&](const std::string& q, nn::Module& m) {
    if (auto* f = dynamic_cast<fp8::Fp8Module*>(&m)) {
      f->set_amax_history_len(options_.recipe.history_rows());
      fp8_forwards_at_setup_.emplace_back(q, f->fp8_forwards());
    }
  });
  module.to(dtype_);
}

void TransformerEnginePrecision::check_first_training_step() const {
  if (!module_ || fp8_forwards_at_setup_.empty()) return;
  std::vector<std::string> idle;
  size_t i = 0;
  walk(*module_, "", [&](const std::string& q, nn::Module& m) {
    const auto* f = dynamic_cast<const fp8::Fp8Module*>(&m);
    if (f == nullptr || i >= fp8_forwards_at_setup_.size()) return;
    const auto& [name, at_setup] = fp8_forwards_at_setup_[i++];
    if (name == q && f->fp8_forwards() == at_setup) idle.push_back(q);
  });
  if (idle.empty()) return;
  const std::string names = first_names(idle, 4);
  const std::string why = fmt::format(
      "forward calls the layers they replaced through member pointers kept from the "
      "constructor, which run in {} without FP8; call the module in the slot "
      "(child(\"fc1\")->forward(x)) (docs/trainer.md, \"Swapped layers\")",
      dtype_.name());
  MANTISSA_CHECK(idle.size() < fp8_forwards_at_setup_.size(), "TransformerEnginePrecision",
                 "none of the {} FP8 layers ran in the first training step ({}): {}",
                 fp8_forwards_at_setup_.size(), names, why);
  warn(
      fmt::format("TransformerEnginePrecision: {} of the {} FP8 layers did not run in the first "
                  "training step ({}): if {}",
                  idle.size(), fp8_forwards_at_setup_.size(), names, why));
}

ScopePtr TransformerEnginePrecision::tensor_init_context() { return default_dtype_scope(dtype_); }

ScopePtr TransformerEnginePrecision::forward_context() {
  return std::make_unique<Fp8StepScope>(dtype_, options_.recipe);
}

data::Example TransformerEnginePrecision::convert_input(const data::Example& batch) const {
  data::Example out = batch;
  if (out.input.defined() && out.input.is_floating_point()) out.input = out.input.to(dtype_);
  if (out.target.defined() && out.target.is_floating_point()) out.target = out.target.to(dtype_);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<fp8::ScalingState>>>
TransformerEnginePrecision::fp8_states() const {
  std::vector<std::pair<std::string, std::shared_ptr<fp8::ScalingState>>> out;
  if (!module_) return out;
  if (auto* f = dynamic_cast<fp8::Fp8Module*>(module_)) out.emplace_back("", f->fp8_state());
  walk(*module_, "", [&](const std::string& q, nn::Module& m) {
    if (auto* f = dynamic_cast<fp8::Fp8Module*>(&m)) out.emplace_back(q, f->fp8_state());
  });
  return out;
}

nlohmann::json TransformerEnginePrecision::state_dict() const {
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [name, st] : fp8_states()) {
    nlohmann::json hist = nlohmann::json::array();
    for (int64_t r = 0; r < st->history_len(); ++r) hist.push_back(to_floats(st->amax_history[r]));
    meta[name] = {{"scale", to_floats(st->scale)}, {"amax_history", hist}};
  }
  nlohmann::json out = {{"recipe", options_.recipe.to_json()}, {"fp8_meta", meta}};
  if (options_.recipe.uses_sr_stream()) {
    const fp8::SrStream& sr = fp8::nvfp4_sr_stream();
    out["sr_stream"] = {
        {"seed", sr.seed}, {"offset", sr.offset}, {"bits_per_element", fp8::kSrBitsPerElement}};
  }
  return out;
}

void TransformerEnginePrecision::load_state_dict(const nlohmann::json& state) {
  if (state.contains("recipe")) {
    const fp8::Recipe saved = fp8::Recipe::from_json(state.at("recipe"));
    MANTISSA_CHECK(saved == options_.recipe, "TransformerEnginePrecision", "{}",
                   fp8::recipe_mismatch(saved, options_.recipe));
  }
  std::optional<fp8::SrStream> stream;
  if (options_.recipe.uses_sr_stream() && state.contains("sr_stream")) {
    const nlohmann::json& sr = state.at("sr_stream");
    MANTISSA_CHECK(sr.is_object() && sr.contains("seed") && sr.contains("offset") &&
                       sr.at("seed").is_number_unsigned() && sr.at("offset").is_number_unsigned(),
                   "TransformerEnginePrecision",
                   "sr_stream (the stochastic rounding stream) must be an object "
                   "with the unsigned integers 'seed' and 'offset', got {}",
                   escape_untrusted(sr.dump()));
    // The draw the stream's writer made: a record without it is from a build that drew a
    // 32-bit word per element, whose run resumes with this build's draw.
    if (sr.contains("bits_per_element")) {
      const nlohmann::json& bits = sr.at("bits_per_element");
      MANTISSA_CHECK(bits.is_number_unsigned() && bits.get<uint64_t>() == fp8::kSrBitsPerElement,
                     "TransformerEnginePrecision",
                     "sr_stream's bits_per_element is {}: this build's stochastic rounding draws "
                     "{} random bits per element and cannot resume another draw",
                     escape_untrusted(bits.dump()), fp8::kSrBitsPerElement);
    } else {
      warn(fmt::format(
          "TransformerEnginePrecision: the checkpoint's stochastic rounding stream has no "
          "bits_per_element: it was written by a build that drew a 32-bit random word per "
          "element. The run resumes from its seed and offset, but the stochastic rounding from "
          "here on draws {} bits per element, so its codes differ from those that build would "
          "have drawn",
          fp8::kSrBitsPerElement));
    }
    stream = fp8::SrStream{sr.at("seed").get<uint64_t>(), sr.at("offset").get<uint64_t>()};
  }
  if (!state.contains("fp8_meta")) {
    if (stream) fp8::nvfp4_sr_stream() = *stream;
    return;
  }
  const nlohmann::json& meta = state.at("fp8_meta");
  MANTISSA_CHECK(meta.is_object(), "TransformerEnginePrecision",
                 "fp8_meta must be a JSON object of layers, got {}", meta.type_name());
  // Every layer read and checked before any changes.
  const auto states = fp8_states();
  std::vector<MetaValues> values;
  for (const auto& [name, st] : states)
    values.push_back(read_meta_entry(meta, name, st->num_slots(), st->history_len()));
  for (size_t k = 0; k < states.size(); ++k) {
    const auto& st = states[k].second;
    std::copy(values[k].scale.begin(), values[k].scale.end(), st->scale.data<float>());
    std::copy(values[k].history.begin(), values[k].history.end(), st->amax_history.data<float>());
  }
  if (stream) fp8::nvfp4_sr_stream() = *stream;
}

void check_fp8_meta_matches_tensors(const nlohmann::json& state, const nn::StateDict& model) {
  if (!state.is_object() || !state.contains("fp8_meta") || !state.at("fp8_meta").is_object())
    return;
  const nlohmann::json& meta = state.at("fp8_meta");
  for (const auto& [layer, entry] : meta.items()) {
    const std::string prefix = layer.empty() ? "" : layer + ".";
    const std::string scale_key = prefix + fp8::kScaleBufferName;
    const std::string hist_key = prefix + fp8::kAmaxHistoryBufferName;
    if (!model.contains(scale_key) || !model.contains(hist_key)) continue;
    const Tensor& scale_t = model.at(scale_key);
    const Tensor& hist_t = model.at(hist_key);
    if (scale_t.dim() != 1 || hist_t.dim() != 2 || hist_t.size(1) != scale_t.size(0)) continue;
    const std::vector<float> scale = to_floats(scale_t.to(kFloat32));
    const std::vector<float> hist = to_floats(hist_t.to(kFloat32));
    const MetaValues saved = read_meta_entry(meta, layer, scale_t.size(0), hist_t.size(0));
    auto differ = [&](const std::string& key, const std::vector<float>& tensor,
                      const std::vector<float>& json, const char* field) {
      for (size_t i = 0; i < tensor.size(); ++i) {
        if (tensor[i] == json[i]) continue;
        fail("TransformerEnginePrecision",
             "the two copies of the FP8 state of layer '{}' differ: the tensor 'model.{}' "
             "holds {} at index {} but the precision plugin's fp8_meta {} holds {} there; no "
             "run writes that: the file was damaged or edited; use an earlier checkpoint",
             escape_untrusted(layer), escape_untrusted(key), tensor[i], i, field, json[i]);
      }
    };
    differ(scale_key, scale, saved.scale, "scale");
    differ(hist_key, hist, saved.history, "amax_history");
  }
}

Fp8Stats TransformerEnginePrecision::take_stats() {
  Fp8Stats out;
  for (const auto& [name, st] : fp8_states()) {
    for (fp8::Role role : {fp8::Role::kInput, fp8::Role::kWeight, fp8::Role::kGradOutput}) {
      const int slot = static_cast<int>(role);
      const fp8::CastCounts c = st->take_counts(slot);
      Fp8RoleStats s;
      s.scale = st->scale_of(slot);
      s.amax = st->scale_amax(slot);
      s.peak = c.peak;
      s.casts = c.total;
      if (c.total > 0) {
        s.saturated_fraction = static_cast<double>(c.saturated) / static_cast<double>(c.total);
        s.flushed_fraction = static_cast<double>(c.flushed) / static_cast<double>(c.total);
      }
      out[name][fp8::role_name(role)] = s;
    }
  }
  return out;
}

}  // namespace mantissa::train
