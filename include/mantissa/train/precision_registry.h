#pragma once
// The precision registry: ONE table of every `precision` value mantissa knows. Everything
// that lists or interprets precisions is generated from it: normalize_precision and its error
// messages, the plugin factory (make_precision, used by the Trainer and the GPT loop), the
// CLI's --precision help, `mantissa info`, the parameter dtype checkpoints check weights
// against, and the tests that iterate over precisions.
//
// Adding a precision:
//   1. one new file pair (include/mantissa/train/<name>.h, src/train/<name>.cpp) with the
//      Precision subclass and its factory,
//        std::unique_ptr<Precision> make_my_precision(const PrecisionOptions& options);
//      reading any plugin-specific settings from options.extra (and rejecting keys it does not
//      know). Whatever the plugin must carry across a resume goes in its state_dict() /
//      load_state_dict(): checkpoints store it for every plugin.
//   2. one registration line in the table in src/train/precision_registry.cpp:
//        {.name = "my-precision", .description = "...", .make = make_my_precision},
//      (aliases, accelerators and model kinds when they differ from the defaults; `.weights`
//      for a precision that quantizes Linear weights).
// A name Lightning knows but mantissa does not implement yet is registered with
// implemented = false and no factory: it is recognised, listed as planned, and refused with a
// "recognised but not implemented yet" error.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/quant/weight_quantization.h"
#include "mantissa/train/precision.h"

namespace mantissa::train {

using PrecisionFactory = std::function<std::unique_ptr<Precision>(const PrecisionOptions&)>;

// Another name for a precision ("16" for "16-mixed"). A non-empty warning is printed to stderr
// (prefixed "mantissa: warning: ") whenever the alias is used.
struct PrecisionAlias {
  std::string name;
  std::string warning;
};

// The narrowest arithmetic a precision asks of the hardware; it decides where the precision
// runs natively and where it is emulated (precision_support.h).
enum class PrecisionMath { kFloat32, kFloat64, kBFloat16, kFloat16, kFloat8, kInt8, kInt4 };

// What a precision does to a model's weights, for the callers that must treat precisions
// differently (fine-tuning, eval's checkpoint checks, compare, plan, the memory footprint):
// they ask these instead of comparing precision names.
struct PrecisionTraits {
  // quantized_weights, weight_bits and stores_codes follow from the entry's `weights` (its
  // format's row and options): precision_traits() fills them, a registry line does not.
  // The Linear layers' weights are quantized to 4 or 8 bits (nf4, nf4-dq, fp4, fp4-dq, int8,
  // int8-training): the quantization flags (--quant-dtype, --quant-ignore) apply.
  bool quantized_weights = false;
  // Bits of one quantized weight (4 or 8); 0 when the weights are not quantized.
  int weight_bits = 0;
  // The quantized weights are held as frozen 4-/8-bit codes, and checkpoints store those codes
  // (nf4, nf4-dq, fp4, fp4-dq, int8; not int8-training, whose float weights train and are
  // quantized for each product only).
  bool stores_codes = false;
  // FP8 layers with delayed scaling: checkpoints hold their scales and amax histories beside
  // the weights (transformer-engine, transformer-engine-float16).
  bool fp8 = false;
  // The parameters themselves are float16/bfloat16 and train in it (16-true, bf16-true).
  bool half_true = false;
  // Apex's amp levels (--amp-backend apex, O0-O3) apply (16-mixed).
  bool apex_levels = false;
  // The base weights train (false when they are frozen codes).
  bool trains_base_weights() const { return !stores_codes; }
};

struct PrecisionEntry {
  std::string name;         // canonical: "bf16-mixed"
  std::string description;  // one line, for `mantissa info` and docs
  PrecisionFactory make;    // null when not implemented
  std::vector<PrecisionAlias> aliases = {};
  std::vector<std::string> accelerators = {"cpu"};
  // The reference models (`mantissa train --model`) it runs with.
  std::vector<std::string> model_kinds = {"mlp", "cnn", "vit", "gpt"};
  bool implemented = true;  // false: recognised (Lightning has it) but refused for now
  PrecisionMath math = PrecisionMath::kFloat32;
  PrecisionTraits traits = {};
  // A precision that quantizes Linear weights: their format (a row of the format table) and its
  // options, handed to the plugin and from it to the layers and kernels unchanged.
  std::optional<quant::WeightQuantization> weights = std::nullopt;
};

// Every entry, implemented ones first, in the order messages list them.
const std::vector<PrecisionEntry>& precision_registry();
// Adds an entry at the end of the implemented ones (plugins outside the library, tests).
// Throws when the name or an alias is taken, or an implemented entry has no factory.
void register_precision(PrecisionEntry entry);
// Removes a registered entry (tests); throws when there is none by that name.
void unregister_precision(const std::string& name);

// The entry whose name or alias is `value`, or nullptr. Prints no warning.
const PrecisionEntry* find_precision(const std::string& value);

// The traits of a precision value (a canonical name or an alias; no warning is printed);
// all false for a value the registry does not know.
PrecisionTraits precision_traits(const std::string& value);

// Canonical names of the implemented precisions, in table order.
std::vector<std::string> supported_precisions();
// Canonical names Lightning knows whose plugins (FP8, 4/8-bit) are not implemented yet.
std::vector<std::string> planned_precisions();
// "32-true, 64-true, 16-mixed, bf16-mixed, 16-true or bf16-true" (CLI help).
std::string supported_precisions_text();

// The canonical name of a precision value: an alias maps to its precision (printing the
// alias's warning, if any), canonical names map to themselves. A planned name throws
// "recognised but not implemented yet"; anything else throws listing every valid value.
std::string normalize_precision(const std::string& value);

// The plugin for a precision value (normalised first; options.precision is set to the
// canonical name). options.accelerator is checked (check_accelerator) and must be one the
// entry supports.
std::unique_ptr<Precision> make_precision(const std::string& value, PrecisionOptions options = {});
// The plugin for a precision value made by its factory alone, without the support and
// accelerator checks of make_precision (no "emulated on this CPU" warning): for looking at
// what a precision does to a model (a checkpoint's precision, the quantizing plugin that checks
// --quant-ignore before the runs), not for running it. options.precision is set to the
// canonical name; throws as normalize_precision does.
std::unique_ptr<Precision> make_precision_unchecked(const std::string& value,
                                                    PrecisionOptions options = {});
// make_precision(value, {.accelerator = accelerator}).
std::unique_ptr<Precision> precision_plugin_from_string(const std::string& value,
                                                        const std::string& accelerator = "cpu");

// The dtype parameters have under an implemented precision (asks its plugin, made without the
// support check: no "emulated on this CPU" warning for a checkpoint's precision).
DType precision_param_dtype(const std::string& value);

// Checks an accelerator name: "cpu" and "auto" pass; "gpu" and "cuda" pass when a CUDA GPU can
// be used (cuda::is_available) and otherwise throw with the reason; "mps"/"tpu" throw saying no
// such backend exists; anything else throws listing the valid values.
void check_accelerator(const std::string& accelerator);
// The accelerator a run of `precision` uses: "cpu" or "gpu" ("cuda" is "gpu"; "auto" is "gpu"
// when a CUDA GPU can be used and the precision runs there, as Lightning's auto picks the GPU,
// else "cpu"). Throws as check_accelerator does.
std::string resolve_accelerator(const std::string& accelerator,
                                const std::string& precision = "32-true");

}  // namespace mantissa::train
