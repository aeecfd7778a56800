#include "model_hparams.h"

#include <type_traits>

#include "mantissa/core/error.h"

namespace mantissa::recipes {
namespace {

nlohmann::json adapter_hparams(const TrainOptions& o) {
  return {{"lora-rank", o.quant.lora_rank},
          {"lora-alpha", o.quant.lora_alpha},
          {"quant-ignore", o.quant.quant_ignore},
          {"quant-dtype", o.quant.quant_dtype}};
}

// Whether a flag given on the command line may differ from the file: the model's shape may
// not (a wrong head count would even load, and compute something else), the rest may (another
// corpus, another adapter scale).
enum class Override { kAllowed, kMustMatch };

// A value as it is written after its flag: strings without JSON's quotes.
std::string as_flag_value(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Reads hparams[key] into `out` when the key is there and the command line left it unset.
template <typename T>
void take(const nlohmann::json& hparams, const std::string& key, const std::string& source,
          const std::function<bool(const std::string&)>& given, Override rule, T& out) {
  const auto it = hparams.find(key);
  if (it == hparams.end()) return;
  const bool fits = std::is_same_v<T, std::string> ? it->is_string()
                    : std::is_integral_v<T>        ? it->is_number_integer()
                                                   : it->is_number();
  MANTISSA_CHECK(fits, "eval",
                 "{}: hyper_parameters.{} has the wrong type ({}); the file is damaged: pass "
                 "--{} as trained",
                 source, key, it->type_name(), key);
  if (!given(key)) {
    out = it->get<T>();
    return;
  }
  MANTISSA_CHECK(rule == Override::kAllowed || it->get<T>() == out, "eval",
                 "{} was trained with --{} {}, but --{} is {} here: leave --{} out (the file "
                 "records it)",
                 source, key, as_flag_value(*it), key, as_flag_value(nlohmann::json(out)), key);
}

}  // namespace

nlohmann::json image_model_hparams(const TrainOptions& o) {
  nlohmann::json j = {{"model", o.model}};
  if (o.model == "mlp") j["hidden"] = o.hidden;
  if (o.model == "vit") {
    j["patch"] = o.vit_patch;
    j["pool"] = o.vit_pool;
  }
  j.update(adapter_hparams(o));
  return j;
}

nlohmann::json gpt_model_hparams(const TrainOptions& o, const GptOptions& g) {
  nlohmann::json j = {{"model", "gpt"},   {"layers", g.layers},   {"width", g.width},
                      {"heads", g.heads}, {"context", g.context}, {"text", g.text}};
  j.update(adapter_hparams(o));
  return j;
}

void apply_model_hparams(const nlohmann::json& hparams, const std::string& source,
                         const std::function<bool(const std::string& flag)>& given, TrainOptions& o,
                         GptOptions& g) {
  MANTISSA_CHECK(hparams.is_object(), "eval",
                 "{}: hyper_parameters must be a JSON object, got {}; the file is damaged", source,
                 hparams.type_name());
  take(hparams, "model", source, given, Override::kMustMatch, o.model);
  take(hparams, "hidden", source, given, Override::kMustMatch, o.hidden);
  take(hparams, "patch", source, given, Override::kMustMatch, o.vit_patch);
  take(hparams, "pool", source, given, Override::kMustMatch, o.vit_pool);
  take(hparams, "layers", source, given, Override::kMustMatch, g.layers);
  take(hparams, "width", source, given, Override::kMustMatch, g.width);
  take(hparams, "heads", source, given, Override::kMustMatch, g.heads);
  take(hparams, "context", source, given, Override::kMustMatch, g.context);
  take(hparams, "text", source, given, Override::kAllowed, g.text);
  take(hparams, "lora-rank", source, given, Override::kAllowed, o.quant.lora_rank);
  take(hparams, "lora-alpha", source, given, Override::kAllowed, o.quant.lora_alpha);
  take(hparams, "quant-ignore", source, given, Override::kAllowed, o.quant.quant_ignore);
  take(hparams, "quant-dtype", source, given, Override::kAllowed, o.quant.quant_dtype);
}

}  // namespace mantissa::recipes
