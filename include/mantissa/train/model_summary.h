#pragma once
// A table of a model's layers for the start of a run (Lightning's ModelSummary): per layer up
// to max_depth, its type, parameter count, trainable count, parameter dtypes and the bytes its
// state takes (parameters and buffers, so packed 4-bit weights count at their stored size),
// then totals.
//
//      | Name      | Type       | Params | Trainable | Dtype   | Size
//   0  | net.fc1   | Linear     | 803 K  | 803 K     | float32 | 3.1 MiB
#include <cstdint>
#include <string>
#include <vector>

#include "mantissa/nn/module.h"
#include "mantissa/train/callback.h"

namespace mantissa::train {

struct LayerSummary {
  std::string name;  // qualified, e.g. "net.fc1"
  std::string type;  // the module's class name
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;
  std::string dtypes;  // of the parameters, comma separated ("" when there are none)
  int64_t state_bytes = 0;
};

struct ModelSummaryTotals {
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;
  int64_t state_bytes = 0;
};

// Layers with at most max_depth parts in their qualified name (1: direct children), in
// registration order. Totals always cover the whole model.
std::vector<LayerSummary> summarize_layers(const nn::Module& model, int max_depth = 1);
ModelSummaryTotals summarize_totals(const nn::Module& model);
// The printed table.
std::string model_summary(const nn::Module& model, int max_depth = 1);

// Prints model_summary(module) when fit starts.
class ModelSummary : public Callback {
 public:
  explicit ModelSummary(int max_depth = 1);
  std::string state_key() const override { return "ModelSummary"; }
  void on_fit_start(Trainer& trainer, TrainModule& module) override;

 private:
  int max_depth_;
};

}  // namespace mantissa::train
