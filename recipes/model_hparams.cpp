#include "mantissa/recipes/model_hparams.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/fp8/recipe.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::recipes {
namespace {

// Why the file's tensors contradict a size it records, or "" (also when they do not show it).
template <typename T>
using Contradiction = std::function<std::string(const T& recorded)>;

nlohmann::json adapter_hparams(const TrainOptions& o) {
  return {{"lora-rank", o.quant.lora_rank},
          {"lora-alpha", o.quant.lora_alpha},
          {"lora-dropout", o.quant.lora_dropout},
          {"quant-ignore", o.quant.quant_ignore},
          {"quant-dtype", o.quant.quant_dtype}};
}

// --fp8-exclude's names in one spelling: trimmed (as the plugin reads them), sorted, without
// repeats or empty names ("h0,head").
std::string canonical_exclude(const std::string& names) {
  std::vector<std::string> list;
  for (size_t start = 0; start <= names.size();) {
    const size_t comma = std::min(names.find(',', start), names.size());
    const std::string item = names.substr(start, comma - start);
    const size_t first = item.find_first_not_of(" \t");
    if (first != std::string::npos)
      list.push_back(item.substr(first, item.find_last_not_of(" \t") - first + 1));
    start = comma + 1;
  }
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  return fmt::format("{}", fmt::join(list, ","));
}

// Whether a flag given on the command line may differ from the file: the model's shape may
// not (a wrong head count would even load, and compute something else), the rest may (another
// corpus, another adapter scale).
enum class Override { kAllowed, kMustMatch };

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
// A size below 1 is damage even where the tensors do not tell (the GPT refused it only once
// built, in its own words, without naming the file).
Contradiction<int64_t> gpt_contradiction(std::optional<int64_t> in_file, const char* shown_by) {
  return [in_file, shown_by](const int64_t& recorded) -> std::string {
    if (recorded < 1) return fmt::format("is {}, but a GPT's sizes are at least 1", recorded);
    if (!in_file || *in_file == recorded) return "";
    return fmt::format("is {}, but the file's tensors say {} ({})", recorded, *in_file, shown_by);
  };
}

// The GPT's head count, which no tensor shows: at least 1, and a divisor of the width (each
// head takes width / heads of the embedding). `width` is the file's (its tensors', else its
// record's), or the run's.
Contradiction<int64_t> heads_contradiction(int64_t width) {
  return [width](const int64_t& heads) -> std::string {
    if (heads < 1) return fmt::format("is {}, but a GPT has at least 1 attention head", heads);
    if (width % heads == 0) return "";
    return fmt::format("is {}, which does not divide the width {} (each head takes width / heads)",
                       heads, width);
  };
}

// The adapters' rank, which the file's lora_A weights show (their rows); a file with tensors
// but none of them was written by a run without adapters (--lora-rank 0).
Contradiction<int64_t> lora_rank_contradiction(const TensorShapes& shapes) {
  return [in_file = lora_rank_in_file(shapes),
          known = !shapes.empty()](const int64_t& rank) -> std::string {
    if (rank < 0) return fmt::format("is {}, but a LoRA rank is 0 (no adapters) or more", rank);
    if (in_file && in_file->rank != rank)
      return fmt::format("is {}, but {} has rank {} (its rows)", rank,
                         quote_untrusted(in_file->tensor), in_file->rank);
    if (!in_file && rank > 0 && known)
      return fmt::format("is {}, but the file holds no LoRA adapters (no lora_A weight)", rank);
    return "";
  };
}

// Who reads a file's record, for its errors: the tag ("eval", "--resume") and what the message
// of a damaged value advises ("" for eval's "pass --KEY as trained": there the flag replaces the
// damaged value).
struct Reader {
  const char* where = "eval";
  std::string advice;
  bool builds_model = true;  // false: the run's flags build the model, the record is only checked
  std::string advice_for(const std::string& key) const {
    return advice.empty() ? fmt::format("pass --{} as trained", key) : advice;
  }
};
const Reader kEval{};

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
          const Reader& reader, const std::function<bool(const std::string&)>& given, Override rule,
          T& out, const Contradiction<T>& contradiction = nullptr,
          const std::string& section = "hyper_parameters.") {
  const auto it = hparams.find(key);
  if (it == hparams.end()) return;
  std::string damage = damage_of<T>(*it);
  if (damage.empty() && contradiction) damage = contradiction(it->get<T>());
  if (!given(key)) {
    MANTISSA_CHECK(damage.empty(), reader.where, "{}: {}{} {}; the file is damaged: {}", source,
                   section, key, damage, reader.advice_for(key));
    out = it->get<T>();
    return;
  }
  MANTISSA_CHECK(rule == Override::kAllowed || !damage.empty() || it->get<T>() == out, reader.where,
                 "{} was trained with --{} {}, but --{} is {} here: leave --{} out (the file "
                 "records it)",
                 source, key, as_flag_value(*it), key, as_flag_value(nlohmann::json(out)), key);
}

