#pragma once
// What a run's model is built from (sizes, adapters, quantization settings), as the JSON that
// its checkpoints and --save-weights files store under "hyper_parameters" (Lightning's
// save_hyperparameters), and the way back: `mantissa eval` reads them so that the file alone
// rebuilds the model it was saved from. Keys are the CLI flags' names without the dashes
// ("hidden", "lora-rank", ...); docs/cli.md lists them.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/tensor_sizes.h"

namespace mantissa::recipes {

// The FP8 settings of a transformer-engine run, as its hyperparameters store them ({} for the
// other precisions): the recipe with its defaults resolved ("fp8-format": "HYBRID",
// "fp8-amax-history-len": 1024, "fp8-amax-compute-algo": "max", "fp8-margin": 0) and the
// modules kept out of FP8 ("fp8-exclude": "h0,head", "" for none). The image models' and the
// GPT's hyperparameters include them. A recipe flag that does not parse is an error here.
nlohmann::json fp8_hparams(const TrainOptions& o);

// The given --fp8-* settings (`settings`: "fp8_amax_history_len" -> "16", as the flags fill the
// map) spelled as fp8_hparams spells them: the flag's name ("fp8-amax-history-len") and the
// same typed value (16, "E4M3" for "e4m3", the exclusion list sorted), only those given. The
// JSON reports of compare and bench record their precision_options so, and the same option
// reads the same in a report and in a checkpoint. A value the plugin refuses is kept as given.
nlohmann::json fp8_settings_json(const PrecisionSettings& settings);

// The image models' (mlp, cnn, vit) hyperparameters.
nlohmann::json image_model_hparams(const TrainOptions& o);
// The GPT's: its sizes and corpus besides the adapter and quantization settings.
nlohmann::json gpt_model_hparams(const TrainOptions& o, const GptOptions& g);

// A recorded value as it is written after its flag, for messages: strings without JSON's
// quotes ("" for an empty one), escaped, since it comes from the file (docs/design.md,
// "Untrusted files").
std::string as_flag_value(const nlohmann::json& v);

// Sets the options a saved model was built with from its hyperparameters, each only where
// `given(flag)` says the command line did not set it already. `source` names the file in
// errors: a value of the wrong type (a damaged or hand-edited file) is an error naming the key,
// and so is a size that the file's own tensors (`shapes`) contradict: an MLP's hidden sizes
// (its layers' biases), the GPT's width, context (its embeddings) and layers (its blocks).
// That is checked before anything is built, so a damaged "hidden": "999999,999999" is a clear
// error rather than gigabytes allocated for a model the weights cannot fill. A damaged value
// whose flag is given is replaced by the flag. Unknown keys are ignored (a newer writer's
// additions).
void apply_model_hparams(const nlohmann::json& hparams, const std::string& source,
                         const TensorShapes& shapes,
                         const std::function<bool(const std::string& flag)>& given, TrainOptions& o,
                         GptOptions& g);

// The checks apply_model_hparams and apply_fp8_hparams make of a file's hyperparameters with no
// flag given, for a reader whose run builds its model from its own flags, so that no flag
// replaces a damaged value: `train --resume` (checkpoint_metadata.h's recorded_model_hparams).
// A value of the wrong type, one no build knows (a model "resnet") or one the file's own tensors
// (`shapes`) contradict is an error from `where` in eval's words, up to "the file is damaged",
// followed by ": " and `advice`. Keys eval does not read are not checked; a record without
// "hidden" is no error here (nothing is built from it).
void check_model_hparams_intact(const nlohmann::json& hparams, const std::string& source,
                                const TensorShapes& shapes, const char* where,
                                const std::string& advice);

// Sets an FP8 checkpoint's plugin settings (`settings`, the --fp8-* flags' map: "fp8_format" ->
// "E4M3", ...) from the fp8-* keys of its hyperparameters (fp8_hparams), each only where
// `given(flag)` says the command line did not set it. Files written before those keys existed
// give the recipe their trainer metadata records (`recipe`: precision_plugin's
// TransformerEnginePrecision "recipe" object, or null), but not the exclusions. A given
// --fp8-format, --fp8-amax-compute-algo or --fp8-margin wins; a given --fp8-amax-history-len
// or --fp8-exclude must match the file (its FP8 layers' tensors have that many history rows,
// and the excluded layers have none). A damaged value (of the wrong type, one the plugin
// refuses, a history length the tensors contradict, an excluded name that holds FP8 state or
// names no tensors) is an error naming the key.
void apply_fp8_hparams(const nlohmann::json& hparams, const nlohmann::json& recipe,
                       const std::string& source, const TensorShapes& shapes,
                       const std::function<bool(const std::string& flag)>& given,
                       PrecisionSettings& settings);

}  // namespace mantissa::recipes
