#pragma once
// The training run behind `mantissa train`: a reference model on Fashion-MNIST with AdamW in
// the chosen precision. Kept apart from the command-line parsing so tests can run it.
#include <cstdint>
#include <functional>
#include <string>

#include "metrics.h"

namespace mantissa::app {

struct TrainOptions {
  std::string model = "mlp";
  std::string precision = "32-true";
  int epochs = 2;
  int64_t batch_size = 256;
  double lr = 1e-3;
  double weight_decay = 1e-2;  // AdamW's default
  uint64_t seed = 0;
  std::string hidden = "256";
  int64_t vit_patch = 7;             // --model vit: patch size (4 or 7)
  std::string vit_pool = "cls";      // --model vit: "cls" or "mean"
  int threads = 0;                   // 0: OpenMP's default (all cores)
  int64_t train_subset = 0;          // 0: the whole training set; else its first N images
  bool master_weights = false;       // bf16-true / 16-true: fp32 master copy in the optimizer
  bool stochastic_rounding = false;  // bf16-true: stochastic rounding of the update
  std::string metrics_json;
  std::string data_dir;
  bool quiet = false;  // no per-epoch lines
  // Test hook: multiplies the loss of global step s by loss_multiplier(s) before backward
  // (used to force fp16 overflow). Null: no change.
  std::function<double(int64_t)> loss_multiplier;
};

// Trains, evaluates after every epoch and returns the metrics (also written to
// options.metrics_json when set). Throws mantissa::Error on bad options or data, and when the
// loss becomes non-finite without a loss scaler to absorb it.
TrainMetrics run_training(const TrainOptions& options);

}  // namespace mantissa::app