// Why the FP8 plugin refuses a recipe value (`check` builds the recipe with it), or "".
std::string refusal(const std::function<void()>& check) {
  try {
    check();
    return "";
  } catch (const Error& e) {
    return fmt::format("is refused: {}", e.what());
  }
}

// The FP8 keys of the hyperparameters (fp8_hparams) for a resolved recipe and exclusion list.
nlohmann::json recipe_hparams(const train::TransformerEngineOptions& te) {
  // Under current scaling the delayed-only settings do not apply and are left out.
  if (te.recipe.kind != fp8::RecipeKind::kDelayed) {
    nlohmann::json j = {
        {"fp8-recipe", fp8::recipe_kind_name(te.recipe.kind)},
        {"fp8-format", fp8::format_name(te.recipe.fp8_format)},
        {"fp8-power-2-scales", te.recipe.use_power_2_scales ? "true" : "false"},
        {"fp8-exclude", canonical_exclude(fmt::format("{}", fmt::join(te.exclude, ",")))}};
    if (te.recipe.kind == fp8::RecipeKind::kBlock)
      j["fp8-fp32-scales"] = te.recipe.use_fp32_scales ? "true" : "false";
    if (te.recipe.kind == fp8::RecipeKind::kNvfp4) {
      j["fp8-disable-rht"] = te.recipe.disable_rht ? "true" : "false";
      j["fp8-disable-stochastic-rounding"] =
          te.recipe.disable_stochastic_rounding ? "true" : "false";
      j["fp8-disable-2d-quantization"] = te.recipe.disable_2d_quantization ? "true" : "false";
    }
    if (te.recipe.kind == fp8::RecipeKind::kMxfp4) {
      j["fp8-enable-rht"] = te.recipe.enable_rht ? "true" : "false";
      j["fp8-enable-stochastic-rounding"] = te.recipe.enable_stochastic_rounding ? "true" : "false";
    }
    return j;
  }
  return {{"fp8-recipe", fp8::recipe_kind_name(te.recipe.kind)},
          {"fp8-format", fp8::format_name(te.recipe.fp8_format)},
          {"fp8-amax-history-len", te.recipe.amax_history_len},
          {"fp8-amax-compute-algo", fp8::amax_compute_algo_name(te.recipe.amax_compute_algo)},
          {"fp8-margin", te.recipe.margin},
          {"fp8-exclude", canonical_exclude(fmt::format("{}", fmt::join(te.exclude, ",")))}};
}

// A recipe name in the spelling files record ("MXFP8" -> "mxfp8"); one that does not parse is
// left as given, for the comparison to show and the plugin to refuse.
std::string canonical_recipe(const std::string& name) {
  try {
    return fp8::recipe_kind_name(fp8::recipe_kind_from_string(name));
  } catch (const Error&) {
    return name;
  }
}

