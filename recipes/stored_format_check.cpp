#include "mantissa/recipes/stored_format_check.h"

#include <fmt/format.h>

#include <optional>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {
namespace {

// The quantized or FP8 state a file's tensors hold: the first tensor of each kind, by name.
struct StoredState {
  std::string four_bit;     // "<weight>.quant_state.bitsandbytes__nf4" (or __fp4)
  std::string nested;       // "<weight>.nested_absmax": double-quantized 4-bit absmax
  std::string int8_scales;  // "<layer>.SCB": LLM.int8's row scales
  std::string fp8;          // "<layer>.fp8_scale" or "<layer>.fp8_amax_history"
};

StoredState stored_state(const io::SafetensorsHeader& header) {
  StoredState s;
  auto first = [](std::string& slot, const std::string& name) {
    if (slot.empty()) slot = name;
  };
  for (const io::SafetensorsTensorInfo& t : header.tensors) {
    const std::string& n = t.name;
    if (n.ends_with(".quant_state.bitsandbytes__nf4") ||
        n.ends_with(".quant_state.bitsandbytes__fp4"))
      first(s.four_bit, n);
    else if (n.ends_with(".nested_absmax"))
      first(s.nested, n);
    else if (n.ends_with(".SCB"))
      first(s.int8_scales, n);
    else if (n.ends_with(".fp8_scale") || n.ends_with(".fp8_amax_history"))
      first(s.fp8, n);
  }
  return s;
}

// The precision the state implies and how the tensors show it; nullopt when they show none
// (full-precision weights, int8-training's float weights, or an FP8 run, which has a family of
// precisions: `fp8` is checked apart).
struct Implied {
  std::string precision;
  std::string shown;
};
std::optional<Implied> implied_precision(const StoredState& s) {
  if (!s.four_bit.empty()) {
    const std::string format = s.four_bit.ends_with("__nf4") ? "nf4" : "fp4";
    const std::string weights = fmt::format("{} weights ({})", format, quote_untrusted(s.four_bit));
    if (!s.nested.empty())
      return Implied{format + "-dq", fmt::format("{} with double-quantized absmax ({})", weights,
                                                 quote_untrusted(s.nested))};
    return Implied{format, weights + " without double-quantized absmax"};
  }
  if (!s.int8_scales.empty())
    return Implied{"int8", fmt::format("LLM.int8 weights ({})", quote_untrusted(s.int8_scales))};
  return std::nullopt;
}

// The compute dtype a --quant-dtype value names, as the plugin state records it.
std::string plugin_dtype_of(const std::string& quant_dtype) {
  if (quant_dtype == "bf16") return "bfloat16";
  if (quant_dtype == "fp16") return "float16";
  if (quant_dtype == "fp32") return "float32";
  return "";
}

}  // namespace

void check_stored_format(const io::SafetensorsHeader& header, const std::string& path,
                         const char* where, const std::string& advice) {
  const nlohmann::json meta = metadata_json(header.metadata, train::kCheckpointMetadataKey, path,
                                            "the trainer metadata", where, nullptr);
  // A checkpoint's trainer metadata, or a --save-weights file's own "precision" entry.
  std::optional<std::string> precision;
  std::string field = "the trainer metadata's precision";
  if (meta.is_object()) {
    if (meta.contains("precision") && meta.at("precision").is_string())
      precision = meta.at("precision").get<std::string>();
  } else if (const auto it = header.metadata.find("precision"); it != header.metadata.end()) {
    precision = it->second;
    field = "its metadata's precision";
  }
  const StoredState stored = stored_state(header);
  if (precision) {
    const std::string shown = quote_untrusted(*precision);
    if (const std::optional<Implied> implied = implied_precision(stored);
        implied && *precision != implied->precision) {
      fail(where,
           "{}: {} is {}, but its tensors hold {}, which precision {} writes; the file is "
           "damaged: {}",
           path, field, shown, implied->shown, implied->precision, advice);
    }
    if (!stored.fp8.empty() && !train::precision_traits(*precision).fp8) {
      fail(where,
           "{}: {} is {}, but its tensors hold FP8 state ({}), which only the transformer-engine "
           "precisions write; the file is damaged: {}",
           path, field, shown, quote_untrusted(stored.fp8), advice);
    }
  }
  // The quantized layers' compute dtype, recorded twice: as the run's --quant-dtype and in the
  // plugin's state. Each value's own damage (a dtype no flag takes) is the hyperparameters'
  // check (model_hparams.h).
  if (!meta.is_object()) return;
  const nlohmann::json* hparams =
      meta.contains("hyper_parameters") ? &meta.at("hyper_parameters") : nullptr;
  const nlohmann::json* plugin = &meta;
  for (const char* key : {"precision_plugin", "BitsandbytesPrecision", "dtype"})
    plugin = plugin != nullptr && plugin->is_object() && plugin->contains(key) ? &plugin->at(key)
                                                                               : nullptr;
  if (hparams == nullptr || !hparams->is_object() || !hparams->contains("quant-dtype") ||
      plugin == nullptr || !plugin->is_string())
    return;
  const nlohmann::json& quant_dtype = hparams->at("quant-dtype");
  if (!quant_dtype.is_string()) return;
  const std::string expected = plugin_dtype_of(quant_dtype.get<std::string>());
  if (expected.empty() || expected == plugin->get<std::string>()) return;
  fail(where,
       "{}: hyper_parameters.quant-dtype is {}, but the precision plugin's state says its "
       "quantized layers compute in {} (precision_plugin.BitsandbytesPrecision.dtype); the file "
       "is damaged: {}",
       path, quote_untrusted(quant_dtype.get<std::string>()),
       quote_untrusted(plugin->get<std::string>()), advice);
}

}  // namespace mantissa::recipes
