// The table of precisions and everything generated from it (see precision_registry.h).
#include "mantissa/train/precision_registry.h"

#include "mantissa/core/cuda.h"
#include "mantissa/core/warning.h"
#include "mantissa/train/precision_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/train/precisions/apex_amp_precision.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/precisions/double_precision.h"
#include "mantissa/train/precisions/half_precision.h"
#include "mantissa/train/precisions/mixed_precision.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::train {
namespace {

// Lightning warns for the aliases that meant mixed precision; "32" and "64" pass silently.
PrecisionAlias discouraged_alias(const std::string& alias, const std::string& canonical) {
  return {alias, fmt::format("`precision={}` is supported for historical reasons but its usage is "
                             "discouraged; use '{}'",
                             alias, canonical)};
}

// make_bitsandbytes_precision is overloaded; the table needs the PrecisionOptions one.
std::unique_ptr<Precision> make_bitsandbytes_precision_entry(const PrecisionOptions& options) {
  return make_bitsandbytes_precision(options);
}

// THE table. Implemented precisions first, in the order messages list them; then the names
// Lightning knows that are not implemented yet. One line (entry) per precision.
std::vector<PrecisionEntry> builtin_table() {
  return {
      {.name = "32-true",
       .description = "float32 parameters and compute (the default)",
       .make = make_true_precision,
       .aliases = {{"32", ""}},
       .accelerators = {"cpu", "gpu"}},
      {.name = "64-true",
       .description = "float64 parameters, inputs and compute",
       .make = make_double_precision,
       .aliases = {{"64", ""}},
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kFloat64},
      {.name = "16-mixed",
       .description = "float32 parameters, float16 autocast, dynamic loss scaling (GradScaler)",
       .make = make_mixed_precision,
       .aliases = {discouraged_alias("16", "16-mixed")},
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kFloat16,
       .traits = {.apex_levels = true}},
      {.name = "bf16-mixed",
       .description = "float32 parameters, bfloat16 autocast, no loss scaling",
       .make = make_mixed_precision,
       .aliases = {discouraged_alias("bf16", "bf16-mixed")},
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kBFloat16},
      {.name = "16-true",
       .description = "float16 parameters, inputs and compute",
       .make = make_half_precision,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kFloat16,
       .traits = {.half_true = true}},
      {.name = "bf16-true",
       .description = "bfloat16 parameters, inputs and compute",
       .make = make_half_precision,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kBFloat16,
       .traits = {.half_true = true}},
      {.name = "transformer-engine",
       .description =
           "FP8/FP4 Linear/LayerNorm layers (--fp8-recipe, delayed scaling by default), bfloat16 "
           "rest",
       .make = make_transformer_engine_precision,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kFloat8,
       .traits = {.fp8 = true}},
      {.name = "transformer-engine-float16",
       .description =
           "FP8/FP4 Linear/LayerNorm layers (--fp8-recipe, delayed scaling by default), float16 "
           "rest",
       .make = make_transformer_engine_precision,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kFloat8,
       .traits = {.fp8 = true}},
      {.name = "nf4",
       .description = "4-bit NormalFloat weights (bitsandbytes), frozen; LoRA adapters train",
       .make = make_bitsandbytes_precision_entry,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kInt4,
       .weights = quant::WeightQuantization{.format = FormatId::kNf4}},
      {.name = "nf4-dq",
       .description = "4-bit NormalFloat weights with double-quantized scales (QLoRA)",
       .make = make_bitsandbytes_precision_entry,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kInt4,
       .weights = quant::WeightQuantization{.format = FormatId::kNf4, .double_quant = true}},
      {.name = "fp4",
       .description = "4-bit float weights (bitsandbytes), frozen",
       .make = make_bitsandbytes_precision_entry,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kInt4,
       .weights = quant::WeightQuantization{.format = FormatId::kFp4}},
      {.name = "fp4-dq",
       .description = "4-bit float weights with double-quantized scales",
       .make = make_bitsandbytes_precision_entry,
       .accelerators = {"cpu", "gpu"},
       .math = PrecisionMath::kInt4,
       .weights = quant::WeightQuantization{.format = FormatId::kFp4, .double_quant = true}},
      {.name = "int8",
       .description = "8-bit LLM.int8 weights with outlier decomposition, frozen",
       .make = make_bitsandbytes_precision_entry,
       .math = PrecisionMath::kInt8,
       .weights = quant::WeightQuantization{.format = FormatId::kInt8Rowwise}},
      {.name = "int8-training",
       .description = "LLM.int8 forward products, trainable float weights",
       .make = make_bitsandbytes_precision_entry,
       .math = PrecisionMath::kInt8,
       .weights = quant::WeightQuantization{.format = FormatId::kInt8Rowwise, .trainable = true}},
  };
}

std::vector<PrecisionEntry>& table() {
  static std::vector<PrecisionEntry> t = builtin_table();
  return t;
}

std::vector<std::string> names_where(bool implemented) {
  std::vector<std::string> out;
  for (const auto& e : table())
    if (e.implemented == implemented) out.push_back(e.name);
  return out;
}

std::vector<std::string> sorted_aliases() {
  std::vector<std::string> out;
  for (const auto& e : table())
    for (const auto& a : e.aliases) out.push_back(a.name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

const std::vector<PrecisionEntry>& precision_registry() { return table(); }

const PrecisionEntry* find_precision(const std::string& value) {
  for (const auto& e : table()) {
    if (e.name == value) return &e;
    for (const auto& a : e.aliases)
      if (a.name == value) return &e;
  }
  return nullptr;
}

void register_precision(PrecisionEntry entry) {
  MANTISSA_CHECK(!entry.name.empty(), "register_precision", "the precision needs a name");
  MANTISSA_CHECK(find_precision(entry.name) == nullptr, "register_precision",
                 "precision '{}' is already registered", entry.name);
  for (const auto& a : entry.aliases) {
    MANTISSA_CHECK(find_precision(a.name) == nullptr, "register_precision",
                   "alias '{}' of '{}' is already a registered precision or alias", a.name,
                   entry.name);
  }
  MANTISSA_CHECK(!entry.implemented || entry.make != nullptr, "register_precision",
                 "precision '{}' is marked implemented but has no factory", entry.name);
  auto& t = table();
  auto first_planned =
      std::find_if(t.begin(), t.end(), [](const PrecisionEntry& e) { return !e.implemented; });
  t.insert(entry.implemented ? first_planned : t.end(), std::move(entry));
}

void unregister_precision(const std::string& name) {
  auto& t = table();
  auto it =
      std::find_if(t.begin(), t.end(), [&](const PrecisionEntry& e) { return e.name == name; });
  MANTISSA_CHECK(it != t.end(), "unregister_precision", "no precision named '{}'", name);
  t.erase(it);
}

PrecisionTraits precision_traits(const std::string& value) {
  const PrecisionEntry* e = find_precision(value);
  if (e == nullptr) return {};
  PrecisionTraits t = e->traits;
  if (e->weights) {  // the weight traits follow from the format and its options
    t.quantized_weights = true;
    t.weight_bits = formats::format_row(e->weights->format).element_bits;
    t.stores_codes = !e->weights->trainable;
  }
  return t;
}

std::vector<std::string> supported_precisions() { return names_where(true); }

std::vector<std::string> planned_precisions() { return names_where(false); }

std::string supported_precisions_text() {
  const std::vector<std::string> names = supported_precisions();
  if (names.size() < 2) return fmt::format("{}", fmt::join(names, ""));
  return fmt::format("{} or {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
}

namespace {

// " (did you mean 'x'?)" for a misspelt precision: its nearest names (letter case and '_'
// ignored), or the precision a common other name stands for.
std::string did_you_mean(const std::string& value) {
  static const std::vector<std::pair<std::string, std::string>> kOtherNames = {
      {"fp8", "transformer-engine"},
      {"e4m3", "transformer-engine"},
      {"e5m2", "transformer-engine"},
      {"fp16", "16-mixed"},
      {"float16", "16-mixed"},
      {"half", "16-mixed"},
      {"bfloat16", "bf16-mixed"},
      {"fp32", "32-true"},
      {"float32", "32-true"},
      {"single", "32-true"},
      {"fp64", "64-true"},
      {"float64", "64-true"},
      {"double", "64-true"},
      {"int4", "nf4"},
      {"qlora", "nf4-dq"}};
  std::string lower = value;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [other, name] : kOtherNames)
    if (lower == other) return fmt::format(" (did you mean '{}'?)", name);
  const std::string meant = likely_meant(value, supported_precisions());
  return meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant);
}

}  // namespace

std::string normalize_precision(const std::string& value) {
  const PrecisionEntry* e = find_precision(value);
  if (e == nullptr) {
    const std::vector<std::string> planned = planned_precisions();
    fail("precision", "unknown precision '{}'{}; valid values are: {} (legacy aliases: {}{})",
         value, did_you_mean(value), fmt::join(supported_precisions(), ", "),
         fmt::join(sorted_aliases(), ", "),
         planned.empty()
             ? std::string()
             : fmt::format("; recognised but not implemented yet: {}", fmt::join(planned, ", ")));
  }
  if (!e->implemented) {
    fail("precision",
         "'{}' is recognised but not implemented yet (its plugin does not exist in this build); "
         "valid values are: {}",
         value, fmt::join(supported_precisions(), ", "));
  }
  for (const auto& a : e->aliases) {
    if (a.name == value && !a.warning.empty()) warn_once(a.warning);
  }
  return e->name;
}

void check_accelerator(const std::string& accelerator) {
  if (accelerator == "cpu" || accelerator == "auto") return;
  if (accelerator == "gpu" || accelerator == "cuda") {
    if (!cuda::is_available())
      fail("Trainer",
           "accelerator '{}' is not available: {}; use accelerator='cpu' or 'auto' (--accelerator "
           "cpu|auto)",
           accelerator, cuda::unavailable_reason());
    return;
  }
  if (accelerator == "mps" || accelerator == "tpu")
    fail("Trainer",
         "accelerator '{}' is not available: mantissa has no {} backend; use accelerator='cpu' "
         "(--accelerator cpu), "
         "'gpu' (CUDA) or 'auto'",
         accelerator, accelerator);
  fail("Trainer", "unknown accelerator '{}'; valid values are: cpu, gpu, cuda, auto", accelerator);
}

std::string resolve_accelerator(const std::string& accelerator, const std::string& precision) {
  check_accelerator(accelerator);
  if (accelerator != "auto") return accelerator == "cuda" ? "gpu" : accelerator;
  if (!cuda::is_available()) return "cpu";
  // The GPU when the support table's CUDA cell says yes (the precision runs there and the GPU
  // has its arithmetic: bf16 from 8.0, FP8 from 8.9), as `mantissa info` shows it.
  const PrecisionEntry* e = find_precision(normalize_precision(precision));
  return precision_support(*e, AcceleratorKind::kCuda, this_machine()).support == Support::kYes
             ? "gpu"
             : "cpu";
}

std::unique_ptr<Precision> make_precision(const std::string& value, PrecisionOptions options) {
  // The support table's reason (no CUDA build, no GPU, no bf16 on this GPU) comes first: it
  // says more than check_accelerator's.
  const bool gpu = options.accelerator == "gpu" || options.accelerator == "cuda";
  if (!gpu) options.accelerator = resolve_accelerator(options.accelerator, value);
  options.precision = normalize_precision(value);
  const PrecisionEntry& e = *find_precision(options.precision);
  // Lightning 1.x's amp_backend: "native" is the registry's plugin, "apex" Apex's levels.
  std::string backend = "native";
  if (auto it = options.extra.find("amp_backend"); it != options.extra.end()) {
    backend = it->second;
    options.extra.erase(it);
  }
  MANTISSA_CHECK(backend == "native" || backend == "apex", "precision",
                 "amp_backend must be 'native' or 'apex', got '{}'", backend);
  if (backend == "native" && options.extra.count("amp_level") != 0) {
    fail("precision",
         "You have asked for `amp_level='{}'` but it's only supported with "
         "`amp_backend='apex'`.",
         options.extra.at("amp_level"));
  }
  // "no" throws with the reason (no CUDA build, no GPU), "emulated" warns once. Apex's O0 is
  // pure fp32 whatever the precision string says, so it is checked as 32-true.
  const auto level = options.extra.find("amp_level");
  const bool apex_fp32 = backend == "apex" && level != options.extra.end() && level->second == "O0";
  check_precision_support(apex_fp32 ? *find_precision("32-true") : e, options.accelerator,
                          this_machine());
  if (gpu) options.accelerator = resolve_accelerator(options.accelerator, value);
  const auto& acc = e.accelerators;
  MANTISSA_CHECK(std::find(acc.begin(), acc.end(), options.accelerator) != acc.end(), "precision",
                 "precision '{}' does not run on accelerator '{}'; it supports: {}", e.name,
                 options.accelerator, fmt::join(acc, ", "));
  std::unique_ptr<Precision> plugin =
      backend == "apex" ? make_apex_amp_precision(options) : e.make(options);
  MANTISSA_CHECK(plugin != nullptr, "precision", "the factory of '{}' returned no plugin", e.name);
  return plugin;
}

std::unique_ptr<Precision> precision_plugin_from_string(const std::string& value,
                                                        const std::string& accelerator) {
  PrecisionOptions options;
  options.accelerator = accelerator;
  return make_precision(value, std::move(options));
}

std::unique_ptr<Precision> make_precision_unchecked(const std::string& value,
                                                    PrecisionOptions options) {
  options.precision = normalize_precision(value);
  const PrecisionEntry& e = *find_precision(options.precision);
  std::unique_ptr<Precision> plugin = e.make(options);
  MANTISSA_CHECK(plugin != nullptr, "precision", "the factory of '{}' returned no plugin", e.name);
  return plugin;
}

DType precision_param_dtype(const std::string& value) {
  // A checkpoint's precision is looked up, not run: its plugin is made without the support
  // check, whose "emulated on this CPU" warning would be about a precision no one runs here.
  const PrecisionEntry* e = find_precision(value);
  if (e == nullptr || !e->implemented || !e->make) return make_precision(value)->param_dtype();
  PrecisionOptions options;
  options.precision = e->name;
  return e->make(options)->param_dtype();
}

}  // namespace mantissa::train
