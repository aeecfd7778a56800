#pragma once
// What a run's model is built from (sizes, adapters, quantization settings), as the JSON that
// its checkpoints and --save-weights files store under "hyper_parameters" (Lightning's
// save_hyperparameters), and the way back: `mantissa eval` reads them so that the file alone
// rebuilds the model it was saved from. Keys are the CLI flags' names without the dashes
// ("hidden", "lora-rank", ...); docs/cli.md lists them.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpt_run.h"
#include "image_run.h"
#include "tensor_sizes.h"

namespace mantissa::recipes {

// The image models' (mlp, cnn, vit) hyperparameters.
nlohmann::json image_model_hparams(const TrainOptions& o);
// The GPT's: its sizes and corpus besides the adapter and quantization settings.
nlohmann::json gpt_model_hparams(const TrainOptions& o, const GptOptions& g);

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

}  // namespace mantissa::recipes
