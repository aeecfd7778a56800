#include "model_hparams.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <type_traits>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"

namespace mantissa::recipes {
namespace {

// Why the file's tensors contradict a size it records, or "" (also when they do not show it).
template <typename T>
using Contradiction = std::function<std::string(const T& recorded)>;

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

// A value as it is written after its flag: strings without JSON's quotes. From the file, so
// escaped (docs/design.md, "Untrusted files").
std::string as_flag_value(const nlohmann::json& v) {
  return escape_untrusted(v.is_string() ? v.get<std::string>() : v.dump());
}

// What the file's tensors say against a recorded size (see take); "" where they agree or do
// not tell.
std::string hidden_contradiction(const std::string& hidden, const TensorShapes& shapes) {
  const std::vector<int64_t> outputs = mlp_layer_outputs(shapes);  // hidden..., then 10
  if (outputs.size() < 2) return "";
  const std::vector<int64_t> in_file(outputs.begin(), outputs.end() - 1);
  if (parse_hidden_sizes(hidden) == in_file) return "";
  return fmt::format(
      "is {}, but the file's tensors are those of hidden '{}' (its layers' "
      "biases have {} outputs)",
      as_flag_value(hidden), fmt::join(in_file, ","), fmt::join(outputs, ", "));
}

// The GPT's sizes: `in_file` is what the tensors show (nullopt: they do not), `shown_by` how.
Contradiction<int64_t> gpt_contradiction(std::optional<int64_t> in_file, const char* shown_by) {
  return [in_file, shown_by](const int64_t& recorded) -> std::string {
    if (!in_file || *in_file == recorded) return "";
    return fmt::format("is {}, but the file's tensors say {} ({})", recorded, *in_file, shown_by);
  };
}

// Reads hparams[key] into `out` when the key is there and the command line left it unset.
// Whether a value read from the file can be used: of the option's type, and a string without
// control characters (a model name, sizes or a path; an escape sequence would reach the
// terminal in the messages that quote it). Returns why not, or "".
template <typename T>
std::string damage_of(const nlohmann::json& v) {
  const bool fits = std::is_same_v<T, std::string> ? v.is_string()
                    : std::is_integral_v<T>        ? v.is_number_integer()
                                                   : v.is_number();
  if (!fits) return fmt::format("has the wrong type ({})", v.type_name());
  if constexpr (std::is_same_v<T, std::string>) {
    std::string plain = v.get<std::string>();
    std::erase(plain, '\\');  // a backslash is fine; escape_untrusted doubles it
    if (escape_untrusted(plain, plain.size() + 1) != plain)
      return fmt::format("holds control characters or invalid UTF-8 ({})",
                         quote_untrusted(v.get<std::string>()));
  }
  return "";
}

// Reads hparams[key] into `out` when the key is there and the command line left it unset; a
// given flag is checked against it (Override) or wins. A damaged value (of the wrong type, or
// one the tensors contradict) is an error unless the flag is given, which then replaces it.
template <typename T>
void take(const nlohmann::json& hparams, const std::string& key, const std::string& source,
          const std::function<bool(const std::string&)>& given, Override rule, T& out,
          const Contradiction<T>& contradiction = nullptr) {
  const auto it = hparams.find(key);
  if (it == hparams.end()) return;
  std::string damage = damage_of<T>(*it);
  if (damage.empty() && contradiction) damage = contradiction(it->get<T>());
  if (!given(key)) {
    MANTISSA_CHECK(damage.empty(), "eval",
                   "{}: hyper_parameters.{} {}; the file is damaged: pass --{} as trained", source,
                   key, damage, key);
    out = it->get<T>();
    return;
  }
  MANTISSA_CHECK(rule == Override::kAllowed || !damage.empty() || it->get<T>() == out, "eval",
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
                         const TensorShapes& shapes,
                         const std::function<bool(const std::string& flag)>& given, TrainOptions& o,
                         GptOptions& g) {
  MANTISSA_CHECK(hparams.is_object(), "eval",
                 "{}: hyper_parameters must be a JSON object, got {}; the file is damaged", source,
                 hparams.type_name());
  take(hparams, "model", source, given, Override::kMustMatch, o.model);
  take(hparams, "hidden", source, given, Override::kMustMatch, o.hidden,
       Contradiction<std::string>([&](const std::string& hidden) {
         return o.model == "mlp" ? hidden_contradiction(hidden, shapes) : "";
       }));
  take(hparams, "patch", source, given, Override::kMustMatch, o.vit_patch);
  take(hparams, "pool", source, given, Override::kMustMatch, o.vit_pool);
  const GptSizes sizes = gpt_sizes(shapes);
  take(hparams, "layers", source, given, Override::kMustMatch, g.layers,
       gpt_contradiction(sizes.layers, "the blocks h0, h1, ... it holds"));
  take(hparams, "width", source, given, Override::kMustMatch, g.width,
       gpt_contradiction(sizes.width, "the columns of wte.weight"));
  take(hparams, "heads", source, given, Override::kMustMatch, g.heads);
  take(hparams, "context", source, given, Override::kMustMatch, g.context,
       gpt_contradiction(sizes.context, "the rows of wpe.weight"));
  take(hparams, "text", source, given, Override::kAllowed, g.text);
  take(hparams, "lora-rank", source, given, Override::kAllowed, o.quant.lora_rank);
  take(hparams, "lora-alpha", source, given, Override::kAllowed, o.quant.lora_alpha);
  take(hparams, "quant-ignore", source, given, Override::kAllowed, o.quant.quant_ignore);
  take(hparams, "quant-dtype", source, given, Override::kAllowed, o.quant.quant_dtype);
}

}  // namespace mantissa::recipes