// One FP8 setting of apply_fp8_hparams: from `hparams` (the hyperparameters), or else from
// `from_recipe` (an older file's trainer metadata), into settings["fp8_<name>"] unless its flag
// is given. A given flag's value is what a kMustMatch key is compared with; one that does not
// parse is left to the plugin, which names it.
template <typename T>
void take_fp8(const nlohmann::json& hparams, const nlohmann::json& from_recipe,
              const std::string& key, const std::string& source, const Reader& reader,
              const std::function<bool(const std::string&)>& given, Override rule,
              const Contradiction<T>& contradiction, PrecisionSettings& settings) {
  const bool in_hparams = hparams.contains(key);
  const nlohmann::json& from = in_hparams ? hparams : from_recipe;
  if (!from.contains(key)) return;
  std::string setting = key;
  std::replace(setting.begin(), setting.end(), '-', '_');
  T value{};
  if (given(key)) {
    const auto flag = settings.find(setting);
    if (flag == settings.end()) return;
    if constexpr (std::is_same_v<T, std::string>) {
      value = key == "fp8-exclude"  ? canonical_exclude(flag->second)
              : key == "fp8-recipe" ? canonical_recipe(flag->second)
                                    : flag->second;
    } else {
      size_t used = 0;
      try {
        value = std::stoll(flag->second, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != flag->second.size()) return;
    }
  }
  take(from, key, source, reader, given, rule, value, contradiction,
       in_hparams ? "hyper_parameters." : "the FP8 recipe of its trainer metadata, as ");
  if (given(key)) return;
  if constexpr (std::is_same_v<T, std::string>) {
    // A run without --fp8-exclude records "": no setting (the plugin refuses an empty list).
    if (key == "fp8-exclude" && value.empty()) return;
    settings[setting] = value;
  } else {
    settings[setting] = std::to_string(value);
  }
}

}  // namespace

std::string as_flag_value(const nlohmann::json& v) {
  if (v.is_string() && v.get<std::string>().empty()) return "\"\"";  // --fp8-exclude ""
  return escape_untrusted(v.is_string() ? v.get<std::string>() : v.dump());
}

nlohmann::json fp8_hparams(const TrainOptions& o) {
  if (!train::precision_traits(o.precision).fp8) return nlohmann::json::object();
  return recipe_hparams(train::transformer_engine_options_from(o.precision_options));
}

nlohmann::json fp8_settings_json(const PrecisionSettings& settings) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : settings) {
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    try {
      const nlohmann::json all =
          recipe_hparams(train::transformer_engine_options_from({{key, value}}));
      out[flag] = all.contains(flag) ? all.at(flag) : nlohmann::json(value);
    } catch (const Error&) {
      out[flag] = value;  // a value the plugin refuses (the run refused it): as given
    }
  }
  return out;
}

nlohmann::json image_model_hparams(const TrainOptions& o) {
  nlohmann::json j = {{"model", o.model}};
  if (o.model == "mlp") j["hidden"] = o.hidden;
  if (o.model == "vit") {
    j["patch"] = o.vit_patch;
    j["pool"] = o.vit_pool;
  }
  j.update(adapter_hparams(o));
  j.update(fp8_hparams(o));
  return j;
}

nlohmann::json gpt_model_hparams(const TrainOptions& o, const GptOptions& g) {
  nlohmann::json j = {{"model", "gpt"},   {"layers", g.layers},   {"width", g.width},
                      {"heads", g.heads}, {"context", g.context}, {"text", g.text}};
  j.update(adapter_hparams(o));
  j.update(fp8_hparams(o));
  return j;
}

