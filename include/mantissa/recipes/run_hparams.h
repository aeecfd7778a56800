#pragma once
// The settings a training run was given, as its loggers' hparams.yaml records them beside the
// model's hyperparameters (Lightning's loggers write every hyperparameter the module and data
// module saved: the precision, optimizer, schedule, batch and limits as well as the sizes).
// Keys are the flags' names without the dashes ("batch-size", "lora-rank"), as the
// checkpoints' hyper_parameters (model_hparams.h) spell theirs; values are typed (numbers,
// booleans, strings). The checkpoints keep recording only what rebuilds the model.
#include <nlohmann/json.hpp>

#include "mantissa/recipes/finetune_run.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

// What every `mantissa train` and `mantissa finetune` run configures: the precision with its
// FP8 recipe settings, the optimizer with its settings, the lr schedule, batch size, gradient
// accumulation and clipping, the limits (max steps and epochs, as the Trainer resolved them in
// `t`), the seed, LoRA and quantization settings, early stopping, and the strategy.
nlohmann::json run_hparams(const TrainOptions& o, const train::TrainerOptions& t);

// run_hparams with a fine-tune's own settings: the data, block size, the validation split and
// interval, the warm-up of its warm-up + cosine schedule, activation checkpointing, and
// --adapter / --merge-to when given (the model directory is the module's record,
// finetune_hparams).
nlohmann::json finetune_run_hparams(const TrainOptions& o, const FinetuneOptions& f,
                                    const train::TrainerOptions& t);

// run_hparams with the GPT's schedule (warm-up + cosine) and validation interval.
nlohmann::json gpt_run_hparams(const TrainOptions& o, const GptOptions& g,
                               const train::TrainerOptions& t);

// Hands `hparams` to each of the Trainer's loggers (none under fast_dev_run), which merge them
// into hparams.yaml; the module's own (save_hyperparameters) join them when the fit sets up.
void log_run_hparams(const train::Trainer& trainer, const nlohmann::json& hparams);

}  // namespace mantissa::recipes
