#pragma once
// RunConfig: the settings of a fit that decide what a checkpoint's position and optimizer
// state mean: the training data's size, batching and order, the seed, and the learning rates
// configure_optimizers() set, and the optimizer's other hyper-parameters. A checkpoint stores it
// (metadata "run"), and resuming compares it with the new run's to refuse, warn or apply a change
// (the rules are in docs/trainer.md, "What a resume may change").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mantissa::train {

struct RunConfig {
  int64_t dataset_size = 0;          // examples in the training set
  int64_t batch_size = 0;            // of the training loader
  bool shuffle = false;              // the loader's
  uint64_t loader_seed = 0;          // the loader's shuffle seed (the order of epoch e)
  bool drop_last = false;            // the loader's
  int64_t num_training_batches = 0;  // per epoch, after limit_train_batches
  std::optional<uint64_t> seed;      // TrainerOptions::seed
  // Every param group's lr as configure_optimizers() left it (after the schedulers' initial
  // step), and each LR scheduler's base lrs: what a changed learning rate shows up in.
  std::vector<double> configured_lrs;
  std::vector<std::vector<double>> scheduler_base_lrs;
  // Every param group's other hyper-parameters as configure_optimizers() set them
  // (Optimizer::group_options without "lr": weight_decay, betas, eps, momentum, ...). Loading
  // the optimizer's state restores the checkpoint's values, as torch.optim does, so a changed
  // one would be dropped in silence; the resume applies it instead. Absent from checkpoints
  // written before it was recorded (then nothing is compared).
  std::vector<nlohmann::json> configured_group_options;
};

// As stored in a checkpoint's metadata ("run"; scheduler_base_lrs are not stored: the
// schedulers' own state holds them).
nlohmann::json run_config_to_json(const RunConfig& config);
// Reads the "run" object of a checkpoint; throws mantissa::Error naming the field ("run.<key>")
// when one is missing, mistyped or out of range. `source` names the file.
RunConfig run_config_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace mantissa::train