namespace {

// apply_model_hparams, its errors worded for `reader`.
void apply_model_hparams_for(const Reader& reader, const nlohmann::json& hparams,
                             const std::string& source, const TensorShapes& shapes,
                             const std::function<bool(const std::string& flag)>& given,
                             TrainOptions& o, GptOptions& g) {
  MANTISSA_CHECK(hparams.is_object(), reader.where,
                 "{}: hyper_parameters must be a JSON object, got {}; the file is damaged", source,
                 hparams.type_name());
  // A model name no build knows is damage to the file, not a flag the user got wrong.
  take(hparams, "model", source, reader, given, Override::kMustMatch, o.model,
       Contradiction<std::string>([](const std::string& model) -> std::string {
         if (model == "mlp" || model == "cnn" || model == "vit" || model == "gpt") return "";
         return fmt::format("is {}, which is none of mlp, cnn, vit, gpt", quote_untrusted(model));
       }));
  take(hparams, "hidden", source, reader, given, Override::kMustMatch, o.hidden,
       Contradiction<std::string>([&](const std::string& hidden) {
         return o.model == "mlp" ? hidden_contradiction(hidden, shapes) : "";
       }));
  // A file without the record (older, or its metadata stripped): the default --hidden would
  // fail the load with a size mismatch per tensor. Its mlp layers say which sizes it holds.
  // (Not damage: a reader that builds the model from its own flags has nothing to check.)
  if (!hparams.contains("hidden") && !given("hidden") && o.model == "mlp" && reader.builds_model) {
    const std::vector<int64_t> outputs = mlp_layer_outputs(shapes);  // hidden..., then 10
    if (outputs.size() >= 2) {
      const std::vector<int64_t> in_file(outputs.begin(), outputs.end() - 1);
      MANTISSA_CHECK(parse_hidden_sizes(o.hidden) == in_file, "eval",
                     "{} records no model hyper-parameters (a file written before they were "
                     "saved, or stripped of its metadata); its tensors are those of an mlp with "
                     "--hidden {}: pass --hidden {}",
                     source, fmt::join(in_file, ","), fmt::join(in_file, ","));
    }
  }
  take(hparams, "patch", source, reader, given, Override::kMustMatch, o.vit_patch);
  take(hparams, "pool", source, reader, given, Override::kMustMatch, o.vit_pool);
  const GptSizes sizes = gpt_sizes(shapes);
  take(hparams, "layers", source, reader, given, Override::kMustMatch, g.layers,
       gpt_contradiction(sizes.layers, "the blocks h0, h1, ... it holds"));
  take(hparams, "width", source, reader, given, Override::kMustMatch, g.width,
       gpt_contradiction(sizes.width, "the columns of wte.weight"));
  // After --width: g.width is then the file's width (or the flag's, which must match it).
  const int64_t width = sizes.width.value_or(g.width);
  take(hparams, "heads", source, reader, given, Override::kMustMatch, g.heads,
       heads_contradiction(width));
  take(hparams, "context", source, reader, given, Override::kMustMatch, g.context,
       gpt_contradiction(sizes.context, "the rows of wpe.weight"));
  take(hparams, "text", source, reader, given, Override::kAllowed, g.text);
  take(hparams, "lora-rank", source, reader, given, Override::kAllowed, o.quant.lora_rank,
       lora_rank_contradiction(shapes));
  take(hparams, "lora-alpha", source, reader, given, Override::kAllowed, o.quant.lora_alpha);
  take(hparams, "quant-ignore", source, reader, given, Override::kAllowed, o.quant.quant_ignore);
  take(hparams, "quant-dtype", source, reader, given, Override::kAllowed, o.quant.quant_dtype,
       Contradiction<std::string>([](const std::string& dtype) -> std::string {
         if (dtype == "bf16" || dtype == "fp16" || dtype == "fp32") return "";
         return fmt::format("is {}, which is none of bf16, fp16, fp32", quote_untrusted(dtype));
       }));
}

// apply_fp8_hparams, its errors worded for `reader`.
void apply_fp8_hparams_for(const Reader& reader, const nlohmann::json& hparams,
                           const nlohmann::json& recipe, const std::string& source,
                           const TensorShapes& shapes,
                           const std::function<bool(const std::string& flag)>& given,
                           PrecisionSettings& settings) {
  MANTISSA_CHECK(hparams.is_object(), reader.where,
                 "{}: hyper_parameters must be a JSON object, got {}; the file is damaged", source,
                 hparams.type_name());
  nlohmann::json stored = hparams;
  // The names' order does not matter: compared in one spelling.
  if (stored.contains("fp8-exclude") && stored.at("fp8-exclude").is_string())
    stored["fp8-exclude"] = canonical_exclude(stored.at("fp8-exclude").get<std::string>());
  // An older file: its trainer metadata's recipe (fp8::DelayedScaling::to_json) under the keys
  // the hyperparameters use, for those they lack.
  static const std::pair<const char*, const char*> kRecipeKeys[] = {
      {"fp8-format", "fp8_format"},
      {"fp8-amax-history-len", "amax_history_len"},
      {"fp8-amax-compute-algo", "amax_compute_algo"},
      {"fp8-margin", "margin"}};
  nlohmann::json from_recipe = nlohmann::json::object();
  for (const auto& [key, recipe_key] : kRecipeKeys) {
    if (stored.contains(key) || recipe.is_null()) continue;
    MANTISSA_CHECK(recipe.is_object(), reader.where,
                   "{}: the FP8 recipe of its trainer metadata must be a JSON object, got {}; the "
                   "file is damaged: pass the run's --fp8-* flags",
                   source, recipe.type_name());
    if (recipe.contains(recipe_key)) from_recipe[key] = recipe.at(recipe_key);
  }
  // The recipe decides the FP8 layers' buffers (delayed: amax_history_len rows, current: 1):
  // another does not load. A file without the key is delayed (or its metadata's recipe says).
  if (!stored.contains("fp8-recipe") && recipe.is_object() && recipe.contains("recipe"))
    from_recipe["fp8-recipe"] = recipe.at("recipe");
  take_fp8(stored, from_recipe, "fp8-recipe", source, reader, given, Override::kMustMatch,
           Contradiction<std::string>([](const std::string& v) {
             return refusal([&] { fp8::recipe_kind_from_string(v); });
           }),
           settings);
  take_fp8(stored, from_recipe, "fp8-power-2-scales", source, reader, given, Override::kAllowed,
           Contradiction<std::string>([](const std::string& v) {
             return refusal([&] {
               train::transformer_engine_options_from(
                   {{"fp8_recipe", "current"}, {"fp8_power_2_scales", v}});
             });
           }),
           settings);
  take_fp8(
      stored, from_recipe, "fp8-fp32-scales", source, reader, given, Override::kAllowed,
      Contradiction<std::string>([](const std::string& v) {
        return refusal([&] {
          train::transformer_engine_options_from({{"fp8_recipe", "block"}, {"fp8_fp32_scales", v}});
        });
      }),
      settings);
  // nvfp4's switches, recorded as --fp8-fp32-scales is.
  for (const char* key :
       {"fp8-disable-rht", "fp8-disable-stochastic-rounding", "fp8-disable-2d-quantization"}) {
    std::string setting = std::string("fp8_") + (key + 4);
    std::replace(setting.begin(), setting.end(), '-', '_');
    take_fp8(stored, from_recipe, key, source, reader, given, Override::kAllowed,
             Contradiction<std::string>([setting](const std::string& v) {
               return refusal([&] {
                 train::transformer_engine_options_from({{"fp8_recipe", "nvfp4"}, {setting, v}});
               });
             }),
             settings);
  }
  // mxfp4's switches, recorded as nvfp4's are.
  for (const char* key : {"fp8-enable-rht", "fp8-enable-stochastic-rounding"}) {
    std::string setting = std::string("fp8_") + (key + 4);
    std::replace(setting.begin(), setting.end(), '-', '_');
    take_fp8(stored, from_recipe, key, source, reader, given, Override::kAllowed,
             Contradiction<std::string>([setting](const std::string& v) {
               return refusal([&] {
                 train::transformer_engine_options_from({{"fp8_recipe", "mxfp4"}, {setting, v}});
               });
             }),
             settings);
  }
  take_fp8(stored, from_recipe, "fp8-format", source, reader, given, Override::kAllowed,
           Contradiction<std::string>(
               [](const std::string& v) { return refusal([&] { fp8::format_from_string(v); }); }),
           settings);
  take_fp8(stored, from_recipe, "fp8-amax-compute-algo", source, reader, given, Override::kAllowed,
           Contradiction<std::string>([](const std::string& v) {
             return refusal([&] { fp8::amax_compute_algo_from_string(v); });
           }),
           settings);
  take_fp8(stored, from_recipe, "fp8-margin", source, reader, given, Override::kAllowed,
           Contradiction<int64_t>([](const int64_t& v) {
             return refusal([&] {
               fp8::DelayedScaling r;
               r.margin = static_cast<int>(std::clamp<int64_t>(v, std::numeric_limits<int>::min(),
                                                               std::numeric_limits<int>::max()));
               r.validate();
             });
           }),
           settings);
  // The FP8 layers' tensors hold that many history rows: another length does not load.
  const std::optional<int64_t> rows = fp8_amax_history_rows(shapes);
  take_fp8(stored, from_recipe, "fp8-amax-history-len", source, reader, given, Override::kMustMatch,
           Contradiction<int64_t>([&](const int64_t& v) -> std::string {
             fp8::DelayedScaling r;
             r.amax_history_len = v;
             std::string why = refusal([&] { r.validate(); });
             if (why.empty() && rows && *rows != v)
               why = fmt::format(
                   "is {}, but the file's FP8 layers keep {} rows of amax history (their "
                   "fp8_amax_history tensors)",
                   v, *rows);
             return why;
           }),
           settings);
  // The layers kept out of FP8 are plain layers in the file: another list does not load.
  take_fp8(stored, nlohmann::json::object(), "fp8-exclude", source, reader, given,
           Override::kMustMatch,
           Contradiction<std::string>([&](const std::string& names) -> std::string {
             if (names.empty()) return "";  // nothing kept out of FP8
             for (const std::string& name :
                  train::transformer_engine_options_from({{"fp8_exclude", names}}).exclude) {
               const std::string state = fp8_state_within(shapes, name);
               if (!state.empty())
                 return fmt::format(
                     "is {}, but the file's tensors hold FP8 state inside '{}' ({}), which it "
                     "keeps out of FP8",
                     as_flag_value(names), escape_untrusted(name), escape_untrusted(state));
             }
             return "";
           }),
           settings);
  // A flag the file's recipe does not read is refused even at its default value, as train
  // refuses it ("--fp8-margin 0" beside a file trained under current).
  std::set<std::string> given_settings;
  for (const auto& [setting, value] : settings) {
    std::string flag = setting;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (given(flag)) given_settings.insert(setting);
  }
  train::transformer_engine_options_from(settings, given_settings);
}

}  // namespace

void apply_model_hparams(const nlohmann::json& hparams, const std::string& source,
                         const TensorShapes& shapes,
                         const std::function<bool(const std::string& flag)>& given, TrainOptions& o,
                         GptOptions& g) {
  apply_model_hparams_for(kEval, hparams, source, shapes, given, o, g);
}

void apply_fp8_hparams(const nlohmann::json& hparams, const nlohmann::json& recipe,
                       const std::string& source, const TensorShapes& shapes,
                       const std::function<bool(const std::string& flag)>& given,
                       PrecisionSettings& settings) {
  apply_fp8_hparams_for(kEval, hparams, recipe, source, shapes, given, settings);
}

void check_model_hparams_intact(const nlohmann::json& hparams, const std::string& source,
                                const TensorShapes& shapes, const char* where,
                                const std::string& advice) {
  const Reader reader{where, advice, /*builds_model=*/false};
  // eval's reading of the file with no flag given, into options nothing uses: every damaged
  // value is an error, in eval's words.
  const auto nothing_given = [](const std::string&) { return false; };
  TrainOptions o;
  GptOptions g;
  apply_model_hparams_for(reader, hparams, source, shapes, nothing_given, o, g);
  PrecisionSettings settings;
  apply_fp8_hparams_for(reader, hparams, nullptr, source, shapes, nothing_given, settings);
}

}  // namespace mantissa::recipes
